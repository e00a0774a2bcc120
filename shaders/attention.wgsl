// attention.wgsl — fused softmax attention, flash-style: out = softmax(q k^T * SCALE + mask) v
// with an online softmax (a running max and sum per query row), the log-sum-exp kept for the
// backward, which recomputes the probabilities from it. Nothing of size TQ x TK is stored.
//
// Metadata words, bindings, overrides: contract.ATTENTION (the generated header). q, k, v, dout
// are dense (B, T, d); the mask is a strided view of (B..., TQ, TK). One invocation per query row
// (per key row in attn_bwd_dkv), holding its rows of at most ATTN_MAX_D values in private memory.
// Keys (queries in attn_bwd_dkv) come in chunks [J0, J1), one dispatch each, so that no
// invocation loops past the adapter's budget; the running state lives in f32 buffers between them.

const MAXD: u32 = 128u;                 // contract.ATTN_MAX_D

fn mask_base(b: u32) -> u32 {
    var rem = b;
    var o = mu(W_OFFSET_MASK);
    for (var d = mu(W_MASK_NB); d > 0u; d = d - 1u) {
        let s = mu(W_MASK_BSHAPE + d - 1u);
        o = o + (rem % s) * mu(W_MASK_BSTRIDES + d - 1u);
        rem = rem / s;
    }
    return o;
}

// whether key j is visible from query i (causal: keys up to i, aligned to the end as torch's)
fn visible(i: u32, j: u32) -> bool {
    return !CAUSAL || j + mu(W_TQ) <= i + mu(W_TK);
}

// the scaled, masked score of query row qr (private copy) and key j of batch b
fn score(qr: ptr<function, array<f32, MAXD>>, b: u32, i: u32, j: u32, mb: u32) -> f32 {
    let D = mu(W_D);
    let kb = (b * mu(W_TK) + j) * D;
    var s = 0.0;
    for (var d = 0u; d < D; d = d + 1u) { s = s + (*qr)[d] * f32(k[kb + d]); }
    s = s * mf(W_SCALE);
    if (HAS_MASK) { s = s + f32(mask[mb + i * mu(W_MASK_SQ) + j * mu(W_MASK_SK)]); }
    return s;
}

@compute @workgroup_size(WG)
fn attn_fwd(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let D = mu(W_D);
    let DV = mu(W_DV);
    var qr: array<f32, MAXD>;
    var ac: array<f32, MAXD>;
    for (var r = linear_id(wid, nwg, lid); r < mu(W_ROWS); r = r + grid_stride(nwg)) {
        let b = r / mu(W_TQ);
        let i = r % mu(W_TQ);
        for (var d = 0u; d < D; d = d + 1u) { qr[d] = f32(q[r * D + d]); }
        var m = -inf_f32();
        var l = 0.0;
        if (mu(W_FIRST) != 0u) {
            for (var d = 0u; d < DV; d = d + 1u) { ac[d] = 0.0; }
        } else {
            m = ml[2u * r];
            l = ml[2u * r + 1u];
            for (var d = 0u; d < DV; d = d + 1u) { ac[d] = acc[r * DV + d]; }
        }
        let mb = mask_base(b);
        for (var j = mu(W_J0); j < mu(W_J1); j = j + 1u) {
            if (!visible(i, j)) { break; }
            let s = score(&qr, b, i, j, mb);
            if (s == -inf_f32()) { continue; }
            let mn = max(m, s);
            let alpha = exp(m - mn);
            let p = exp(s - mn);
            l = l * alpha + p;
            let vb = (b * mu(W_TK) + j) * DV;
            for (var d = 0u; d < DV; d = d + 1u) { ac[d] = ac[d] * alpha + p * f32(v[vb + d]); }
            m = mn;
        }
        ml[2u * r] = m;
        ml[2u * r + 1u] = l;
        for (var d = 0u; d < DV; d = d + 1u) { acc[r * DV + d] = ac[d]; }
    }
}

// out = acc / l, lse = m + log(l) (a row with no visible key: 0 / 0 = NaN and -inf, as softmax)
@compute @workgroup_size(WG)
fn attn_fwd_finish(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
    let DV = mu(W_DV);
    for (var r = linear_id(wid, nwg, lid); r < mu(W_ROWS); r = r + grid_stride(nwg)) {
        let l = ml[2u * r + 1u];
        for (var d = 0u; d < DV; d = d + 1u) { out[r * DV + d] = S(acc[r * DV + d] / l); }
        lse[r] = S(ml[2u * r] + log(l));
    }
}

// (lse, delta = sum(dout * out)) per query row
@compute @workgroup_size(WG)
fn attn_bwd_prep(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let DV = mu(W_DV);
    for (var r = linear_id(wid, nwg, lid); r < mu(W_ROWS); r = r + grid_stride(nwg)) {
        var s = 0.0;
        for (var d = 0u; d < DV; d = d + 1u) { s = s + f32(dout[r * DV + d]) * f32(out[r * DV + d]); }
        ld[2u * r] = f32(lse[r]);
        ld[2u * r + 1u] = s;
    }
}

// dq / SCALE += sum over the chunk's keys j of p_ij (dout_i . v_j - delta_i) k_j
@compute @workgroup_size(WG)
fn attn_bwd_dq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let D = mu(W_D);
    let DV = mu(W_DV);
    var qr: array<f32, MAXD>;
    var gr: array<f32, MAXD>;
    var ad: array<f32, MAXD>;
    for (var r = linear_id(wid, nwg, lid); r < mu(W_ROWS); r = r + grid_stride(nwg)) {
        let b = r / mu(W_TQ);
        let i = r % mu(W_TQ);
        for (var d = 0u; d < D; d = d + 1u) { qr[d] = f32(q[r * D + d]); }
        for (var d = 0u; d < DV; d = d + 1u) { gr[d] = f32(dout[r * DV + d]); }
        let first = mu(W_FIRST) != 0u;
        for (var d = 0u; d < D; d = d + 1u) {
            if (first) { ad[d] = 0.0; } else { ad[d] = dq[r * D + d]; }
        }
        let lse_i = ld[2u * r];
        let delta = ld[2u * r + 1u];
        let mb = mask_base(b);
        for (var j = mu(W_J0); j < mu(W_J1); j = j + 1u) {
            if (!visible(i, j)) { break; }
            let s = score(&qr, b, i, j, mb);
            if (s == -inf_f32()) { continue; }
            let p = exp(s - lse_i);
            let vb = (b * mu(W_TK) + j) * DV;
            var dp = 0.0;
            for (var d = 0u; d < DV; d = d + 1u) { dp = dp + gr[d] * f32(v[vb + d]); }
            let ds = p * (dp - delta);
            let kb = (b * mu(W_TK) + j) * D;
            for (var d = 0u; d < D; d = d + 1u) { ad[d] = ad[d] + ds * f32(k[kb + d]); }
        }
        for (var d = 0u; d < D; d = d + 1u) { dq[r * D + d] = ad[d]; }
    }
}

// per key row j, over the chunk's queries i: dv += p_ij dout_i, dk / SCALE += ds_ij q_i
@compute @workgroup_size(WG)
fn attn_bwd_dkv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let D = mu(W_D);
    let DV = mu(W_DV);
    let TQ = mu(W_TQ);
    var kr: array<f32, MAXD>;
    var vr: array<f32, MAXD>;
    var ak: array<f32, MAXD>;
    var av: array<f32, MAXD>;
    for (var r = linear_id(wid, nwg, lid); r < mu(W_ROWS); r = r + grid_stride(nwg)) {
        let b = r / mu(W_TK);
        let j = r % mu(W_TK);
        for (var d = 0u; d < D; d = d + 1u) { kr[d] = f32(k[r * D + d]); }
        for (var d = 0u; d < DV; d = d + 1u) { vr[d] = f32(v[r * DV + d]); }
        let first = mu(W_FIRST) != 0u;
        for (var d = 0u; d < D; d = d + 1u) {
            if (first) { ak[d] = 0.0; } else { ak[d] = dk[r * D + d]; }
        }
        for (var d = 0u; d < DV; d = d + 1u) {
            if (first) { av[d] = 0.0; } else { av[d] = dv[r * DV + d]; }
        }
        let mb = mask_base(b);
        var i0 = mu(W_J0);
        if (CAUSAL && j + TQ > mu(W_TK)) { i0 = max(i0, j + TQ - mu(W_TK)); }
        for (var i = i0; i < mu(W_J1); i = i + 1u) {
            let qb = (b * TQ + i) * D;
            var s = 0.0;
            for (var d = 0u; d < D; d = d + 1u) { s = s + f32(q[qb + d]) * kr[d]; }
            s = s * mf(W_SCALE);
            if (HAS_MASK) { s = s + f32(mask[mb + i * mu(W_MASK_SQ) + j * mu(W_MASK_SK)]); }
            if (s == -inf_f32()) { continue; }
            let row = b * TQ + i;
            let p = exp(s - ld[2u * row]);
            let gb = row * DV;
            var dp = 0.0;
            for (var d = 0u; d < DV; d = d + 1u) {
                let g = f32(dout[gb + d]);
                dp = dp + g * vr[d];
                av[d] = av[d] + p * g;
            }
            let ds = p * (dp - ld[2u * row + 1u]);
            for (var d = 0u; d < D; d = d + 1u) { ak[d] = ak[d] + ds * f32(q[qb + d]); }
        }
        for (var d = 0u; d < D; d = d + 1u) { dk[r * D + d] = ak[d]; }
        for (var d = 0u; d < DV; d = d + 1u) { dv[r * DV + d] = av[d]; }
    }
}
