"""CUDA C source of the cuda backend's fused kernels, and their compile-once cache.

One source, specialised by C++ templates (compiled at run time by NVRTC through cupy.RawModule):
  * the activation is a template constant `A` (the ACT table's `code`: 0 none, 1 relu, 2 sigmoid,
    3 tanh, 4 silu, 5 gelu (erf), 6 gelu_tanh); `switch (A)` on it is folded away by the compiler;
  * the storage type `S` (float, double, or `half_t` = float16 bits, computed in float);
  * the vector width `V` (elements per memory access: 16 bytes by default: float4 / double2 / 8 x half)
    and `U` (vectors per thread, loads issued before the first use).

Kernels
  ew<S, Op, NIN, V, U, CS>      out = Op(a[, b]) elementwise (activation of order 0/1/2: MapOp;
                                dz = dy * act'(saved): BwdOp). Grid: one block per 256*U vectors.
  bias_act<S, A, HAS_BIAS, WRITE_Z, V, U>
                                the GEMM epilogue: zb = z + bias[col]; y = act(zb), in place (y is z)
                                or, when the backward needs the pre-activation, z = zb and y separate.
  bwd_db<S, A, FROM_Z, V, U>    dz = dy * act'(saved) plus per-block partial column sums of dz (the
                                bias gradient); one small reduction over the partial rows finishes it.

The formulas are the ACT table's (numr_web/ops/activations.py): overflow-safe for every finite input
(sigmoid through tanh, never exp(-z); 0 * inf guarded in the gelu_tanh and gelu second derivatives),
exact GELU through erfc, the tanh form for gelu_tanh, relu'(0) = 0. Backward of the "z" activations
(silu, gelu, gelu_tanh) reads only dy and z (Phi recomputed by erfc: bandwidth-bound, the arithmetic
is free), of the "y" activations only dy and y.
"""
from __future__ import annotations

SOURCE = r"""
typedef unsigned short half_t;   // float16 storage (bits); arithmetic in float

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

__device__ __forceinline__ float  m_tanh(float x)  { return tanhf(x); }
__device__ __forceinline__ double m_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float  m_exp(float x)   { return expf(x); }
__device__ __forceinline__ double m_exp(double x)  { return exp(x); }
__device__ __forceinline__ float  m_erfc(float x)  { return erfcf(x); }
__device__ __forceinline__ double m_erfc(double x) { return erfc(x); }

#define K_SQRT1_2      0.70710678118654752440
#define K_INV_SQRT_2PI 0.39894228040143267794
#define K_GELU_C       0.79788456080286535588
#define K_GELU_A       0.044715

// sigmoid = 0.5 + 0.5 tanh(z/2): no overflow for any z
template <typename C> __device__ __forceinline__ C sigm(C z) { return C(0.5) + C(0.5) * m_tanh(C(0.5) * z); }
// Phi(z) = 0.5 erfc(-z/sqrt2) (no cancellation for z << 0); phi(z) = exp(-z^2/2)/sqrt(2 pi)
template <typename C> __device__ __forceinline__ C cdf(C z) { return C(0.5) * m_erfc(-z * C(K_SQRT1_2)); }
template <typename C> __device__ __forceinline__ C pdf(C z) { return C(K_INV_SQRT_2PI) * m_exp(C(-0.5) * z * z); }
template <typename C> __device__ __forceinline__ C gelu_tanh_t(C z) {
    return m_tanh(C(K_GELU_C) * z * (C(1) + C(K_GELU_A) * z * z));
}

// act(z)
template <int A, typename C> __device__ __forceinline__ C act_f(C z) {
    switch (A) {
    case 1: return (z > C(0) || z != z) ? z : C(0);                 // keeps NaN, like numpy maximum
    case 2: return sigm(z);
    case 3: return m_tanh(z);
    case 4: return z * sigm(z);
    case 5: return z * cdf(z);
    case 6: return C(0.5) * z * (C(1) + gelu_tanh_t(z));
    default: return z;
    }
}

// act'(z) from the pre-activation z
template <int A, typename C> __device__ __forceinline__ C act_dz(C z) {
    switch (A) {
    case 1: return z > C(0) ? C(1) : C(0);                          // relu'(0) = 0
    case 2: { C s = sigm(z); return s * (C(1) - s); }
    case 3: { C t = m_tanh(z); return C(1) - t * t; }
    case 4: { C s = sigm(z); return s * (C(1) + z * (C(1) - s)); }
    case 5: { C p = pdf(z); return cdf(z) + (p == C(0) ? C(0) : z * p); }
    case 6: {
        C t = gelu_tanh_t(z), sech2 = C(1) - t * t;
        C r = C(0.5) * (C(1) + t);
        if (sech2 != C(0)) r += C(0.5) * z * sech2 * C(K_GELU_C) * (C(1) + C(3.0 * K_GELU_A) * z * z);
        return r;
    }
    default: return C(1);
    }
}

// act'(.) from the output y (the activations whose table row says saves "y")
template <int A, typename C> __device__ __forceinline__ C act_dy(C y) {
    switch (A) {
    case 1: return y > C(0) ? C(1) : C(0);
    case 2: return y * (C(1) - y);
    case 3: return C(1) - y * y;
    default: return C(1);
    }
}

// act''(z)
template <int A, typename C> __device__ __forceinline__ C act_d2(C z) {
    switch (A) {
    case 2: { C s = sigm(z); return s * (C(1) - s) * (C(1) - C(2) * s); }
    case 3: { C t = m_tanh(z); return C(-2) * t * (C(1) - t * t); }
    case 4: { C s = sigm(z); C q = s * (C(1) - s); return q == C(0) ? C(0) : q * (C(2) + z * (C(1) - C(2) * s)); }
    case 5: { C p = pdf(z); return p == C(0) ? C(0) : p * (C(2) - z * z); }
    case 6: {
        C t = gelu_tanh_t(z), sech2 = C(1) - t * t;
        if (sech2 == C(0)) return C(0);
        C du = C(K_GELU_C) * (C(1) + C(3.0 * K_GELU_A) * z * z);
        C ddu = C(6.0 * K_GELU_C * K_GELU_A) * z;
        return sech2 * (du + C(0.5) * z * (ddu - C(2) * t * du * du));
    }
    default: return C(0);                                          // none, relu
    }
}

// out = act^(ORDER)(x)
template <int A, int ORDER> struct MapOp {
    template <typename C> static __device__ __forceinline__ C f(C x, C) {
        return ORDER == 0 ? act_f<A>(x) : (ORDER == 1 ? act_dz<A>(x) : act_d2<A>(x));
    }
};

// dz = dy * act'(saved); saved is z (FROM_Z) or y
template <int A, bool FROM_Z> struct BwdOp {
    template <typename C> static __device__ __forceinline__ C f(C dy, C s) {
        if (A == 0) return dy;
        if (A == 1) return s > C(0) ? dy : C(0);                     // where(y > 0, dy, 0)
        return dy * (FROM_Z ? act_dz<A>(s) : act_dy<A>(s));
    }
};

template <typename S, int V> struct alignas(sizeof(S) * V) Pack { S v[V]; };

// 16-byte-chunked loads/stores; CS: streaming cache hint (evict-first: data far larger than L2)
template <bool CS, typename P> __device__ __forceinline__ P ldp(const P* p) {
    if constexpr (CS && sizeof(P) % 16 == 0) {
        P out;
        const int4* q = reinterpret_cast<const int4*>(p);
        int4* o = reinterpret_cast<int4*>(&out);
#pragma unroll
        for (int c = 0; c < (int)(sizeof(P) / 16); ++c) o[c] = __ldcs(q + c);
        return out;
    } else {
        return *p;
    }
}
template <bool CS, typename P> __device__ __forceinline__ void stp(P* p, const P& v) {
    if constexpr (CS && sizeof(P) % 16 == 0) {
        int4* q = reinterpret_cast<int4*>(p);
        const int4* o = reinterpret_cast<const int4*>(&v);
#pragma unroll
        for (int c = 0; c < (int)(sizeof(P) / 16); ++c) __stcs(q + c, o[c]);
    } else {
        *p = v;
    }
}

// elementwise, NIN inputs (1 or 2); n elements; vectors of V, U vectors per thread; scalar tail
template <typename S, typename OP, int NIN, int V, int U, bool CS>
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
            ra[u] = ldp<CS>(reinterpret_cast<const P*>(a) + i);
            if (NIN == 2) rb[u] = ldp<CS>(reinterpret_cast<const P*>(b) + i);
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
            stp<CS>(reinterpret_cast<P*>(out) + i, o);
        }
    }
    if (V > 1 && blockIdx.x == 0) {            // the last n % V elements
        long long t = nv * V + threadIdx.x;
        if (t < n) out[t] = IO<S>::st(OP::f(IO<S>::ld(a[t]), NIN == 2 ? IO<S>::ld(b[t]) : C(0)));
    }
}

// GEMM epilogue over z (rows x ncols, row-major; ncols % V == 0): zb = z + bias; y = act(zb).
// WRITE_Z: z <- zb and y separate; else y is z (in place).
template <typename S, int A, bool HAS_BIAS, bool WRITE_Z, int V, int U>
__global__ void __launch_bounds__(256) bias_act(S* z, const S* __restrict__ bias, S* y,
                                                long long n, long long ncols) {
    typedef typename IO<S>::C C;
    typedef Pack<S, V> P;
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
            P zo, yo;
#pragma unroll
            for (int k = 0; k < V; ++k) {
                C zb = IO<S>::ld(zv[u].v[k]);
                if (HAS_BIAS) zb += IO<S>::ld(bv[u].v[k]);
                zo.v[k] = IO<S>::st(zb);
                yo.v[k] = IO<S>::st(act_f<A>(WRITE_Z ? IO<S>::ld(zo.v[k]) : zb));
            }
            if (WRITE_Z) reinterpret_cast<P*>(z)[i] = zo;
            reinterpret_cast<P*>(y)[i] = yo;
        }
    }
}

// dz = dy * act'(saved) over rows x (ncv * V) and per-block partial column sums of dz:
// block (BX, BY): threadIdx.x walks column vectors, threadIdx.y rows (stride gridDim.y * BY,
// U rows in flight); partial[blockIdx.y, col] then holds the block's sum.
template <typename S, int A, bool FROM_Z, int V, int U>
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
                        C d = BwdOp<A, FROM_Z>::f(IO<S>::ld(ra[u].v[k]), IO<S>::ld(rb[u].v[k]));
                        o.v[k] = IO<S>::st(d);
                        acc[k] += d;
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
"""

# the ACT codes the kernels know (must match ACT[...].code)
CODES = {"none": 0, "relu": 1, "sigmoid": 2, "tanh": 3, "silu": 4, "gelu": 5, "gelu_tanh": 6}
C_TYPES = {"float32": "float", "float64": "double", "float16": "half_t"}
OPTIONS = ("--std=c++17",)

_modules: dict = {}   # (kind, ctype, variant) -> {name_expression: cupy function}


def _compile(key, exprs):
    import cupy
    mod = cupy.RawModule(code=SOURCE, options=OPTIONS, name_expressions=list(exprs))
    fns = {e: mod.get_function(e) for e in exprs}
    _modules[key] = fns
    return fns


def get(kind, ctype, variant, expr_for):
    """The compiled kernel for one specialisation. All 7 activations of one (kind, dtype, variant)
    are compiled together in one NVRTC call (once per process; cupy also caches it on disk)."""
    key = (kind, ctype, variant)
    fns = _modules.get(key)
    if fns is None:
        fns = _compile(key, [expr_for(code) for code in range(7)])
    return fns


def ew_expr(ctype, op, nin, v, u, cs):
    return f"ew<{ctype}, {op}, {nin}, {v}, {u}, {'true' if cs else 'false'}>"
