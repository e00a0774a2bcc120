// numr_web cuda backend: tiled flash attention on tensor cores for 16-bit storage (float16; the
// element type is a template argument with its PTX names in AttTc<S>, so bfloat16 is one more
// specialisation), FlashAttention-2's schedule: mma.sync m16n8k16 with float32 accumulation,
// fragments read from shared memory with ldmatrix (sm_80 and newer). Appended after
// attention_tiled.cu (it uses AttMask, ATT_PARAMS, att_scores' conventions, att_row_sum).
//
// A block of W warps takes BR = 16 W rows (query rows: forward and dq; key rows: dk / dv), 16 a
// warp, and walks the other side in tiles of BC rows. A warp's scores are an m16 x BC float32
// accumulator in mma's C layout: lane = 4 g + t holds rows g and g + 8, columns 8 n + 2 t + {0, 1};
// a row's max and sum are shuffles over the 4 lanes t. The C layout of two adjacent n-tiles,
// rounded to 16 bits, is the A fragment of the next product, so scores never leave registers.
//
// Products (a warp's 16 rows, `att_tc_rows` / `att_tc_cols`; the forward holds q's fragments):
//   rows: C[16 x BC] += A[16 x DM] B, B = a shared [BC][DM] tile read as k = d (ldmatrix):
//         q k^T, dout v^T (rows queries), k q^T, v dout^T (rows keys);
//   cols: C[16 x DM] += P[16 x BC] X, X = a shared [BC][DM] tile read as k = its rows
//         (ldmatrix.trans): p v, ds k (rows queries), p^T dout, ds^T q (rows keys).
// Shared tiles are [rows][DM + ATT_HPAD] 16-bit values, DM the head dim rounded up to 32 and
// zero-padded: rows 16 bytes apart modulo 128, so each 8 x 8 ldmatrix reads 8 bank groups.
//
// Numerics as attention_tiled.cu (log2-unit scores, float32 softmax statistics, lse in float32),
// with p and ds rounded to the storage type for their products, as FlashAttention does.
// `vec` bit 0 (1): q, k (dq, dk) rows may be read as 8-element vectors (D % 8 == 0, 16-byte
// aligned); bit 1: the same for v, out, dout, dv (DV).

#define ATT_HPAD 8

template <typename S> struct AttTc;

#ifndef ATT_EMULATED
__device__ __forceinline__ unsigned att_saddr(const void* p) {
    unsigned long long s;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(s) : "l"(p));
    return (unsigned)s;
}
// four 8 x 8 matrices of 16-bit values; lanes 8 i .. 8 i + 7 give matrix i's row addresses;
// lane l gets row l / 4, columns 2 (l % 4) and + 1 of each (transposed: column l / 4, rows 2 (l % 4), + 1)
__device__ __forceinline__ void att_ldsm4(unsigned (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(att_saddr(p)));
}
__device__ __forceinline__ void att_ldsm4_t(unsigned (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(att_saddr(p)));
}
__device__ __forceinline__ void att_mma_f16(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                            unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// two floats as two float16 (round to nearest even), lo in the low half
__device__ __forceinline__ unsigned att_pack_f16(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
#endif

template <> struct AttTc<half_t> {
    static __device__ __forceinline__ unsigned pack(float lo, float hi) { return att_pack_f16(lo, hi); }
    static __device__ __forceinline__ void mma(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                               unsigned b1) { att_mma_f16(c, a, b0, b1); }
};

// rows [r0, r0 + R) of a (T, n) matrix of 16-bit values, rows ld apart, into a shared tile of DM
// columns (row stride DM + ATT_HPAD), zeros past row T and column n
template <typename S, int R, int DM, int NT>
__device__ __forceinline__ void att_fill16(S* dst, const S* __restrict__ src, long long r0,
                                           long long T, long long n, long long ld, bool vec) {
    const int LD = DM + ATT_HPAD;
    if (vec) {
        const int N = R * DM / 8;
#pragma unroll
        for (int it = 0; it < (N + NT - 1) / NT; ++it) {
            const int e = threadIdx.x + it * NT;
            if (N % NT != 0 && e >= N) break;
            const int r = e / (DM / 8), c = e % (DM / 8) * 8;
            const long long g = r0 + r;
            att_f4 x = att_f4v(0.f, 0.f, 0.f, 0.f);            // 16 bytes: 8 values
            if (g < T && c < n) x = *(const att_f4*)(src + g * ld + c);
            *(att_f4*)(dst + r * LD + c) = x;
        }
    } else {
        for (int e = threadIdx.x; e < R * DM; e += NT) {
            const int r = e / DM, c = e % DM;
            const long long g = r0 + r;
            dst[r * LD + c] = (g < T && c < n) ? src[g * ld + c] : (S)0;
        }
    }
}

// the A fragments of a warp's 16 rows (at R, stride LD) for the 16 columns from k0
template <int LD, typename S>
__device__ __forceinline__ void att_tc_afrag(unsigned (&a)[4], const S* R, int k0, int lane) {
    att_ldsm4(a, R + ((lane & 7) + ((lane >> 3) & 1) * 8) * LD + k0 + (lane >> 4) * 8);
}

// rows, one k step of 16: c[n][.] += A B, B the shared [BC][DM] tile X read as k = d from k0
template <typename S, int DM, int BC>
__device__ __forceinline__ void att_tc_kstep(float (&c)[BC / 8][4], const unsigned (&a)[4],
                                             const S* X, int k0, int lane) {
    const int LD = DM + ATT_HPAD;
#pragma unroll
    for (int np = 0; np < BC / 16; ++np) {
        unsigned b[4];
        att_ldsm4(b, X + (16 * np + (lane & 7) + (lane >> 4) * 8) * LD + k0 + ((lane >> 3) & 1) * 8);
        AttTc<S>::mma(c[2 * np], a, b[0], b[1]);
        AttTc<S>::mma(c[2 * np + 1], a, b[2], b[3]);
    }
}
// rows: c[n][.] += A B over k < DM; A: the warp's 16 rows at R (shared, stride DM + ATT_HPAD);
// att_tc_rows_held: A's fragments held in registers
template <typename S, int DM, int BC>
__device__ __forceinline__ void att_tc_rows(float (&c)[BC / 8][4], const S* R, const S* X,
                                            int lane) {
#pragma unroll 1
    for (int k0 = 0; k0 < DM; k0 += 16) {
        unsigned a[4];
        att_tc_afrag<DM + ATT_HPAD>(a, R, k0, lane);
        att_tc_kstep<S, DM, BC>(c, a, X, k0, lane);
    }
}
template <typename S, int DM, int BC>
__device__ __forceinline__ void att_tc_rows_held(float (&c)[BC / 8][4],
                                                 const unsigned (&a)[DM / 16][4], const S* X,
                                                 int lane) {
#pragma unroll
    for (int kc = 0; kc < DM / 16; ++kc) att_tc_kstep<S, DM, BC>(c, a[kc], X, 16 * kc, lane);
}

// cols: c[n][.] += P X over the tile's BC rows; P: the warp's 16 x BC scores in C layout,
// rounded to S; X: a shared [BC][DM] tile read as k = its rows (ldmatrix.trans)
template <typename S, int DM, int BC>
__device__ __forceinline__ void att_tc_cols(float (&c)[DM / 8][4], const float (&p)[BC / 8][4],
                                            const S* X, int lane) {
    const int LD = DM + ATT_HPAD;
#pragma unroll
    for (int kc = 0; kc < BC / 16; ++kc) {
        const unsigned a[4] = {AttTc<S>::pack(p[2 * kc][0], p[2 * kc][1]),
                               AttTc<S>::pack(p[2 * kc][2], p[2 * kc][3]),
                               AttTc<S>::pack(p[2 * kc + 1][0], p[2 * kc + 1][1]),
                               AttTc<S>::pack(p[2 * kc + 1][2], p[2 * kc + 1][3])};
#pragma unroll
        for (int np = 0; np < DM / 16; ++np) {
            unsigned b[4];
            att_ldsm4_t(b, X + (16 * kc + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + 16 * np
                               + (lane >> 4) * 8);
            AttTc<S>::mma(c[2 * np], a, b[0], b[1]);
            AttTc<S>::mma(c[2 * np + 1], a, b[2], b[3]);
        }
    }
}

// scores in log2 units as att_scores, on a C-layout accumulator: rows r0 + g (+ 8), columns
// c0 + 8 n + 2 t (+ 1); KR: rows are keys
template <typename S, int MK, bool KR, int BC>
__device__ __forceinline__ void att_tc_scores(float (&s)[BC / 8][4], float c2, const AttMask& mk,
                                              long long mb, long long r0, long long c0,
                                              long long TQ, long long TK, bool causal, bool edge) {
#pragma unroll
    for (int n = 0; n < BC / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const long long r = r0 + (e >> 1) * 8, c = c0 + 8 * n + (e & 1);
            const long long qi = KR ? c : r, kj = KR ? r : c;
            float x = s[n][e] * c2;
            if (MK != ATT_MASK_NONE && qi < TQ && kj < TK) {
                const long long off = mb + qi * mk.sq + kj * mk.sk;
                if (MK == ATT_MASK_BOOL && !((const unsigned char*)mk.p)[off]) x = -ATT_INF;
                if (MK == ATT_MASK_ADD) x = fmaf(IO<S>::ld(((const S*)mk.p)[off]), ATT_LOG2E, x);
            }
            if (edge && (kj >= TK || (causal && kj > qi))) x = -ATT_INF;
            s[n][e] = x;
        }
}

__device__ __forceinline__ float att_quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(ATT_FULL, x, 1));
    return fmaxf(x, __shfl_xor_sync(ATT_FULL, x, 2));
}
__device__ __forceinline__ float att_quad_sum(float x) {
    x += __shfl_xor_sync(ATT_FULL, x, 1);
    return x + __shfl_xor_sync(ATT_FULL, x, 2);
}

// a warp's C-layout accumulator rows (rows r0 + g, + 8) times f into a (T, n) matrix, rows ld
// apart
template <typename S, int DM>
__device__ __forceinline__ void att_tc_store(S* dst, const float (&a)[DM / 8][4], const float (&f)[2],
                                             long long r0, long long T, long long n, long long ld,
                                             int lane, bool vec) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const long long r = r0 + g + 8 * h;
        if (r >= T) continue;
        S* row = dst + r * ld;
#pragma unroll
        for (int nt = 0; nt < DM / 8; ++nt) {
            const int c = 8 * nt + 2 * t;
            const float x0 = a[nt][2 * h] * f[h], x1 = a[nt][2 * h + 1] * f[h];
            if (vec) {                                   // n even: c < n means c + 1 < n
                if (c < n) *(unsigned*)(row + c) = AttTc<S>::pack(x0, x1);
            } else {
                if (c < n) row[c] = IO<S>::st(x0);
                if (c + 1 < n) row[c + 1] = IO<S>::st(x1);
            }
        }
    }
}

// shared memory of each kernel, in bytes (attention.py's smem_bytes_tc mirrors these)
template <typename S, int DM, int W, int BC> __host__ __device__ constexpr int att_tc_smem_fwd() {
    return (16 * W + 2 * BC) * (DM + ATT_HPAD) * (int)sizeof(S);
}
template <typename S, int DM, int W, int BC> __host__ __device__ constexpr int att_tc_smem_bwd() {
    return (32 * W + 2 * BC) * (DM + ATT_HPAD) * (int)sizeof(S) + 2 * BC * (int)sizeof(float);
}

#define ATT_TC_LANES \
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3; \
    const int BR = 16 * W, LD = DM + ATT_HPAD;

// out = softmax(q k^T * scale + mask) v, lse; query blocks in reverse order (heaviest first)
template <typename S, int DM, int MK, int W, int BC, int DENSE = 0>
__global__ void __launch_bounds__(32 * W) attn_fwd_tc(
        const S* __restrict__ q, const S* __restrict__ k, const S* __restrict__ v, const void* mask,
        S* __restrict__ out, float* __restrict__ lse, ATT_PARAMS, long long vec, ATT_STRIDES) {
    extern __shared__ att_f4 att_sh4[];
    ATT_TC_LANES
    S* Qs = (S*)att_sh4;
    S* Ks = Qs + BR * LD;
    S* Vs = Ks + BC * LD;
    const AttMask mk = ATT_MASK_VIEW(mask);
    const long long b = blockIdx.x, q0 = (long long)(gridDim.y - 1 - blockIdx.y) * BR;
    ATT_HEAD_OF(b);
    const long long r0 = q0 + 16 * w + g;            // the thread's first row
    const float c2 = (float)scale_ * ATT_LOG2E;
    const long long mb = MK ? mk.base(b) : 0;
    att_fill16<S, 16 * W, DM, 32 * W>(Qs, q + ATT_IN(q, b), q0, TQ, D, ATT_LD(q), vec & 1);
    __syncthreads();
    unsigned qa[DM / 16][4];
#pragma unroll
    for (int kc = 0; kc < DM / 16; ++kc) att_tc_afrag<LD>(qa[kc], Qs + 16 * w * LD, 16 * kc, lane);
    float o[DM / 8][4], m[2] = {-ATT_INF, -ATT_INF}, l[2] = {0.f, 0.f};
#pragma unroll
    for (int n = 0; n < DM / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    const long long jend = causal ? min(TK, q0 + BR) : TK;
    for (long long j0 = 0; j0 < jend; j0 += BC) {
        __syncthreads();
        att_fill16<S, BC, DM, 32 * W>(Ks, k + ATT_IN(k, b), j0, TK, D, ATT_LD(k), vec & 1);
        att_fill16<S, BC, DM, 32 * W>(Vs, v + ATT_IN(v, b), j0, TK, DV, ATT_LD(v), vec & 2);
        __syncthreads();
        float s[BC / 8][4];
#pragma unroll
        for (int n = 0; n < BC / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
        att_tc_rows_held<S, DM, BC>(s, qa, Ks, lane);
        const bool edge = j0 + BC > TK || (causal && j0 + BC - 1 > q0 + 16 * w);
        att_tc_scores<S, MK, false, BC>(s, c2, mk, mb, r0, j0 + 2 * t, TQ, TK, causal, edge);
#pragma unroll
        for (int h = 0; h < 2; ++h) {               // rows g and g + 8: online softmax
            float mx = -ATT_INF;
#pragma unroll
            for (int n = 0; n < BC / 8; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
            const float mn = fmaxf(m[h], att_quad_max(mx));
            const float mu = mn == -ATT_INF ? 0.f : mn;
            const float alpha = exp2f(m[h] - mu);
            m[h] = mn;
            float ls = 0.f;
#pragma unroll
            for (int n = 0; n < BC / 8; ++n) {
                s[n][2 * h] = exp2f(s[n][2 * h] - mu);
                s[n][2 * h + 1] = exp2f(s[n][2 * h + 1] - mu);
                ls += s[n][2 * h] + s[n][2 * h + 1];
            }
            l[h] = l[h] * alpha + ls;
#pragma unroll
            for (int n = 0; n < DM / 8; ++n) { o[n][2 * h] *= alpha; o[n][2 * h + 1] *= alpha; }
        }
        att_tc_cols<S, DM, BC>(o, s, Vs, lane);
    }
    float f[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const float lt = att_quad_sum(l[h]);
        f[h] = lt == 0.f ? 0.f : 1.f / lt;             // no visible key: out 0, lse -inf
        const long long r = r0 + 8 * h;
        if (t == 0 && r < TQ) lse[b * TQ + r] = (m[h] + log2f(lt)) * ATT_LN2;
    }
    att_tc_store<S, DM>(out + ATT_AT(o, b, 0), o, f, q0 + 16 * w, TQ, DV, Lor, lane, vec & 2);
}

// dq = scale * sum_j p_ij (dout_i . v_j - delta_i) k_j, and delta_i = dout_i . out_i
template <typename S, int DM, int MK, int W, int BC, int DENSE = 0>
__global__ void __launch_bounds__(32 * W) attn_bwd_dq_tc(
        const S* __restrict__ q, const S* __restrict__ k, const S* __restrict__ v, const void* mask,
        const S* __restrict__ dout, const S* __restrict__ out, const float* __restrict__ lse,
        S* __restrict__ dq, float* __restrict__ delta, ATT_PARAMS, long long vec, ATT_STRIDES) {
    extern __shared__ att_f4 att_sh4[];
    ATT_TC_LANES
    S* Qs = (S*)att_sh4;
    S* Gs = Qs + BR * LD;
    S* Ks = Gs + BR * LD;
    S* Vs = Ks + BC * LD;
    const AttMask mk = ATT_MASK_VIEW(mask);
    const long long b = blockIdx.x, q0 = (long long)(gridDim.y - 1 - blockIdx.y) * BR;
    ATT_HEAD_OF(b);
    const long long r0 = q0 + 16 * w + g;
    const float c2 = (float)scale_ * ATT_LOG2E;
    const long long mb = MK ? mk.base(b) : 0;
    att_fill16<S, 16 * W, DM, 32 * W>(Qs, q + ATT_IN(q, b), q0, TQ, D, ATT_LD(q), vec & 1);
    att_fill16<S, 16 * W, DM, 32 * W>(Gs, dout + ATT_IN(g, b), q0, TQ, DV, ATT_LD(g), vec & 2);
    __syncthreads();
    float dl[2], l2[2], acc[DM / 8][4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const long long r = r0 + 8 * h;
        float x = 0.f;
        if (r < TQ)
            for (int d = t; d < DV; d += 4)
                x += IO<S>::ld(Gs[(16 * w + g + 8 * h) * LD + d]) * IO<S>::ld(out[ATT_AT(o, b, r) + d]);
        dl[h] = att_quad_sum(x);
        if (t == 0 && r < TQ) delta[b * TQ + r] = dl[h];
        const float ls = r < TQ ? lse[b * TQ + r] : -ATT_INF;
        l2[h] = ls == -ATT_INF ? ATT_INF : ls * ATT_LOG2E;
    }
#pragma unroll
    for (int n = 0; n < DM / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
    const long long jend = causal ? min(TK, q0 + BR) : TK;
    for (long long j0 = 0; j0 < jend; j0 += BC) {
        __syncthreads();
        att_fill16<S, BC, DM, 32 * W>(Ks, k + ATT_IN(k, b), j0, TK, D, ATT_LD(k), vec & 1);
        att_fill16<S, BC, DM, 32 * W>(Vs, v + ATT_IN(v, b), j0, TK, DV, ATT_LD(v), vec & 2);
        __syncthreads();
        float s[BC / 8][4], dp[BC / 8][4];
#pragma unroll
        for (int n = 0; n < BC / 8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) { s[n][e] = 0.f; dp[n][e] = 0.f; }
        att_tc_rows<S, DM, BC>(s, Qs + 16 * w * LD, Ks, lane);
        att_tc_rows<S, DM, BC>(dp, Gs + 16 * w * LD, Vs, lane);
        const bool edge = j0 + BC > TK || (causal && j0 + BC - 1 > q0 + 16 * w);
        att_tc_scores<S, MK, false, BC>(s, c2, mk, mb, r0, j0 + 2 * t, TQ, TK, causal, edge);
#pragma unroll
        for (int n = 0; n < BC / 8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                s[n][e] = exp2f(s[n][e] - l2[e >> 1]) * (dp[n][e] - dl[e >> 1]);
        att_tc_cols<S, DM, BC>(acc, s, Ks, lane);
    }
    const float f[2] = {(float)scale_, (float)scale_};
    att_tc_store<S, DM>(dq + ATT_AT(dq, b, 0), acc, f, q0 + 16 * w, TQ, D, Ldqr, lane, vec & 1);
}

// per key row j: dv = sum_i p_ij dout_i, dk = scale * sum_i p_ij (dout_i . v_j - delta_i) q_i;
// key blocks in order (under `causal` the first see the most queries)
template <typename S, int DM, int MK, int W, int BC, int DENSE = 0>
__global__ void __launch_bounds__(32 * W) attn_bwd_dkv_tc(
        const S* __restrict__ q, const S* __restrict__ k, const S* __restrict__ v, const void* mask,
        const S* __restrict__ dout, const float* __restrict__ lse, const float* __restrict__ delta,
        S* __restrict__ dk, S* __restrict__ dv, ATT_PARAMS, long long vec, ATT_STRIDES) {
    extern __shared__ att_f4 att_sh4[];
    ATT_TC_LANES
    S* Ks = (S*)att_sh4;
    S* Vs = Ks + BR * LD;
    S* Qs = Vs + BR * LD;
    S* Gs = Qs + BC * LD;
    float* Ls = (float*)(Gs + BC * LD);                // the tile's lse (log2 units) and delta
    float* Dl = Ls + BC;
    const AttMask mk = ATT_MASK_VIEW(mask);
    const long long b = blockIdx.x, k0 = (long long)blockIdx.y * BR;
    ATT_HEAD_OF(b);
    const long long r0 = k0 + 16 * w + g;
    const float c2 = (float)scale_ * ATT_LOG2E;
    const long long mb = MK ? mk.base(b) : 0;
    att_fill16<S, 16 * W, DM, 32 * W>(Ks, k + ATT_IN(k, b), k0, TK, D, ATT_LD(k), vec & 1);
    att_fill16<S, 16 * W, DM, 32 * W>(Vs, v + ATT_IN(v, b), k0, TK, DV, ATT_LD(v), vec & 2);
    float ak[DM / 8][4], av[DM / 8][4];
#pragma unroll
    for (int n = 0; n < DM / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) { ak[n][e] = 0.f; av[n][e] = 0.f; }
    for (long long i0 = causal ? k0 / BC * BC : 0; i0 < TQ; i0 += BC) {
        __syncthreads();
        att_fill16<S, BC, DM, 32 * W>(Qs, q + ATT_IN(q, b), i0, TQ, D, ATT_LD(q), vec & 1);
        att_fill16<S, BC, DM, 32 * W>(Gs, dout + ATT_IN(g, b), i0, TQ, DV, ATT_LD(g), vec & 2);
        for (int e = threadIdx.x; e < BC; e += 32 * W) {
            const long long i = i0 + e;
            const float ls = i < TQ ? lse[b * TQ + i] : -ATT_INF;
            Ls[e] = ls == -ATT_INF ? ATT_INF : ls * ATT_LOG2E;
            Dl[e] = i < TQ ? delta[b * TQ + i] : 0.f;
        }
        __syncthreads();
        float s[BC / 8][4], dp[BC / 8][4];
#pragma unroll
        for (int n = 0; n < BC / 8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) { s[n][e] = 0.f; dp[n][e] = 0.f; }
        att_tc_rows<S, DM, BC>(s, Ks + 16 * w * LD, Qs, lane);
        const bool edge = causal && k0 + 16 * w + 15 > i0;
        att_tc_scores<S, MK, true, BC>(s, c2, mk, mb, r0, i0 + 2 * t, TQ, TK, causal, edge);
#pragma unroll
        for (int n = 0; n < BC / 8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[n][e] = exp2f(s[n][e] - Ls[8 * n + 2 * t + (e & 1)]);
        att_tc_cols<S, DM, BC>(av, s, Gs, lane);
        att_tc_rows<S, DM, BC>(dp, Vs + 16 * w * LD, Gs, lane);
#pragma unroll
        for (int n = 0; n < BC / 8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) dp[n][e] = s[n][e] * (dp[n][e] - Dl[8 * n + 2 * t + (e & 1)]);
        att_tc_cols<S, DM, BC>(ak, dp, Qs, lane);
    }
    const float fk[2] = {(float)scale_, (float)scale_}, fv[2] = {1.f, 1.f};
    att_tc_store<S, DM>(dk + ATT_AT(dk, b, 0), ak, fk, k0 + 16 * w, TK, D, Ldkr, lane, vec & 1);
    att_tc_store<S, DM>(dv + ATT_AT(dv, b, 0), av, fv, k0 + 16 * w, TK, DV, Ldvr, lane, vec & 2);
}
