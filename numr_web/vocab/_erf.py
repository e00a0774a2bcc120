"""erf for numpy, which has none. float64: the C library's erf (math.erf, <= 1 ulp), vectorised.
float32 (float16 through float32): a table-driven evaluation in float64 rounded once to float32
(<= 1 ulp; tests/test_activations.py checks the bound), several times faster than
scipy.special.erf's float32 loop. cupy ships its own erf.
"""
from __future__ import annotations

import functools
import math


def erf(xp, x):
    if xp.__name__ != "numpy":
        import cupyx.scipy.special as cs  # cupy ships erf
        return cs.erf(x)
    if x.dtype == xp.float64:
        return _erf_f64(xp, x)
    if x.dtype == xp.float32:
        return _erf_f32(xp, x)
    return _erf_f32(xp, x.astype(xp.float32)).astype(x.dtype)


# float32 erf: x is clipped to +-ERF_KMAX / ERF_N (erf rounds to +-1.0f beyond), its nearest grid
# point x0 = k / ERF_N (k = rint(x ERF_N)) and d = x - x0 (exact, |d| <= 1 / (2 ERF_N)) give
#   erf(x) = erf(x0) + 2/sqrt(pi) exp(-x0²) S,  S = integral_0^d exp(-2 x0 t - t²) dt
#          = d (1 + d (-x0 + d (2 x0² - 1) / 3)) + O(d⁴ x0³ exp(-x0²)),
# erf(x0) and 2/sqrt(pi) exp(-x0²) / ERF_N from two tables (math.erf, math.exp), the cubic in
# float64: the truncation stays below 1e-10 of erf(x), so the result rounded to float32 is within
# 1 ulp. Signed tables (erf(x0) of k = 0 stored as -0.0, so that erf(-0.0) keeps its sign) need no
# abs or copysign passes; rint and the table index come from one addition of 1.5 * 2^52 (the
# float64 whose low bits then hold rint(u), read through an int64 view).
ERF_N = 128
ERF_KMAX = 504                 # 3.9375: 1 - erf(x) < 1.3e-8 there, below half a float32 ulp of 1
# Elements per block: the work arrays (1 MiB) stay in L2; the ~20 numpy calls of a block hold the
# GIL a few microseconds each, a small share of its work only for blocks this large. An array of
# up to WHOLE elements (a block of the cpu backend's threads) goes in one block: on many threads
# each numpy call hands the GIL over (~10-20 us), so fewer, longer calls win there.
ERF_BLOCK = 1 << 15
WHOLE = 1 << 18
_MAGIC = 1.5 * 2.0 ** 52


@functools.lru_cache(maxsize=None)
def _erf_tables(xp):
    """(erf(x0), 2/sqrt(pi) exp(-x0²) / ERF_N, index offset) for x0 = k / ERF_N, |k| <= KMAX."""
    x0 = [k / ERF_N for k in range(-ERF_KMAX, ERF_KMAX + 1)]
    t0 = xp.array([math.erf(v) for v in x0])
    t0[ERF_KMAX] = -0.0                        # -0.0 + d keeps d's sign for either zero
    w = xp.array([2.0 / math.sqrt(math.pi) * math.exp(-v * v) / ERF_N for v in x0])
    base = int(xp.array([_MAGIC]).view(xp.int64)[0]) - ERF_KMAX
    return t0, w, base


def _erf_f32(xp, x):
    t0, w, base = _erf_tables(xp)
    c2, c1 = 2.0 / (3 * ERF_N ** 4), 1.0 / (3 * ERF_N ** 2)
    flat = xp.ascontiguousarray(x).reshape(-1)
    out = xp.empty(flat.shape, xp.float32)
    step = flat.size if flat.size <= WHOLE else ERF_BLOCK
    u, t, p = (xp.empty(min(step, flat.size)) for _ in range(3))
    idx = xp.empty(u.size, xp.int64)
    for i in range(0, flat.size, max(1, step)):
        m = min(step, flat.size - i)
        ub, tb, pb, ib = u[:m], t[:m], p[:m], idx[:m]
        xp.multiply(flat[i:i + m], float(ERF_N), out=ub)    # u = x N, exact
        xp.clip(ub, -ERF_KMAX, ERF_KMAX, out=ub)      # (NaN stays NaN: its index is clipped)
        xp.add(ub, _MAGIC, out=tb)                    # rint(u) + 1.5 * 2^52
        xp.subtract(tb.view(xp.int64), base, out=ib)  # its table index
        tb -= _MAGIC                                  # k = rint(u)
        ub -= tb                                      # e = u - k = d N, in [-1/2, 1/2]
        xp.multiply(tb, tb, out=pb)                   # S N = e (1 + e (-k/N² + e (2k²/N⁴ - 1/N²)/3))
        pb *= c2
        pb -= c1
        pb *= ub
        tb *= 1.0 / ERF_N ** 2
        pb -= tb
        pb *= ub
        pb += 1.0
        pb *= ub
        xp.take(w, ib, out=tb, mode="clip")
        pb *= tb
        xp.take(t0, ib, out=tb, mode="clip")
        pb += tb
        out[i:i + m] = pb
    return out.reshape(x.shape)


# in_blocks' block: its float64 work arrays and operand slices (~1.5 MiB) stay in a core's L2;
# smaller blocks cost more Python calls.
CHUNK = 1 << 16


def in_blocks(xp, fn, dtype, *arrays, out=None, scratch=2, work=None):
    """fn(xp, o, bufs, *arrays): an elementwise fn that writes its result into o (of dtype `dtype`;
    `out` when given, which may be one of the arrays: fn reads each block before writing it) using
    `scratch` work arrays in bufs (of dtype `work`, float64 unless given) and no others. Large dense
    numpy arrays of one shape go block by block (CHUNK elements, so that the work arrays stay in
    cache, allocated once per call); elsewhere (cupy, small, broadcast or strided operands) one
    call on the whole arrays, as for arrays of up to WHOLE elements (a block of the cpu backend's
    threads, where fewer numpy calls mean fewer GIL handovers)."""
    work = xp.float64 if work is None else work
    shape = xp.broadcast(*arrays).shape if len(arrays) > 1 else arrays[0].shape
    out = xp.empty(shape, dtype) if out is None else out
    n = out.size
    if xp.__name__ != "numpy" or n <= WHOLE or not out.flags.c_contiguous or \
            any(a.shape != shape or not a.flags.c_contiguous for a in arrays):
        fn(xp, out, [xp.empty(shape, work) for _ in range(scratch)], *arrays)
        return out
    flat = [a.reshape(-1) for a in arrays]
    o = out.reshape(-1)
    bufs = [xp.empty(CHUNK, work) for _ in range(scratch)]
    for i in range(0, n, CHUNK):
        k = min(CHUNK, n - i)
        fn(xp, o[i:i + k], [b[:k] for b in bufs], *[a[i:i + k] for a in flat])
    return out


_erf_ufunc = None


def _erf_f64(xp, x):
    global _erf_ufunc
    if _erf_ufunc is None:
        _erf_ufunc = xp.frompyfunc(math.erf, 1, 1)
    return _erf_ufunc(x).astype(xp.float64)


def erfc(xp, x):
    """erfc of a float64 array: scipy.special.erfc when installed, else the C library's erfc
    (math.erfc, vectorised); cupy ships its own."""
    if xp.__name__ != "numpy":
        import cupyx.scipy.special as cs
        return cs.erfc(x)
    try:
        from scipy.special import erfc as fn
    except ImportError:
        fn = xp.frompyfunc(math.erfc, 1, 1)
    return xp.asarray(fn(x), dtype=x.dtype)
