// attention.wgsl — fused softmax attention, flash-style: out = softmax(q k^T * SCALE + mask) v
// with an online softmax (a running max and sum per query row), the log-sum-exp kept for the
// backward, which recomputes the probabilities from it. Nothing of size TQ x TK is stored.
//
// Metadata words, bindings, overrides: contract.ATTENTION (the generated header). q, k, v, dout
// are dense (B, T, d); the mask is a strided view of (B..., TQ, TK). One invocation per query row
// (per key row in attn_bwd_dkv), holding its rows of at most ATTN_MAX_D values in private memory
// as vec4s (a row's last vec4 is padded with zeros: D and DV need not be multiples of 4).
// Keys (queries in attn_bwd_dkv) come in chunks [J0, J1), one dispatch each, so that no
// invocation loops past the adapter's budget; the running state lives in f32 buffers between them.

const MAXD4: u32 = 32u;                 // contract.ATTN_MAX_D / 4: vec4s per private row
const AWG: u32 = 64u;                   // contract.ATTN_WG: invocations per workgroup (small
                                        // workgroups: a short sequence still fills the GPU)

fn row_id(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 { return (wid.y * nwg.x + wid.x) * AWG + lid; }
fn row_stride(nwg: vec3<u32>) -> u32 { return nwg.x * nwg.y * AWG; }

fn n4(n: u32) -> u32 { return (n + 3u) / 4u; }

// element d..d+3 of a row starting at `base` of n elements (zeros past n), per binding
fn ld_q(base: u32, d: u32, n: u32) -> vec4<f32> {
    var x = vec4<f32>(f32(q[base + d]), 0.0, 0.0, 0.0);
    if (d + 1u < n) { x.y = f32(q[base + d + 1u]); }
    if (d + 2u < n) { x.z = f32(q[base + d + 2u]); }
    if (d + 3u < n) { x.w = f32(q[base + d + 3u]); }
    return x;
}
fn ld_k(base: u32, d: u32, n: u32) -> vec4<f32> {
    var x = vec4<f32>(f32(k[base + d]), 0.0, 0.0, 0.0);
    if (d + 1u < n) { x.y = f32(k[base + d + 1u]); }
    if (d + 2u < n) { x.z = f32(k[base + d + 2u]); }
    if (d + 3u < n) { x.w = f32(k[base + d + 3u]); }
    return x;
}
fn ld_v(base: u32, d: u32, n: u32) -> vec4<f32> {
    var x = vec4<f32>(f32(v[base + d]), 0.0, 0.0, 0.0);
    if (d + 1u < n) { x.y = f32(v[base + d + 1u]); }
    if (d + 2u < n) { x.z = f32(v[base + d + 2u]); }
    if (d + 3u < n) { x.w = f32(v[base + d + 3u]); }
    return x;
}
fn ld_do(base: u32, d: u32, n: u32) -> vec4<f32> {
    var x = vec4<f32>(f32(dout[base + d]), 0.0, 0.0, 0.0);
    if (d + 1u < n) { x.y = f32(dout[base + d + 1u]); }
    if (d + 2u < n) { x.z = f32(dout[base + d + 2u]); }
    if (d + 3u < n) { x.w = f32(dout[base + d + 3u]); }
    return x;
}

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

// whether key j is visible from query i (causal: keys 0..i, the top-left aligned tril torch uses)
fn visible(i: u32, j: u32) -> bool {
    return !CAUSAL || j <= i;
}

// the scaled, masked score of query row qr (private copy) and key j of batch b
fn score(qr: ptr<function, array<vec4<f32>, MAXD4>>, b: u32, i: u32, j: u32, mb: u32) -> f32 {
    let D = mu(W_D);
    let kb = (b * mu(W_TK) + j) * D;
    var s = 0.0;
    for (var c = 0u; c < n4(D); c = c + 1u) { s = s + dot((*qr)[c], ld_k(kb, 4u * c, D)); }
    s = s * mf(W_SCALE);
    if (HAS_MASK) { s = s + f32(mask[mb + i * mu(W_MASK_SQ) + j * mu(W_MASK_SK)]); }
    return s;
}

@compute @workgroup_size(AWG)
fn attn_fwd(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let D = mu(W_D);
    let DV = mu(W_DV);
    let D4 = n4(D);
    let DV4 = n4(DV);
    var qr: array<vec4<f32>, MAXD4>;
    var ac: array<vec4<f32>, MAXD4>;
    for (var r = row_id(wid, nwg, lid); r < mu(W_ROWS); r = r + row_stride(nwg)) {
        let b = r / mu(W_TQ);
        let i = r % mu(W_TQ);
        for (var c = 0u; c < D4; c = c + 1u) { qr[c] = ld_q(r * D, 4u * c, D); }
        var m = -inf_f32();
        var l = 0.0;
        if (mu(W_FIRST) != 0u) {
            for (var c = 0u; c < DV4; c = c + 1u) { ac[c] = vec4<f32>(0.0); }
        } else {
            m = ml[2u * r];
            l = ml[2u * r + 1u];
            for (var c = 0u; c < DV4; c = c + 1u) { ac[c] = acc[r * DV4 + c]; }
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
            for (var c = 0u; c < DV4; c = c + 1u) { ac[c] = ac[c] * alpha + p * ld_v(vb, 4u * c, DV); }
            m = mn;
        }
        if (mu(W_LAST) != 0u) {           // out = acc / l, lse = m + log(l) (no visible key: 0, as
            let inv = select(1.0 / l, 0.0, l == 0.0);   // torch 2.x, and lse = -inf; the backward skips it)
            for (var d = 0u; d < DV; d = d + 1u) { out[r * DV + d] = S(ac[d / 4u][d % 4u] * inv); }
            lse[r] = S(m + log(l));
        } else {
            ml[2u * r] = m;
            ml[2u * r + 1u] = l;
            for (var c = 0u; c < DV4; c = c + 1u) { acc[r * DV4 + c] = ac[c]; }
        }
    }
}

// (lse, delta = sum(dout * out)) per query row
@compute @workgroup_size(AWG)
fn attn_bwd_prep(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let DV = mu(W_DV);
    for (var r = row_id(wid, nwg, lid); r < mu(W_ROWS); r = r + row_stride(nwg)) {
        var s = 0.0;
        for (var d = 0u; d < DV; d = d + 1u) { s = s + f32(dout[r * DV + d]) * f32(out_in[r * DV + d]); }
        ld[2u * r] = f32(lse_in[r]);
        ld[2u * r + 1u] = s;
    }
}

// dq / SCALE += sum over the chunk's keys j of p_ij (dout_i . v_j - delta_i) k_j
@compute @workgroup_size(AWG)
fn attn_bwd_dq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let D = mu(W_D);
    let DV = mu(W_DV);
    let D4 = n4(D);
    let DV4 = n4(DV);
    var qr: array<vec4<f32>, MAXD4>;
    var gr: array<vec4<f32>, MAXD4>;
    var ad: array<vec4<f32>, MAXD4>;
    for (var r = row_id(wid, nwg, lid); r < mu(W_ROWS); r = r + row_stride(nwg)) {
        let b = r / mu(W_TQ);
        let i = r % mu(W_TQ);
        for (var c = 0u; c < D4; c = c + 1u) { qr[c] = ld_q(r * D, 4u * c, D); }
        for (var c = 0u; c < DV4; c = c + 1u) { gr[c] = ld_do(r * DV, 4u * c, DV); }
        let first = mu(W_FIRST) != 0u;
        for (var c = 0u; c < D4; c = c + 1u) {
            if (first) { ad[c] = vec4<f32>(0.0); } else { ad[c] = dq[r * D4 + c]; }
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
            for (var c = 0u; c < DV4; c = c + 1u) { dp = dp + dot(gr[c], ld_v(vb, 4u * c, DV)); }
            let ds = p * (dp - delta);
            let kb = (b * mu(W_TK) + j) * D;
            for (var c = 0u; c < D4; c = c + 1u) { ad[c] = ad[c] + ds * ld_k(kb, 4u * c, D); }
        }
        for (var c = 0u; c < D4; c = c + 1u) { dq[r * D4 + c] = ad[c]; }
    }
}

// per key row j, over the chunk's queries i: dv += p_ij dout_i, dk / SCALE += ds_ij q_i
@compute @workgroup_size(AWG)
fn attn_bwd_dkv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let D = mu(W_D);
    let DV = mu(W_DV);
    let D4 = n4(D);
    let DV4 = n4(DV);
    let TQ = mu(W_TQ);
    var kr: array<vec4<f32>, MAXD4>;
    var vr: array<vec4<f32>, MAXD4>;
    var ak: array<vec4<f32>, MAXD4>;
    var av: array<vec4<f32>, MAXD4>;
    for (var r = row_id(wid, nwg, lid); r < mu(W_ROWS); r = r + row_stride(nwg)) {
        let b = r / mu(W_TK);
        let j = r % mu(W_TK);
        for (var c = 0u; c < D4; c = c + 1u) { kr[c] = ld_k(r * D, 4u * c, D); }
        for (var c = 0u; c < DV4; c = c + 1u) { vr[c] = ld_v(r * DV, 4u * c, DV); }
        let first = mu(W_FIRST) != 0u;
        for (var c = 0u; c < D4; c = c + 1u) {
            if (first) { ak[c] = vec4<f32>(0.0); } else { ak[c] = dk[r * D4 + c]; }
        }
        for (var c = 0u; c < DV4; c = c + 1u) {
            if (first) { av[c] = vec4<f32>(0.0); } else { av[c] = dv[r * DV4 + c]; }
        }
        let mb = mask_base(b);
        var i0 = mu(W_J0);
        if (CAUSAL) { i0 = max(i0, j); }          // queries before j do not see key j
        for (var i = i0; i < mu(W_J1); i = i + 1u) {
            let qb = (b * TQ + i) * D;
            var s = 0.0;
            for (var c = 0u; c < D4; c = c + 1u) { s = s + dot(ld_q(qb, 4u * c, D), kr[c]); }
            s = s * mf(W_SCALE);
            if (HAS_MASK) { s = s + f32(mask[mb + i * mu(W_MASK_SQ) + j * mu(W_MASK_SK)]); }
            if (s == -inf_f32()) { continue; }
            let row = b * TQ + i;
            let p = exp(s - ld[2u * row]);
            let gb = row * DV;
            var dp = 0.0;
            for (var c = 0u; c < DV4; c = c + 1u) {
                let gv = ld_do(gb, 4u * c, DV);
                dp = dp + dot(gv, vr[c]);
                av[c] = av[c] + p * gv;
            }
            let ds = p * (dp - ld[2u * row + 1u]);
            for (var c = 0u; c < D4; c = c + 1u) { ak[c] = ak[c] + ds * ld_q(qb, 4u * c, D); }
        }
        for (var c = 0u; c < D4; c = c + 1u) { dk[r * D4 + c] = ak[c]; }
        for (var c = 0u; c < DV4; c = c + 1u) { dv[r * DV4 + c] = av[c]; }
    }
}
