// optim.wgsl — the Adam / AdamW update of one float32 parameter in one pass: p, m, v in, the new
// p, m, v out. The arithmetic of numr_web/nn/optim/optimizer.py (Adam._update), operation for
// operation:
//   DECAY_DECOUPLED: base = p * F    DECAY_L2: g = g + p * F    DECAY_NONE: base = p
//   m = m + (g - m) * W  (LERP_HI: g - (g - m) * W1; FIRST: m stands at 0)
//   v = v * B2 + (g * W2) * g  (FIRST: (g * W2) * g)
//   p = base - (m * step_size) / (sqrt(v) / bc2_sqrt + EPS)
// Metadata words, bindings, overrides: contract.OPTIM (the generated header).

@compute @workgroup_size(WG)
fn adam(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    let f = mf(W_F);
    var ss = mf(W_STEP_SIZE);
    var bc = mf(W_BC2_SQRT);
    if (DEV) {
        ss = dss[mu(W_OFFSET_SS)];
        bc = dbc[mu(W_OFFSET_BC)];
    }
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        let pi = p[mu(W_OFFSET_P) + i];
        var gi = g[mu(W_OFFSET_G) + i];
        var base = pi;
        if (DECAY == DECAY_DECOUPLED) { base = pi * f; }
        if (DECAY == DECAY_L2) { gi = gi + pi * f; }
        var m0 = 0.0;
        var v0 = 0.0;
        if (!FIRST) {
            m0 = m[mu(W_OFFSET_M) + i];
            v0 = v[mu(W_OFFSET_V) + i];
        }
        let d = gi - m0;
        var mi = m0 + d * mf(W_W);
        if (LERP_HI) { mi = gi - d * mf(W_W1); }
        let gg = (gi * mf(W_W2)) * gi;
        var vi = gg;
        if (!FIRST) { vi = v0 * mf(W_B2) + gg; }
        let den = sqrt(vi) / bc + mf(W_EPS);
        po[i] = base - (mi * ss) / den;
        mo[i] = mi;
        vo[i] = vi;
    }
}
