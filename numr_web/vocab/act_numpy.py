"""The numpy/cupy side of the activation table (numr_web/vocab/activations.py): the constants the
rows share, the `Code` record (one activation's five functions in one language) and the array
functions the rows' numpy code calls. Functions take the array module `xp` first.
"""
from __future__ import annotations

import contextlib
import math

from ._erf import erf, erfc, in_blocks


def _errstate(xp, **kw):
    """numpy's errstate; CuPy has none (it warns of nothing)."""
    f = getattr(xp, "errstate", None)
    return f(**kw) if f is not None else contextlib.nullcontext()


SQRT1_2 = 1.0 / math.sqrt(2.0)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
GELU_C = math.sqrt(2.0 / math.pi)
GELU_A = 0.044715
SOFTPLUS_THRESHOLD = 20.0
LEAKY_SLOPE = 0.01
SELU_SCALE = 1.0507009873554804934193349852946    # torch's selu constants
SELU_ALPHA = 1.6732632423543772848170429916717


class Code:
    """One activation's five functions in one language (None: not defined for this row).
    keeps_z: fwd leaves its argument intact (a caller that keeps z then needs no copy of it)."""
    __slots__ = ("fwd", "dz", "d2", "d1", "ds", "keeps_z")

    def __init__(self, fwd, dz, d2, d1=None, ds=None, keeps_z=False):
        self.fwd, self.dz, self.d2, self.d1, self.ds = fwd, dz, d2, d1, ds
        self.keeps_z = keeps_z



# -- numpy helpers ----------------------------------------------------------------------------------
def _exp_neg_abs(xp, z):
    e = xp.abs(z)
    xp.negative(e, out=e)
    return xp.exp(e, out=e)                    # exp(-|z|) <= 1: never overflows


def _sigmoid(xp, z):
    # 1 / (1 + e) for z >= 0, e / (1 + e) below, e = exp(-|z|): accurate down to the subnormals
    e = _exp_neg_abs(xp, z)
    d = e + 1
    num = xp.where(z >= 0, xp.ones_like(e), e)
    return xp.divide(num, d, out=num)


def _sigmoid_pair(xp, z):
    s = _sigmoid(xp, z)
    return s, _sigmoid(xp, -z)                 # (s, 1 - s) without cancellation


def _softplus(xp, z):
    small = xp.minimum(z, SOFTPLUS_THRESHOLD)
    return xp.where(z > SOFTPLUS_THRESHOLD, z, xp.log1p(xp.exp(small)))


def _phi_cdf(xp, z):
    if z.dtype.itemsize >= 8:                  # erfc(-z/sqrt2)/2: 1 + erf(z/sqrt2) would cancel in
        c = erfc(xp, z * -SQRT1_2)             # the lower tail (every digit below z = -8)
        c *= 0.5
        return c
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


def _gelu_fwd(xp, z):
    y = _phi_cdf(xp, z)
    y *= z
    return y


def _gelu_dz(xp, z):
    d = _phi_pdf(xp, z)                        # Phi(z) + z phi(z)
    d *= z
    d += _phi_cdf(xp, z)
    return d


def _gelu_d1_from_y(xp, d, bufs, dy, z, y):
    # Phi(z) = y / z from the output: no second erf (0.5 where z is 0 or too small to divide by)
    cdf, p = bufs
    with _errstate(xp, divide="ignore", invalid="ignore"):
        xp.divide(y, z, out=cdf)
    xp.abs(z, out=p)
    if p.size and not p.min() > 1e-30:         # only where the block has such z (or a NaN)
        xp.copyto(cdf, 0.5, where=p <= 1e-30)
    xp.multiply(z, z, out=p)                   # Phi(z) + z phi(z)
    p *= -0.5
    xp.exp(p, out=p)
    p *= INV_SQRT_2PI
    p *= z
    p += cdf
    xp.multiply(p, dy, out=d)


def _gelu_d1(xp, dy, z, y=None):
    if y is None:
        return _GELU_D1(xp, dy, z)
    return in_blocks(xp, _gelu_d1_from_y, dy.dtype, dy, z, y, work=dy.dtype)


def _gelu_tanh_u2(xp, z):
    u = xp.multiply(z, z)
    u *= GELU_A
    u += 1
    u *= z
    u *= 2 * GELU_C
    return u                                   # 2u = 2 c (z + a z³)


def _gelu_tanh_du(xp, z):
    return GELU_C * (1 + 3 * GELU_A * z * z)


# gelu_tanh on numpy: z sigmoid(2u), no cancellation in the lower tail. float32 (and float16,
# computed in float32): z / (1 + exp(-2u)) evaluated in float64 and rounded once (the float32
# rounding of u alone costs up to ~4 ulp), in cache-sized blocks (float64 temporaries of the whole
# array would make it memory-bound: 5x slower), each pass a plain float64 ufunc into a work array
# (a ufunc that mixes float32 and float64 runs numpy's casting buffers: 2-3x slower). exp's
# argument is clipped to +-GELU_TANH_EXP (numpy's exp takes a slow path where it overflows; past
# it y is z or rounds to -0.0, even for z = -3e38); the derivative's z to +-GELU_TANH_CLIP (past
# it the derivative is 1 or below float32's smallest subnormal). float64: the sigmoid pair of
# 2u, unclipped (its range is wider).
GELU_TANH_CLIP = 12.0
GELU_TANH_EXP = 700.0


def _gelu_tanh_sig_fwd(xp, z):
    y = _sigmoid(xp, _gelu_tanh_u2(xp, z))
    y *= z
    return y


def _gelu_tanh_sig_dz(xp, z):
    s, q = _sigmoid_pair(xp, _gelu_tanh_u2(xp, z))      # sigmoid(2u) + 2 z u' s q
    sq = s * q
    return s + xp.where(sq == 0, 0, 2 * z * sq * _gelu_tanh_du(xp, z)).astype(z.dtype, copy=False)


def _neg_2u(xp, e, a):
    """e = -2u = -2c (a + A a³), from float64 a."""
    xp.multiply(a, a, out=e)
    e *= -2 * GELU_C * GELU_A
    e -= 2 * GELU_C
    e *= a


def _gelu_tanh_fwd64(xp, y, bufs, z):
    a, e = bufs
    xp.copyto(a, z)
    _neg_2u(xp, e, a)
    xp.clip(e, -GELU_TANH_EXP, GELU_TANH_EXP, out=e)
    xp.exp(e, out=e)
    e += 1
    xp.divide(a, e, out=e)                     # z / (1 + exp(-2u))
    if e.size and not e.min() > -math.inf:     # z = -inf gives -inf (NaN: also the slow way);
        xp.copyto(e, math.nan, where=e == -math.inf)   # torch: -inf * 0 = NaN
    xp.copyto(y, e)


def _gelu_tanh_d1_64(xp, d, bufs, z, dy=None):
    # s + P s q = (D + P E) / D² (s, q = sigmoid(+-2u), E = exp(-2u), D = 1 + E, P = 2 z u'),
    # P = 2c (z + 3 A z³) = -3 (-2u) - 4c z; times dy before the rounding
    a, e = bufs
    xp.clip(z, -GELU_TANH_CLIP, GELU_TANH_CLIP, out=a)
    _neg_2u(xp, e, a)
    a *= 4 * GELU_C / 3
    a += e                                     # -P / 3 (cancels at most a factor 3: < 2 bits)
    xp.exp(e, out=e)
    a *= e
    e += 1
    a *= -3
    a += e                                     # D + P E
    e *= e
    a /= e
    if dy is not None:
        a *= dy
    xp.copyto(d, a)


def _gelu_tanh_fwd(xp, z):
    if z.dtype.itemsize >= 8:
        return _gelu_tanh_sig_fwd(xp, z)
    return in_blocks(xp, _gelu_tanh_fwd64, z.dtype, z)       # a new array: keeps_z


def _gelu_tanh_dz(xp, z):
    if z.dtype.itemsize >= 8:
        return _gelu_tanh_sig_dz(xp, z)
    return in_blocks(xp, _gelu_tanh_d1_64, z.dtype, z)


def _gelu_tanh_d1(xp, dy, z, y=None):
    if z.dtype.itemsize >= 8:
        return _times_dy(_gelu_tanh_sig_dz)(xp, dy, z)
    return in_blocks(xp, _gelu_tanh_d1_64, dy.dtype, z, dy)


def _gelu_tanh_d2(xp, z):
    s, q = _sigmoid_pair(xp, _gelu_tanh_u2(xp, z))   # (1 - t²) [u' + 0.5 z (u'' - 2 t u'²)]
    du = _gelu_tanh_du(xp, z)
    ddu = 6 * GELU_C * GELU_A * z
    sq4 = 4 * s * q
    return xp.where(sq4 == 0, 0, sq4 * (du + 0.5 * z * (ddu - 2 * (s - q) * du * du))).astype(
        z.dtype, copy=False)


def _rounded_once(dz):
    """(dz, d1) for a derivative whose terms cancel near its roots (mish' = tanh(sp) + z sech²(sp)
    s is 0.06 at z = -1 from terms of 0.3): in float32 each term's rounding (and numpy's
    transcendental paths differ by CPU: SSE, AVX2, AVX-512) comes back multiplied by the
    cancellation; evaluated in float64 and rounded once, a float32 result is within an ulp. In
    cache-sized blocks over the cores (numr_web.vocab._erf.in_blocks)."""
    def block(xp, o, bufs, z, dy=None):
        # (in_blocks' worker threads do not inherit the caller's np.errstate: inf * 0 in the
        # tails would warn there)
        with _errstate(xp, all="ignore"):
            d = dz(xp, z.astype(xp.float64))
            if dy is not None:
                d *= dy
        xp.copyto(o, d)

    def dz_wide(xp, z):
        return dz(xp, z) if z.dtype.itemsize >= 8 else in_blocks(xp, block, z.dtype, z, scratch=0)

    def d1_wide(xp, dy, z, y=None):
        if z.dtype.itemsize >= 8:
            d = dz(xp, z)
            d *= dy
            return d
        return in_blocks(xp, block, dy.dtype, z, dy, scratch=0)
    return dz_wide, d1_wide


def _silu_dz(xp, z):
    s, q = _sigmoid_pair(xp, z)                # s (1 + z (1 - s))
    q *= z
    q += 1
    q *= s
    return q


def _silu_d2(xp, z):
    s, q = _sigmoid_pair(xp, z)                # s (1 - s) (2 + z (1 - 2 s))
    return s * q * (2 + z * (q - s))


def _mish_parts(xp, z):
    sp = _softplus(xp, z)
    t = xp.tanh(sp)
    a, b = _sigmoid_pair(xp, 2 * sp)           # sech²(sp) = 4 sigmoid(2sp) sigmoid(-2sp): no
    s, q = _sigmoid_pair(xp, z)                # cancellation where tanh(sp) rounds to 1
    return t, 4 * a * b, s, q


def _mish_dz(xp, z):
    t, sech2, s, _ = _mish_parts(xp, z)        # tanh(sp) + z sech²(sp) sigmoid(z)
    return t + z * sech2 * s


def _mish_d2(xp, z):
    t, sech2, s, q = _mish_parts(xp, z)        # sech²(sp) [2 s + z s ((1 - s) - 2 t s)]
    return sech2 * (2 * s + z * s * (q - 2 * t * s))


def _sigmoid_d2(xp, z):
    s, q = _sigmoid_pair(xp, z)                # s q (q - s), q - s = -tanh(z/2) (no cancellation)
    t = xp.tanh(z * 0.5)
    t *= s
    t *= q
    return xp.negative(t, out=t)


def _sech2(xp, z):
    s, q = _sigmoid_pair(xp, 2 * z)            # 4 sigmoid(2z) sigmoid(-2z): 1 - tanh² cancels
    s *= q
    s *= 4
    return s


# the float32 derivatives that cancel near a root, evaluated in float64 (_rounded_once)
_SILU_DZ, _SILU_D1 = _rounded_once(_silu_dz)
_SILU_D2 = _rounded_once(_silu_d2)[0]
_GELU_DZ, _GELU_D1 = _rounded_once(_gelu_dz)
_GELU_D2 = _rounded_once(lambda xp, z: _phi_pdf(xp, z) * (2 - z * z))[0]
_GELU_TANH_D2 = _rounded_once(_gelu_tanh_d2)[0]
_MISH_DZ, _MISH_D1 = _rounded_once(_mish_dz)
_MISH_D2 = _rounded_once(_mish_d2)[0]


def _relu_fwd(xp, z):
    xp.copyto(z, 0, where=z < 0)               # -0.0 and NaN pass through, as in torch
    return z


def _times_dy(dz_fn):
    """d1 for "z" rows: dy * act'(z)."""
    def d1(xp, dy, z, y=None):
        d = dz_fn(xp, z)
        d *= dy
        return d
    return d1


def _zeros(xp, z):
    return xp.zeros_like(z)


def _ones(xp, z):
    return xp.ones_like(z)


def _np(fwd, dz, d2, d1=None, ds=None, keeps_z=False):
    return Code(fwd, dz, d2, d1 or _times_dy(dz), ds, keeps_z)



def _elu_np(scale, alpha):
    """scale * (z if z > 0 else alpha * expm1(z)) and its derivatives, as torch (act'' is 0 at z = 0,
    act'(NaN) = scale); elu is (1, 1), celu at its default alpha (1, 1), selu (SELU_SCALE, SELU_ALPHA).
    (where, not minimum(z, 0): that may return the 0 for z = -0.0, and elu(-0.0) is -0.0)"""
    la = scale * alpha

    def fwd(xp, z):
        neg = xp.expm1(xp.where(z > 0, 0, z))
        if la != 1:
            neg *= la
        return xp.where(z > 0, z if scale == 1 else z * scale, neg).astype(z.dtype, copy=False)
    return _np(fwd,
               lambda xp, z: xp.where(z <= 0, la * xp.exp(xp.minimum(z, 0)), scale).astype(z.dtype),
               lambda xp, z: xp.where(z < 0, la * xp.exp(xp.minimum(z, 0)), 0.0).astype(z.dtype))


def _softsign_dz(xp, z):
    a = xp.abs(z)
    a += 1
    a *= a
    return xp.reciprocal(a, out=a)             # 1 / (1 + |z|)^2 (0 once the square overflows)


def _softsign_d2(xp, z):
    a = xp.abs(z)
    a += 1
    return -2 * xp.sign(z) / (a * a * a)


def _tanhshrink_dz(xp, z):
    t = xp.tanh(z)                             # tanh(z)^2: no 1 - sech^2 cancellation
    t *= t
    return t


def _tanhshrink(xp, z):
    if z.dtype.itemsize >= 8:
        return z - xp.tanh(z)
    w = z.astype(xp.float64)                   # z - tanh(z) cancels near 0: float64, rounded once
    w -= xp.tanh(w)
    return w.astype(z.dtype)
