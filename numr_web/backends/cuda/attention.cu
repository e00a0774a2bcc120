// numr_web cuda backend: fused softmax attention, flash-style (appended to kernels.cu's source, whose
// IO<S> it uses). out = softmax(q k^T * scale + mask) v with an online softmax (a running max and sum
// per query row); the forward keeps each row's log-sum-exp, the backward recomputes the
// probabilities from it. Nothing of size TQ x TK is stored.
//
// One thread per query row (per key row in attn_bwd_dkv), holding its rows of at most DM values in
// registers (DM: the head dim rounded up to 16, 32, 64 or 128; the padding is zeros). A block takes
// ATT_ROWS consecutive rows (blockIdx.y) of one batch (blockIdx.x) and stages the other side's rows through
// shared memory, AttTile::N at a time. q, k, v, dout, out are dense (B, T, d); the mask, when there
// is one, is a strided view of (B..., TQ, TK) (bool: attend where true; or additive, of type S),
// its batch dims coalesced into at most 4 (shape ms*, element strides mt*).
//
// Template: S storage type, DM the register row length, MK the mask kind (0 none, 1 bool,
// 2 additive). Launch: grid (B, ceil(rows / ATT_ROWS)), block ATT_ROWS.

#define ATT_ROWS 64
#define ATT_MASK_NONE 0
#define ATT_MASK_BOOL 1
#define ATT_MASK_ADD 2
#define ATT_INF __int_as_float(0x7f800000)

__device__ __forceinline__ float  att_log(float x)  { return logf(x); }
__device__ __forceinline__ double att_log(double x) { return log(x); }

// keys (queries) per shared-memory tile: two tiles of DM values of the compute type stay <= 32 KiB
template <typename C, int DM> struct AttTile { static const int N = (DM * sizeof(C) > 256) ? 16 : 32; };

struct AttMask {
    const void* p; long long nb, s0, s1, s2, s3, t0, t1, t2, t3, sq, sk;
    // element offset of batch b's (TQ, TK) plane: b unravelled over the coalesced batch shape
    __device__ __forceinline__ long long base(long long b) const {
        long long o = 0, r = b;
        const long long s[4] = {s0, s1, s2, s3}, t[4] = {t0, t1, t2, t3};
        for (int d = (int)nb - 1; d >= 0; --d) { o += (r % s[d]) * t[d]; r /= s[d]; }
        return o;
    }
};

// The parameters every attention kernel takes after its pointers (attention.py passes them in this
// order): sizes, causal, the mask view's coalesced batch shape / strides and row / column strides
// (AttMask's fields), the scale; ATT_MASK_VIEW(p) gathers the mask's part.
#define ATT_PARAMS long long TQ, long long TK, long long D, long long DV, long long causal, \
    long long nb, long long s0, long long s1, long long s2, long long s3, long long t0, \
    long long t1, long long t2, long long t3, long long sq, long long sk, double scale_
#define ATT_MASK_VIEW(p) AttMask{p, nb, s0, s1, s2, s3, t0, t1, t2, t3, sq, sk}

// the scaled, masked score (the mask term added after scaling, as torch)
template <typename S, int MK, typename C>
__device__ __forceinline__ C att_score(C dot, C scale, const AttMask& mk, long long off) {
    C s = dot * scale;
    if (MK == ATT_MASK_BOOL && !((const unsigned char*)mk.p)[off]) s = -ATT_INF;
    if (MK == ATT_MASK_ADD) s += IO<S>::ld(((const S*)mk.p)[off]);
    return s;
}

template <typename S, int DM>
__device__ __forceinline__ void att_load_row(typename IO<S>::C* r, const S* src, long long n) {
#pragma unroll
    for (int d = 0; d < DM; ++d) r[d] = d < n ? IO<S>::ld(src[d]) : 0;
}

// tile rows [j0, j0 + N) of a (T, n) matrix into shared memory, zeros past T and n
template <typename S, int DM, int N>
__device__ __forceinline__ void att_stage(typename IO<S>::C (*dst)[DM], const S* src, long long j0,
                                          long long T, long long n) {
    for (int e = threadIdx.x; e < N * DM; e += ATT_ROWS) {
        int jj = e / DM, d = e % DM;
        long long j = j0 + jj;
        dst[jj][d] = (j < T && d < n) ? IO<S>::ld(src[j * n + d]) : 0;
    }
}

template <typename S, int DM, int MK>
__global__ void __launch_bounds__(ATT_ROWS) attn_fwd(
        const S* __restrict__ q, const S* __restrict__ k, const S* __restrict__ v, const void* mask,
        S* __restrict__ out, S* __restrict__ lse, ATT_PARAMS) {
    typedef typename IO<S>::C C;
    const int N = AttTile<C, DM>::N;
    __shared__ C ks[N][DM], vs[N][DM];
    const AttMask mk = ATT_MASK_VIEW(mask);
    const C scale = (C)scale_;
    const long long b = blockIdx.x, i = (long long)blockIdx.y * ATT_ROWS + threadIdx.x;
    const bool live = i < TQ;
    C qr[DM], acc[DM];
    att_load_row<S, DM>(qr, q + (b * TQ + (live ? i : 0)) * D, D);
#pragma unroll
    for (int d = 0; d < DM; ++d) acc[d] = 0;
    C m = -ATT_INF, l = 0;
    const long long mb = MK ? mk.base(b) : 0;
    long long jend = TK;
    if (causal) jend = min(TK, ((long long)blockIdx.y + 1) * ATT_ROWS);   // the block's last row sees up to it
    for (long long j0 = 0; j0 < jend; j0 += N) {
        __syncthreads();
        att_stage<S, DM, N>(ks, k + b * TK * D, j0, TK, D);
        att_stage<S, DM, N>(vs, v + b * TK * DV, j0, TK, DV);
        __syncthreads();
        if (!live) continue;
        for (int jj = 0; jj < N; ++jj) {
            long long j = j0 + jj;
            if (j >= TK || (causal && j > i)) break;
            C dot = 0;
#pragma unroll
            for (int d = 0; d < DM; ++d) dot += qr[d] * ks[jj][d];
            C s = att_score<S, MK>(dot, scale, mk, mb + i * sq + j * sk);
            if (s == -ATT_INF) continue;
            C mn = s > m ? s : m;                   // not fmax: a NaN score propagates
            C alpha = m_exp(m - mn), p = m_exp(s - mn);
            l = l * alpha + p;
#pragma unroll
            for (int d = 0; d < DM; ++d) acc[d] = acc[d] * alpha + p * vs[jj][d];
            m = mn;
        }
    }
    if (!live) return;
    // no visible key: out 0 (torch 2.x) and lse -inf (the backward gives that row zero gradients)
    C inv = l == 0 ? C(0) : C(1) / l;
    S* o = out + (b * TQ + i) * DV;
#pragma unroll
    for (int d = 0; d < DM; ++d) if (d < DV) o[d] = IO<S>::st(acc[d] * inv);
    lse[b * TQ + i] = IO<S>::st(m + att_log(l));
}

// dq = scale * sum_j p_ij (dout_i . v_j - delta_i) k_j, delta_i = dout_i . out_i (kept in `delta`
// for attn_bwd_dkv, which runs after this kernel)
template <typename S, int DM, int MK>
__global__ void __launch_bounds__(ATT_ROWS) attn_bwd_dq(
        const S* __restrict__ q, const S* __restrict__ k, const S* __restrict__ v, const void* mask,
        const S* __restrict__ dout, const S* __restrict__ out, const S* __restrict__ lse,
        S* __restrict__ dq, typename IO<S>::C* __restrict__ delta, ATT_PARAMS) {
    typedef typename IO<S>::C C;
    const int N = AttTile<C, DM>::N;
    __shared__ C ks[N][DM], vs[N][DM];
    const AttMask mk = ATT_MASK_VIEW(mask);
    const C scale = (C)scale_;
    const long long b = blockIdx.x, i = (long long)blockIdx.y * ATT_ROWS + threadIdx.x;
    const long long r = b * TQ + i;
    const bool live = i < TQ;
    C qr[DM], gr[DM], acc[DM];
    att_load_row<S, DM>(qr, q + (live ? r : 0) * D, D);
    att_load_row<S, DM>(gr, dout + (live ? r : 0) * DV, DV);
    C dl = 0;                                    // delta_i = dout_i . out_i (dout_i is in gr)
#pragma unroll
    for (int d = 0; d < DM; ++d) if (live && d < DV) dl += gr[d] * IO<S>::ld(out[r * DV + d]);
#pragma unroll
    for (int d = 0; d < DM; ++d) acc[d] = 0;
    const C ls = live ? IO<S>::ld(lse[r]) : C(0);
    const bool dead = ls == -ATT_INF;            // every key masked: p = 0 everywhere
    if (live) delta[r] = dl;
    const long long mb = MK ? mk.base(b) : 0;
    long long jend = TK;
    if (causal) jend = min(TK, ((long long)blockIdx.y + 1) * ATT_ROWS);
    for (long long j0 = 0; j0 < jend; j0 += N) {
        __syncthreads();
        att_stage<S, DM, N>(ks, k + b * TK * D, j0, TK, D);
        att_stage<S, DM, N>(vs, v + b * TK * DV, j0, TK, DV);
        __syncthreads();
        if (!live || dead) continue;
        for (int jj = 0; jj < N; ++jj) {
            long long j = j0 + jj;
            if (j >= TK || (causal && j > i)) break;
            C dot = 0, dp = 0;
#pragma unroll
            for (int d = 0; d < DM; ++d) { dot += qr[d] * ks[jj][d]; dp += gr[d] * vs[jj][d]; }
            C s = att_score<S, MK>(dot, scale, mk, mb + i * sq + j * sk);
            if (s == -ATT_INF) continue;
            C ds = m_exp(s - ls) * (dp - dl);
#pragma unroll
            for (int d = 0; d < DM; ++d) acc[d] += ds * ks[jj][d];
        }
    }
    if (!live) return;
#pragma unroll
    for (int d = 0; d < DM; ++d) if (d < D) dq[r * D + d] = IO<S>::st(acc[d] * scale);
}

// per key row j: dv = sum_i p_ij dout_i, dk = scale * sum_i p_ij (dout_i . v_j - delta_i) q_i
template <typename S, int DM, int MK>
__global__ void __launch_bounds__(ATT_ROWS) attn_bwd_dkv(
        const S* __restrict__ q, const S* __restrict__ k, const S* __restrict__ v, const void* mask,
        const S* __restrict__ dout, const S* __restrict__ lse,
        const typename IO<S>::C* __restrict__ delta, S* __restrict__ dk, S* __restrict__ dv,
        ATT_PARAMS) {
    typedef typename IO<S>::C C;
    const int N = AttTile<C, DM>::N;
    __shared__ C qs[N][DM], gs[N][DM], lss[N], dls[N];
    const AttMask mk = ATT_MASK_VIEW(mask);
    const C scale = (C)scale_;
    const long long b = blockIdx.x, j = (long long)blockIdx.y * ATT_ROWS + threadIdx.x;
    const bool live = j < TK;
    C kr[DM], vr[DM], ak[DM], av[DM];
    att_load_row<S, DM>(kr, k + (b * TK + (live ? j : 0)) * D, D);
    att_load_row<S, DM>(vr, v + (b * TK + (live ? j : 0)) * DV, DV);
#pragma unroll
    for (int d = 0; d < DM; ++d) { ak[d] = 0; av[d] = 0; }
    const long long mb = MK ? mk.base(b) : 0;
    // causal: only queries i >= j see key j; the block's first key is its smallest
    const long long i0 = causal ? ((long long)blockIdx.y * ATT_ROWS) / N * N : 0;
    for (long long it = i0; it < TQ; it += N) {
        __syncthreads();
        att_stage<S, DM, N>(qs, q + b * TQ * D, it, TQ, D);
        att_stage<S, DM, N>(gs, dout + b * TQ * DV, it, TQ, DV);
        for (int e = threadIdx.x; e < N; e += ATT_ROWS) {
            long long i = it + e;
            lss[e] = i < TQ ? IO<S>::ld(lse[b * TQ + i]) : C(-ATT_INF);
            dls[e] = i < TQ ? delta[b * TQ + i] : C(0);
        }
        __syncthreads();
        if (!live) continue;
        for (int ii = 0; ii < N; ++ii) {
            long long i = it + ii;
            if (i >= TQ) break;
            if ((causal && j > i) || lss[ii] == -ATT_INF) continue;
            C dot = 0, dp = 0;
#pragma unroll
            for (int d = 0; d < DM; ++d) { dot += kr[d] * qs[ii][d]; dp += vr[d] * gs[ii][d]; }
            C s = att_score<S, MK>(dot, scale, mk, mb + i * sq + j * sk);
            if (s == -ATT_INF) continue;
            C p = m_exp(s - lss[ii]), ds = p * (dp - dls[ii]);
#pragma unroll
            for (int d = 0; d < DM; ++d) { av[d] += p * gs[ii][d]; ak[d] += ds * qs[ii][d]; }
        }
    }
    if (!live) return;
#pragma unroll
    for (int d = 0; d < DM; ++d) {
        if (d < D) dk[(b * TK + j) * D + d] = IO<S>::st(ak[d] * scale);
        if (d < DV) dv[(b * TK + j) * DV + d] = IO<S>::st(av[d]);
    }
}
