// conv.wgsl — im2col (torch's unfold) and its adjoint col2im (torch's fold), NCHW, dense inputs.
//
// Metadata words, bindings: contract.CONV (the generated header). Output position (oh, ow) of
// kernel tap (i, j) reads input pixel (oh * SH - PH + i * DH, ow * SW - PW + j * DW).

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
    for (var t = linear_id(wid, nwg, lid); t < total; t = t + grid_stride(nwg)) {
        let ow = t % OW;
        let oh = (t / OW) % OH;
        let j = (t / (OW * OH)) % KW;
        let i = (t / (OW * OH * KW)) % KH;
        let nc = t / (OW * OH * KW * KH);             // n * C + c
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
    for (var t = linear_id(wid, nwg, lid); t < total; t = t + grid_stride(nwg)) {
        let w = t % W;
        let h = (t / W) % H;
        let nc = t / (W * H);
        var acc = C(0);
        for (var i = 0u; i < KH; i = i + 1u) {
            let hp = i32(h + mu(W_PH)) - i32(i * mu(W_DH));
            if (hp < 0 || hp % SH != 0 || hp / SH >= i32(OH)) { continue; }
            let oh = u32(hp / SH);
            for (var j = 0u; j < KW; j = j + 1u) {
                let wp = i32(w + mu(W_PW)) - i32(j * mu(W_DW));
                if (wp < 0 || wp % SW != 0 || wp / SW >= i32(OW)) { continue; }
                let ow = u32(wp / SW);
                acc = acc + C(a[mu(W_OFFSET_IN) + ((nc * KH + i) * KW + j) * OH * OW + oh * OW + ow]);
            }
        }
        out[mu(W_OFFSET_OUT) + t] = store_c(acc);
    }
}
