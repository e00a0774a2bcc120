// numr_web cuda backend: the optimizers' updates (launched by optim.py), each ONE kernel over a
// list of up to LIST_TENSORS float32 parameters (torch's multi-tensor "foreach" kernels): the
// tensors' addresses and sizes travel by value in the kernel's parameter block (AdamList,
// SgdList), so a launch uploads nothing (a captured step records the block in its graph node)
// and a model's parameters take one or two launches instead of one each.
// The list is read as one run of elements: tensor t holds elements [end[t-1], end[t]); a thread's
// grid-stride loop only moves forward, so it finds the next tensor by stepping t, not by search.
// Appended to kernels.cu by codegen.py.

#define LIST_TENSORS 48          // tensors a launch (the parameter block stays under 4 KiB)

// -- Adam / AdamW ------------------------------------------------------------------------------------
// The same arithmetic, in the same order and roundings, as nn/optim's composed update (each
// operation rounded on its own: __f*_rn keeps the compiler from contracting into FMAs):
//   AdamW: base = p * f (f = 1 - lr wd) | Adam: g = g + p * f (f = wd) | no decay: base = p
//   m = lerp(m, g, w) (torch's two forms: m + (g - m) w for |w| < 0.5, else g - (g - m)(1 - w))
//   v = v b2 + (g (1 - b2)) g;   p = base - (m step_size) / (sqrt(v) / bc2_sqrt + eps)
// FIRST: no state yet, m and v stand at 0 (the composed update's Python 0.0: m = 0 + (g - 0) w,
// v = (g (1 - b2)) g). step_size and bc2_sqrt come as values, or (DEV, capturable: each tensor's
// step count t on the device) are lr / (1 - b1^t) and sqrt(1 - b2^t) in float32.
// The scalars arrive rounded to float32 on the host, as numpy rounds a Python number.
// found (or null): GradScaler's flag on the device; where it is not 0 the step is skipped, the
// outputs are the inputs (m and v 0 on the FIRST step), so that a captured AMP step needs no
// select of every tensor afterwards (torch's fused kernels take found_inf for the same reason).
#define ADAM_DECAY_NONE 0
#define ADAM_DECAY_L2 1
#define ADAM_DECAY_DECOUPLED 2

struct AdamList {                // optim.py's ADAM_LIST packs it: the same fields in this order
    const float* p[LIST_TENSORS];
    const float* g[LIST_TENSORS];
    const float* m[LIST_TENSORS];          // null on the FIRST step
    const float* v[LIST_TENSORS];
    float* po[LIST_TENSORS];
    float* mo[LIST_TENSORS];
    float* vo[LIST_TENSORS];
    const float* step[LIST_TENSORS];       // DEV: each tensor's 0-d step count
    long long end[LIST_TENSORS];           // cumulative sizes
    const float* found;
    long long count;
    float f, w, w1, b2, w2, eps, ss, bc, lr, ln_b1, ln_b2, pad_;
};

template <int DECAY, bool FIRST, bool DEV, bool LERP_HI>
__global__ void __launch_bounds__(256) adam_list(const AdamList a) {
    const bool skip = a.found != nullptr && a.found[0] != 0.f;
    const long long total = a.end[a.count - 1], stride = (long long)gridDim.x * blockDim.x;
    long long t = -1, lo = 0, hi = 0;
    float ss = a.ss, bc = a.bc;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        if (i >= hi) {
            while (i >= hi) { ++t; lo = hi; hi = a.end[t]; }
            if (DEV) {   // the bias corrections in float32: 1 - b^t = -expm1(t ln b) (1 - powf
                const float n = a.step[t][0];                         // would cancel)
                ss = __fdiv_rn(a.lr, -expm1f(n * a.ln_b1));
                bc = __fsqrt_rn(-expm1f(n * a.ln_b2));
            }
        }
        const long long j = i - lo;
        const float pi = a.p[t][j];
        if (skip) {
            a.po[t][j] = pi;
            a.mo[t][j] = FIRST ? 0.f : a.m[t][j];
            a.vo[t][j] = FIRST ? 0.f : a.v[t][j];
            continue;
        }
        float gi = a.g[t][j], base = pi;
        if (DECAY == ADAM_DECAY_DECOUPLED) base = __fmul_rn(pi, a.f);
        if (DECAY == ADAM_DECAY_L2) gi = __fadd_rn(gi, __fmul_rn(pi, a.f));
        const float m0 = FIRST ? 0.f : a.m[t][j];
        const float d = __fsub_rn(gi, m0);
        const float mi = LERP_HI ? __fsub_rn(gi, __fmul_rn(d, a.w1))
                                 : __fadd_rn(m0, __fmul_rn(d, a.w));
        const float gg = __fmul_rn(__fmul_rn(gi, a.w2), gi);
        const float vi = FIRST ? gg : __fadd_rn(__fmul_rn(a.v[t][j], a.b2), gg);
        const float den = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc), a.eps);
        a.po[t][j] = __fsub_rn(base, __fdiv_rn(__fmul_rn(mi, ss), den));
        a.mo[t][j] = mi;
        a.vo[t][j] = vi;
    }
}

// -- SGD ---------------------------------------------------------------------------------------------
// torch.optim.SGD's update as nn/optim's composed form (SGD._update), each operation rounded on its
// own, the flags' parts where set:
//   g = -g (SGD_MAXIMIZE);  g = g + p wd (SGD_DECAY);
//   SGD_MOMENTUM: buf = g (FIRST) | buf mom + g damp1 (SGD_DAMP) | buf mom + g,
//                 g = g + buf mom (SGD_NESTEROV) | buf;
//   p = p - g lr
// The scalars arrive rounded to float32 on the host (damp1 = 1 - dampening).
#define SGD_MAXIMIZE 1
#define SGD_DECAY 2
#define SGD_MOMENTUM 4
#define SGD_DAMP 8
#define SGD_NESTEROV 16

struct SgdList {                 // optim.py's SGD_LIST packs it
    const float* p[LIST_TENSORS];
    const float* g[LIST_TENSORS];
    const float* buf[LIST_TENSORS];        // null on the FIRST step or without momentum
    float* po[LIST_TENSORS];
    float* bo[LIST_TENSORS];               // null without momentum
    long long end[LIST_TENSORS];
    long long count, flags;
    float wd, mom, damp1, lr;
};

template <bool FIRST>
__global__ void __launch_bounds__(256) sgd_list(const SgdList a) {
    const long long total = a.end[a.count - 1], stride = (long long)gridDim.x * blockDim.x;
    long long t = -1, lo = 0, hi = 0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        while (i >= hi) { ++t; lo = hi; hi = a.end[t]; }
        const long long j = i - lo;
        const float pi = a.p[t][j];
        float gi = a.g[t][j];
        if (a.flags & SGD_MAXIMIZE) gi = -gi;
        if (a.flags & SGD_DECAY) gi = __fadd_rn(gi, __fmul_rn(pi, a.wd));
        if (a.flags & SGD_MOMENTUM) {
            float b = gi;
            if (!FIRST) b = __fadd_rn(__fmul_rn(a.buf[t][j], a.mom),
                                      (a.flags & SGD_DAMP) ? __fmul_rn(gi, a.damp1) : gi);
            a.bo[t][j] = b;
            gi = (a.flags & SGD_NESTEROV) ? __fadd_rn(gi, __fmul_rn(b, a.mom)) : b;
        }
        a.po[t][j] = __fsub_rn(pi, __fmul_rn(gi, a.lr));
    }
}
