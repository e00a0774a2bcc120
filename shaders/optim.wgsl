// optim.wgsl — the Adam / AdamW update of one float32 parameter in one pass: p, m, v in, the new
// p, m, v out; SGD's (sgd below) likewise. The arithmetic of numr_web/nn/optim/optimizer.py
// (Adam._update), operation for operation:
//   DECAY_DECOUPLED: base = p * F    DECAY_L2: g = g + p * F    DECAY_NONE: base = p
//   m = m + (g - m) * W  (LERP_HI: g - (g - m) * W1; FIRST: m stands at 0)
//   v = v * B2 + (g * W2) * g  (FIRST: (g * W2) * g)
//   p = base - (m * step_size) / (sqrt(v) / bc2_sqrt + EPS)
// Metadata words, bindings, overrides: contract.OPTIM (the generated header).

// 1 - b^t = -expm1(t ln b), ln b given (from the host, in double): 1 - pow(b, t) would cancel
// (b = 0.999, t = 1: pow's error grows a thousandfold); the series below |x| < 0.5
fn one_minus_pow(ln_b: f32, t: f32) -> f32 {
    let x = t * ln_b;
    if (abs(x) >= 0.5) { return 1.0 - exp(x); }
    return -(x * (1.0 + x * (0.5 + x * (1.0 / 6.0 + x * (1.0 / 24.0 + x * (1.0 / 120.0 +
             x * (1.0 / 720.0 + x * (1.0 / 5040.0))))))));
}

@compute @workgroup_size(WG)
fn adam(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    let f = mf(W_F);
    var ss = mf(W_STEP_SIZE);
    var bc = mf(W_BC2_SQRT);
    if (DEV) {                     // the step count on the device: lr / (1 - b1^t), sqrt(1 - b2^t)
        let t = dstep[mu(W_OFFSET_STEP)];
        ss = mf(W_LR) / one_minus_pow(mf(W_LN_B1), t);
        bc = sqrt(one_minus_pow(mf(W_LN_B2), t));
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

// torch.optim.SGD's update, as nn/optim's composed form (SGD._update), operation for operation:
//   g = -g (MAXIMIZE);  g = g + p * F (WD);
//   MOMENTUM: buf = g (FIRST) | buf * MOM + g * DAMP1 (DAMP) | buf * MOM + g;
//             g = g + buf * MOM (NESTEROV) | buf;
//   p = p - g * LR
@compute @workgroup_size(WG)
fn sgd(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
       @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        let pi = p[mu(W_OFFSET_P) + i];
        var gi = g[mu(W_OFFSET_G) + i];
        if (MAXIMIZE) { gi = -gi; }
        if (WD) { gi = gi + pi * mf(W_F); }
        if (MOMENTUM) {
            var b = gi;
            if (!FIRST) {
                var t = gi;
                if (DAMP) { t = gi * mf(W_DAMP1); }
                b = m[mu(W_OFFSET_M) + i] * mf(W_MOM) + t;
            }
            mo[i] = b;
            if (NESTEROV) { gi = gi + b * mf(W_MOM); } else { gi = b; }
        }
        po[i] = pi - gi * mf(W_LR);
    }
}
