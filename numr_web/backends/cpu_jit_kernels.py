"""The cpu backend's compiled loops (numba): each replaces a multi-pass numpy formula over one
block of an op with one loop that reads every element once and holds no GIL while it runs
(`nogil`), so the worker threads' blocks run on all cores at once (a numpy formula's block hands
the GIL over at each of its ~20 calls). Imported only through cpu_jit.kernels(), where numba is
installed; compiled at first use, cached on disk by numba.

Arithmetic: the numpy formula's operations in the same precision, where they are plain IEEE
operations (the bias add, Adam's update: bit-identical to the numpy path); a transcendental
formula is evaluated in float64 and rounded once, with the C library's exp / erfc (within an ulp
of the numpy path, which rounds once as well or computes in the output's precision). Sums over a
row (a norm's mean and variance) add in float64, in any order (fastmath's reassociation, _SUMS:
they vectorise; a scalar chain of float64 adds made the layer norm 3-4x slower).
"""
from __future__ import annotations

import math

import numba
import numpy as np

from ..vocab._erf import _MAGIC, ERF_KMAX, ERF_N, _erf_tables
from ..vocab.act_numpy import GELU_A, GELU_C, INV_SQRT_2PI, SQRT1_2
from .cpu_jit_cnn import (bn_apply, bn_dx, bn_grad_sums, bn_moments, col2im_wide,  # noqa: F401
                          conv_bias_relu, im2col, max_pool_2x2, max_pool_2x2_backward,
                          max_pool_backward,
                          to_rows_wide)

_JIT = dict(nogil=True, cache=True, error_model="numpy")
_SUMS = dict(_JIT, fastmath={"reassoc", "contract"})   # float64 sums that vectorise
_INLINE = dict(cache=True, inline="always", error_model="numpy")
# Loops that take an activation's compiled function as an argument are not cached on disk:
# numba keys their cache entry on the function's dispatcher object, which no later process
# matches, so each process compiled anew and appended an entry; the index's entries then
# rebuild dispatchers that numba keeps alive only for its last 128, and once the index held
# more, every new compile failed ("underlying object has vanished")
_JIT_TAKES_FN = dict(nogil=True, error_model="numpy")

_T0, _W, _ = _erf_tables(np)            # float32 erf's tables (numba freezes them as constants)
_C2, _C1 = 2.0 / (3 * ERF_N ** 4), 1.0 / (3 * ERF_N ** 2)


@numba.njit(**_INLINE)
def _erf_table(x):
    """vocab._erf's float32 erf of a float64 x, operation for operation (its result rounded to
    float32 is _erf_f32's)."""
    if x != x:
        return x
    u = min(max(x * ERF_N, -ERF_KMAX), float(ERF_KMAX))
    k = (u + _MAGIC) - _MAGIC                # rint, as _erf_f32 rounds (and signs) it
    e = u - k
    p = (k * k * _C2 - _C1) * e
    p = (p - k * (1.0 / ERF_N ** 2)) * e
    p = (p + 1.0) * e
    i = int(k) + ERF_KMAX
    return p * _W[i] + _T0[i]


# -- activations: each compiled row's scalar formulas. fwd(z) gets z in its array's precision,
# d1(dy, s) the gradient and the saved tensor; each returns a value rounded once into the output.
@numba.njit(**_INLINE)
def _sigmoid(x):
    e = math.exp(-abs(x))
    return (1.0 if x >= 0 else e) / (1.0 + e)


@numba.njit(**_INLINE)
def relu_fwd(z):
    return 0.0 if z < 0 else z               # -0.0 and NaN pass through, as in torch


@numba.njit(**_INLINE)
def relu_d1(dy, y):
    return 0.0 if y <= 0 else dy             # NaN in y passes dy (torch: y <= 0 ? 0 : dy)


@numba.njit(**_INLINE)
def silu_fwd(z):
    x = np.float64(z)
    return x * _sigmoid(x)


@numba.njit(**_INLINE)
def silu_d1(dy, z):
    x = np.float64(z)
    return dy * (_sigmoid(x) * (1.0 + x * _sigmoid(-x)))     # s (1 + z (1 - s)), no cancellation


@numba.njit(**_INLINE)
def gelu_fwd32(z):
    """act_numpy._gelu_fwd on float32, operation for operation: the same bits."""
    e = np.float32(_erf_table(np.float64(z * np.float32(SQRT1_2))))
    return ((e + np.float32(1.0)) * np.float32(0.5)) * z


@numba.njit(**_INLINE)
def gelu_fwd64(z):
    return (math.erfc(z * -SQRT1_2) * 0.5) * z


@numba.njit(**_INLINE)
def gelu_d1_64(dy, z):
    x = np.float64(z)                        # Phi(z) + z phi(z); erfc: no cancellation below 0
    d = 0.5 * math.erfc(x * -SQRT1_2)     # (NaN at +-inf: inf * 0, as torch and the numpy path)
    return dy * (d + x * (INV_SQRT_2PI * math.exp(-0.5 * x * x)))


# |z| below which gelu_d1_32 holds (the erf table's clip lies at 5.568); gelu_d1_64 past it
GELU_TABLE_MAX = 5.5


@numba.njit(**_INLINE)
def gelu_d1_32(dy, z):
    """Phi(z) + z phi(z) for float32 from the erf table, for |z| < GELU_TABLE_MAX: its row k (x0
    = k / N, x = z / sqrt 2 = x0 + e / N) holds erf(x0) and 2/sqrt(pi) exp(-x0²) / N, so phi(z)
    = exp(-x²) / sqrt(2 pi) = W[k] N / (2 sqrt 2) exp(-(2k + e) e / N²), the last factor a
    Taylor polynomial (its argument is below 0.031: error < 2e-12). Error < 1e-11, below
    float32's rounding; no C library call and no branch, so the loop vectorises."""
    x = np.float64(z)
    u = min(max(x * (SQRT1_2 * ERF_N), -ERF_KMAX), float(ERF_KMAX))
    k = (u + _MAGIC) - _MAGIC
    e = u - k
    i = int(k) + ERF_KMAX
    p = (k * k * _C2 - _C1) * e
    p = (p - k * (1.0 / ERF_N ** 2)) * e
    p = (p + 1.0) * e
    t = -(2.0 * k + e) * e * (1.0 / ERF_N ** 2)
    ex = 1.0 + t * (1.0 + t * (1.0 / 2 + t * (1.0 / 6 + t * (1.0 / 24 + t * (1.0 / 120)))))
    phi = _W[i] * (ERF_N / (2.0 * math.sqrt(2.0))) * ex
    return dy * (0.5 + 0.5 * (p * _W[i] + _T0[i]) + x * phi)


@numba.njit(**_INLINE)
def gelu_tanh_fwd(z):
    x = np.float64(z)                        # z sigmoid(2u), 2u = 2c (z + a z³): no cancellation
    return x * _sigmoid(x * (x * x * (2 * GELU_C * GELU_A) + 2 * GELU_C))


@numba.njit(**_INLINE)
def gelu_tanh_d1(dy, z):
    x = np.float64(z)                        # s + 2 z u' s q, (s, q) = sigmoid(+-2u)
    u2 = x * (x * x * (2 * GELU_C * GELU_A) + 2 * GELU_C)
    s, q = _sigmoid(u2), _sigmoid(-u2)
    sq = s * q
    if sq != 0:                              # (0 * inf where the tails underflow)
        s += 2.0 * x * sq * (GELU_C * (1.0 + 3.0 * GELU_A * x * x))
    return dy * s


none = np.empty(0, np.float32)        # an absent operand (a norm's weight, its mean)

# The compiled rows of the activation table: name -> (float32 row, float64 row), a row being
# (fwd, d1, d1 past the limit, limit): d1 holds for |s| < limit, the other beyond it (and for NaN)
_ALL = math.inf
ACT_ROWS = {"relu": ((relu_fwd, relu_d1, relu_d1, _ALL), (relu_fwd, relu_d1, relu_d1, _ALL)),
            "silu": ((silu_fwd, silu_d1, silu_d1, _ALL), (silu_fwd, silu_d1, silu_d1, _ALL)),
            "gelu": ((gelu_fwd32, gelu_d1_32, gelu_d1_64, GELU_TABLE_MAX),
                     (gelu_fwd64, gelu_d1_64, gelu_d1_64, _ALL)),
            "gelu_tanh": ((gelu_tanh_fwd, gelu_tanh_d1, gelu_tanh_d1, _ALL),
                          (gelu_tanh_fwd, gelu_tanh_d1, gelu_tanh_d1, _ALL))}


@numba.njit(**_JIT_TAKES_FN)
def act_fwd(f, z, bias, y):
    """Rows of a 2-D z (any strides): z += bias (in z's precision, when bias has a column),
    y = f(z) rounded once."""
    rows, cols = z.shape
    for r in range(rows):
        for c in range(cols):
            v = z[r, c]
            if bias.shape[0]:
                v = v + bias[c]
                z[r, c] = v
            y[r, c] = f(v)


@numba.njit(**_JIT_TAKES_FN)
def act_d1(f, tail, limit, dy, s, dz):
    """dz = f(dy, s) rounded once, over flat arrays; then tail(dy, s) where |s| is not below
    `limit` (a second loop, so that the first, without a branch, vectorises)."""
    for i in range(dz.size):
        dz[i] = f(dy[i], s[i])
    if limit < math.inf:
        for i in range(dz.size):
            x = s[i]
            if not (-limit < x < limit):
                dz[i] = tail(dy[i], x)


# -- layer / RMS norm over rows ----------------------------------------------------------------------
@numba.njit(**_SUMS)
def layer_norm(x, w, b, eps, rms, y, mean, rstd):
    """Rows of a 2-D x: mean and variance added in float64, y = (x - mean) rstd w + b rounded
    once; mean and rstd stored in their arrays' precision (what the backward reads)."""
    rows, n = x.shape
    for r in range(rows):
        m = 0.0
        if not rms:
            for c in range(n):
                m += x[r, c]
            m /= n
        var = 0.0
        for c in range(n):
            d = x[r, c] - m
            var += d * d
        rs = 1.0 / math.sqrt(var / n + eps)
        if not rms:
            mean[r] = m
        rstd[r] = rs
        for c in range(n):
            v = (x[r, c] - m) * rs
            if w.shape[0]:
                v *= w[c]
            if b.shape[0]:
                v += b[c]
            y[r, c] = v


@numba.njit(**_SUMS)
def layer_norm_backward(dy, x, w, mean, rstd, rms, dx, dw, db):
    """Rows: xhat = (x - mean) rstd, g = dy w; dx = (g - mean(g) - xhat mean(g xhat)) rstd (no
    mean(g) for RMS norm), row sums in float64; dw, db (float64, empty where not wanted): these
    rows' column sums of dy xhat and dy, row after row (the weight and bias gradients' share)."""
    rows, n = x.shape
    want_w, want_b = dw.shape[0] > 0, db.shape[0] > 0
    for c in range(dw.shape[0]):
        dw[c] = 0.0
    for c in range(db.shape[0]):
        db[c] = 0.0
    for r in range(rows):
        m = 0.0 if rms else np.float64(mean[r])
        rs = np.float64(rstd[r])
        sg = 0.0
        sgx = 0.0
        for c in range(n):
            xh = (x[r, c] - m) * rs
            g = np.float64(dy[r, c])
            if want_w:
                dw[c] += g * xh
            if want_b:
                db[c] += g
            if w.shape[0]:
                g *= w[c]
            sg += g
            sgx += g * xh
        mg = 0.0 if rms else sg / n
        proj = sgx / n
        for c in range(n):
            xh = (x[r, c] - m) * rs
            g = np.float64(dy[r, c])
            if w.shape[0]:
                g *= w[c]
            dx[r, c] = (g - mg - xh * proj) * rs


# -- Adam / AdamW --------------------------------------------------------------------------------------
@numba.njit(**_JIT)
def adam(p, g, m, v, po, mo, vo, mode, factor, w, one_minus_w, b2, one_minus_b2, eps, ss, bc,
         zero, lerp_up):
    """ArrayOptim.adam_update's arithmetic, operation for operation, every scalar already in
    p's precision: bit-identical. mode: 0 plain, 1 decoupled weight decay, 2 L2 (g + p factor);
    m / v with no element: the first step."""
    for i in range(p.size):
        gi = g[i]
        if mode == 2:
            gi = gi + p[i] * factor
        a = m[i] if m.size else zero
        if lerp_up:
            mi = a + (gi - a) * w
        else:
            mi = gi - (gi - a) * one_minus_w
        gv = (gi * one_minus_b2) * gi
        vi = v[i] * b2 + gv if v.size else gv
        denom = np.sqrt(vi) / bc + eps
        upd = (mi * ss) / denom
        po[i] = p[i] * factor - upd if mode == 1 else p[i] - upd
        mo[i] = mi
        vo[i] = vi


@numba.njit(**_JIT)
def scatter_rows_add(rows, src, t0, t1, out):
    """out[rows[i]] += src[i] for the targets t0 <= rows[i] < t1, row after row in index order:
    np.add.at's order (each target sums 0 + its 1st row + its 2nd + ...), for an embedding's
    gradient; a block of targets per thread, whole rows (contiguous: vectorized); rows in range
    (checked where the index entered)."""
    n, C = src.shape
    for i in range(n):
        t = rows[i]
        if t0 <= t < t1:
            for c in range(C):
                out[t, c] += src[i, c]
