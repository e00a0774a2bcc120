// norm.wgsl — layer norm and RMS norm over dense rows of N elements, forward and backward, one
// workgroup per row (sums in f32 as a tree in workgroup memory).
//
// Metadata words, bindings, overrides: contract.NORM (the generated header).
// Forward:  xhat = (x - mean) * rstd  (RMS: x * rstd),  y = xhat * w + b.
// Backward: g = dy * w;  dx = rstd * (g - mean(g) - xhat * mean(g * xhat))  (RMS: no mean(g));
//           gx = dy * xhat for the weight gradient, summed over the rows by the backend.

var<workgroup> red: array<f32, WG>;

// the sum of v over the workgroup (every invocation gets it)
fn wg_sum(v: f32, lid: u32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) { red[lid] = red[lid] + red[lid + s]; }
        workgroupBarrier();
    }
    let total = red[0];
    workgroupBarrier();
    return total;
}

fn weight(j: u32) -> f32 {
    if (HAS_W) { return f32(w[mu(W_OFFSET_W) + j]); }
    return 1.0;
}

@compute @workgroup_size(WG)
fn layer_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let rows = mu(W_ROWS);
    let n = mu(W_N);
    let nf = f32(n);
    for (var r = wid.y * nwg.x + wid.x; r < rows; r = r + nwg.x * nwg.y) {
        let xb = mu(W_OFFSET_X) + r * n;
        var m = 0.0;
        if (!RMS) {
            var s = 0.0;
            for (var j = lid; j < n; j = j + WG) { s = s + f32(x[xb + j]); }
            m = wg_sum(s, lid) / nf;
        }
        var s2 = 0.0;
        for (var j = lid; j < n; j = j + WG) {
            let c = f32(x[xb + j]) - m;
            s2 = s2 + c * c;
        }
        let rsd = 1.0 / sqrt(wg_sum(s2, lid) / nf + mf(W_EPS));
        let yb = mu(W_OFFSET_Y) + r * n;
        for (var j = lid; j < n; j = j + WG) {
            var v = (f32(x[xb + j]) - m) * rsd * weight(j);
            if (HAS_B) { v = v + f32(b[mu(W_OFFSET_B) + j]); }
            y[yb + j] = S(v);
        }
        if (lid == 0u) {
            if (!RMS) { mean[mu(W_OFFSET_MEAN) + r] = S(m); }
            rstd[mu(W_OFFSET_RSTD) + r] = S(rsd);
        }
    }
}

@compute @workgroup_size(WG)
fn layer_norm_bwd(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let rows = mu(W_ROWS);
    let n = mu(W_N);
    let nf = f32(n);
    for (var r = wid.y * nwg.x + wid.x; r < rows; r = r + nwg.x * nwg.y) {
        let xb = mu(W_OFFSET_X) + r * n;
        let gb = mu(W_OFFSET_DY) + r * n;
        var m = 0.0;
        if (!RMS) { m = f32(mean_in[mu(W_OFFSET_MEAN) + r]); }
        let rs = f32(rstd_in[mu(W_OFFSET_RSTD) + r]);
        var sg = 0.0;
        var sgx = 0.0;
        for (var j = lid; j < n; j = j + WG) {
            let g = f32(dy[gb + j]) * weight(j);
            sg = sg + g;
            sgx = sgx + g * (f32(x[xb + j]) - m) * rs;
        }
        let mg = wg_sum(sg, lid) / nf;
        let mgx = wg_sum(sgx, lid) / nf;
        let yb = mu(W_OFFSET_Y) + r * n;
        for (var j = lid; j < n; j = j + WG) {
            let dyj = f32(dy[gb + j]);
            let xhat = (f32(x[xb + j]) - m) * rs;
            var d = dyj * weight(j) - xhat * mgx;
            if (!RMS) { d = d - mg; }
            y[yb + j] = S(d * rs);
            if (HAS_W) { gx[mu(W_OFFSET_GX) + r * n + j] = dyj * xhat; }
        }
    }
}
