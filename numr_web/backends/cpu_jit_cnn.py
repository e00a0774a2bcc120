"""The conv net's compiled loops (numba, no GIL held; exported by cpu_jit_kernels.py): the
per-block passes of cpu_cnn.py around a convolution block's GEMMs, max pooling's backward, and
batch norm's elementwise passes (cpu_batchnorm.py). Each is a copy or the numpy path's float
operations in the same order, so the results are the numpy path's bits:

  * im2col: a block's columns, in the (C, kh, kw, n, OH, OW) layout of CpuCNN._block_cols;
  * conv_bias_relu: the GEMM's (O, n * L) product to (n, O, L) with the channel bias added
    (one float add, as np.add) and relu applied (relu_fwd) where asked;
  * to_rows_wide: the output gradient (n, O, OH, OW) to the (O, n, OH, Wp) rows of
    _col2im_wide, zeros in the kw - 1 padding columns;
  * col2im_wide: _col2im_wide's tap adds into each padded plane, in its (i, j) order from +0,
    kept only where the input lies (the crop);
  * max_pool_2x2: max pooling's forward for 2x2 windows of stride 2 inside the input (the
    common pool; a loop over runtime window geometry ran 4-10x slower than this unrolled one,
    slower than numpy's passes over whole views, so other pools stay numpy's): torch's rule, a
    later element wins when greater or NaN, so y is x at the index (the numpy path's maximum
    keeps the last of tying zeros' signs; otherwise the same bits);
  * max_pool_backward: max pooling's gradient over blocks of planes (ArrayCNN's tap-ordered
    adds; one write a window where windows share no element); max_pool_2x2_backward the same
    values for 2x2 windows of stride 2 inside the input, every element written once;
  * bn_moments, bn_grad_sums: batch norm's per-(image, channel) sums, forward (of x - a
    shift and its square) and backward (of g and g (x - mean), g relu's gradient where asked),
    in float64 in any order (fastmath's reassociation lets them vectorise): not the numpy
    path's float32 pairwise bits, but its error bound or better, and the same on any thread
    count (a row's sum depends on its length only);
  * bn_apply, bn_dx: batch norm's pass writing y (no activation or relu) and its training
    backward's pass writing dx (relu's gradient taken from the saved input where asked).
"""
from __future__ import annotations

import numba
import numpy as np

_JIT = dict(nogil=True, cache=True, error_model="numpy")
# sums in any order (a vector of partial sums): reassociation only, no NaN/inf assumptions
_SUMS = dict(_JIT, fastmath={"reassoc", "contract"})


@numba.njit(**_JIT)
def im2col(x, cols, sh, sw, ph, pw, dh, dw):
    """cols (C, kh, kw, n, OH, OW) = the windows of x (n, C, H, W), zeros outside."""
    n, C, H, W = x.shape
    kh, kw, OH, OW = cols.shape[1], cols.shape[2], cols.shape[4], cols.shape[5]
    for c in range(C):
        for i in range(kh):
            for j in range(kw):
                for b in range(n):
                    for oy in range(OH):
                        iy = oy * sh - ph + i * dh
                        inside = 0 <= iy < H
                        for ox in range(OW):
                            ix = ox * sw - pw + j * dw
                            cols[c, i, j, b, oy, ox] = x[b, c, iy, ix] \
                                if inside and 0 <= ix < W else 0.0


@numba.njit(**_JIT)
def conv_bias_relu(zg, bias, relu, z):
    """z (n, O, L) = zg (O, n * L) + bias[o] (bias empty: none added), relu'd where asked."""
    n, O, L = z.shape
    add = bias.shape[0] > 0
    for b in range(n):
        for o in range(O):
            for q in range(L):
                v = zg[o, b * L + q]
                if add:
                    v = v + bias[o]
                z[b, o, q] = 0.0 if relu and v < 0 else v     # relu_fwd: -0.0, NaN pass


@numba.njit(**_JIT)
def to_rows_wide(dz, dzw):
    """dzw (O, n, OH, Wp) = dz (n, O, OH, OW) transposed, zeros in columns OW..Wp-1."""
    n, O, OH, OW = dz.shape
    wp = dzw.shape[3]
    for o in range(O):
        for b in range(n):
            for y in range(OH):
                for x in range(OW):
                    dzw[o, b, y, x] = dz[b, o, y, x]
                for x in range(OW, wp):
                    dzw[o, b, y, x] = 0.0


@numba.njit(**_JIT)
def col2im_wide(cols, ph, pw, zero, dx):
    """dx (n, C, H, W) = _col2im_wide's planes: cols (C, kh, kw, n, OH * Wp), tap (i, j) added
    at offset i * Wp + j of the padded plane, in (i, j) order from +0 (`zero`: a scalar of dx's
    dtype, so the sums stay in it), then cropped: one long run of adds a tap (they vectorise;
    an output element's adds, tap by tap, ran 2-2.6x slower)."""
    n, C, H, W = dx.shape
    kh, kw, run = cols.shape[1], cols.shape[2], cols.shape[4]
    wp = W + 2 * pw
    plane = np.empty((H + 2 * ph) * wp + kw, dx.dtype)   # (the last tap's run goes past)
    for b in range(n):
        for c in range(C):
            for q in range(plane.shape[0]):
                plane[q] = zero
            for i in range(kh):
                for j in range(kw):
                    at = i * wp + j
                    for q in range(run):
                        plane[at + q] = plane[at + q] + cols[c, i, j, b, q]
            for y in range(H):
                for x in range(W):
                    dx[b, c, y, x] = plane[(y + ph) * wp + x + pw]


@numba.njit(**_JIT)
def max_pool_2x2(x, best, idx):
    """best, idx (P, OH, OW) = each 2x2 window's maximum of x (P, H, W) at stride 2 and its
    flat index in the plane (windows inside x: 2 OH <= H, 2 OW <= W), taps in row order."""
    P, H, W = x.shape
    OH, OW = best.shape[1], best.shape[2]
    for p in range(P):
        xp, bp, ip = x[p], best[p], idx[p]
        for oy in range(OH):
            r = 2 * oy
            for ox in range(OW):
                q = 2 * ox
                b, k = xp[r, q], r * W + q
                v = xp[r, q + 1]
                t = v > b or v != v
                b, k = (v, r * W + q + 1) if t else (b, k)
                v = xp[r + 1, q]
                t = v > b or v != v
                b, k = (v, (r + 1) * W + q) if t else (b, k)
                v = xp[r + 1, q + 1]
                t = v > b or v != v
                b, k = (v, (r + 1) * W + q + 1) if t else (b, k)
                bp[oy, ox], ip[oy, ox] = b, k


@numba.njit(**_JIT)
def max_pool_2x2_backward(g, idx, zero, dx):
    """max_pool_backward for 2x2 windows of stride 2 inside the input, in one pass of writes:
    each window's four elements get zero + g at its index and zero elsewhere (the same values
    as the zero fill and then one write a window), the rows and columns no window covers zero."""
    P, H, W = dx.shape
    OH, OW = g.shape[1], g.shape[2]
    for p in range(P):
        for oy in range(OH):
            r = 2 * oy
            for ox in range(OW):
                q = 2 * ox
                k = idx[p, oy, ox]
                v = zero + g[p, oy, ox]
                dx[p, r, q] = v if k == r * W + q else zero
                dx[p, r, q + 1] = v if k == r * W + q + 1 else zero
                dx[p, r + 1, q] = v if k == (r + 1) * W + q else zero
                dx[p, r + 1, q + 1] = v if k == (r + 1) * W + q + 1 else zero
            for x in range(2 * OW, W):
                dx[p, r, x] = zero
                dx[p, r + 1, x] = zero
        for y in range(2 * OH, H):
            for x in range(W):
                dx[p, y, x] = zero


@numba.njit(**_JIT)
def max_pool_backward(g, idx, kh, kw, sh, sw, ph, pw, dh, dw, zero, dx):
    """dx (P, H, W) = ArrayCNN._max_pool_grad_into: from +0, each window's g added at its saved
    index, tap by tap and window by window within a tap (its order of the adds); windows that
    share no element: one write each."""
    P, H, W = dx.shape
    OH, OW = g.shape[1], g.shape[2]
    disjoint = sh >= dh * (kh - 1) + 1 and sw >= dw * (kw - 1) + 1
    for p in range(P):
        for r in range(H):
            for q in range(W):
                dx[p, r, q] = zero
        if disjoint:
            for oy in range(OH):
                for ox in range(OW):
                    k = idx[p, oy, ox]
                    dx[p, k // W, k % W] = zero + g[p, oy, ox]
            continue
        for i in range(kh):
            for j in range(kw):
                for oy in range(OH):
                    r = oy * sh - ph + i * dh
                    if r < 0 or r >= H:
                        continue
                    for ox in range(OW):
                        q = ox * sw - pw + j * dw
                        if 0 <= q < W and idx[p, oy, ox] == r * W + q:
                            dx[p, r, q] = dx[p, r, q] + g[p, oy, ox]


@numba.njit(**_JIT)
def bn_apply(x, shift, scale, bias, relu, y):
    """CpuBatchNorm's y for a block: ((x - shift[c]) * scale[c] + bias[c]) (bias empty: none),
    relu'd where asked; x, y (n, C, L)."""
    n, C, L = x.shape
    add = bias.shape[0] > 0
    for b in range(n):
        for c in range(C):
            for q in range(L):
                v = (x[b, c, q] - shift[c]) * scale[c]
                if add:
                    v = v + bias[c]
                y[b, c, q] = 0.0 if relu and v < 0 else v


@numba.njit(**_SUMS)
def bn_moments(x, shift, s1, s2):
    """s1, s2 (n, C) = per row of x (n, C, L): the sums of d = x - shift[c] and of d * d, in
    float64 (a shift near the mean keeps E[d^2] - E[d]^2 free of cancellation)."""
    n, C, L = x.shape
    for b in range(n):
        for c in range(C):
            k = shift[c]
            a1 = 0.0
            a2 = 0.0
            for q in range(L):
                d = np.float64(x[b, c, q]) - k
                a1 += d
                a2 += d * d
            s1[b, c] = a1
            s2[b, c] = a2


@numba.njit(**_SUMS)
def bn_grad_sums(dy, s, relu, x, mean, sg, sgx):
    """sg, sgx (n, C) = per row: the sums of g and of g * (x - mean[c]) in float64, where g is
    dy, or relu's gradient where(s <= 0, 0, dy) where asked."""
    n, C, L = x.shape
    for b in range(n):
        for c in range(C):
            m = mean[c]
            a1 = 0.0
            a2 = 0.0
            for q in range(L):
                g = np.float64(dy[b, c, q])
                if relu and s[b, c, q] <= 0:
                    g = 0.0
                a1 += g
                a2 += g * (np.float64(x[b, c, q]) - m)
            sg[b, c] = a1
            sgx[b, c] = a2


@numba.njit(**_JIT)
def bn_dx(dy, s, relu, zero, x, m, r, kx, kg, scale, dx):
    """CpuBatchNorm's training dx for a block: (g - (x - m) r kx - kg) scale, per channel c,
    in that order of operations, where g is dy, or relu's gradient where(s <= 0, +0, dy) where
    asked (`zero`: +0 of dx's dtype, so the arithmetic stays in it); dy may be dx itself."""
    n, C, L = x.shape
    for b in range(n):
        for c in range(C):
            for q in range(L):
                g = zero if relu and s[b, c, q] <= 0 else dy[b, c, q]
                xhat = ((x[b, c, q] - m[c]) * r[c]) * kx[c]
                dx[b, c, q] = ((g - xhat) - kg[c]) * scale[c]
