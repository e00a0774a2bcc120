// norm.wgsl — layer norm and RMS norm over dense rows of N elements, forward and backward.
// LANES invocations share a row (WG / LANES rows per workgroup); their partial sums (f32) meet in
// a tree in workgroup memory. LANES = 1: one invocation per row, no barriers (CPU adapters);
// 32: short rows on GPUs; WG: long rows.
//
// Metadata words, bindings, overrides: contract.NORM (the generated header).
// Forward:  xhat = (x - mean) * rstd  (RMS: x * rstd),  y = xhat * w + b.
// Backward: g = dy * w;  dx = rstd * (g - mean(g) - xhat * mean(g * xhat))  (RMS: no mean(g));
//           gx = dy * xhat for the weight gradient, summed over the rows by the backend.

var<workgroup> red: array<f32, WG>;

// the sum of v over the LANES invocations of a row (each of them gets it)
fn row_sum(v: f32, lid: u32) -> f32 {
    if (LANES == 1u) { return v; }
    let lane = lid % LANES;
    red[lid] = v;
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) { red[lid] = red[lid] + red[lid + s]; }
        workgroupBarrier();
    }
    let total = red[lid - lane];
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
    let per = WG / LANES;
    let lane = lid % LANES;
    for (var g = wid.y * nwg.x + wid.x; g * per < rows; g = g + nwg.x * nwg.y) {
        let r = g * per + lid / LANES;
        var end = 0u;                                   // inactive invocations sum nothing
        if (r < rows) { end = n; }
        let xb = mu(W_OFFSET_X) + r * n;
        var m = 0.0;
        if (!RMS) {
            // sums of x - x[0]: a row far from 0 (1000 +- 1) loses no digits to its offset in
            // the running sums (the mean's error was 10x torch's in the normalised values)
            var x0 = 0.0;
            if (r < rows) { x0 = f32(x[xb]); }
            var s = 0.0;
            for (var j = lane; j < end; j = j + LANES) { s = s + (f32(x[xb + j]) - x0); }
            m = x0 + row_sum(s, lid) / nf;
        }
        var s2 = 0.0;
        for (var j = lane; j < end; j = j + LANES) {
            let c = f32(x[xb + j]) - m;
            s2 = s2 + c * c;
        }
        let rsd = 1.0 / sqrt(row_sum(s2, lid) / nf + mf(W_EPS));
        let yb = mu(W_OFFSET_Y) + r * n;
        for (var j = lane; j < end; j = j + LANES) {
            var v = (f32(x[xb + j]) - m) * rsd * weight(j);
            if (HAS_B) { v = v + f32(b[mu(W_OFFSET_B) + j]); }
            y[yb + j] = S(v);
        }
        if (lane == 0u && r < rows) {
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
    let per = WG / LANES;
    let lane = lid % LANES;
    for (var g = wid.y * nwg.x + wid.x; g * per < rows; g = g + nwg.x * nwg.y) {
        let r = g * per + lid / LANES;
        var end = 0u;
        var m = 0.0;
        var rs = 0.0;
        if (r < rows) {
            end = n;
            if (!RMS) { m = f32(mean_in[mu(W_OFFSET_MEAN) + r]); }
            rs = f32(rstd_in[mu(W_OFFSET_RSTD) + r]);
        }
        let xb = mu(W_OFFSET_X) + r * n;
        let gb = mu(W_OFFSET_DY) + r * n;
        var sg = 0.0;
        var sgx = 0.0;
        for (var j = lane; j < end; j = j + LANES) {
            let g = f32(dy[gb + j]) * weight(j);
            sg = sg + g;
            sgx = sgx + g * (f32(x[xb + j]) - m) * rs;
        }
        let mg = row_sum(sg, lid) / nf;
        let mgx = row_sum(sgx, lid) / nf;
        let yb = mu(W_OFFSET_Y) + r * n;
        for (var j = lane; j < end; j = j + LANES) {
            let dyj = f32(dy[gb + j]);
            let xhat = (f32(x[xb + j]) - m) * rs;
            var d = dyj * weight(j) - xhat * mgx;
            if (!RMS) { d = d - mg; }
            y[yb + j] = S(d * rs);
            if (HAS_W) { gx[mu(W_OFFSET_GX) + r * n + j] = dyj * xhat; }
        }
    }
}
