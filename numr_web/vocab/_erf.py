"""erf for numpy, which has none. float64: the C library's erf (math.erf, <= 1 ulp), vectorised.
float32/float16: scipy.special.erf when installed, else a float64 series rounded once to float32
(<= 1 ulp; tests/test_activations.py checks the bound). cupy ships its own erf.
"""
from __future__ import annotations

import math

# numpy has no erf. float64: the C library's erf (math.erf, <= 1 ulp), vectorised.
# float32/float16: scipy.special.erf when installed (fast), else the float64 series below rounded
# once to float32 (within 1 ulp of math.erf: tests/test_activations.py):
#   |x| < 0.5:      alternating Taylor series;
#   0.5 <= |x| <= 3: 2/sqrt(pi) exp(-x²) sum 2^n x^(2n+1)/(2n+1)!!, a series of positive terms;
#   |x| > 3:        erfc by its Laplace continued fraction (60 terms).
# tests/test_activations.py checks both bounds.
def erf(xp, x):
    if xp.__name__ != "numpy":
        import cupyx.scipy.special as cs  # cupy ships erf
        return cs.erf(x)
    if x.dtype == xp.float64:
        return _erf_f64(xp, x)
    try:  # scipy is optional; never required
        from scipy.special import erf as fn
    except ImportError:
        fn = None
    return _blocked(xp, x, fn)


# Large float32 arrays go through erf in cache-sized blocks: the series makes many passes over
# its data, several times faster in L2 than through memory. (The cpu backend spreads an op's
# blocks over the cores itself: numr_web/backends/cpu_threads.py; this module runs no threads.)
BLOCK = 1 << 15


def _blocked(xp, x, fn):
    def one(v):
        return fn(v).astype(v.dtype, copy=False) if fn is not None else _erf_series(xp, v)
    if x.size <= BLOCK:
        return one(x)
    flat = xp.ascontiguousarray(x).reshape(-1)
    out = xp.empty_like(flat)
    for i in range(0, flat.size, BLOCK):
        out[i:i + BLOCK] = one(flat[i:i + BLOCK])
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
    call on the whole arrays."""
    work = xp.float64 if work is None else work
    shape = xp.broadcast(*arrays).shape if len(arrays) > 1 else arrays[0].shape
    out = xp.empty(shape, dtype) if out is None else out
    n = out.size
    if xp.__name__ != "numpy" or n <= CHUNK or not out.flags.c_contiguous or \
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


def _erf_series(xp, x):
    dt = x.dtype
    x64 = xp.asarray(x, dtype=xp.float64)
    ax = xp.abs(x64)
    out = xp.empty_like(x64)
    tiny = ax < 0.5                   # alternating Taylor series: terms shrink fast, no cancellation
    xs = ax[tiny]
    x2 = xs * xs
    term, total, n = xs.copy(), xs.copy(), 0
    while term.size and (xp.abs(term) > total * 1e-18).any():
        n += 1
        term *= -x2 * (2 * n - 1) / (n * (2 * n + 1))
        total += term
    out[tiny] = (2.0 / math.sqrt(math.pi)) * total
    mid = (ax >= 0.5) & (ax <= 3.0)    # positive-term series times exp(-x²)
    xs = ax[mid]
    x2 = xs * xs
    term, total, n = xs.copy(), xs.copy(), 0
    while term.size and (term > total * 1e-18).any():
        n += 1
        term *= 2.0 * x2 / (2 * n + 1)
        total += term
    out[mid] = (2.0 / math.sqrt(math.pi)) * _exp_neg_sq(xp, xs) * total
    big = ax > 3.0                     # Laplace continued fraction for erfc
    xl = ax[big]
    f = xl.copy()
    for k in range(60, 0, -1):
        f = xl + (k / 2.0) / f
    out[big] = 1.0 - _exp_neg_sq(xp, xl) / (math.sqrt(math.pi) * f)
    out = xp.copysign(out, x64)
    return out.astype(dt, copy=False)


def _exp_neg_sq(xp, x):
    # exp(-x²) without the rounding error of x*x: hi has 24 significant bits, so hi*hi is exact
    hi = x.astype(xp.float32).astype(xp.float64)
    return xp.exp(-hi * hi) * xp.exp(-(x - hi) * (x + hi))


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
