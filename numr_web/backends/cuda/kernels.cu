// numr_web cuda backend: the hand-written kernel bodies. codegen.py reads this file when the
// backend builds its kernels and inserts, at the marker line below, the per-activation functions
// and the act_fwd / act_dz / act_d2 / act_d1 / act_ds dispatch generated from the activation table
// (numr_web/vocab/activations.py). `numr-web shaders --language cuda` prints the assembled source.
//
// Templates (compiled by NVRTC through cupy.RawModule, one module per family and dtype):
//   S  storage type: float, double, or half_t (float16 bits; computed in float, rounded once)
//   A  the activation's row number in the table (a compile-time constant: the dispatch folds away)
//   V  elements per memory access (16 bytes by default), U vectors per thread

typedef unsigned short half_t;

template <typename S> struct IO;
template <> struct IO<float> {
    typedef float C;
    static __device__ __forceinline__ float ld(float x) { return x; }
    static __device__ __forceinline__ float st(float x) { return x; }
};
template <> struct IO<double> {
    typedef double C;
    static __device__ __forceinline__ double ld(double x) { return x; }
    static __device__ __forceinline__ double st(double x) { return x; }
};
template <> struct IO<half_t> {
    typedef float C;
    static __device__ __forceinline__ float ld(half_t h) {
        float f; asm("{cvt.f32.f16 %0, %1;}\n" : "=f"(f) : "h"(h)); return f;
    }
    static __device__ __forceinline__ half_t st(float f) {
        half_t h; asm("{cvt.rn.f16.f32 %0, %1;}\n" : "=h"(h) : "f"(f)); return h;
    }
};

// -- math helpers the table's CUDA code may use (C: float or double; CUDA's own expm1 / log1p have
//    float overloads) ------------------------------------------------------------------------------
__device__ __forceinline__ float  m_tanh(float x)  { return tanhf(x); }
__device__ __forceinline__ double m_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float  m_exp(float x)   { return expf(x); }
__device__ __forceinline__ double m_exp(double x)  { return exp(x); }
__device__ __forceinline__ float  m_erfc(float x)  { return erfcf(x); }
__device__ __forceinline__ double m_erfc(double x) { return erfc(x); }

// tanhshrink(x) = x - tanh(x): in float, shaders/act.wgsl's tanhshrink_s (a series near 0, where
// the difference cancels; (|x| - 1) + 2e / (1 + e), e = exp(-2|x|), above); in double as the cpu
__device__ __forceinline__ double m_tanhshrink(double x) { return x - tanh(x); }
__device__ __forceinline__ float m_tanhshrink(float x) {
    const float ax = fabsf(x);
    if (ax < 0.9f) {
        const float s = x * x;
        float q = -7.0546369464009683e-8f;
        q = q * s + 1.7406618963571648e-7f;
        q = q * s - 4.2949110782738059e-7f;
        q = q * s + 1.0597268320104654e-6f;
        q = q * s - 2.6147711512907546e-6f;
        q = q * s + 6.4516892156554308e-6f;
        q = q * s - 1.5918905069328965e-5f;
        q = q * s + 3.9278323883316834e-5f;
        q = q * s - 9.6915379569294503e-5f;
        q = q * s + 0.00023912911424355248f;
        q = q * s - 0.00059002744094558598f;
        q = q * s + 0.0014558343870513183f;
        q = q * s - 0.003592128036572481f;
        q = q * s + 0.0088632355299021966f;
        q = q * s - 0.021869488536155203f;
        q = q * s + 0.053968253968253968f;
        q = q * s - 0.13333333333333333f;
        q = q * s + 0.33333333333333333f;
        return x * s * q;
    }
    const float e = expf(-2.f * ax);
    const float r = (ax - 1.f) + 2.f * e / (1.f + e);
    return x < 0.f ? -r : r;
}

#define K_SQRT1_2      0.70710678118654752440
#define K_INV_SQRT_2PI 0.39894228040143267794
#define K_GELU_C       0.79788456080286535588
#define K_GELU_A       0.044715

// sigmoid: 1 / (1 + e) for z >= 0, e / (1 + e) below, e = exp(-|z|) <= 1: no overflow, and
// accurate down to the subnormals for z << 0 (never 1 - something)
template <typename C> __device__ __forceinline__ C sigm(C z) {
    C e = m_exp(-(z < C(0) ? -z : z));
    return (z >= C(0) ? C(1) : e) / (C(1) + e);
}
// Phi(z) = 0.5 erfc(-z/sqrt2) (no cancellation for z << 0); phi(z) = exp(-z^2/2)/sqrt(2 pi)
template <typename C> __device__ __forceinline__ C cdf(C z) { return C(0.5) * m_erfc(-z * C(K_SQRT1_2)); }
template <typename C> __device__ __forceinline__ C pdf(C z) { return C(K_INV_SQRT_2PI) * m_exp(C(-0.5) * z * z); }
// sech^2(x) = 4 e / (1 + e)^2, e = exp(-2|x|): no cancellation (1 - tanh^2 loses it all for |x| > 9)
template <typename C> __device__ __forceinline__ C sech2(C x) {
    C e = m_exp(C(-2) * (x < C(0) ? -x : x)), d = C(1) + e;
    return C(4) * e / (d * d);
}
// the tanh-form GELU's argument u = c (z + a z^3) and du/dz
template <typename C> __device__ __forceinline__ C gelu_tanh_u(C z) {
    return C(K_GELU_C) * z * (C(1) + C(K_GELU_A) * z * z);
}
template <typename C> __device__ __forceinline__ C gelu_tanh_du(C z) {
    return C(K_GELU_C) * (C(1) + C(3.0 * K_GELU_A) * z * z);
}
// z exp(x) where exp(x) alone would be subnormal (flushed to 0 under -ftz) but the product is
// normal: exp(x) = 2^k exp(r), |r| <= ln2 / 2 (Cody-Waite: ln2 in two parts), then (z exp(r)) 2^k
__device__ __forceinline__ float mul_exp(float z, float x) {
    if (x < -200.f) return 0.f * z;
    float k = rintf(x * 1.44269504f);
    float r = fmaf(k, -0.693145751953125f, x);
    r = fmaf(k, -1.42860676533018e-06f, r);
    return ldexpf(z * expf(r), (int)k);
}
__device__ __forceinline__ double mul_exp(double z, double x) { return z * exp(x); }
#define K_TAIL -80      // lower tails (z exp(z) forms of the table) start below it

// softplus (beta 1, threshold 20, torch's)
template <typename C> __device__ __forceinline__ C softplus_f(C z) {
    return z > C(20) ? z : log1p(m_exp(z));
}

//@@ GENERATED ACTIVATIONS @@

// -- elementwise operators ------------------------------------------------------------------------
// out = fn(x) for one table row; F: 0 fwd, 1 dz, 2 d2, 3 ds
template <int A, int F> struct MapOp {
    template <typename C> static __device__ __forceinline__ C f(C x, C) {
        if constexpr (F == 0) return act_fwd<A>(x);
        else if constexpr (F == 1) return act_dz<A>(x);
        else if constexpr (F == 2) return act_d2<A>(x);
        else return act_ds<A>(x);
    }
};

// dz = dy * act'(.) from the saved tensor s (the table's d1)
template <int A> struct BwdOp {
    template <typename C> static __device__ __forceinline__ C f(C dy, C s) { return act_d1<A>(dy, s); }
};

// the hot binary arithmetic: 0 add, 1 sub, 2 mul, 3 div (IEEE, like numpy)
template <int O> struct BinOp {
    template <typename C> static __device__ __forceinline__ C f(C a, C b) {
        if constexpr (O == 0) return a + b;
        else if constexpr (O == 1) return a - b;
        else if constexpr (O == 2) return a * b;
        else return a / b;
    }
};

template <typename S, int V> struct alignas(sizeof(S) * V) Pack { S v[V]; };

// out = OP(a, b) (NIN 2) or OP(a) (NIN 1) over n elements: vectors of V, U per thread, scalar tail
template <typename S, typename OP, int NIN, int V, int U>
__global__ void __launch_bounds__(256) ew(const S* __restrict__ a, const S* __restrict__ b,
                                          S* __restrict__ out, long long n) {
    typedef typename IO<S>::C C;
    typedef Pack<S, V> P;
    const long long nv = n / V;
    const long long base = (long long)blockIdx.x * (blockDim.x * U) + threadIdx.x;
    P ra[U], rb[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        long long i = base + (long long)u * blockDim.x;
        if (i < nv) {
            ra[u] = reinterpret_cast<const P*>(a)[i];
            if (NIN == 2) rb[u] = reinterpret_cast<const P*>(b)[i];
        }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
        long long i = base + (long long)u * blockDim.x;
        if (i < nv) {
            P o;
#pragma unroll
            for (int k = 0; k < V; ++k)
                o.v[k] = IO<S>::st(OP::f(IO<S>::ld(ra[u].v[k]), NIN == 2 ? IO<S>::ld(rb[u].v[k]) : C(0)));
            reinterpret_cast<P*>(out)[i] = o;
        }
    }
    if (V > 1 && blockIdx.x == 0) {            // the last n % V elements
        long long t = nv * V + threadIdx.x;
        if (t < n) out[t] = IO<S>::st(OP::f(IO<S>::ld(a[t]), NIN == 2 ? IO<S>::ld(b[t]) : C(0)));
    }
}

// out = a converted from storage type S to D through the compute types (float <-> float16: one
// rounding, cvt.rn), vectors of V, U per thread, scalar tail: autocast's casts
template <typename S, typename D, int V, int U>
__global__ void __launch_bounds__(256) cast(const S* __restrict__ a, D* __restrict__ out,
                                            long long n) {
    typedef Pack<S, V> P;
    typedef Pack<D, V> Q;
    const long long nv = n / V;
    const long long base = (long long)blockIdx.x * (blockDim.x * U) + threadIdx.x;
    P r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        long long i = base + (long long)u * blockDim.x;
        if (i < nv) r[u] = reinterpret_cast<const P*>(a)[i];
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
        long long i = base + (long long)u * blockDim.x;
        if (i < nv) {
            Q o;
#pragma unroll
            for (int k = 0; k < V; ++k) o.v[k] = IO<D>::st(IO<S>::ld(r[u].v[k]));
            reinterpret_cast<Q*>(out)[i] = o;
        }
    }
    if (V > 1 && blockIdx.x == 0) {            // the last n % V elements
        long long t = nv * V + threadIdx.x;
        if (t < n) out[t] = IO<D>::st(IO<S>::ld(a[t]));
    }
}

// out = OP(a, s) (or OP(s, a) when REV) with a scalar s (a Python number, rounded to C first)
template <typename S, typename OP, bool REV, int V, int U>
__global__ void __launch_bounds__(256) ews(const S* __restrict__ a, double s_, S* __restrict__ out,
                                           long long n) {
    typedef typename IO<S>::C C;
    typedef Pack<S, V> P;
    const C s = C(s_);
    const long long nv = n / V;
    const long long base = (long long)blockIdx.x * (blockDim.x * U) + threadIdx.x;
#pragma unroll
    for (int u = 0; u < U; ++u) {
        long long i = base + (long long)u * blockDim.x;
        if (i < nv) {
            P r = reinterpret_cast<const P*>(a)[i], o;
#pragma unroll
            for (int k = 0; k < V; ++k) {
                C x = IO<S>::ld(r.v[k]);
                o.v[k] = IO<S>::st(REV ? OP::f(s, x) : OP::f(x, s));
            }
            reinterpret_cast<P*>(out)[i] = o;
        }
    }
    if (V > 1 && blockIdx.x == 0) {
        long long t = nv * V + threadIdx.x;
        if (t < n) {
            C x = IO<S>::ld(a[t]);
            out[t] = IO<S>::st(REV ? OP::f(s, x) : OP::f(x, s));
        }
    }
}

// GEMM epilogue over z (rows x ncols, row-major; ncols % V == 0): zb = z + bias; y = act(zb),
// stored as O. O = S: y is z (in place), or with WRITE_Z z <- zb and y separate (the backward
// reads z). O narrower than S (the float32 result of a float16 GEMM): zo <- zb and y rounded to
// O once, from the S values (the same numbers as an S epilogue followed by a cast, one pass).
template <typename S, typename O, int A, bool HAS_BIAS, bool WRITE_Z, int V, int U>
__global__ void __launch_bounds__(256) bias_act(const S* z, const S* __restrict__ bias, O* zo,
                                                O* y, long long n, long long ncols) {
    typedef typename IO<S>::C C;
    typedef Pack<S, V> P;
    typedef Pack<O, V> Q;
    const long long nv = n / V;
    const long long base = (long long)blockIdx.x * (blockDim.x * U) + threadIdx.x;
    P zv[U], bv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        long long i = base + (long long)u * blockDim.x;
        if (i < nv) {
            zv[u] = reinterpret_cast<const P*>(z)[i];
            if (HAS_BIAS) bv[u] = reinterpret_cast<const P*>(bias)[(unsigned long long)(i * V) % (unsigned long long)ncols / V];
        }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
        long long i = base + (long long)u * blockDim.x;
        if (i < nv) {
            Q zq, yq;
#pragma unroll
            for (int k = 0; k < V; ++k) {
                C zb = IO<S>::ld(zv[u].v[k]);
                if (HAS_BIAS) zb += IO<S>::ld(bv[u].v[k]);
                zq.v[k] = IO<O>::st(zb);
                yq.v[k] = IO<O>::st(act_fwd<A>(WRITE_Z ? IO<S>::ld(IO<S>::st(zb)) : zb));
            }
            if (WRITE_Z) reinterpret_cast<Q*>(zo)[i] = zq;
            reinterpret_cast<Q*>(y)[i] = yq;
        }
    }
}

// dz = dy * act'(saved) over rows x (ncv * V), and per-block partial column sums of dz (the bias
// gradient) in the same pass: threadIdx.x walks column vectors, threadIdx.y rows (stride
// gridDim.y * BY, U rows in flight); partial[blockIdx.y, col] holds the block's sum, summed in a
// fixed order (deterministic).
template <typename S, int A, int V, int U>
__global__ void __launch_bounds__(256) bwd_db(const S* __restrict__ dy, const S* __restrict__ s,
                                              S* __restrict__ dz, typename IO<S>::C* __restrict__ partial,
                                              long long rows, long long ncv) {
    typedef typename IO<S>::C C;
    typedef Pack<S, V> P;
    __shared__ C sh[256 * V];
    const long long cv = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    C acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = C(0);
    if (cv < ncv) {
        const long long step = (long long)gridDim.y * blockDim.y;
        for (long long r0 = (long long)blockIdx.y * blockDim.y + threadIdx.y; r0 < rows; r0 += step * U) {
            P ra[U], rb[U];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                long long r = r0 + u * step;
                if (r < rows) {
                    ra[u] = reinterpret_cast<const P*>(dy)[r * ncv + cv];
                    rb[u] = reinterpret_cast<const P*>(s)[r * ncv + cv];
                }
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                long long r = r0 + u * step;
                if (r < rows) {
                    P o;
#pragma unroll
                    for (int k = 0; k < V; ++k) {
                        C d = act_d1<A>(IO<S>::ld(ra[u].v[k]), IO<S>::ld(rb[u].v[k]));
                        o.v[k] = IO<S>::st(d);
                        acc[k] += d;                    // in the compute type, rounded once
                    }
                    reinterpret_cast<P*>(dz)[r * ncv + cv] = o;
                }
            }
        }
    }
    const int t = threadIdx.y * blockDim.x + threadIdx.x;
#pragma unroll
    for (int k = 0; k < V; ++k) sh[t * V + k] = acc[k];
    for (int half = blockDim.y / 2; half > 0; half /= 2) {
        __syncthreads();
        if ((int)threadIdx.y < half) {
            const int o = (threadIdx.y + half) * blockDim.x + threadIdx.x;
#pragma unroll
            for (int k = 0; k < V; ++k) sh[t * V + k] += sh[o * V + k];
        }
    }
    if (threadIdx.y == 0 && cv < ncv) {
#pragma unroll
        for (int k = 0; k < V; ++k) partial[blockIdx.y * ncv * V + cv * V + k] = sh[threadIdx.x * V + k];
    }
}

// a double rounded once to the storage type (float16: directly, not through float)
template <typename S> __device__ __forceinline__ S round_from_double(double x) { return S(x); }
template <> __device__ __forceinline__ half_t round_from_double<half_t>(double x) {
    half_t h; asm("{cvt.rn.f16.f64 %0, %1;}\n" : "=h"(h) : "d"(x)); return h;
}

// sum of n contiguous elements, divided by div (1 for the sum, n for the mean), by ONE block: each
// thread adds a strided run in double, then a fixed-order tree in shared memory; rounded once to
// the storage type. For small n, where the launch and not the bandwidth is the cost; the same
// result every time.
template <typename S>
__global__ void __launch_bounds__(256) sum_small(const S* __restrict__ x, S* __restrict__ out,
                                                 long long n, double div) {
    __shared__ double sh[256];
    double acc = 0;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) acc += (double)IO<S>::ld(x[i]);
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = round_from_double<S>(sh[0] / div);
}

// the deterministic scatter-add: keys sorted (ties in source order); the thread at the first
// element of each run of equal keys sums the run in order and writes out[key] (out zeroed first).
// No atomics and no host round trip: the same sum every time.
template <typename S>
__global__ void __launch_bounds__(256) seg_sum(const long long* __restrict__ key,
                                               const S* __restrict__ vals, S* __restrict__ out,
                                               long long n) {
    typedef typename IO<S>::C C;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long k = key[i];
    if (i > 0 && key[i - 1] == k) return;
    C acc = C(0);
    for (long long j = i; j < n && key[j] == k; ++j) acc += IO<S>::ld(vals[j]);
    out[k] = IO<S>::st(acc);
}
