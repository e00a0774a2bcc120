// norm.wgsl — layer norm and RMS norm over dense rows of N elements, forward and backward; softmax
// cross-entropy and batch norm (below).
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

// the max of v over the LANES invocations of a row (each of them gets it)
fn row_max(v: f32, lid: u32) -> f32 {
    if (LANES == 1u) { return v; }
    let lane = lid % LANES;
    red[lid] = v;
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) { red[lid] = max(red[lid], red[lid + s]); }
        workgroupBarrier();
    }
    let m = red[lid - lane];
    workgroupBarrier();
    return m;
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

// -- softmax cross-entropy over rows of N classes ----------------------------------------------------
// With m = max_j x_j, e_j = exp(x_j - m), S = sum_j e_j (p_j = e_j / S):
//   loss = log S - (1 - s) (x[label] - m) - (s / N) sum_j (x_j - m)  (s: SMOOTH), 0 where the label
//   is IGNORE; (m, S, the others' sum S - e_label added without it) saved, f32, for the backward:
//   dx_j = dy_r (p_j - (1 - s) [j == label] - s / N), 0 in ignored rows; at the label
//   p - 1 = -(others) / S, no cancellation where p is near 1.
// Labels are in [0, N) or IGNORE (the ops layer checks them); clamped here all the same.
@compute @workgroup_size(WG)
fn xent(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let rows = mu(W_ROWS);
    let n = mu(W_N);
    let per = WG / LANES;
    let lane = lid % LANES;
    let s = mf(W_SMOOTH);
    for (var g = wid.y * nwg.x + wid.x; g * per < rows; g = g + nwg.x * nwg.y) {
        let r = g * per + lid / LANES;
        var end = 0u;
        var label = mi(W_IGNORE);
        if (r < rows) {
            end = n;
            label = labels[mu(W_OFFSET_LABELS) + r];
        }
        let xb = mu(W_OFFSET_X) + r * n;
        var m = -inf_f32();
        for (var j = lane; j < end; j = j + LANES) { m = max(m, f32(x[xb + j])); }
        m = row_max(m, lid);
        var e = 0.0;
        var others = 0.0;
        var sx = 0.0;
        for (var j = lane; j < end; j = j + LANES) {
            let v = f32(x[xb + j]) - m;
            let ev = exp(v);
            e = e + ev;
            if (i32(j) != label) { others = others + ev; }
            if (SMOOTHING) { sx = sx + v; }
        }
        let total = row_sum(e, lid);
        others = row_sum(others, lid);
        if (SMOOTHING) { sx = row_sum(sx, lid); }
        if (lane == 0u && r < rows) {
            var loss = 0.0;
            if (label != mi(W_IGNORE)) {
                let c = u32(clamp(label, 0, i32(n) - 1));
                loss = log(total) - (1.0 - s) * (f32(x[xb + c]) - m);
                if (SMOOTHING) { loss = loss - s / f32(n) * sx; }
            }
            y[mu(W_OFFSET_Y) + r] = S(loss);
            let o = mu(W_OFFSET_STATS) + 3u * r;
            gx[o] = m;
            gx[o + 1u] = total;
            gx[o + 2u] = others;
        }
    }
}

@compute @workgroup_size(WG)
fn xent_bwd(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let rows = mu(W_ROWS);
    let n = mu(W_N);
    let per = WG / LANES;
    let lane = lid % LANES;
    let s = mf(W_SMOOTH);
    for (var g = wid.y * nwg.x + wid.x; g * per < rows; g = g + nwg.x * nwg.y) {
        let r = g * per + lid / LANES;
        if (r >= rows) { continue; }
        let label = labels[mu(W_OFFSET_LABELS) + r];
        let keep = label != mi(W_IGNORE);
        let o = mu(W_OFFSET_STATS) + 3u * r;
        let m = coef[o];
        let total = coef[o + 1u];
        let gr = f32(dy[mu(W_OFFSET_DY) + r * mu(W_G_STRIDE)]);
        let xb = mu(W_OFFSET_X) + r * n;
        let yb = mu(W_OFFSET_Y) + r * n;
        for (var j = lane; j < n; j = j + LANES) {
            var d = exp(f32(x[xb + j]) - m) / total;
            if (i32(j) == label) { d = s - coef[o + 2u] / total; }
            if (SMOOTHING) { d = d - s / f32(n); }
            var v = 0.0;
            if (keep) { v = d * gr; }
            y[yb + j] = S(v);
        }
    }
}

// -- batch norm: x (NB, C, S) --------------------------------------------------------------------------
// Channel c holds NB * S elements: element j is x[n = j / S, c, s = j % S]. Training statistics are
// sums of x - x[0, c, 0] (shifted: a far-off mean costs no digits) and of their squares, over
// chunks of BN_CHUNK elements (LANES invocations a chunk, a tree in workgroup memory), summed over
// the chunks in order by one invocation per channel: deterministic. The f32 scratch `gx` holds the
// partials (BN_CHUNKS x C pairs) and after them per-channel coefficients, BN_COEFS arrays of C:
//   forward:  scale = rstd * w, bias, mean, rstd, var;   y = act((x - mean) * scale + bias)
//   backward: k = rstd * w, mean(g), mean(g * xhat), sum(g xhat) (dw), sum(g) (db);
//             g = act_d1(dy, saved), xhat = (x - mean) * rstd, dx = (g - mean(g) - xhat mean(g xhat)) k
// (eval: mean(g) = mean(g xhat) = 0). The backward reads the forward's mean and rstd from `coef`.

fn bn_at(c: u32, j: u32) -> u32 {
    let s = mu(W_BN_S);
    return ((j / s) * mu(W_BN_C) + c) * s + j % s;
}

// index in gx of per-channel coefficient k of channel c
fn bn_k(k: u32, c: u32) -> u32 {
    let C = mu(W_BN_C);
    return mu(W_OFFSET_GX) + mu(W_BN_CHUNKS) * C * 2u + k * C + c;
}

fn bn_g(t: u32) -> f32 {
    let d = f32(dy[mu(W_OFFSET_DY) + t]);
    if (ACT == ACT_NONE) { return d; }
    return act_d1(ACT, d, f32(sv[mu(W_OFFSET_SV) + t]));
}

// partial sums of chunk r / C of channel r % C: forward x - x[0, c, 0] and its square; backward
// (BWD) g and g * xhat
@compute @workgroup_size(WG)
fn bn_stats(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let C = mu(W_BN_C);
    let rows = mu(W_BN_CHUNKS) * C;
    let count = mu(W_BN_NB) * mu(W_BN_S);
    let per = WG / LANES;
    let lane = lid % LANES;
    for (var g = wid.y * nwg.x + wid.x; g * per < rows; g = g + nwg.x * nwg.y) {
        let r = g * per + lid / LANES;
        var j0 = 0u;
        var j1 = 0u;
        var c = 0u;
        var x0 = 0.0;
        var m = 0.0;
        var rs = 0.0;
        if (r < rows) {
            c = r % C;
            j0 = (r / C) * mu(W_BN_CHUNK);
            j1 = min(j0 + mu(W_BN_CHUNK), count);
            if (BWD) {
                m = coef[mu(W_OFFSET_MEAN) + c];
                rs = coef[mu(W_OFFSET_RSTD) + c];
            } else {
                x0 = f32(x[mu(W_OFFSET_X) + bn_at(c, 0u)]);
            }
        }
        var s1 = 0.0;
        var s2 = 0.0;
        for (var j = j0 + lane; j < j1; j = j + LANES) {
            let t = bn_at(c, j);
            if (BWD) {
                let gv = bn_g(t);
                s1 = s1 + gv;
                s2 = s2 + gv * ((f32(x[mu(W_OFFSET_X) + t]) - m) * rs);
            } else {
                let d = f32(x[mu(W_OFFSET_X) + t]) - x0;
                s1 = s1 + d;
                s2 = s2 + d * d;
            }
        }
        let t1 = row_sum(s1, lid);
        let t2 = row_sum(s2, lid);
        if (lane == 0u && r < rows) {
            gx[mu(W_OFFSET_GX) + 2u * r] = t1;
            gx[mu(W_OFFSET_GX) + 2u * r + 1u] = t2;
        }
    }
}

// one invocation per channel: the chunks' partials summed in order, the coefficients written
@compute @workgroup_size(WG)
fn bn_finalize(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let C = mu(W_BN_C);
    let cnt = f32(mu(W_BN_NB) * mu(W_BN_S));
    for (var c = linear_id(wid, nwg, lid); c < C; c = c + grid_stride(nwg)) {
        var s1 = 0.0;
        var s2 = 0.0;
        if (TRAIN || BWD) {
            for (var k = 0u; k < mu(W_BN_CHUNKS); k = k + 1u) {
                s1 = s1 + gx[mu(W_OFFSET_GX) + 2u * (k * C + c)];
                s2 = s2 + gx[mu(W_OFFSET_GX) + 2u * (k * C + c) + 1u];
            }
        }
        if (BWD) {
            let k = coef[mu(W_OFFSET_RSTD) + c] * weight(c);
            gx[bn_k(0u, c)] = k;
            gx[bn_k(1u, c)] = select(0.0, s1 / cnt, TRAIN);
            gx[bn_k(2u, c)] = select(0.0, s2 / cnt, TRAIN);
            gx[bn_k(3u, c)] = s2;
            gx[bn_k(4u, c)] = s1;
            continue;
        }
        var mval = 0.0;
        var v = 0.0;
        if (TRAIN) {
            let m = s1 / cnt;
            v = max(s2 / cnt - m * m, 0.0);
            mval = f32(x[mu(W_OFFSET_X) + bn_at(c, 0u)]) + m;
        } else {
            mval = f32(mean_in[mu(W_OFFSET_MEAN) + c]);
            v = f32(rstd_in[mu(W_OFFSET_RSTD) + c]);
        }
        let rs = 1.0 / sqrt(v + mf(W_EPS));
        var bias = 0.0;
        if (HAS_B) { bias = f32(b[mu(W_OFFSET_B) + c]); }
        gx[bn_k(0u, c)] = rs * weight(c);
        gx[bn_k(1u, c)] = bias;
        gx[bn_k(2u, c)] = mval;
        gx[bn_k(3u, c)] = rs;
        gx[bn_k(4u, c)] = v;
    }
}

// forward, one invocation per element: y = act((x - mean) * scale + bias) (and z when WRITE_Z)
@compute @workgroup_size(WG)
fn bn_apply(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let total = mu(W_N);
    let sp = mu(W_BN_S);
    let C = mu(W_BN_C);
    for (var t = linear_id(wid, nwg, lid); t < total; t = t + grid_stride(nwg)) {
        let c = (t / sp) % C;
        let z = (f32(x[mu(W_OFFSET_X) + t]) - gx[bn_k(2u, c)]) * gx[bn_k(0u, c)] + gx[bn_k(1u, c)];
        if (WRITE_Z) { zo[mu(W_OFFSET_Z) + t] = S(z); }
        var v = z;
        if (ACT != ACT_NONE) { v = act_fwd(ACT, z); }
        y[mu(W_OFFSET_Y) + t] = S(v);
    }
}

// backward, one invocation per element: dx = (g - mean(g) - xhat mean(g xhat)) rstd w
@compute @workgroup_size(WG)
fn bn_bwd_dx(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let total = mu(W_N);
    let sp = mu(W_BN_S);
    let C = mu(W_BN_C);
    for (var t = linear_id(wid, nwg, lid); t < total; t = t + grid_stride(nwg)) {
        let c = (t / sp) % C;
        let xhat = (f32(x[mu(W_OFFSET_X) + t]) - coef[mu(W_OFFSET_MEAN) + c]) *
                   coef[mu(W_OFFSET_RSTD) + c];
        let d = bn_g(t) - gx[bn_k(1u, c)] - xhat * gx[bn_k(2u, c)];
        y[mu(W_OFFSET_Y) + t] = S(d * gx[bn_k(0u, c)]);
    }
}
