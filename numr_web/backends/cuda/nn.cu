// numr_web cuda backend: the fused nn kernels (launched by nn.py): layer / RMS norm forward and
// backward, softmax cross-entropy forward and backward, the scatter-add of whole rows (the
// optimizers' updates are optim.cu's).
// Appended to kernels.cu by codegen.py (uses its IO<S>).
// Storage S: float, double, half_t (computed in float, rounded once); C: the compute type.

// sum over the 32 lanes of a warp (every lane gets it)
template <typename C> __device__ __forceinline__ C warp_sum(C v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// -- layer / RMS norm, one warp per row of n -------------------------------------------------------
// A row's values sit in registers (NT per lane, n <= 32 NT): one read of x, one write of y. NT 0
// is the loop form for any n (x read three times, through L1). Formulas as array_nn.layer_norm:
// mean = sum(x) / n, var = sum((x - mean)^2) / n, rstd = 1 / sqrt(var + eps) (RMS: mean 0).
#define ROW_OF_WARP ((long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5))

template <typename S, int NT, bool RMS, bool HW, bool HB>
__global__ void __launch_bounds__(256) ln_fwd(
        const S* __restrict__ x, const S* __restrict__ w, const S* __restrict__ b,
        S* __restrict__ y, S* __restrict__ mean_out, S* __restrict__ rstd_out,
        long long rows, long long n, double eps) {
    typedef typename IO<S>::C C;
    const int lane = threadIdx.x & 31;
    const long long row = ROW_OF_WARP;
    if (row >= rows) return;
    const S* xr = x + row * n;
    S* yr = y + row * n;
    C v[NT > 0 ? NT : 1];
    C s = C(0), q = C(0);
    if constexpr (NT > 0) {
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            v[t] = lane + 32 * t < n ? IO<S>::ld(xr[lane + 32 * t]) : C(0);
            s += v[t];
        }
    } else {
        for (long long j = lane; j < n; j += 32) s += IO<S>::ld(xr[j]);
    }
    const C mu = RMS ? C(0) : warp_sum(s) / C(n);
    if constexpr (NT > 0) {
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const C d = lane + 32 * t < n ? v[t] - mu : C(0);
            q += d * d;
        }
    } else {
        for (long long j = lane; j < n; j += 32) { const C d = IO<S>::ld(xr[j]) - mu; q += d * d; }
    }
    const C rs = C(1) / sqrt(warp_sum(q) / C(n) + C(eps));
    if (lane == 0) {
        if (!RMS) mean_out[row] = IO<S>::st(mu);
        rstd_out[row] = IO<S>::st(rs);
    }
    if constexpr (NT > 0) {
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const int j = lane + 32 * t;
            if (j < n) {
                C o = (v[t] - mu) * rs;
                if (HW) o = o * IO<S>::ld(w[j]);
                if (HB) o = o + IO<S>::ld(b[j]);
                yr[j] = IO<S>::st(o);
            }
        }
    } else {
        for (long long j = lane; j < n; j += 32) {
            C o = (IO<S>::ld(xr[j]) - mu) * rs;
            if (HW) o = o * IO<S>::ld(w[j]);
            if (HB) o = o + IO<S>::ld(b[j]);
            yr[j] = IO<S>::st(o);
        }
    }
}

// dx per row: g = dy * w, xhat = (x - mean) rstd, dx = (g - mean(g) - xhat mean(g xhat)) rstd
// (RMS: no mean(g) term), as array_nn.layer_norm_backward
template <typename S, int NT, bool RMS, bool HW>
__global__ void __launch_bounds__(256) ln_bwd_dx(
        const S* __restrict__ dy, const S* __restrict__ x, const S* __restrict__ w,
        const S* __restrict__ mean, const S* __restrict__ rstd, S* __restrict__ dx,
        long long rows, long long n) {
    typedef typename IO<S>::C C;
    const int lane = threadIdx.x & 31;
    const long long row = ROW_OF_WARP;
    if (row >= rows) return;
    const S* xr = x + row * n;
    const S* gr = dy + row * n;
    S* dr = dx + row * n;
    const C mu = RMS ? C(0) : IO<S>::ld(mean[row]);
    const C rs = IO<S>::ld(rstd[row]);
    C gv[NT > 0 ? NT : 1], hv[NT > 0 ? NT : 1];
    C sg = C(0), sgh = C(0);
    if constexpr (NT > 0) {
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const int j = lane + 32 * t;
            C g = C(0), h = C(0);
            if (j < n) {
                g = IO<S>::ld(gr[j]);
                if (HW) g = g * IO<S>::ld(w[j]);
                h = (IO<S>::ld(xr[j]) - mu) * rs;
            }
            gv[t] = g;
            hv[t] = h;
            sg += g;
            sgh += g * h;
        }
    } else {
        for (long long j = lane; j < n; j += 32) {
            C g = IO<S>::ld(gr[j]);
            if (HW) g = g * IO<S>::ld(w[j]);
            const C h = (IO<S>::ld(xr[j]) - mu) * rs;
            sg += g;
            sgh += g * h;
        }
    }
    const C mg = RMS ? C(0) : warp_sum(sg) / C(n);
    const C mgh = warp_sum(sgh) / C(n);
    if constexpr (NT > 0) {
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const int j = lane + 32 * t;
            if (j < n) dr[j] = IO<S>::st((gv[t] - mg - hv[t] * mgh) * rs);
        }
    } else {
        for (long long j = lane; j < n; j += 32) {
            C g = IO<S>::ld(gr[j]);
            if (HW) g = g * IO<S>::ld(w[j]);
            const C h = (IO<S>::ld(xr[j]) - mu) * rs;
            dr[j] = IO<S>::st((g - mg - h * mgh) * rs);
        }
    }
}

// partial column sums of dy * xhat (the weight's gradient) and dy (the bias's) over the rows of
// chunk blockIdx.y: one thread a column, consecutive threads consecutive columns (coalesced);
// nn.py adds the chunks' partials (a fixed order: deterministic)
template <typename S, bool RMS, bool HB>
__global__ void __launch_bounds__(256) ln_bwd_wb(
        const S* __restrict__ dy, const S* __restrict__ x, const S* __restrict__ mean,
        const S* __restrict__ rstd, typename IO<S>::C* __restrict__ pw,
        typename IO<S>::C* __restrict__ pb, long long rows, long long n, long long chunk) {
    typedef typename IO<S>::C C;
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    const long long r0 = (long long)blockIdx.y * chunk;
    const long long r1 = r0 + chunk < rows ? r0 + chunk : rows;
    C aw = C(0), ab = C(0);
    for (long long r = r0; r < r1; ++r) {
        const C g = IO<S>::ld(dy[r * n + j]);
        const C mu = RMS ? C(0) : IO<S>::ld(mean[r]);
        aw += g * ((IO<S>::ld(x[r * n + j]) - mu) * IO<S>::ld(rstd[r]));
        if (HB) ab += g;
    }
    pw[blockIdx.y * n + j] = aw;
    if (HB) pb[blockIdx.y * n + j] = ab;
}

// -- softmax cross-entropy, one warp per row of n classes -----------------------------------------
// With m = max_j x_j, e_j = exp(x_j - m), S = sum_j e_j (p_j = e_j / S): loss = log S -
// (1 - s)(x[label] - m) - (s / n) sum_j (x_j - m) (s: label smoothing), 0 where label == ignore;
// stats (m, S, the others' sum S - e_label added without it) for the backward:
// dx_j = g (p_j - (1 - s) [j == label] - s / n), 0 in ignored rows, at the label p - 1 =
// -others / S (no cancellation where p is near 1); g: one value per row, g_stride 0 for one value
// broadcast. As array_nn.cross_entropy; the ops layer checks the labels (clamped here all the
// same).
template <typename C> __device__ __forceinline__ C warp_max(C v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

template <typename S, bool SMOOTH>
__global__ void __launch_bounds__(256) xent_fwd(
        const S* __restrict__ x, const int* __restrict__ labels, S* __restrict__ loss,
        typename IO<S>::C* __restrict__ stats, long long rows, long long n, long long ignore,
        double smoothing) {
    typedef typename IO<S>::C C;
    const int lane = threadIdx.x & 31;
    const long long row = ROW_OF_WARP;
    if (row >= rows) return;
    const S* xr = x + row * n;
    const long long label = labels[row];
    C m = C(-__int_as_float(0x7f800000));          // -inf
    for (long long j = lane; j < n; j += 32) m = fmax(m, IO<S>::ld(xr[j]));
    m = warp_max(m);                         // a NaN is dropped here, and met by the sums below
    C e = C(0), others = C(0), sx = C(0);
    for (long long j = lane; j < n; j += 32) {
        const C v = IO<S>::ld(xr[j]) - m;
        const C ev = exp(v);
        e += ev;
        if (j != label) others += ev;
        if (SMOOTH) sx += v;
    }
    const C total = warp_sum(e);
    others = warp_sum(others);
    if (SMOOTH) sx = warp_sum(sx);
    if (lane == 0) {
        C out = C(0);
        if (label != ignore) {
            const C s = C(smoothing);
            out = log(total) - (C(1) - s) * (IO<S>::ld(xr[label < 0 ? 0 : label >= n ? n - 1
                                                             : label]) - m);
            if (SMOOTH) out -= s / C(n) * sx;
        }
        loss[row] = IO<S>::st(out);
        stats[3 * row] = m;
        stats[3 * row + 1] = total;
        stats[3 * row + 2] = others;
    }
}

template <typename S, bool SMOOTH>
__global__ void __launch_bounds__(256) xent_bwd(
        const S* __restrict__ x, const int* __restrict__ labels,
        const typename IO<S>::C* __restrict__ stats, const S* __restrict__ g, long long g_stride,
        S* __restrict__ dx, long long rows, long long n, long long ignore, double smoothing) {
    typedef typename IO<S>::C C;
    const int lane = threadIdx.x & 31;
    const long long row = ROW_OF_WARP;
    if (row >= rows) return;
    const S* xr = x + row * n;
    S* dr = dx + row * n;
    const long long label = labels[row];
    const bool keep = label != ignore;
    const C m = stats[3 * row], total = stats[3 * row + 1];
    const C gr = IO<S>::ld(g[row * g_stride]);
    const C s = C(smoothing), sn = s / C(n);
    for (long long j = lane; j < n; j += 32) {
        C d = exp(IO<S>::ld(xr[j]) - m) / total;
        if (j == label) d = s - stats[3 * row + 2] / total;
        if (SMOOTH) d -= sn;
        dr[j] = IO<S>::st(keep ? d * gr : C(0));
    }
}

// -- scatter-add of whole rows (an embedding's / index_select's backward) -------------------------------
// out[key[i], c] += src[perm[i], c] for the L rows in sorted order (key sorted, ties in source
// order: perm): the first row of each run of equal keys sums the run, column by column, in
// order (the same sums as seg_sum's over flat elements, with L keys sorted instead of L * R).
template <typename S>
__global__ void __launch_bounds__(128) rows_seg_sum(const long long* __restrict__ key,
                                                    const long long* __restrict__ perm,
                                                    const S* __restrict__ src, S* __restrict__ out,
                                                    long long L, long long R) {
    typedef typename IO<S>::C C;
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long i = blockIdx.y + 65535LL * blockIdx.z;
    if (c >= R || i >= L) return;
    const long long k = key[i];
    if (i > 0 && key[i - 1] == k) return;
    C acc = C(0);
    for (long long j = i; j < L && key[j] == k; ++j) acc += IO<S>::ld(src[perm[j] * R + c]);
    out[k * R + c] = IO<S>::st(acc);
}
