"""The activation table: one row per activation, used by the unfused ops (nr.relu, ...), the fused
GEMM epilogue and its backward, on every backend.

Each row gives
  * `grad_from`: "y" when act'(z) is cheapest from the output (tanh' = 1 - y²), "z" when the
    pre-activation must be saved;
  * numpy/cupy formulas (`xp` is the array module): `fwd(xp, z)` may overwrite z; `d1(xp, dy, s)` is
    dz = dy * act'(.) from the saved tensor `s`; `d2(xp, z)` is act''(z) (for create_graph);
    `dz(xp, z)` is act'(z) from z (for the unfused first-derivative op);
  * `code`: the integer selecting the activation in shaders/act.wgsl and the CUDA kernels (ACT_*).
Conventions are PyTorch's: relu'(0) = 0; `gelu` is exact (erf), `gelu_tanh` the tanh form.
Every formula is overflow-safe for any finite input (sigmoid through tanh, never exp(-z)).
"""
from __future__ import annotations

import math

SQRT1_2 = 1.0 / math.sqrt(2.0)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
GELU_C = math.sqrt(2.0 / math.pi)
GELU_A = 0.044715


# -- erf -------------------------------------------------------------------------------------------
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


def _sigmoid(xp, z, out=None):
    # 0.5 + 0.5 tanh(z/2): no overflow for any z (exp(-z) overflows for z < -88 in float32)
    out = xp.multiply(z, 0.5, out=out)
    xp.tanh(out, out=out)
    out *= 0.5
    out += 0.5
    return out


def _phi_cdf(xp, z):
    c = erf(xp, z * z.dtype.type(SQRT1_2))
    c += 1
    c *= 0.5
    return c


def _phi_pdf(xp, z):
    p = xp.multiply(z, z)
    p *= -0.5
    xp.exp(p, out=p)
    p *= INV_SQRT_2PI
    return p


# -- forward (fwd may overwrite z when grad_from == "y") ---------------------------------------------
def _relu_fwd(xp, z):
    return xp.maximum(z, 0, out=z)


def _silu_fwd(xp, z):
    y = _sigmoid(xp, z)
    y *= z
    return y


def _gelu_fwd(xp, z):
    y = _phi_cdf(xp, z)
    y *= z
    return y


def _gelu_tanh_inner(xp, z):
    u = xp.multiply(z, z)
    u *= GELU_A
    u += 1
    u *= z
    u *= GELU_C
    return xp.tanh(u, out=u)           # t = tanh(c (z + a z³))


def _gelu_tanh_fwd(xp, z):
    y = _gelu_tanh_inner(xp, z)
    y += 1
    y *= z
    y *= 0.5
    return y


# -- act'(z) given z ---------------------------------------------------------------------------------
def _relu_dz(xp, z):
    return (z > 0).astype(z.dtype)


def _sigmoid_dz(xp, z):
    s = _sigmoid(xp, z)
    return s * (1 - s)


def _tanh_dz(xp, z):
    t = xp.tanh(z)
    return 1 - t * t


def _silu_dz(xp, z):
    s = _sigmoid(xp, z)
    d = 1 - s                          # s (1 + z (1 - s))
    d *= z
    d += 1
    d *= s
    return d


def _gelu_dz(xp, z):
    d = _phi_pdf(xp, z)                # Φ(z) + z φ(z)
    d *= z
    d += _phi_cdf(xp, z)
    return d


def _gelu_tanh_dz(xp, z):
    t = _gelu_tanh_inner(xp, z)        # 0.5 (1 + t) + 0.5 z (1 - t²) c (1 + 3 a z²)
    du = xp.multiply(z, z)
    du *= 3 * GELU_A
    du += 1
    du *= GELU_C
    du *= z
    du *= 1 - t * t
    du += 1 + t
    du *= 0.5
    return du


# -- dz = dy * act'(.), one pass, from the output y and (grad_from "z") the pre-activation z -----------
def _relu_d1(xp, dy, y, z):
    return xp.where(y > 0, dy, 0).astype(dy.dtype, copy=False)   # relu'(0) = 0


def _sigmoid_d1(xp, dy, y, z):
    d = 1 - y
    d *= y
    d *= dy
    return d


def _tanh_d1(xp, dy, y, z):
    d = xp.multiply(y, y)
    xp.subtract(1, d, out=d)
    d *= dy
    return d


def _gelu_d1(xp, dy, y, z):
    # Φ(z) + z φ(z) with Φ(z) = y / z recovered from the output (to ~1 ulp): no second erf
    with xp.errstate(divide="ignore", invalid="ignore") if hasattr(xp, "errstate") else _null():
        cdf = xp.divide(y, z)
    cdf = xp.where(xp.abs(z) > 1e-30, cdf, 0.5).astype(z.dtype, copy=False)
    d = _phi_pdf(xp, z)
    d *= z
    d += cdf
    d *= dy
    return d


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _from_z(dz_fn):
    def d1(xp, dy, y, z):
        d = dz_fn(xp, z)
        d *= dy
        return d
    return d1


# -- act''(z) --------------------------------------------------------------------------------------
def _sigmoid_d2(xp, z):
    s = _sigmoid(xp, z)
    return s * (1 - s) * (1 - 2 * s)


def _tanh_d2(xp, z):
    t = xp.tanh(z)
    return -2 * t * (1 - t * t)


def _silu_d2(xp, z):
    s = _sigmoid(xp, z)
    return s * (1 - s) * (2 + z * (1 - 2 * s))


def _gelu_d2(xp, z):
    return _phi_pdf(xp, z) * (2 - z * z)


def _gelu_tanh_d2(xp, z):
    t = _gelu_tanh_inner(xp, z)        # (1 - t²) [u' + 0.5 z (u'' - 2 t u'²)]
    du = GELU_C * (1 + 3 * GELU_A * z * z)
    ddu = 6 * GELU_C * GELU_A * z
    return (1 - t * t) * (du + 0.5 * z * (ddu - 2 * t * du * du))


def _zeros(xp, z):
    return xp.zeros_like(z)


def _ones(xp, z):
    return xp.ones_like(z)


class Act:
    __slots__ = ("name", "code", "grad_from", "fwd", "d1", "dz", "d2", "smooth")

    def __init__(self, name, code, grad_from, fwd, d1, dz, d2, smooth=True):
        self.name, self.code, self.grad_from = name, code, grad_from
        self.fwd, self.d1, self.dz, self.d2, self.smooth = fwd, d1, dz, d2, smooth

    def __repr__(self):
        return f"Act({self.name!r})"


ACT = {a.name: a for a in (
    #   name        code grad_from fwd (may overwrite z)        dz=dy*act'          act'(z)        act''(z)
    Act("none",      0, "y", lambda xp, z: z,                  lambda xp, dy, y, z: dy, _ones,        _zeros),
    Act("relu",      1, "y", _relu_fwd,                         _relu_d1,            _relu_dz,      _zeros, smooth=False),
    Act("sigmoid",   2, "y", lambda xp, z: _sigmoid(xp, z, z),  _sigmoid_d1,         _sigmoid_dz,   _sigmoid_d2),
    Act("tanh",      3, "y", lambda xp, z: xp.tanh(z, out=z),   _tanh_d1,            _tanh_dz,      _tanh_d2),
    Act("silu",      4, "z", _silu_fwd,                         _from_z(_silu_dz),   _silu_dz,      _silu_d2),
    Act("gelu",      5, "z", _gelu_fwd,                         _gelu_d1,            _gelu_dz,      _gelu_d2),
    Act("gelu_tanh", 6, "z", _gelu_tanh_fwd,                    _from_z(_gelu_tanh_dz), _gelu_tanh_dz, _gelu_tanh_d2),
)}


def get_act(name):
    from ..errors import NumrError
    act = ACT.get(name) if isinstance(name, str) else None
    if act is None:
        raise UnknownActivationError(f"unknown activation {name!r}; expected one of {list(ACT)}")
    return act


from ..errors import NumrError  # noqa: E402


class UnknownActivationError(NumrError, ValueError):
    """An activation name not in the ACT table."""
