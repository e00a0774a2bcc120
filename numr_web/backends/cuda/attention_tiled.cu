// numr_web cuda backend: tiled flash attention on the SIMT pipes, FlashAttention-2's schedule with
// full float32 products (appended after attention.cu: it uses IO<S>, AttMask, ATT_PARAMS, ATT_INF).
//
// A block of W warps takes BR = 4 W TM rows (query rows: forward and dq; key rows: dk / dv) of one
// batch and walks the other side in tiles of BC rows staged in shared memory. Within a warp, lane
// = 8 rg + cg: the 4 lane rows rg own TM consecutive block rows each, the 8 lane columns cg own the
// tile columns cg + 8 t (t < BC / 8) of the scores and the accumulator columns 4 cg + 32 u + e
// (e < 4, u < DM / 32). A score row lives in the 8 lanes of one lane row: its max and sum are warp
// shuffles. Score tiles go through a per-warp shared buffer, transposed ([column][row]), to the
// next product, so no block barrier separates the two products of a tile.
//
// Shared tiles are row-major with DM + ATT_PAD floats a row (DM: the head dim rounded up to a
// multiple of 32, zero-padded): 16-byte reads along d, and 8 lanes reading 8 consecutive rows hit
// 8 different bank quads. Products: att_mm_rows (both operands along d: q k^T, dout v^T) and
// att_mm_cols (scores^T times a tile: p v, ds k, p^T dout, ds^T q).
//
// Scores are kept in log2 units (scale * log2 e folded into one multiply, exp2f); the forward's
// log-sum-exp is stored in natural units, in float32 for every storage type. Rows that see no key
// get out = 0 and lse = -inf; the backward reads lse = -inf as "p = 0 everywhere".
//
// Template: S storage type (float or half_t: loaded into float tiles), DM padded head dim, MK mask
// kind, W warps, TM rows a thread, BC tile rows. attention.py chooses W / TM / BC (its TILES table)
// and computes the dynamic shared memory size with the same formulas as AttT below (att_smem_*).
// `vec` bit 0: q, k (and dq, dk) rows may be read as 4-element vectors (D % 4 == 0, aligned);
// bit 1: the same for v, out, dout, dv (DV).

#define ATT_PAD 4                       // floats of padding a shared row (keeps 16-byte alignment)
#define ATT_LOG2E 1.4426950408889634f
#define ATT_LN2 0.6931471805599453f
#define ATT_FULL 0xffffffffu
#ifndef ATT_UNROLL_K
#define ATT_UNROLL_K 1
#endif

// The operands may be strided views (the heads of a fused qkv projection; an output written as
// (B, T, H, D) so that merging its heads back needs no copy): the b-th (batch, head) matrix of
// operand X starts at (b / hn) * LX0 + (b % hn) * LX1 and its rows are LXr apart (each row's
// values contiguous). X: q, k, v, o (out), g (dout), dq, dk, dv; unused ones are 0.
#define ATT_STRIDES long long hn, \
    long long Lq0, long long Lq1, long long Lqr, long long Lk0, long long Lk1, long long Lkr, \
    long long Lv0, long long Lv1, long long Lvr, long long Lo0, long long Lo1, long long Lor, \
    long long Lg0, long long Lg1, long long Lgr, long long Ldq0, long long Ldq1, long long Ldqr, \
    long long Ldk0, long long Ldk1, long long Ldkr, long long Ldv0, long long Ldv1, long long Ldvr
// (in a kernel of block b, after ATT_HEAD_OF(b): the divisions once a block, not once a tile)
#define ATT_HEAD_OF(b) const long long hb0 = (b) / hn, hb1 = (b) % hn
#define ATT_AT(X, BI, RI) (hb0 * L##X##0 + hb1 * L##X##1 + (RI) * L##X##r)
// DENSE (the kernels' last template flag, 1 where attention.py finds q, k, v and dout dense): those
// inputs' matrix b starts at b T n and their rows are n apart, facts the compiler then sees (the
// strided form's address arithmetic lengthens the tile loops: docs/benchmarks.md); the outputs
// and `out` keep their strides either way. ATT_IN(X, b): input X's matrix b, ATT_LD(X): its row
// stride; ATT_T_X / ATT_N_X: its rows and row length (ATT_PARAMS' names).
#define ATT_T_q TQ
#define ATT_N_q D
#define ATT_T_k TK
#define ATT_N_k D
#define ATT_T_v TK
#define ATT_N_v DV
#define ATT_T_g TQ
#define ATT_N_g DV
#define ATT_IN(X, BI) (DENSE ? (BI) * ATT_T_##X * ATT_N_##X : ATT_AT(X, BI, 0))
#define ATT_LD(X) (DENSE ? (long long)ATT_N_##X : L##X##r)
enum { att_unroll_k = ATT_UNROLL_K };   // d steps of 4 unrolled in att_mm_rows

template <int DM_, int W_, int TM_, int BC_> struct AttT {
    static const int DM = DM_, W = W_, NT = 32 * W_, TM = TM_, BC = BC_;
    static const int BR = 4 * W * TM;        // block rows
    static const int TN = BC / 8;            // tile columns a thread owns
    static const int LD = DM + ATT_PAD;      // row stride of a (rows, DM) shared tile
    static const int SW = 4 * TM + ATT_PAD;  // row stride of a warp's score tile [BC][4 TM]
    static const int DC = DM / 8;            // accumulator columns a thread owns
    static_assert(DM % 32 == 0 && TM % 4 == 0 && BC % 8 == 0, "attention tile shape");
};

// 4 floats (4 halves) read or written as one access (the source is compiled without headers)
struct alignas(16) att_f4 { float x, y, z, w; };
struct alignas(8) att_u2 { unsigned x, y; };
__device__ __forceinline__ att_f4 att_f4v(float x, float y, float z, float w) {
    att_f4 r; r.x = x; r.y = y; r.z = z; r.w = w; return r;
}

// 4 consecutive elements as floats (p 16-byte aligned for float, 8-byte for half)
__device__ __forceinline__ att_f4 att_ld4(const float* p) { return *(const att_f4*)p; }
__device__ __forceinline__ att_f4 att_ld4(const half_t* p) {
    att_u2 u = *(const att_u2*)p;
    return att_f4v(IO<half_t>::ld((half_t)(u.x & 0xffff)), IO<half_t>::ld((half_t)(u.x >> 16)),
                   IO<half_t>::ld((half_t)(u.y & 0xffff)), IO<half_t>::ld((half_t)(u.y >> 16)));
}
__device__ __forceinline__ void att_st4(float* p, att_f4 x) { *(att_f4*)p = x; }
__device__ __forceinline__ void att_st4(half_t* p, att_f4 x) {
    att_u2 u;
    u.x = (unsigned)IO<half_t>::st(x.x) | ((unsigned)IO<half_t>::st(x.y) << 16);
    u.y = (unsigned)IO<half_t>::st(x.z) | ((unsigned)IO<half_t>::st(x.w) << 16);
    *(att_u2*)p = u;
}

// rows [r0, r0 + R) of a (T, n) matrix with rows ld apart into a shared tile (row stride
// DM + ATT_PAD, DM columns), zeros past row T and column n
template <typename S, int R, int DM, int NT>
__device__ __forceinline__ void att_fill(float* dst, const S* __restrict__ src, long long r0,
                                         long long T, long long n, long long ld, bool vec) {
    const int LD = DM + ATT_PAD;
    if (vec) {
        const int N = R * DM / 4;
#pragma unroll
        for (int it = 0; it < (N + NT - 1) / NT; ++it) {
            const int e = threadIdx.x + it * NT;
            if (N % NT != 0 && e >= N) break;
            const int r = e / (DM / 4), c = e % (DM / 4) * 4;
            const long long g = r0 + r;
            att_f4 x = att_f4v(0.f, 0.f, 0.f, 0.f);
            if (g < T && c < n) x = att_ld4(src + g * ld + c);
            *(att_f4*)(dst + r * LD + c) = x;
        }
    } else {
        for (int e = threadIdx.x; e < R * DM; e += NT) {
            const int r = e / DM, c = e % DM;
            const long long g = r0 + r;
            dst[r * LD + c] = (g < T && c < n) ? IO<S>::ld(src[g * ld + c]) : 0.f;
        }
    }
}

// acc[i][t] += sum_k A[i][k] B[8 t][k] over k < DM (A: the thread's first row, B: its first
// column's row, both of stride DM + ATT_PAD)
template <int DM, int TM, int TN>
__device__ __forceinline__ void att_mm_rows(float (&acc)[TM][TN], const float* A, const float* B) {
    const int LD = DM + ATT_PAD;
#pragma unroll att_unroll_k
    for (int k = 0; k < DM; k += 4) {
        att_f4 b[TN];
#pragma unroll
        for (int t = 0; t < TN; ++t) b[t] = *(const att_f4*)(B + 8 * t * LD + k);
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const att_f4 a = *(const att_f4*)(A + i * LD + k);
#pragma unroll
            for (int t = 0; t < TN; ++t) {
                float x = acc[i][t];
                x = fmaf(a.x, b[t].x, x);
                x = fmaf(a.y, b[t].y, x);
                x = fmaf(a.z, b[t].z, x);
                acc[i][t] = fmaf(a.w, b[t].w, x);
            }
        }
    }
}

// acc[i][4 u + e] += sum_kk P[kk][i] X[kk][32 u + e] over kk < BC (P: a warp's transposed scores at
// the thread's first row, stride SW; X: a tile at the thread's first column 4 cg, stride LD)
template <int DM, int TM, int BC>
__device__ __forceinline__ void att_mm_cols(float (&acc)[TM][DM / 8], const float* P,
                                            const float* X) {
    const int LD = DM + ATT_PAD, SW = 4 * TM + ATT_PAD;
#pragma unroll 4
    for (int kk = 0; kk < BC; ++kk) {
        float p[TM];
#pragma unroll
        for (int i = 0; i < TM; i += 4) {
            const att_f4 x = *(const att_f4*)(P + kk * SW + i);
            p[i] = x.x; p[i + 1] = x.y; p[i + 2] = x.z; p[i + 3] = x.w;
        }
#pragma unroll
        for (int u = 0; u < DM / 32; ++u) {
            const att_f4 x = *(const att_f4*)(X + kk * LD + 32 * u);
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                acc[i][4 * u] = fmaf(p[i], x.x, acc[i][4 * u]);
                acc[i][4 * u + 1] = fmaf(p[i], x.y, acc[i][4 * u + 1]);
                acc[i][4 * u + 2] = fmaf(p[i], x.z, acc[i][4 * u + 2]);
                acc[i][4 * u + 3] = fmaf(p[i], x.w, acc[i][4 * u + 3]);
            }
        }
    }
}

// the thread's scores into its warp's transposed buffer (at the thread's first row): P[c][i]
template <int TM, int TN, int SW>
__device__ __forceinline__ void att_put_scores(float* P, const float (&s)[TM][TN]) {
#pragma unroll
    for (int t = 0; t < TN; ++t)
#pragma unroll
        for (int i = 0; i < TM; i += 4)
            *(att_f4*)(P + 8 * t * SW + i) =
                att_f4v(s[i][t], s[i + 1][t], s[i + 2][t], s[i + 3][t]);
}

// scores in log2 units: s * scale * log2 e plus the mask (hidden: -inf); rows r0 + i, columns
// c0 + 8 t; KR: rows are keys (dk / dv) instead of queries. `edge`: the tile reaches past the
// last key or across the causal diagonal, so each element is checked
template <typename S, int MK, bool KR, int TM, int TN>
__device__ __forceinline__ void att_scores(float (&s)[TM][TN], float c2, const AttMask& mk,
                                           long long mb, long long r0, long long c0, long long TQ,
                                           long long TK, bool causal, bool edge) {
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int t = 0; t < TN; ++t) {
            const long long qi = KR ? c0 + 8 * t : r0 + i, kj = KR ? r0 + i : c0 + 8 * t;
            float x = s[i][t] * c2;
            if (MK != ATT_MASK_NONE && qi < TQ && kj < TK) {
                const long long off = mb + qi * mk.sq + kj * mk.sk;
                if (MK == ATT_MASK_BOOL && !((const unsigned char*)mk.p)[off]) x = -ATT_INF;
                if (MK == ATT_MASK_ADD) x = fmaf(IO<S>::ld(((const S*)mk.p)[off]), ATT_LOG2E, x);
            }
            if (edge && (kj >= TK || (causal && kj > qi))) x = -ATT_INF;
            s[i][t] = x;
        }
}

__device__ __forceinline__ float att_row_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(ATT_FULL, x, 1));
    x = fmaxf(x, __shfl_xor_sync(ATT_FULL, x, 2));
    return fmaxf(x, __shfl_xor_sync(ATT_FULL, x, 4));
}
__device__ __forceinline__ float att_row_sum(float x) {
    x += __shfl_xor_sync(ATT_FULL, x, 1);
    x += __shfl_xor_sync(ATT_FULL, x, 2);
    return x + __shfl_xor_sync(ATT_FULL, x, 4);
}

// a thread's accumulator row (columns 4 cg + 32 u + e, pre-offset in dst) times f, up to column n
template <typename S, int DM>
__device__ __forceinline__ void att_store_row(S* dst, const float (&a)[DM / 8], float f, int c0,
                                              long long n, bool vec) {
#pragma unroll
    for (int u = 0; u < DM / 32; ++u) {
        const int c = c0 + 32 * u;
        const att_f4 x =
            att_f4v(a[4 * u] * f, a[4 * u + 1] * f, a[4 * u + 2] * f, a[4 * u + 3] * f);
        if (vec) {
            if (c < n) att_st4(dst + 32 * u, x);
        } else {
            if (c < n) dst[32 * u] = IO<S>::st(x.x);
            if (c + 1 < n) dst[32 * u + 1] = IO<S>::st(x.y);
            if (c + 2 < n) dst[32 * u + 2] = IO<S>::st(x.z);
            if (c + 3 < n) dst[32 * u + 3] = IO<S>::st(x.w);
        }
    }
}

// shared memory of each kernel, in floats (attention.py's smem_bytes mirrors these)
template <class G> __host__ __device__ constexpr int att_smem_fwd() {
    return (G::BR + 2 * G::BC) * G::LD + G::W * G::BC * G::SW;
}
template <class G> __host__ __device__ constexpr int att_smem_dq() {
    return (2 * G::BR + 2 * G::BC) * G::LD + G::W * G::BC * G::SW;
}
template <class G> __host__ __device__ constexpr int att_smem_dkv() {
    return (2 * G::BR + 2 * G::BC) * G::LD + G::W * G::BC * G::SW + 2 * G::BC;
}

#define ATT_LANES \
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, rg = lane >> 3, cg = lane & 7; \
    const int rr = w * 4 * TM + rg * TM;     /* the thread's first block row */

// out = softmax(q k^T * scale + mask) v; lse = the rows' log-sum-exp (natural units, float32).
// Query blocks in reverse order: under `causal` the last ones see the most keys and start first.
template <typename S, int DM, int MK, int W, int TM, int BC, int DENSE = 0>
__global__ void __launch_bounds__(32 * W) attn_fwd_t(
        const S* __restrict__ q, const S* __restrict__ k, const S* __restrict__ v, const void* mask,
        S* __restrict__ out, float* __restrict__ lse, ATT_PARAMS, long long vec, ATT_STRIDES) {
    typedef AttT<DM, W, TM, BC> G;
    extern __shared__ att_f4 att_sh4[];
    ATT_LANES
    float* Qs = (float*)att_sh4;
    float* Ks = Qs + G::BR * G::LD;
    float* Vs = Ks + BC * G::LD;
    float* Pw = Vs + BC * G::LD + w * BC * G::SW;
    const AttMask mk = ATT_MASK_VIEW(mask);
    const long long b = blockIdx.x, q0 = (long long)(gridDim.y - 1 - blockIdx.y) * G::BR;
    ATT_HEAD_OF(b);
    const float c2 = (float)scale_ * ATT_LOG2E;
    const long long mb = MK ? mk.base(b) : 0;
    att_fill<S, G::BR, DM, G::NT>(Qs, q + ATT_IN(q, b), q0, TQ, D, ATT_LD(q), vec & 1);
    float o[TM][G::DC], m[TM], l[TM];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        m[i] = -ATT_INF;
        l[i] = 0.f;
#pragma unroll
        for (int c = 0; c < G::DC; ++c) o[i][c] = 0.f;
    }
    const long long jend = causal ? min(TK, q0 + G::BR) : TK;
    for (long long j0 = 0; j0 < jend; j0 += BC) {
        __syncthreads();                 // the previous tile's readers are done
        att_fill<S, BC, DM, G::NT>(Ks, k + ATT_IN(k, b), j0, TK, D, ATT_LD(k), vec & 1);
        att_fill<S, BC, DM, G::NT>(Vs, v + ATT_IN(v, b), j0, TK, DV, ATT_LD(v), vec & 2);
        __syncthreads();
        float s[TM][G::TN];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int t = 0; t < G::TN; ++t) s[i][t] = 0.f;
        att_mm_rows<DM, TM, G::TN>(s, Qs + rr * G::LD, Ks + cg * G::LD);
        const bool edge = j0 + BC > TK || (causal && j0 + BC - 1 > q0 + rr);
        att_scores<S, MK, false, TM, G::TN>(s, c2, mk, mb, q0 + rr, j0 + cg, TQ, TK, causal, edge);
#pragma unroll
        for (int i = 0; i < TM; ++i) {   // online softmax: the row's running max and sum
            float mx = s[i][0];
#pragma unroll
            for (int t = 1; t < G::TN; ++t) mx = fmaxf(mx, s[i][t]);
            const float mn = fmaxf(m[i], att_row_max(mx));
            const float mu = mn == -ATT_INF ? 0.f : mn;      // nothing visible yet: p = 0
            const float alpha = exp2f(m[i] - mu);
            m[i] = mn;
            float ls = 0.f;
#pragma unroll
            for (int t = 0; t < G::TN; ++t) {
                s[i][t] = exp2f(s[i][t] - mu);
                ls += s[i][t];
            }
            l[i] = l[i] * alpha + ls;
#pragma unroll
            for (int c = 0; c < G::DC; ++c) o[i][c] *= alpha;
        }
        att_put_scores<TM, G::TN, G::SW>(Pw + cg * G::SW + rg * TM, s);
        __syncwarp();
        att_mm_cols<DM, TM, BC>(o, Pw + rg * TM, Vs + 4 * cg);
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const float lt = att_row_sum(l[i]);
        const long long r = q0 + rr + i;
        if (r >= TQ) continue;
        // no visible key: out 0 (torch 2.x), lse -inf (the backward gives the row zero gradients)
        att_store_row<S, DM>(out + ATT_AT(o, b, r) + 4 * cg, o[i], lt == 0.f ? 0.f : 1.f / lt,
                             4 * cg, DV, vec & 2);
        if (cg == 0) lse[b * TQ + r] = (m[i] + log2f(lt)) * ATT_LN2;
    }
}

// dq = scale * sum_j p_ij (dout_i . v_j - delta_i) k_j; delta_i = dout_i . out_i is written for
// attn_bwd_dkv_t, which runs after this kernel
template <typename S, int DM, int MK, int W, int TM, int BC, int DENSE = 0>
__global__ void __launch_bounds__(32 * W) attn_bwd_dq_t(
        const S* __restrict__ q, const S* __restrict__ k, const S* __restrict__ v, const void* mask,
        const S* __restrict__ dout, const S* __restrict__ out, const float* __restrict__ lse,
        S* __restrict__ dq, float* __restrict__ delta, ATT_PARAMS, long long vec, ATT_STRIDES) {
    typedef AttT<DM, W, TM, BC> G;
    extern __shared__ att_f4 att_sh4[];
    ATT_LANES
    float* Qs = (float*)att_sh4;
    float* Gs = Qs + G::BR * G::LD;
    float* Ks = Gs + G::BR * G::LD;
    float* Vs = Ks + BC * G::LD;
    float* Pw = Vs + BC * G::LD + w * BC * G::SW;
    const AttMask mk = ATT_MASK_VIEW(mask);
    const long long b = blockIdx.x, q0 = (long long)(gridDim.y - 1 - blockIdx.y) * G::BR;
    ATT_HEAD_OF(b);
    const float c2 = (float)scale_ * ATT_LOG2E;
    const long long mb = MK ? mk.base(b) : 0;
    att_fill<S, G::BR, DM, G::NT>(Qs, q + ATT_IN(q, b), q0, TQ, D, ATT_LD(q), vec & 1);
    att_fill<S, G::BR, DM, G::NT>(Gs, dout + ATT_IN(g, b), q0, TQ, DV, ATT_LD(g), vec & 2);
    __syncthreads();
    float dl[TM], l2[TM], acc[TM][G::DC];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const long long r = q0 + rr + i;
        float x = 0.f;
        if (r < TQ)
            for (int d = cg; d < DV; d += 8)
                x += Gs[(rr + i) * G::LD + d] * IO<S>::ld(out[ATT_AT(o, b, r) + d]);
        dl[i] = att_row_sum(x);
        if (cg == 0 && r < TQ) delta[b * TQ + r] = dl[i];
        const float ls = r < TQ ? lse[b * TQ + r] : -ATT_INF;
        l2[i] = ls == -ATT_INF ? ATT_INF : ls * ATT_LOG2E;    // +inf: p = 0 (no visible key)
#pragma unroll
        for (int c = 0; c < G::DC; ++c) acc[i][c] = 0.f;
    }
    const long long jend = causal ? min(TK, q0 + G::BR) : TK;
    for (long long j0 = 0; j0 < jend; j0 += BC) {
        __syncthreads();
        att_fill<S, BC, DM, G::NT>(Ks, k + ATT_IN(k, b), j0, TK, D, ATT_LD(k), vec & 1);
        att_fill<S, BC, DM, G::NT>(Vs, v + ATT_IN(v, b), j0, TK, DV, ATT_LD(v), vec & 2);
        __syncthreads();
        float s[TM][G::TN], dp[TM][G::TN];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int t = 0; t < G::TN; ++t) { s[i][t] = 0.f; dp[i][t] = 0.f; }
        att_mm_rows<DM, TM, G::TN>(s, Qs + rr * G::LD, Ks + cg * G::LD);
        att_mm_rows<DM, TM, G::TN>(dp, Gs + rr * G::LD, Vs + cg * G::LD);
        const bool edge = j0 + BC > TK || (causal && j0 + BC - 1 > q0 + rr);
        att_scores<S, MK, false, TM, G::TN>(s, c2, mk, mb, q0 + rr, j0 + cg, TQ, TK, causal, edge);
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int t = 0; t < G::TN; ++t)
                s[i][t] = exp2f(s[i][t] - l2[i]) * (dp[i][t] - dl[i]);
        att_put_scores<TM, G::TN, G::SW>(Pw + cg * G::SW + rg * TM, s);
        __syncwarp();
        att_mm_cols<DM, TM, BC>(acc, Pw + rg * TM, Ks + 4 * cg);
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const long long r = q0 + rr + i;
        if (r < TQ)
            att_store_row<S, DM>(dq + ATT_AT(dq, b, r) + 4 * cg, acc[i], (float)scale_, 4 * cg, D,
                                 vec & 1);
    }
}

// per key row j: dv = sum_i p_ij dout_i, dk = scale * sum_i p_ij (dout_i . v_j - delta_i) q_i.
// Key blocks in order: under `causal` the first ones see the most queries and start first.
template <typename S, int DM, int MK, int W, int TM, int BC, int DENSE = 0>
__global__ void __launch_bounds__(32 * W) attn_bwd_dkv_t(
        const S* __restrict__ q, const S* __restrict__ k, const S* __restrict__ v, const void* mask,
        const S* __restrict__ dout, const float* __restrict__ lse, const float* __restrict__ delta,
        S* __restrict__ dk, S* __restrict__ dv, ATT_PARAMS, long long vec, ATT_STRIDES) {
    typedef AttT<DM, W, TM, BC> G;
    extern __shared__ att_f4 att_sh4[];
    ATT_LANES
    float* Ks = (float*)att_sh4;
    float* Vs = Ks + G::BR * G::LD;
    float* Qs = Vs + G::BR * G::LD;
    float* Gs = Qs + BC * G::LD;
    float* Pw = Gs + BC * G::LD + w * BC * G::SW;
    float* Ls = Gs + BC * G::LD + G::W * BC * G::SW;     // the tile's lse (log2 units), delta
    float* Dl = Ls + BC;
    const AttMask mk = ATT_MASK_VIEW(mask);
    const long long b = blockIdx.x, k0 = (long long)blockIdx.y * G::BR;
    ATT_HEAD_OF(b);
    const float c2 = (float)scale_ * ATT_LOG2E;
    const long long mb = MK ? mk.base(b) : 0;
    att_fill<S, G::BR, DM, G::NT>(Ks, k + ATT_IN(k, b), k0, TK, D, ATT_LD(k), vec & 1);
    att_fill<S, G::BR, DM, G::NT>(Vs, v + ATT_IN(v, b), k0, TK, DV, ATT_LD(v), vec & 2);
    float ak[TM][G::DC], av[TM][G::DC];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int c = 0; c < G::DC; ++c) { ak[i][c] = 0.f; av[i][c] = 0.f; }
    // causal: only queries i >= j see key j; the first tile holding the block's first key
    for (long long i0 = causal ? k0 / BC * BC : 0; i0 < TQ; i0 += BC) {
        __syncthreads();
        att_fill<S, BC, DM, G::NT>(Qs, q + ATT_IN(q, b), i0, TQ, D, ATT_LD(q), vec & 1);
        att_fill<S, BC, DM, G::NT>(Gs, dout + ATT_IN(g, b), i0, TQ, DV, ATT_LD(g), vec & 2);
        for (int e = threadIdx.x; e < BC; e += G::NT) {
            const long long i = i0 + e;
            const float ls = i < TQ ? lse[b * TQ + i] : -ATT_INF;
            Ls[e] = ls == -ATT_INF ? ATT_INF : ls * ATT_LOG2E;   // +inf: p = 0
            Dl[e] = i < TQ ? delta[b * TQ + i] : 0.f;
        }
        __syncthreads();
        float s[TM][G::TN], dp[TM][G::TN];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int t = 0; t < G::TN; ++t) { s[i][t] = 0.f; dp[i][t] = 0.f; }
        att_mm_rows<DM, TM, G::TN>(s, Ks + rr * G::LD, Qs + cg * G::LD);
        const bool edge = causal && k0 + rr + TM - 1 > i0 + cg;   // keys past TK are not written
        att_scores<S, MK, true, TM, G::TN>(s, c2, mk, mb, k0 + rr, i0 + cg, TQ, TK, causal, edge);
#pragma unroll
        for (int t = 0; t < G::TN; ++t) {
            const float lt = Ls[cg + 8 * t];
#pragma unroll
            for (int i = 0; i < TM; ++i) s[i][t] = exp2f(s[i][t] - lt);
        }
        att_put_scores<TM, G::TN, G::SW>(Pw + cg * G::SW + rg * TM, s);
        __syncwarp();
        att_mm_cols<DM, TM, BC>(av, Pw + rg * TM, Gs + 4 * cg);
        att_mm_rows<DM, TM, G::TN>(dp, Vs + rr * G::LD, Gs + cg * G::LD);
#pragma unroll
        for (int t = 0; t < G::TN; ++t) {
            const float d = Dl[cg + 8 * t];
#pragma unroll
            for (int i = 0; i < TM; ++i) dp[i][t] = s[i][t] * (dp[i][t] - d);
        }
        __syncwarp();                    // the warp's reads of p are done
        att_put_scores<TM, G::TN, G::SW>(Pw + cg * G::SW + rg * TM, dp);
        __syncwarp();
        att_mm_cols<DM, TM, BC>(ak, Pw + rg * TM, Qs + 4 * cg);
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const long long j = k0 + rr + i;
        if (j >= TK) continue;
        att_store_row<S, DM>(dk + ATT_AT(dk, b, j) + 4 * cg, ak[i], (float)scale_, 4 * cg, D,
                             vec & 1);
        att_store_row<S, DM>(dv + ATT_AT(dv, b, j) + 4 * cg, av[i], 1.f, 4 * cg, DV, vec & 2);
    }
}
