// conv.wgsl — im2col (torch's unfold) and its adjoint col2im (torch's fold), NCHW, dense inputs;
// max pooling forward (value and argmax) and backward (from the argmax).
//
// Metadata words, bindings: contract.CONV (the generated header). Output position (oh, ow) of
// kernel tap (i, j) reads input pixel (oh * SH - PH + i * DH, ow * SW - PW + j * DW). The columns
// are (N, C*KH*KW, OH*OW), or with CN (C*KH*KW, N*OH*OW) (the weight gradient's operand).

// shape word `word`, or with SPEC the override constant k holding the same value: the driver then
// divides by a constant (a multiply and a shift) instead of running an integer division, which
// bounds these index-heavy kernels on a GPU
fn cw(word: u32, k: u32) -> u32 {
    if (SPEC) { return k; }
    return mu(word);
}

// column element t's (n * C + c, tap i * KW + j, output position oh * OW + ow)
fn col_parts(t: u32, nb: u32) -> vec3<u32> {
    let L = cw(W_OH, K_OH) * cw(W_OW, K_OW);
    let T = cw(W_KH, K_KH) * cw(W_KW, K_KW);
    if (CN) {
        let q = t / (L * nb);                          // c * T + tap
        return vec3<u32>(((t / L) % nb) * cw(W_C, K_C) + q / T, q % T, t % L);
    }
    return vec3<u32>(t / (L * T), (t / L) % T, t % L);
}

// im2col: one invocation per column element (n, (c, i, j), (oh, ow)); padding reads PAD.
@compute @workgroup_size(WG)
fn im2col(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let total = mu(W_N);
    let OH = cw(W_OH, K_OH);
    let OW = cw(W_OW, K_OW);
    let KH = cw(W_KH, K_KH);
    let KW = cw(W_KW, K_KW);
    let C = cw(W_C, K_C);
    let H = i32(cw(W_H, K_H));
    let W = i32(cw(W_W, K_W));
    let nb = select(total / (C * KH * KW * OH * OW), K_NB, SPEC);
    for (var t = linear_id(wid, nwg, lid); t < total; t = t + grid_stride(nwg)) {
        let p = col_parts(t, nb);
        let ow = p.z % OW;
        let oh = p.z / OW;
        let j = p.y % KW;
        let i = p.y / KW;
        let nc = p.x;                                  // n * C + c
        let h = i32(oh * cw(W_SH, K_SH) + i * cw(W_DH, K_DH)) - i32(cw(W_PH, K_PH));
        let w = i32(ow * cw(W_SW, K_SW) + j * cw(W_DW, K_DW)) - i32(cw(W_PW, K_PW));
        var v = S(mf(W_PAD));
        if (h >= 0 && h < H && w >= 0 && w < W) {
            v = a[mu(W_OFFSET_IN) + (nc * u32(H) + u32(h)) * u32(W) + u32(w)];
        }
        out[mu(W_OFFSET_OUT) + t] = v;
    }
}

// col2im: one invocation per input pixel, a gather over the columns that read it, in tap order
// (i, j): deterministic, no atomics.
@compute @workgroup_size(WG)
fn col2im(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let total = mu(W_N);
    let OH = cw(W_OH, K_OH);
    let OW = cw(W_OW, K_OW);
    let KH = cw(W_KH, K_KH);
    let KW = cw(W_KW, K_KW);
    let H = cw(W_H, K_H);
    let W = cw(W_W, K_W);
    let SH = i32(cw(W_SH, K_SH));
    let SW = i32(cw(W_SW, K_SW));
    let chans = cw(W_C, K_C);
    let nb = select(total / (chans * H * W), K_NB, SPEC);
    for (var t = linear_id(wid, nwg, lid); t < total; t = t + grid_stride(nwg)) {
        let w = t % W;
        let h = (t / W) % H;
        let nc = t / (W * H);
        // columns of (n, c): tap (i, j) at row rbase + i * KW + j, position oh * OW + ow
        var rbase = nc * KH * KW;
        var cbase = 0u;
        var rstride = OH * OW;
        if (CN) {
            rbase = (nc % chans) * KH * KW;
            cbase = (nc / chans) * OH * OW;
            rstride = nb * OH * OW;
        }
        var acc = C(0);
        for (var i = 0u; i < KH; i = i + 1u) {
            let hp = i32(h + cw(W_PH, K_PH)) - i32(i * cw(W_DH, K_DH));
            if (hp < 0 || hp % SH != 0 || hp / SH >= i32(OH)) { continue; }
            let oh = u32(hp / SH);
            for (var j = 0u; j < KW; j = j + 1u) {
                let wp = i32(w + cw(W_PW, K_PW)) - i32(j * cw(W_DW, K_DW));
                if (wp < 0 || wp % SW != 0 || wp / SW >= i32(OW)) { continue; }
                let ow = u32(wp / SW);
                acc = acc + C(a[mu(W_OFFSET_IN) + (rbase + i * KW + j) * rstride + cbase +
                                oh * OW + ow]);
            }
        }
        out[mu(W_OFFSET_OUT) + t] = store_c(acc);
    }
}

// max pooling: one invocation per output element. The value is the window's maximum (NaN if it
// holds one); idx the flat index h * W + w of the element chosen, torch's: the first maximum in
// window order, the last NaN, the window's first element inside the input when all are -inf.
@compute @workgroup_size(WG)
fn maxpool(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let total = mu(W_N);
    let OH = cw(W_OH, K_OH);
    let OW = cw(W_OW, K_OW);
    let H = i32(cw(W_H, K_H));
    let W = i32(cw(W_W, K_W));
    for (var t = linear_id(wid, nwg, lid); t < total; t = t + grid_stride(nwg)) {
        let ow = t % OW;
        let oh = (t / OW) % OH;
        let base = mu(W_OFFSET_IN) + (t / (OW * OH)) * u32(H * W);
        let hs = i32(oh * cw(W_SH, K_SH)) - i32(cw(W_PH, K_PH));
        let ws = i32(ow * cw(W_SW, K_SW)) - i32(cw(W_PW, K_PW));
        var best = 0.0;
        var bi = -1;
        for (var i = 0u; i < cw(W_KH, K_KH); i = i + 1u) {
            let h = hs + i32(i * cw(W_DH, K_DH));
            if (h < 0 || h >= H) { continue; }
            for (var j = 0u; j < cw(W_KW, K_KW); j = j + 1u) {
                let w = ws + i32(j * cw(W_DW, K_DW));
                if (w < 0 || w >= W) { continue; }
                let v = f32(a[base + u32(h * W + w)]);
                if (bi < 0 || v > best || isnan_f(v)) {
                    best = v;
                    bi = h * W + w;
                }
            }
        }
        out[mu(W_OFFSET_OUT) + t] = S(best);
        idx[mu(W_OFFSET_IDX) + t] = bi;
    }
}

// its backward: one invocation per input element, the sum of dy (binding a) over the windows
// whose idx is this element, windows in increasing order (deterministic, no atomics)
@compute @workgroup_size(WG)
fn maxpool_bwd(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let total = mu(W_N);
    let OH = cw(W_OH, K_OH);
    let OW = cw(W_OW, K_OW);
    let KH = cw(W_KH, K_KH);
    let KW = cw(W_KW, K_KW);
    let H = cw(W_H, K_H);
    let W = cw(W_W, K_W);
    let SH = i32(cw(W_SH, K_SH));
    let SW = i32(cw(W_SW, K_SW));
    for (var t = linear_id(wid, nwg, lid); t < total; t = t + grid_stride(nwg)) {
        let w = t % W;
        let h = (t / W) % H;
        let base = (t / (W * H)) * OH * OW;
        let me = i32(h * W + w);
        var acc = 0.0;
        for (var ii = KH; ii > 0u; ii = ii - 1u) {
            let hp = i32(h + cw(W_PH, K_PH)) - i32((ii - 1u) * cw(W_DH, K_DH));
            if (hp < 0 || hp % SH != 0 || hp / SH >= i32(OH)) { continue; }
            let oh = u32(hp / SH);
            for (var jj = KW; jj > 0u; jj = jj - 1u) {
                let wp = i32(w + cw(W_PW, K_PW)) - i32((jj - 1u) * cw(W_DW, K_DW));
                if (wp < 0 || wp % SW != 0 || wp / SW >= i32(OW)) { continue; }
                let o = base + oh * OW + u32(wp / SW);
                if (idx[mu(W_OFFSET_IDX) + o] == me) { acc = acc + f32(a[mu(W_OFFSET_IN) + o]); }
            }
        }
        out[mu(W_OFFSET_OUT) + t] = S(acc);
    }
}

// the same where the windows tile the input exactly (stride = kernel, no padding or dilation, H =
// OH KH, W = OW KW): one invocation per window writes its KH x KW elements, dy at the argmax and 0
// elsewhere (the gather above divides for every window of every element: integer division is
// what bounds it on a GPU). W_N: the windows.
@compute @workgroup_size(WG)
fn maxpool_bwd_tiles(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lid: u32) {
    let total = mu(W_N);
    let OH = cw(W_OH, K_OH);
    let OW = cw(W_OW, K_OW);
    let KH = cw(W_KH, K_KH);
    let KW = cw(W_KW, K_KW);
    let W = cw(W_W, K_W);
    for (var t = linear_id(wid, nwg, lid); t < total; t = t + grid_stride(nwg)) {
        let ow = t % OW;
        let r = t / OW;
        let oh = r % OH;
        let base = mu(W_OFFSET_OUT) + (r / OH) * OH * KH * W;   // (n, c)'s first element
        let m = u32(idx[mu(W_OFFSET_IDX) + t]);
        let g = a[mu(W_OFFSET_IN) + t];
        for (var i = 0u; i < KH; i = i + 1u) {
            let row = (oh * KH + i) * W + ow * KW;
            for (var j = 0u; j < KW; j = j + 1u) {
                out[base + row + j] = select(S(0), g, row + j == m);
            }
        }
    }
}
