// matmul.wgsl — batched GEMM with the fused bias + activation epilogue:
//     z = a @ b (+ bias);  y = act(z);  writes y, and z too when WRITE_Z (the ACT row saves z).
// a (..., M, K) and b (..., K, N) are strided views (transposes are free); batch dims broadcast
// through their strides (0 on a broadcast dim). The output is dense (batch, M, N).
//
// Tiling (entry `gemm`): a 256-invocation workgroup computes a 64 x 64 tile of the output; each
// invocation owns a 4 x 4 register block (register blocking: 16 multiply-adds per 2 vec4 loads
// from workgroup memory); K advances 16 at a time through workgroup memory (rows padded against
// bank conflicts) while the next K-slice is prefetched into registers (a K-slice of 32 is slower:
// twice the workgroup memory, fewer resident workgroups). Entry `gemm_big`: 128 x 128 tiles,
// 8 x 8 per invocation. Entry `gemm_v4` (row- or column-major operands with vec4-aligned strides): vec4 global
// loads, double-buffered workgroup tiles, 128 x 64 (8 x 4 per invocation) or, with V4_WIDE,
// 128 x 128 (8 x 8); see below. Their speeds: docs/benchmarks.md.
//
// Metadata words (W_M, W_N, W_K, strides, offsets, batch shape...), bindings and overrides:
// contract.MATMUL (the generated header). Grid: (ceil(N/64), ceil(M/64), batches). The bias /
// activation epilogue and the batch offsets are shared by every entry (`epilogue`, `batch_offsets`).

// (batch index, a offset, b offset) of batch z of this dispatch
fn batch_offsets(z: u32) -> vec3<u32> {
    var rem = z + mu(W_BATCH0);
    let batch = rem;
    var oa = mu(W_OFFSET_A);
    var ob = mu(W_OFFSET_B);
    for (var d = mu(W_BATCH_NDIM); d > 0u; d = d - 1u) {
        let k = d - 1u;
        let s = mu(W_BATCH_SHAPE + k);
        let c = rem % s;
        rem = rem / s;
        oa = oa + c * mu(W_A_BATCH_STRIDES + k);
        ob = ob + c * mu(W_B_BATCH_STRIDES + k);
    }
    return vec3<u32>(batch, oa, ob);
}

// The fused epilogue of every GEMM entry: output element o (dense index, before the out / z
// offsets) in column n holds z = a @ b; adds the bias, applies the activation, writes y (and z).
fn epilogue(o: u32, n: u32, acc: C) {
    var z = acc;
    if (HAS_BIAS) { z = z + C(bias[mu(W_OFFSET_BIAS) + n * mu(W_BIAS_STRIDE)]); }
    var y = z;
    if (ACT != ACT_NONE) { y = C(act_fwd(ACT, f32(z))); }
    out[mu(W_OFFSET_OUT) + o] = S(y);
    if (WRITE_Z) { zout[mu(W_OFFSET_Z) + o] = S(z); }
}

// v = out[m, n..n+3] (obase: the batch's first element), the elements inside the matrix. The
// entries call it with constant indices of their accumulator arrays: a dynamically indexed copy
// of an accumulator array is placed in local memory (gemm_v4 on the H200: 29.8 -> 38.3 TFLOP/s).
// Each entry lists its calls itself: one shared function taking the array (inlined alike) gave
// gemm_v4 35.9 TFLOP/s against 38.3 (the driver's schedule follows the code's shape).
fn store_row4(obase: u32, m: u32, n: u32, M: u32, N: u32, v: vec4<C>) {
    if (m >= M) { return; }
    for (var c = 0u; c < 4u; c = c + 1u) {
        if (n + c < N) { epilogue(obase + m * N + n + c, n + c, v[c]); }
    }
}

// Loader roles: consecutive invocations read consecutive addresses of a and b whatever their
// layout. Default: a row-major (lanes along k), b row-major (lanes along n); A_MLANES: a is
// column-major (a transposed view); B_KLANES: b is column-major.
const BM: u32 = 64u;
const BN: u32 = 64u;
const BK: u32 = 16u;

// rows of 16 vec4 padded to 17: the transposing tile stores hit different banks
var<workgroup> As: array<vec4<C>, 272>;   // [k][m/4]: 4 consecutive rows of column k
var<workgroup> Bs: array<vec4<C>, 272>;   // [k][n/4]: 4 consecutive columns of row k

fn lda(p: u32, m: u32, k: u32, M: u32, K: u32) -> C {
    if (!CHECK || (m < M && k < K)) { return C(a[p]); }
    return C(0);
}
fn ldb(p: u32, k: u32, n: u32, K: u32, N: u32) -> C {
    if (!CHECK || (k < K && n < N)) { return C(b[p]); }
    return C(0);
}

// 4 consecutive rows m..m+3 of a at column k / 4 consecutive columns n..n+3 of b at row k
// (zeros outside the matrix)
fn col4_a(oa: u32, m: u32, k: u32, sam: u32, sak: u32, M: u32, K: u32) -> vec4<C> {
    let p = oa + k * sak + m * sam;
    return vec4<C>(lda(p, m, k, M, K), lda(p + sam, m + 1u, k, M, K),
                   lda(p + 2u * sam, m + 2u, k, M, K), lda(p + 3u * sam, m + 3u, k, M, K));
}
fn row4_b(ob: u32, k: u32, n: u32, sbk: u32, sbn: u32, K: u32, N: u32) -> vec4<C> {
    let p = ob + k * sbk + n * sbn;
    return vec4<C>(ldb(p, k, n, K, N), ldb(p + sbn, k, n + 1u, K, N),
                   ldb(p + 2u * sbn, k, n + 2u, K, N), ldb(p + 3u * sbn, k, n + 3u, K, N));
}

@compute @workgroup_size(16, 16)
fn gemm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
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

    let row0 = wid.y * BM;
    let col0 = wid.x * BN;
    let tx = lid3.x;
    let ty = lid3.y;
    // loader roles: A tile column ka, rows 4*ma..4*ma+3;  B tile row kb, columns 4*nb..4*nb+3
    var ka = li & 15u;
    var ma = li >> 4u;
    if (A_MLANES) { ma = li & 15u; ka = li >> 4u; }
    var nb = li & 15u;
    var kb = li >> 4u;
    if (B_KLANES) { kb = li & 15u; nb = li >> 4u; }

    var acc0 = vec4<C>(C(0));
    var acc1 = vec4<C>(C(0));
    var acc2 = vec4<C>(C(0));
    var acc3 = vec4<C>(C(0));

    let m0 = row0 + 4u * ma;
    let n0 = col0 + 4u * nb;
    // the next K-slice is fetched into registers while the current one is multiplied
    var ra = col4_a(oa, m0, ka, sam, sak, M, K);
    var rb = row4_b(ob, kb, n0, sbk, sbn, K, N);
    for (var k0 = 0u; k0 < K; k0 = k0 + BK) {
        As[ka * 17u + ma] = ra;
        Bs[kb * 17u + nb] = rb;
        workgroupBarrier();
        let kn = k0 + BK;
        if (kn < K) {
            ra = col4_a(oa, m0, kn + ka, sam, sak, M, K);
            rb = row4_b(ob, kn + kb, n0, sbk, sbn, K, N);
        }
        for (var k = 0u; k < BK; k = k + 1u) {
            let av = As[k * 17u + ty];
            let bv = Bs[k * 17u + tx];
            acc0 = mad4(av.x, bv, acc0);
            acc1 = mad4(av.y, bv, acc1);
            acc2 = mad4(av.z, bv, acc2);
            acc3 = mad4(av.w, bv, acc3);
        }
        workgroupBarrier();
    }
    let obase = batch * M * N;
    let m = row0 + 4u * ty;
    let n = col0 + 4u * tx;
    store_row4(obase, m, n, M, N, acc0);
    store_row4(obase, m + 1u, n, M, N, acc1);
    store_row4(obase, m + 2u, n, M, N, acc2);
    store_row4(obase, m + 3u, n, M, N, acc3);
}

// gemm_big: the same contract with a 128 x 128 output tile per workgroup and an 8 x 8 register
// block per invocation (rows 4ty..4ty+3 and 64+4ty..; columns 4tx.. and 64+4tx..): 64
// multiply-adds per 4 vec4 loads from workgroup memory, 1024 per thread between barriers.
// Used when M and N are both >= 128. Grid: (ceil(N/128), ceil(M/128), batches).
var<workgroup> As2: array<vec4<C>, 528>;  // [k][m/4], 16 x 32 padded to 33
var<workgroup> Bs2: array<vec4<C>, 528>;  // [k][n/4], 16 x 32 padded to 33

@compute @workgroup_size(16, 16)
fn gemm_big(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>,
            @builtin(local_invocation_index) li: u32) {
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
    let tx = lid3.x;
    let ty = lid3.y;
    var kl = li & 15u;          // A loader: column kl, rows 4*ml.. and 64+4*ml..
    var ml = li >> 4u;
    if (A_MLANES) { ml = li & 15u; kl = li >> 4u; }
    var nl = li & 15u;          // B loader: row kr, columns 4*nl.. and 64+4*nl..
    var kr = li >> 4u;
    if (B_KLANES) { kr = li & 15u; nl = li >> 4u; }
    let ma = row0 + 4u * ml;
    let mb = ma + 64u;
    let na = col0 + 4u * nl;
    let nbb = na + 64u;

    var acc: array<vec4<C>, 16>;          // zero-initialised; constant indices only (registers)

    var ra0 = col4_a(oa, ma, kl, sam, sak, M, K);
    var ra1 = col4_a(oa, mb, kl, sam, sak, M, K);
    var rb0 = row4_b(ob, kr, na, sbk, sbn, K, N);
    var rb1 = row4_b(ob, kr, nbb, sbk, sbn, K, N);
    for (var k0 = 0u; k0 < K; k0 = k0 + 16u) {
        As2[kl * 33u + ml] = ra0;
        As2[kl * 33u + 16u + ml] = ra1;
        Bs2[kr * 33u + nl] = rb0;
        Bs2[kr * 33u + 16u + nl] = rb1;
        workgroupBarrier();
        let kn = k0 + 16u;
        if (kn < K) {                     // prefetch the next K-slice into registers
            ra0 = col4_a(oa, ma, kn + kl, sam, sak, M, K);
            ra1 = col4_a(oa, mb, kn + kl, sam, sak, M, K);
            rb0 = row4_b(ob, kn + kr, na, sbk, sbn, K, N);
            rb1 = row4_b(ob, kn + kr, nbb, sbk, sbn, K, N);
        }
        for (var k = 0u; k < 16u; k = k + 1u) {
            let a0 = As2[k * 33u + ty];
            let a1 = As2[k * 33u + 16u + ty];
            let b0 = Bs2[k * 33u + tx];
            let b1 = Bs2[k * 33u + 16u + tx];
            acc[0] = mad4(a0.x, b0, acc[0]);
            acc[1] = mad4(a0.x, b1, acc[1]);
            acc[2] = mad4(a0.y, b0, acc[2]);
            acc[3] = mad4(a0.y, b1, acc[3]);
            acc[4] = mad4(a0.z, b0, acc[4]);
            acc[5] = mad4(a0.z, b1, acc[5]);
            acc[6] = mad4(a0.w, b0, acc[6]);
            acc[7] = mad4(a0.w, b1, acc[7]);
            acc[8] = mad4(a1.x, b0, acc[8]);
            acc[9] = mad4(a1.x, b1, acc[9]);
            acc[10] = mad4(a1.y, b0, acc[10]);
            acc[11] = mad4(a1.y, b1, acc[11]);
            acc[12] = mad4(a1.z, b0, acc[12]);
            acc[13] = mad4(a1.z, b1, acc[13]);
            acc[14] = mad4(a1.w, b0, acc[14]);
            acc[15] = mad4(a1.w, b1, acc[15]);
        }
        workgroupBarrier();
    }

    let obase = batch * M * N;
    let m = row0 + 4u * ty;               // rows m..m+3, m+64..m+67; columns n..n+3, n+64..n+67
    let n = col0 + 4u * tx;
    store_row4(obase, m, n, M, N, acc[0]);
    store_row4(obase, m, n + 64u, M, N, acc[1]);
    store_row4(obase, m + 1u, n, M, N, acc[2]);
    store_row4(obase, m + 1u, n + 64u, M, N, acc[3]);
    store_row4(obase, m + 2u, n, M, N, acc[4]);
    store_row4(obase, m + 2u, n + 64u, M, N, acc[5]);
    store_row4(obase, m + 3u, n, M, N, acc[6]);
    store_row4(obase, m + 3u, n + 64u, M, N, acc[7]);
    store_row4(obase, m + 64u, n, M, N, acc[8]);
    store_row4(obase, m + 64u, n + 64u, M, N, acc[9]);
    store_row4(obase, m + 65u, n, M, N, acc[10]);
    store_row4(obase, m + 65u, n + 64u, M, N, acc[11]);
    store_row4(obase, m + 66u, n, M, N, acc[12]);
    store_row4(obase, m + 66u, n + 64u, M, N, acc[13]);
    store_row4(obase, m + 67u, n, M, N, acc[14]);
    store_row4(obase, m + 67u, n + 64u, M, N, acc[15]);
}

// gemm_v4: the same contract for operands read a vec4 at a time (the launcher checks: a has stride
// 1 along k, or along m with A_MLANES (a transposed view); b stride 1 along n, or along k with
// B_KLANES; K, N, the other strides, the batch strides and both element offsets multiples of 4);
// a and b are read through vec4 views of the same buffers (bindings a4, b4), one 16-byte load per
// 4 elements. The tiles are k-major: an operand read along k is transposed into them by scalar
// stores, one read along m / n is stored as it is read. 128 x 64 output tile per workgroup, 8 x 4 register block per
// invocation (rows 4ty..4ty+3 and 64+4ty..; columns 4tx..4tx+3): 32 multiply-adds per 3 vec4
// loads from workgroup memory; V4_WIDE: 128 x 128 tiles, 8 x 8 per invocation (columns also
// 64+4tx..), 64 multiply-adds per 4 vec4 loads. Double-buffered K-slices of 16: one barrier per
// K-step, the next slice is fetched into registers while the current one is multiplied; the
// 16 k of a slice are unrolled (the driver does not unroll Naga's bounded loop): the blocks are
// generated where `// @generate gemm_v4_ksteps` stands (codegen_gemm.py). A vec4
// runs along k or n (and along m with A_MLANES), and the launcher requires K, N (and M) to be
// multiples of 4: it lies wholly inside or outside the matrix, so CHECK tests m < M, k < K and
// n < N once per vec4. Grid: (ceil(N/64 or 128), ceil(M/128), batches).
// 2 buffers x 16 k x 32 vec4 of m, the vec4 slot of rows 4j..4j+3 in k row k at j ^ (2 (k / 4)):
// the XOR spreads a warp's transposing scalar stores over all banks (as padding rows to 33 vec4
// would, which needs 33 KiB where browsers and lavapipe grant 32)
var<workgroup> As4: array<vec4<C>, 1024>;
var<workgroup> Bs4: array<vec4<C>, 1024>;  // 2 buffers x 16 k x 32 vec4 of n (16 used unless WIDE)

// a[m, k..k+3] / b[k, n..n+3] (p: element index, a multiple of 4); zeros outside the matrix
fn lda4(p: u32, m: u32, k: u32, M: u32, K: u32) -> vec4<C> {
    if (!CHECK || (m < M && k < K)) { return vec4<C>(a4[p >> 2u]); }
    return vec4<C>(C(0));
}
fn ldb4(p: u32, k: u32, n: u32, K: u32, N: u32) -> vec4<C> {
    if (!CHECK || (k < K && n < N)) { return vec4<C>(b4[p >> 2u]); }
    return vec4<C>(C(0));
}

// The slot of vec4 column group g (4 rows of a, 4 columns of b) in k row k of a tile buffer at
// base: g ^ 2 (k / 4), the swizzle the reads in gemm_v4 undo (ty0..ty6, tx0..tx6)
fn slot4(base: u32, k: u32, g: u32) -> u32 { return base + k * 32u + (g ^ ((k >> 2u) << 1u)); }

// k-major tile store of a fragment v = x[r, k..k+3] of a row of a (to_b: a column of b) at tile
// row r: four scalar stores, one per k row (k a multiple of 4: the four share the swizzle)
fn st_transposed(to_b: bool, base: u32, k: u32, r: u32, v: vec4<C>) {
    let i = slot4(base, k, r >> 2u);
    let c = r & 3u;
    if (to_b) {
        Bs4[i][c] = v.x; Bs4[i + 32u][c] = v.y; Bs4[i + 64u][c] = v.z; Bs4[i + 96u][c] = v.w;
    } else {
        As4[i][c] = v.x; As4[i + 32u][c] = v.y; As4[i + 64u][c] = v.z; As4[i + 96u][c] = v.w;
    }
}

// One K-slice of registers into tile buffer `base`: a row-major a (rows ml, ml + 64 at k 4 kq) is
// transposed by st_transposed, an A_MLANES one (k row kn, m quads nl, nl + 16) stored as it is read; b
// likewise (B_KLANES: columns ml, ml + 64 transposed; else k row kn, n quads nl, nl + 16)
fn st_tiles(base: u32, kq: u32, ml: u32, kn: u32, nl: u32, ra0: vec4<C>, ra1: vec4<C>,
            rb0: vec4<C>, rb1: vec4<C>) {
    if (A_MLANES) {
        As4[slot4(base, kn, nl)] = ra0;
        As4[slot4(base, kn, nl + 16u)] = ra1;
    } else {
        st_transposed(false, base, 4u * kq, ml, ra0);
        st_transposed(false, base, 4u * kq, ml + 64u, ra1);
    }
    if (B_KLANES) {
        st_transposed(true, base, 4u * kq, ml, rb0);
        if (V4_WIDE) { st_transposed(true, base, 4u * kq, ml + 64u, rb1); }
    } else {
        Bs4[base + kn * 32u + nl] = rb0;
        if (V4_WIDE) { Bs4[base + kn * 32u + nl + 16u] = rb1; }
    }
}

@compute @workgroup_size(16, 16)
fn gemm_v4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>,
           @builtin(local_invocation_index) li: u32) {
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
    let col0 = wid.x * select(64u, 128u, V4_WIDE);
    let tx = lid3.x;
    let ty = lid3.y;
    // loaders: an operand with stride 1 along k (a row-major a; b with B_KLANES) is read at rows
    // (a) / columns (b) ml and ml + 64 (b: + 64 only when V4_WIDE), k quad 4*kq (4 lanes read 64
    // contiguous bytes); one with stride 1 along m / n (a with A_MLANES; a row-major b) at k row
    // kn, column quads nl and nl + 16 (b: + 16 only when V4_WIDE; 16 lanes read 256 bytes)
    let kq = li & 3u;
    let ml = li >> 2u;
    let nl = li & 15u;
    let kn = li >> 4u;
    let ma0 = row0 + select(ml, 4u * nl, A_MLANES);   // the first m, k of this invocation's a vec4s
    let ka = select(4u * kq, kn, A_MLANES);
    let ma1 = ma0 + 64u;
    let nb0 = col0 + select(4u * nl, ml, B_KLANES);   // and of its b vec4s
    let kb = select(kn, 4u * kq, B_KLANES);
    let nb1 = nb0 + 64u;
    let pa0 = oa + ma0 * sam + ka * sak;
    let pa1 = pa0 + 64u * sam;
    let pb0 = ob + kb * sbk + nb0 * sbn;
    let pb1 = pb0 + 64u * sbn;
    // the prefetch's step along k: sak / sbk, spelled as the constant 1 where the layout makes
    // it 1 (a row-major a, a B_KLANES b), so that the driver folds the multiply away
    let astep = select(1u, sak, A_MLANES);
    let bstep = select(sbk, 1u, B_KLANES);

    var acc: array<vec4<C>, 16>;          // zero-initialised; constant indices only (registers)

    var ra0 = lda4(pa0, ma0, ka, M, K);
    var ra1 = lda4(pa1, ma1, ka, M, K);
    var rb0 = ldb4(pb0, kb, nb0, K, N);
    var rb1 = vec4<C>(C(0));
    if (V4_WIDE) { rb1 = ldb4(pb1, kb, nb1, K, N); }
    st_tiles(0u, kq, ml, kn, nl, ra0, ra1, rb0, rb1);
    workgroupBarrier();
    let ty0 = ty;                         // ty's a slot in k rows 0-3, 4-7, 8-11, 12-15 (swizzle)
    let ty2 = ty ^ 2u;
    let ty4 = ty ^ 4u;
    let ty6 = ty ^ 6u;
    let tx0 = tx;                         // tx's b slot: swizzled as a's where b is transposed
    let tx2 = select(tx, tx ^ 2u, B_KLANES);
    let tx4 = select(tx, tx ^ 4u, B_KLANES);
    let tx6 = select(tx, tx ^ 6u, B_KLANES);
    var cur = 0u;
    for (var k0 = 0u; k0 < K; k0 = k0 + 16u) {
        let k1 = k0 + 16u;
        let more = k1 < K;
        if (more) {                       // prefetch the next K-slice into registers
            ra0 = lda4(pa0 + k1 * astep, ma0, k1 + ka, M, K);
            ra1 = lda4(pa1 + k1 * astep, ma1, k1 + ka, M, K);
            rb0 = ldb4(pb0 + k1 * bstep, k1 + kb, nb0, K, N);
            if (V4_WIDE) { rb1 = ldb4(pb1 + k1 * bstep, k1 + kb, nb1, K, N); }
        }
        let base = cur * 512u;            // this K-slice's buffer, the same slot in As4 and Bs4
        // the k loop unrolled (16 copies, generated by codegen_gemm.py; faster on the H200 than the
        // plain loop); copy k reads ty's a slots as ty ^ 2 (k / 4): the constants ty0..ty6 above
        for (var k4 = 0u; k4 < 16u; k4 = k4 + 16u) {
            // @generate gemm_v4_ksteps
        }
        if (more) {                       // the other buffer: last read before the previous barrier
            let nxt = cur ^ 1u;
            st_tiles(nxt * 512u, kq, ml, kn, nl, ra0, ra1, rb0, rb1);
            cur = nxt;
        }
        workgroupBarrier();
    }

    let obase = batch * M * N;
    let m = row0 + 4u * ty;               // rows m..m+3, m+64..m+67; columns n..n+3, n+64..n+67
    let n = col0 + 4u * tx;
    store_row4(obase, m, n, M, N, acc[0]);
    if (V4_WIDE) { store_row4(obase, m, n + 64u, M, N, acc[8]); }
    store_row4(obase, m + 1u, n, M, N, acc[1]);
    if (V4_WIDE) { store_row4(obase, m + 1u, n + 64u, M, N, acc[9]); }
    store_row4(obase, m + 2u, n, M, N, acc[2]);
    if (V4_WIDE) { store_row4(obase, m + 2u, n + 64u, M, N, acc[10]); }
    store_row4(obase, m + 3u, n, M, N, acc[3]);
    if (V4_WIDE) { store_row4(obase, m + 3u, n + 64u, M, N, acc[11]); }
    store_row4(obase, m + 64u, n, M, N, acc[4]);
    if (V4_WIDE) { store_row4(obase, m + 64u, n + 64u, M, N, acc[12]); }
    store_row4(obase, m + 65u, n, M, N, acc[5]);
    if (V4_WIDE) { store_row4(obase, m + 65u, n + 64u, M, N, acc[13]); }
    store_row4(obase, m + 66u, n, M, N, acc[6]);
    if (V4_WIDE) { store_row4(obase, m + 66u, n + 64u, M, N, acc[14]); }
    store_row4(obase, m + 67u, n, M, N, acc[7]);
    if (V4_WIDE) { store_row4(obase, m + 67u, n + 64u, M, N, acc[15]); }
}
