// matmul_sg.wgsl — the GEMM of matmul.wgsl (same contract: contract.MATMUL_SG shares MATMUL's
// metadata words and bindings; `batch_offsets` and the fused bias + activation `epilogue` come
// from matmul.wgsl, which the module includes) on adapters with subgroup operations
// (wgpu feature "subgroup", browser feature "subgroups"; kernels.py prepends the
// `enable subgroups;` the browser's compiler wants).
//
// Entry `gemm_sg` (vec4-aligned operands, row- or column-major: the transposed views of a Linear's
// backward need no copy; A_MLANES / B_KLANES: a / b column-major): a 256-invocation workgroup
// computes a 128 x 128 output tile, 8 x 8 per invocation (rows 4ty..4ty+3 and 64+4ty..; columns
// 4tx..4tx+3 and 64+4tx..), K-slices of 16 double-buffered in workgroup memory (one barrier per
// K-step; the next slice is fetched into registers while the current one is multiplied).
//   * fragments are transposed between lanes: for a row-major a the 4 lanes of a quad each read
//     a[m + q, k..k+3] (one 16-byte load, rows m..m+3 in one quad) and exchange components with 3
//     subgroupShuffleXor, so lane q holds a[m..m+3, k + q] and stores it with one vec4 store
//     (gemm_v4 stores 4 scalars per vec4, with bank conflicts); the same for a column-major b;
//   * the k-major tiles are XOR-swizzled instead of padded (vec4 slot j of k-row k is stored at
//     j ^ (k & 7)), so both buffers fit in 32 KiB: 2 x (16 x 32 + 16 x 32) vec4;
//   * the inner loop over the 16 k of a slice is unrolled 4 times by hand (`sg_step`; unrolled
//     16 times or not at all it is slower on the H200): per k, 4 vec4 loads from workgroup memory
//     feed 64 fused multiply-adds.
// Quads are lanes 4j..4j+3 of a subgroup holding local_invocation_index 4j'..4j'+3 (consecutive
// invocations form subgroups on every driver this runs on; the parity tests check it). Needs
// subgroups of at least 4 lanes (WebGPU's minimum). Grid: (ceil(N/128), ceil(M/128), batches).
const SG_ROW: u32 = 32u;                    // vec4 slots per k row of a tile
const SG_BUF: u32 = 512u;                   // vec4 slots per buffer (16 k x 32)
var<workgroup> Asg: array<vec4<C>, 1024>;   // 2 buffers x [k][m/4 ^ (k & 7)]
var<workgroup> Bsg: array<vec4<C>, 1024>;   // 2 buffers x [k][n/4 ^ (k & 7)]

// lane q of a quad holds row q of a 4 x 4 block (v = a[m + q, k..k+3]); returns column q
// (a[m..m+3, k + q])
fn quad_transpose(v: vec4<C>, q: u32) -> vec4<C> {
    var r = v;
    r[q ^ 1u] = subgroupShuffleXor(v[q ^ 1u], 1u);
    r[q ^ 2u] = subgroupShuffleXor(v[q ^ 2u], 2u);
    r[q ^ 3u] = subgroupShuffleXor(v[q ^ 3u], 3u);
    return r;
}

// 64 multiply-adds of k-row k of the current buffers (abase, bbase: the buffers' first slots)
fn sg_step(acc: ptr<function, array<vec4<C>, 16>>, abase: u32, bbase: u32, k: u32, ty: u32,
           tx: u32) {
    let ar = abase + k * SG_ROW;
    let sw = k & 7u;
    let a0 = Asg[ar + (ty ^ sw)];
    let a1 = Asg[ar + 16u + (ty ^ sw)];
    let b0 = Bsg[bbase + k * SG_ROW + (tx ^ sw)];
    let b1 = Bsg[bbase + k * SG_ROW + 16u + (tx ^ sw)];
    (*acc)[0] = mad4(a0.x, b0, (*acc)[0]);
    (*acc)[1] = mad4(a0.y, b0, (*acc)[1]);
    (*acc)[2] = mad4(a0.z, b0, (*acc)[2]);
    (*acc)[3] = mad4(a0.w, b0, (*acc)[3]);
    (*acc)[4] = mad4(a1.x, b0, (*acc)[4]);
    (*acc)[5] = mad4(a1.y, b0, (*acc)[5]);
    (*acc)[6] = mad4(a1.z, b0, (*acc)[6]);
    (*acc)[7] = mad4(a1.w, b0, (*acc)[7]);
    (*acc)[8] = mad4(a0.x, b1, (*acc)[8]);
    (*acc)[9] = mad4(a0.y, b1, (*acc)[9]);
    (*acc)[10] = mad4(a0.z, b1, (*acc)[10]);
    (*acc)[11] = mad4(a0.w, b1, (*acc)[11]);
    (*acc)[12] = mad4(a1.x, b1, (*acc)[12]);
    (*acc)[13] = mad4(a1.y, b1, (*acc)[13]);
    (*acc)[14] = mad4(a1.z, b1, (*acc)[14]);
    (*acc)[15] = mad4(a1.w, b1, (*acc)[15]);
}

// store a's fragments (k-row ka, vec4 slots ma and 16 + ma) and b's (k-row kb, slots nb and 16 + nb)
fn sg_store(buf: u32, ka: u32, ma: u32, ta0: vec4<C>, ta1: vec4<C>, kb: u32, nb: u32, tb0: vec4<C>,
            tb1: vec4<C>) {
    let ab = buf * SG_BUF + ka * SG_ROW;
    Asg[ab + (ma ^ (ka & 7u))] = ta0;
    Asg[ab + 16u + (ma ^ (ka & 7u))] = ta1;
    let bb = buf * SG_BUF + kb * SG_ROW;
    Bsg[bb + (nb ^ (kb & 7u))] = tb0;
    Bsg[bb + 16u + (nb ^ (kb & 7u))] = tb1;
}

@compute @workgroup_size(256)
fn gemm_sg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32,
           @builtin(subgroup_invocation_id) lane: u32) {
    let M = mu(W_M);
    let N = mu(W_N);
    let K = mu(W_K);
    let sam = mu(W_A_STRIDE_M);
    let sak = mu(W_A_STRIDE_K);
    let sbk = mu(W_B_STRIDE_K);
    let sbn = mu(W_B_STRIDE_N);
    let bo = batch_offsets(wid.z);
    let batch = bo.x;
    let oa = bo.y;
    let ob = bo.z;
    let row0 = wid.y * 128u;
    let col0 = wid.x * 128u;
    let tx = li & 15u;
    let ty = li >> 4u;
    let q = lane & 3u;
    let kq = (li >> 2u) & 3u;
    let g = li >> 4u;
    // a loader. Row-major a: quad lane q, k quad kq, row group g reads a[4g + q (+ 64), 4kq..4kq+3],
    // transposed to k-row 4kq + q, slot g. A_MLANES: reads a[4tx.. (+ 64), k = g] (vec4 along m),
    // stored as is at k-row g, slot tx. (am, ak): the first element's row and column in the tile.
    var am = 4u * g + q;
    var ak = 4u * kq;
    var ka = ak + q;
    var ma = g;
    if (A_MLANES) { am = 4u * tx; ak = g; ka = g; ma = tx; }
    let pa0 = oa + (row0 + am) * sam + ak * sak;
    let pa1 = pa0 + 64u * sam;
    // b loader. Row-major b: reads b[k = g, 4tx.. (+ 64)] (vec4 along n), stored at k-row g, slot
    // tx. B_KLANES: quad lane q reads b[4kq..4kq+3, 4g + q (+ 64)], transposed to k-row 4kq + q.
    var bn = 4u * tx;
    var bk = g;
    var kb = g;
    var nb = tx;
    if (B_KLANES) { bn = 4u * g + q; bk = 4u * kq; kb = bk + q; nb = g; }
    let pb0 = ob + bk * sbk + (col0 + bn) * sbn;
    let pb1 = pb0 + 64u * sbn;
    // bounds: the first element's row / column (a vec4 lies wholly inside or outside the matrix)
    let ma0 = row0 + am;
    let nb0 = col0 + bn;

    var acc: array<vec4<C>, 16>;          // zero-initialised; constant indices only (registers)

    var ra0 = lda4(pa0, ma0, ak, M, K);
    var ra1 = lda4(pa1, ma0 + 64u, ak, M, K);
    var rb0 = ldb4(pb0, bk, nb0, K, N);
    var rb1 = ldb4(pb1, bk, nb0 + 64u, K, N);
    if (!A_MLANES) { ra0 = quad_transpose(ra0, q); ra1 = quad_transpose(ra1, q); }
    if (B_KLANES) { rb0 = quad_transpose(rb0, q); rb1 = quad_transpose(rb1, q); }
    sg_store(0u, ka, ma, ra0, ra1, kb, nb, rb0, rb1);
    workgroupBarrier();
    var cur = 0u;
    for (var k0 = 0u; k0 < K; k0 = k0 + 16u) {
        let kn = k0 + 16u;
        let more = kn < K;
        if (more) {                       // prefetch the next K-slice into registers
            ra0 = lda4(pa0 + kn * sak, ma0, kn + ak, M, K);
            ra1 = lda4(pa1 + kn * sak, ma0 + 64u, kn + ak, M, K);
            rb0 = ldb4(pb0 + kn * sbk, kn + bk, nb0, K, N);
            rb1 = ldb4(pb1 + kn * sbk, kn + bk, nb0 + 64u, K, N);
        }
        let abase = cur * SG_BUF;
        let bbase = cur * SG_BUF;
        for (var k = 0u; k < 16u; k = k + 4u) {
            sg_step(&acc, abase, bbase, k, ty, tx);
            sg_step(&acc, abase, bbase, k + 1u, ty, tx);
            sg_step(&acc, abase, bbase, k + 2u, ty, tx);
            sg_step(&acc, abase, bbase, k + 3u, ty, tx);
        }
        if (more) {                       // the other buffer: last read before the previous barrier
            let nxt = cur ^ 1u;
            if (!A_MLANES) { ra0 = quad_transpose(ra0, q); ra1 = quad_transpose(ra1, q); }
            if (B_KLANES) { rb0 = quad_transpose(rb0, q); rb1 = quad_transpose(rb1, q); }
            sg_store(nxt, ka, ma, ra0, ra1, kb, nb, rb0, rb1);
            cur = nxt;
        }
        workgroupBarrier();
    }

    let obase = batch * M * N;
    let m = row0 + 4u * ty;               // rows m..m+3, m+64..m+67; columns n..n+3, n+64..n+67
    let n = col0 + 4u * tx;
    store_row4(obase, m, n, M, N, acc[0]);
    store_row4(obase, m, n + 64u, M, N, acc[8]);
    store_row4(obase, m + 1u, n, M, N, acc[1]);
    store_row4(obase, m + 1u, n + 64u, M, N, acc[9]);
    store_row4(obase, m + 2u, n, M, N, acc[2]);
    store_row4(obase, m + 2u, n + 64u, M, N, acc[10]);
    store_row4(obase, m + 3u, n, M, N, acc[3]);
    store_row4(obase, m + 3u, n + 64u, M, N, acc[11]);
    store_row4(obase, m + 64u, n, M, N, acc[4]);
    store_row4(obase, m + 64u, n + 64u, M, N, acc[12]);
    store_row4(obase, m + 65u, n, M, N, acc[5]);
    store_row4(obase, m + 65u, n + 64u, M, N, acc[13]);
    store_row4(obase, m + 66u, n, M, N, acc[6]);
    store_row4(obase, m + 66u, n + 64u, M, N, acc[14]);
    store_row4(obase, m + 67u, n, M, N, acc[7]);
    store_row4(obase, m + 67u, n + 64u, M, N, acc[15]);
}
