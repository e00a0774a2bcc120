// numr_web cuda backend: the kernels of convolutional nets (launched by cnn.py): batch norm
// forward and backward, a per-channel bias + activation and its backward for NCHW tensors (after
// and before cuDNN's convolutions), max pooling forward and backward. Appended to kernels.cu by
// codegen.py (uses its IO<S> and the generated act_fwd / act_d1).
//
// A tensor (NB, NC, HW) dense. The per-channel kernels run a grid (NC, chunks): block (c, k)
// takes channel c of the samples n in [k RPC, (k + 1) RPC), threads (tx, ty) stepping s by
// blockDim.x and n by blockDim.y (no division per element). Per-channel sums are two-level: each
// block writes its partial sums (double), and one thread per channel adds them in chunk order:
// deterministic, no atomics. Templates: S storage type, A the activation's table row, flags.

#define CNN_BLOCK 256

// sums of a and b over the block, the same tree in every call (deterministic), broadcast to every
// thread from lane 0 of warp 0
__device__ __forceinline__ void cnn_block_sum2(double& a, double& b) {
    __shared__ double sa[CNN_BLOCK / 32], sb[CNN_BLOCK / 32];
    const int tid = threadIdx.y * blockDim.x + threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int nw = (blockDim.x * blockDim.y + 31) >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, o);
        b += __shfl_xor_sync(0xffffffffu, b, o);
    }
    __syncthreads();                       // the arrays may still be read by a previous call
    if (lane == 0) { sa[warp] = a; sb[warp] = b; }
    __syncthreads();
    a = lane < nw ? sa[lane] : 0.0;
    b = lane < nw ? sb[lane] : 0.0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, o);
        b += __shfl_xor_sync(0xffffffffu, b, o);
    }
    a = __shfl_sync(0xffffffffu, a, 0);
    b = __shfl_sync(0xffffffffu, b, 0);
}

#define CNN_ROWS                                                                  \
    const long long c = blockIdx.x;                                               \
    const long long n0 = (long long)blockIdx.y * rpc;                             \
    const long long n1 = n0 + rpc < nb ? n0 + rpc : nb;
#define CNN_FOR_EACH(i)                                                           \
    for (long long n = n0 + threadIdx.y; n < n1; n += blockDim.y)                 \
        for (long long s = threadIdx.x, i = (n * nc + c) * hw + s; s < hw;        \
             s += blockDim.x, i += blockDim.x)

// -- batch norm ---------------------------------------------------------------------------------------
// partial sums of chunk blockIdx.y of channel c into part[(c * chunks + k) * 2 + {0, 1}]:
// forward (not BWD) x - x[0, c, 0] and its square (shifted: a far-off mean costs no digits);
// backward g = dy * act'(.) (HS: from the saved sv) and g * xhat
template <typename S, int A, bool BWD, bool HS>
__global__ void __launch_bounds__(CNN_BLOCK) bn_stats(
        const S* __restrict__ x, const S* __restrict__ dy, const S* __restrict__ sv,
        const typename IO<S>::C* __restrict__ mean, const typename IO<S>::C* __restrict__ rstd,
        double* __restrict__ part, long long nb, long long nc, long long hw, long long rpc) {
    typedef typename IO<S>::C C;
    CNN_ROWS
    double s1 = 0.0, s2 = 0.0;
    const C m = BWD ? mean[c] : C(0), r = BWD ? rstd[c] : C(0);
    const double shift = BWD ? 0.0 : (double)IO<S>::ld(x[c * hw]);
    CNN_FOR_EACH(i) {
        if constexpr (BWD) {
            C g = IO<S>::ld(dy[i]);
            if constexpr (HS) g = act_d1<A>(g, IO<S>::ld(sv[i]));
            s1 += (double)g;
            s2 += (double)(g * ((IO<S>::ld(x[i]) - m) * r));
        } else {
            const double d = (double)IO<S>::ld(x[i]) - shift;
            s1 += d;
            s2 += d * d;
        }
    }
    cnn_block_sum2(s1, s2);
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        part[(c * gridDim.y + blockIdx.y) * 2] = s1;
        part[(c * gridDim.y + blockIdx.y) * 2 + 1] = s2;
    }
}

// forward: the channel's statistics (TRAIN: the chunks' partials summed in order; else the
// running ones), y = act((x - mean) rstd w + b) (WZ: z, the pre-activation, too); block (c, 0)
// writes the saved mean and rstd and (UPD) the running statistics: r (1 - m) + stat m with the
// unbiased variance, m the momentum (DEVM: read from the device)
template <typename S, int A, bool TRAIN, bool HW, bool HB, bool WZ, bool UPD, bool DEVM>
__global__ void __launch_bounds__(CNN_BLOCK) bn_fwd(
        const S* __restrict__ x, const double* __restrict__ part, long long chunks,
        const S* __restrict__ w, const S* __restrict__ b, const S* __restrict__ rm,
        const S* __restrict__ rv, const S* __restrict__ mom, S* __restrict__ y,
        S* __restrict__ z, typename IO<S>::C* __restrict__ mean_out,
        typename IO<S>::C* __restrict__ rstd_out, S* __restrict__ rm_out,
        S* __restrict__ rv_out, long long nb, long long nc, long long hw, long long rpc,
        double eps, double momentum) {
    typedef typename IO<S>::C C;
    __shared__ C coef[3];                   // mean, rstd * w, b
    CNN_ROWS
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        double mu, var;
        if (TRAIN) {
            double s1 = 0.0, s2 = 0.0;
            for (long long k = 0; k < chunks; ++k) {
                s1 += part[(c * chunks + k) * 2];
                s2 += part[(c * chunks + k) * 2 + 1];
            }
            const double cnt = (double)(nb * hw);
            const double dm = s1 / cnt;
            var = s2 / cnt - dm * dm;
            var = var > 0.0 ? var : 0.0;
            mu = (double)IO<S>::ld(x[c * hw]) + dm;
        } else {
            mu = (double)IO<S>::ld(rm[c]);
            var = (double)IO<S>::ld(rv[c]);
        }
        const double rs = 1.0 / sqrt(var + eps);
        coef[0] = (C)mu;
        coef[1] = (C)(HW ? rs * (double)IO<S>::ld(w[c]) : rs);
        coef[2] = HB ? IO<S>::ld(b[c]) : C(0);
        if (blockIdx.y == 0) {
            mean_out[c] = (C)mu;
            rstd_out[c] = (C)rs;
            if (UPD) {
                const double mo = DEVM ? (double)IO<S>::ld(mom[0]) : momentum;
                const double cnt = (double)(nb * hw);
                const double unbiased = cnt > 1.0 ? var * cnt / (cnt - 1.0) : var;
                rm_out[c] = IO<S>::st((C)((double)IO<S>::ld(rm[c]) * (1.0 - mo) + mu * mo));
                rv_out[c] = IO<S>::st((C)((double)IO<S>::ld(rv[c]) * (1.0 - mo) + unbiased * mo));
            }
        }
    }
    __syncthreads();
    const C mu = coef[0], sc = coef[1], bi = coef[2];
    CNN_FOR_EACH(i) {
        const C v = (IO<S>::ld(x[i]) - mu) * sc + bi;
        if (WZ) z[i] = IO<S>::st(v);
        y[i] = IO<S>::st(act_fwd<A>(v));
    }
}

// backward: g = dy * act'(.), xhat = (x - mean) rstd, dx = (g - mean(g) - xhat mean(g xhat)) rstd w
// (TRAIN; eval: dx = g rstd w) from the chunks' partial sums of g and g xhat (part, summed in
// order by thread 0); block (c, 0) writes dw = sum(g xhat) (DW) and db = sum(g) (DB)
template <typename S, int A, bool TRAIN, bool HW, bool HS, bool DW, bool DB>
__global__ void __launch_bounds__(CNN_BLOCK) bn_bwd(
        const S* __restrict__ dy, const S* __restrict__ x, const S* __restrict__ sv,
        const typename IO<S>::C* __restrict__ mean, const typename IO<S>::C* __restrict__ rstd,
        const S* __restrict__ w, const double* __restrict__ part, long long chunks,
        S* __restrict__ dx, S* __restrict__ dw, S* __restrict__ db, long long nb, long long nc,
        long long hw, long long rpc) {
    typedef typename IO<S>::C C;
    __shared__ C coef[3];                   // rstd * w, mean(g), mean(g xhat)
    CNN_ROWS
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        double s1 = 0.0, s2 = 0.0;
        if (TRAIN || DW || DB) {
            for (long long k = 0; k < chunks; ++k) {
                s1 += part[(c * chunks + k) * 2];
                s2 += part[(c * chunks + k) * 2 + 1];
            }
        }
        const double cnt = (double)(nb * hw);
        coef[0] = (C)(HW ? (double)rstd[c] * (double)IO<S>::ld(w[c]) : (double)rstd[c]);
        coef[1] = TRAIN ? (C)(s1 / cnt) : C(0);
        coef[2] = TRAIN ? (C)(s2 / cnt) : C(0);
        if (blockIdx.y == 0) {
            if (DW) dw[c] = IO<S>::st((C)s2);
            if (DB) db[c] = IO<S>::st((C)s1);
        }
    }
    __syncthreads();
    const C k = coef[0], mg = coef[1], mgx = coef[2], m = mean[c], r = rstd[c];
    CNN_FOR_EACH(i) {
        C g = IO<S>::ld(dy[i]);
        if constexpr (HS) g = act_d1<A>(g, IO<S>::ld(sv[i]));
        dx[i] = IO<S>::st(TRAIN ? (g - mg - (IO<S>::ld(x[i]) - m) * r * mgx) * k : g * k);
    }
}

// -- per-channel bias + activation (NCHW), and its backward ---------------------------------------------
// y = act(z + b[c]) (WZ: z += b written too; y may be z itself when not WZ)
template <typename S, int A, bool HB, bool WZ>
__global__ void __launch_bounds__(CNN_BLOCK) chan_bias_act(
        S* z, const S* __restrict__ bias, S* y, long long nb, long long nc, long long hw,
        long long rpc) {
    typedef typename IO<S>::C C;
    CNN_ROWS
    const C bi = HB ? IO<S>::ld(bias[c]) : C(0);
    CNN_FOR_EACH(i) {
        const C v = IO<S>::ld(z[i]) + bi;
        if (WZ) z[i] = IO<S>::st(v);
        y[i] = IO<S>::st(act_fwd<A>(v));
    }
}

// dz = dy * act'(.) (HS: from s; WD: written) and (DB) the chunk's partial sum of dz per channel
// into part[c * chunks + k]
template <typename S, int A, bool HS, bool WD, bool DB>
__global__ void __launch_bounds__(CNN_BLOCK) chan_act_bwd(
        const S* __restrict__ dy, const S* __restrict__ s_, S* __restrict__ dz,
        double* __restrict__ part, long long nb, long long nc, long long hw, long long rpc) {
    typedef typename IO<S>::C C;
    CNN_ROWS
    double acc = 0.0, unused = 0.0;
    CNN_FOR_EACH(i) {
        C g = IO<S>::ld(dy[i]);
        if constexpr (HS) g = act_d1<A>(g, IO<S>::ld(s_[i]));
        if (WD) dz[i] = IO<S>::st(g);
        if (DB) acc += (double)g;
    }
    if (DB) {
        cnn_block_sum2(acc, unused);
        if (threadIdx.x == 0 && threadIdx.y == 0) part[c * gridDim.y + blockIdx.y] = acc;
    }
}

// -- max pooling ----------------------------------------------------------------------------------------
// one thread per output element: the window's maximum (NaN if it holds one) and the flat index
// h * W + w of the element chosen, torch's choice: the first maximum in window order, the last
// NaN, the window's first element inside the input when all are -inf
template <typename S>
__global__ void __launch_bounds__(CNN_BLOCK) maxpool_fwd(
        const S* __restrict__ x, S* __restrict__ y, int* __restrict__ idx, long long total,
        long long H, long long W, long long OH, long long OW, long long KH, long long KW,
        long long SH, long long SW, long long PH, long long PW, long long DH, long long DW) {
    typedef typename IO<S>::C C;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const long long ow = t % OW, oh = (t / OW) % OH;
        const S* xp = x + (t / (OW * OH)) * H * W;
        const long long hs = oh * SH - PH, ws = ow * SW - PW;
        C best = C(0);
        long long bi = -1;
        for (long long i = 0; i < KH; ++i) {
            const long long h = hs + i * DH;
            if (h < 0 || h >= H) continue;
            for (long long j = 0; j < KW; ++j) {
                const long long w = ws + j * DW;
                if (w < 0 || w >= W) continue;
                const C v = IO<S>::ld(xp[h * W + w]);
                if (bi < 0 || v > best || v != v) {
                    best = v;
                    bi = h * W + w;
                }
            }
        }
        y[t] = IO<S>::st(best);
        idx[t] = (int)bi;
    }
}

// one thread per input element: the sum of dy over the windows whose idx is this element, in
// increasing window order (deterministic, no atomics)
template <typename S>
__global__ void __launch_bounds__(CNN_BLOCK) maxpool_bwd(
        const S* __restrict__ dy, const int* __restrict__ idx, S* __restrict__ dx,
        long long total, long long H, long long W, long long OH, long long OW, long long KH,
        long long KW, long long SH, long long SW, long long PH, long long PW, long long DH,
        long long DW) {
    typedef typename IO<S>::C C;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const long long w = t % W, h = (t / W) % H;
        const long long base = (t / (W * H)) * OH * OW;
        const int me = (int)(h * W + w);
        C acc = C(0);
        for (long long ii = KH - 1; ii >= 0; --ii) {
            const long long hp = h + PH - ii * DH;
            if (hp < 0 || hp % SH != 0 || hp / SH >= OH) continue;
            for (long long jj = KW - 1; jj >= 0; --jj) {
                const long long wp = w + PW - jj * DW;
                if (wp < 0 || wp % SW != 0 || wp / SW >= OW) continue;
                const long long o = base + (hp / SH) * OW + wp / SW;
                if (idx[o] == me) acc += IO<S>::ld(dy[o]);
            }
        }
        dx[t] = IO<S>::st(acc);
    }
}
