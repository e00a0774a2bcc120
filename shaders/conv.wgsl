// conv.wgsl — im2col (torch's unfold) and its adjoint col2im (torch's fold), NCHW, dense inputs;
// max pooling forward (value and argmax) and backward (from the argmax).
//
// Metadata words, bindings: contract.CONV (the generated header). Output position (oh, ow) of
// kernel tap (i, j) reads input pixel (oh * SH - PH + i * DH, ow * SW - PW + j * DW). The columns
// are (N, C*KH*KW, OH*OW), or with CN (C*KH*KW, N*OH*OW) (the weight gradient's operand).

// column element t's (n * C + c, tap i * KW + j, output position oh * OW + ow)
fn col_parts(t: u32, nb: u32) -> vec3<u32> {
    let L = mu(W_OH) * mu(W_OW);
    let T = mu(W_KH) * mu(W_KW);
    if (CN) {
        let q = t / (L * nb);                          // c * T + tap
        return vec3<u32>(((t / L) % nb) * mu(W_C) + q / T, q % T, t % L);
    }
    return vec3<u32>(t / (L * T), (t / L) % T, t % L);
}

// im2col: one invocation per column element (n, (c, i, j), (oh, ow)); padding reads PAD.
@compute @workgroup_size(WG)
fn im2col(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let total = mu(W_N);
    let OH = mu(W_OH);
    let OW = mu(W_OW);
    let KH = mu(W_KH);
    let KW = mu(W_KW);
    let C = mu(W_C);
    let H = i32(mu(W_H));
    let W = i32(mu(W_W));
    let nb = total / (C * KH * KW * OH * OW);
    for (var t = linear_id(wid, nwg, lid); t < total; t = t + grid_stride(nwg)) {
        let p = col_parts(t, nb);
        let ow = p.z % OW;
        let oh = p.z / OW;
        let j = p.y % KW;
        let i = p.y / KW;
        let nc = p.x;                                  // n * C + c
        let h = i32(oh * mu(W_SH) + i * mu(W_DH)) - i32(mu(W_PH));
        let w = i32(ow * mu(W_SW) + j * mu(W_DW)) - i32(mu(W_PW));
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
    let OH = mu(W_OH);
    let OW = mu(W_OW);
    let KH = mu(W_KH);
    let KW = mu(W_KW);
    let H = mu(W_H);
    let W = mu(W_W);
    let SH = i32(mu(W_SH));
    let SW = i32(mu(W_SW));
    let chans = mu(W_C);
    let nb = total / (chans * H * W);
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
            let hp = i32(h + mu(W_PH)) - i32(i * mu(W_DH));
            if (hp < 0 || hp % SH != 0 || hp / SH >= i32(OH)) { continue; }
            let oh = u32(hp / SH);
            for (var j = 0u; j < KW; j = j + 1u) {
                let wp = i32(w + mu(W_PW)) - i32(j * mu(W_DW));
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
    let OH = mu(W_OH);
    let OW = mu(W_OW);
    let H = i32(mu(W_H));
    let W = i32(mu(W_W));
    for (var t = linear_id(wid, nwg, lid); t < total; t = t + grid_stride(nwg)) {
        let ow = t % OW;
        let oh = (t / OW) % OH;
        let base = mu(W_OFFSET_IN) + (t / (OW * OH)) * u32(H * W);
        let hs = i32(oh * mu(W_SH)) - i32(mu(W_PH));
        let ws = i32(ow * mu(W_SW)) - i32(mu(W_PW));
        var best = 0.0;
        var bi = -1;
        for (var i = 0u; i < mu(W_KH); i = i + 1u) {
            let h = hs + i32(i * mu(W_DH));
            if (h < 0 || h >= H) { continue; }
            for (var j = 0u; j < mu(W_KW); j = j + 1u) {
                let w = ws + i32(j * mu(W_DW));
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
    let OH = mu(W_OH);
    let OW = mu(W_OW);
    let KH = mu(W_KH);
    let KW = mu(W_KW);
    let H = mu(W_H);
    let W = mu(W_W);
    let SH = i32(mu(W_SH));
    let SW = i32(mu(W_SW));
    for (var t = linear_id(wid, nwg, lid); t < total; t = t + grid_stride(nwg)) {
        let w = t % W;
        let h = (t / W) % H;
        let base = (t / (W * H)) * OH * OW;
        let me = i32(h * W + w);
        var acc = 0.0;
        for (var ii = KH; ii > 0u; ii = ii - 1u) {
            let hp = i32(h + mu(W_PH)) - i32((ii - 1u) * mu(W_DH));
            if (hp < 0 || hp % SH != 0 || hp / SH >= i32(OH)) { continue; }
            let oh = u32(hp / SH);
            for (var jj = KW; jj > 0u; jj = jj - 1u) {
                let wp = i32(w + mu(W_PW)) - i32((jj - 1u) * mu(W_DW));
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
    let OH = mu(W_OH);
    let OW = mu(W_OW);
    let KH = mu(W_KH);
    let KW = mu(W_KW);
    let W = mu(W_W);
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
