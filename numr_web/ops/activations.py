"""THE activation table: one row per activation holds everything about it, for every backend.

A row gives
  * `saves`: the tensor the fused backward reads besides dy: "y" (the output) when act'(z) is
    cheapest from it (tanh' = 1 - y²), "z" (the pre-activation) otherwise;
  * five functions, each in three languages (numpy/cupy code, WGSL, CUDA C++):
        fwd(z)     the activation
        dz(z)      act'(z)
        d2(z)      act''(z)                                     (second-order gradients)
        d1(dy, s)  dy * act'(.) computed from the saved tensor s (the fused backward)
        ds(s)      d/ds of the factor act'(.) written in s      ("y" rows only; for "z" rows it is d2)
The WGSL and CUDA dispatch (`switch` on the activation) is generated from these rows
(numr_web/backends/webgpu/codegen.py, numr_web/backends/cuda/codegen.py); a code string is an
expression, or a function body when it contains `return`. WGSL sees f32 `z`/`dy`/`s` and the helpers
of shaders/act.wgsl; CUDA sees the compute type `C` and the helpers of backends/cuda/kernels.cu.
numpy functions take the array module `xp` first; `fwd` may overwrite its argument (unless the
row's numpy Code says keeps_z) and `d1` gets the output `y` as an optional hint (exact GELU
recovers Phi(z) = y / z from it instead of a second erf).

Conventions are PyTorch's: relu'(0) = 0, elu''(0) = 0, hardswish'(+-3) = 0 and 1; `gelu` is exact (erf), `gelu_tanh` the tanh form;
leaky_relu's slope is 0.01, elu's alpha 1, softplus has beta 1 and threshold 20.
Every formula is overflow-safe for any finite input.
"""
from __future__ import annotations

import math

from ..errors import UnknownActivationError
from ._erf import erf, erfc, in_blocks

SQRT1_2 = 1.0 / math.sqrt(2.0)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
GELU_C = math.sqrt(2.0 / math.pi)
GELU_A = 0.044715
SOFTPLUS_THRESHOLD = 20.0
LEAKY_SLOPE = 0.01


class Code:
    """One activation's five functions in one language (None: not defined for this row).
    keeps_z: fwd leaves its argument intact (a caller that keeps z then needs no copy of it)."""
    __slots__ = ("fwd", "dz", "d2", "d1", "ds", "keeps_z")

    def __init__(self, fwd, dz, d2, d1=None, ds=None, keeps_z=False):
        self.fwd, self.dz, self.d2, self.d1, self.ds = fwd, dz, d2, d1, ds
        self.keeps_z = keeps_z


class Act:
    __slots__ = ("name", "saves", "np", "wgsl", "cuda", "smooth")

    def __init__(self, name, saves, np, wgsl, cuda, smooth=True):
        if saves not in ("y", "z"):
            raise ValueError(f"activation {name}: saves must be 'y' or 'z'")
        if saves == "y" and None in (np.d1, np.ds, wgsl.d1, wgsl.ds, cuda.d1, cuda.ds):
            raise ValueError(f"activation {name} saves y: it needs d1 and ds in every language")
        self.name, self.saves, self.np, self.wgsl, self.cuda = name, saves, np, wgsl, cuda
        self.smooth = smooth       # False: a kink (finite differences must avoid it)

    @property
    def code(self):
        """Index of the row: the activation's number in generated WGSL and CUDA."""
        return list(ACT).index(self.name)

    def __repr__(self):
        return f"Act({self.name!r})"


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
    with xp.errstate(divide="ignore", invalid="ignore"):
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
    cache-sized blocks over the cores (numr_web.ops._erf.in_blocks)."""
    def block(xp, o, bufs, z, dy=None):
        # (in_blocks' worker threads do not inherit the caller's np.errstate: inf * 0 in the
        # tails would warn there)
        with xp.errstate(all="ignore"):
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


# -- THE TABLE ----------------------------------------------------------------------------------------
ACT = {a.name: a for a in (
    Act("none", "y",
        np=_np(lambda xp, z: z, _ones, _zeros,
               d1=lambda xp, dy, s, y=None: dy, ds=_zeros),
        wgsl=Code("z", "1.0", "0.0", d1="dy", ds="0.0"),
        cuda=Code("z", "C(1)", "C(0)", d1="dy", ds="C(0)")),
    Act("relu", "y", smooth=False,
        np=_np(_relu_fwd,
               lambda xp, z: (~(z <= 0)).astype(z.dtype), _zeros,
               d1=lambda xp, dy, s, y=None: xp.where(s <= 0, 0, dy).astype(dy.dtype, copy=False),
               ds=_zeros),
        # (the NaN test keeps NVIDIA's Vulkan compiler from turning the select into max(z, 0),
        # which gives 0 for NaN). The gradient passes where y is NaN (torch: y <= 0 ? 0 : dy).
        wgsl=Code("select(z, 0.0, z < 0.0 && !isnan_f(z))",
                  "select(0.0, 1.0, z > 0.0 || isnan_f(z))", "0.0",
                  d1="select(0.0, dy, s > 0.0 || isnan_f(s))", ds="0.0"),
        cuda=Code("z < C(0) ? C(0) : z", "(z > C(0) || z != z) ? C(1) : C(0)", "C(0)",
                  d1="(s > C(0) || s != s) ? dy : C(0)", ds="C(0)")),
    Act("sigmoid", "y",
        np=_np(_sigmoid, lambda xp, z: xp.multiply(*_sigmoid_pair(xp, z)), _sigmoid_d2,
               d1=lambda xp, dy, s, y=None: dy * (1 - s) * s, ds=lambda xp, s: 1 - 2 * s),
        wgsl=Code("sigmoid_s(z)", "sigmoid_d_s(z)",
                  "let sp = sig_pair(z); return sigmoid_d_s(z) * (sp.y - sp.x);",
                  d1="dy * (s * (1.0 - s))", ds="1.0 - 2.0 * s"),
        cuda=Code("sigm(z)", "sigm(z) * sigm(-z)",
                  "C s = sigm(z), q = sigm(-z); return s * q * (q - s);",
                  d1="dy * s * (C(1) - s)", ds="C(1) - C(2) * s")),
    Act("tanh", "y",
        np=_np(lambda xp, z: xp.tanh(z, out=z), _sech2,
               lambda xp, z: -2 * xp.tanh(z) * _sech2(xp, z),
               d1=lambda xp, dy, s, y=None: dy * (1 - s * s), ds=lambda xp, s: -2 * s),
        wgsl=Code("tanh_s(z)", "sech2_s(z)", "-2.0 * tanh_s(z) * sech2_s(z)",
                  d1="dy * (1.0 - s * s)", ds="-2.0 * s"),
        cuda=Code("m_tanh(z)", "sech2(z)", "C(-2) * m_tanh(z) * sech2(z)",
                  d1="dy * (C(1) - s * s)", ds="C(-2) * s")),
    Act("silu", "z",
        np=_np(lambda xp, z: z * _sigmoid(xp, z), _SILU_DZ, _SILU_D2, d1=_SILU_D1),
        wgsl=Code("silu_s(z)",
                  "let sp = sig_pair(z); return sp.x * (1.0 + z * sp.y);",
                  "let sp = sig_pair(z); return sigmoid_d_s(z) * (2.0 + z * (sp.y - sp.x));"),
        cuda=Code("z < C(K_TAIL) ? mul_exp(z, z) : z * sigm(z)", "sigm(z) * (C(1) + z * sigm(-z))",
                  "C s = sigm(z), q = sigm(-z); return s * q * (C(2) + z * (q - s));")),
    Act("gelu", "z",
        np=_np(_gelu_fwd, _GELU_DZ, _GELU_D2, d1=_gelu_d1),
        wgsl=Code("gelu_s(z)", "gelu_dz(z)", "phi_pdf(z) * (2.0 - z * z)"),
        cuda=Code("z * cdf(z)", "C p = pdf(z); return cdf(z) + (p == C(0) ? C(0) : z * p);",
                  "C p = pdf(z); return p == C(0) ? C(0) : p * (C(2) - z * z);")),
    Act("gelu_tanh", "z",
        np=_np(_gelu_tanh_fwd, _gelu_tanh_dz, _GELU_TANH_D2, d1=_gelu_tanh_d1, keeps_z=True),
        wgsl=Code("gelu_tanh_s(z)",
                  "let u = gelu_tanh_u(z);\n"
                  "    var second = 0.5 * z * sech2_s(u) * gelu_tanh_du(z);\n"
                  "    if (abs(u) > 40.0) { second = 0.0; }   // sech² underflowed: no 0 * inf\n"
                  "    return sigmoid_s(2.0 * u) + second;",
                  "let u = gelu_tanh_u(z);\n"
                  "    if (abs(u) > 40.0) { return 0.0; }\n"
                  "    let du = gelu_tanh_du(z);\n"
                  "    let ddu = 6.0 * GELU_C * GELU_A * z;\n"
                  "    return sech2_s(u) * (du + 0.5 * z * (ddu - 2.0 * tanh_s(u) * du * du));"),
        cuda=Code("z * sigm(C(2) * gelu_tanh_u(z))",
                  "C u = gelu_tanh_u(z), h = sech2(u);\n"
                  "    return sigm(C(2) * u) + (h == C(0) ? C(0) : C(0.5) * z * h * gelu_tanh_du(z));",
                  "C u = gelu_tanh_u(z), h = sech2(u);\n"
                  "    if (h == C(0)) return C(0);\n"
                  "    C du = gelu_tanh_du(z), ddu = C(6.0 * K_GELU_C * K_GELU_A) * z;\n"
                  "    return h * (du + C(0.5) * z * (ddu - C(2) * m_tanh(u) * du * du));")),
    Act("leaky_relu", "y", smooth=False,
        np=_np(lambda xp, z: xp.where(z > 0, z, z * LEAKY_SLOPE).astype(z.dtype, copy=False),
               lambda xp, z: xp.where(z > 0, 1.0, LEAKY_SLOPE).astype(z.dtype), _zeros,
               d1=lambda xp, dy, s, y=None: xp.where(s > 0, dy, dy * LEAKY_SLOPE).astype(
                   dy.dtype, copy=False),
               ds=_zeros),
        wgsl=Code("select(0.01 * z, z, z > 0.0)", "select(0.01, 1.0, z > 0.0)", "0.0",
                  d1="select(0.01 * dy, dy, s > 0.0)", ds="0.0"),
        cuda=Code("z > C(0) ? z : C(0.01) * z", "z > C(0) ? C(1) : C(0.01)", "C(0)",
                  d1="s > C(0) ? dy : C(0.01) * dy", ds="C(0)")),
    Act("elu", "z", smooth=False,
        # saves z: elu'(z) = exp(z) from z, as torch; from y it would be y + 1, which cancels
        # (0 in float32 below z = -17). act'' is 0 at z = 0 (torch masks it with z < 0).
        # (where, not minimum(z, 0): that may return the 0 for z = -0.0, and elu(-0.0) is -0.0)
        np=_np(lambda xp, z: xp.where(z > 0, z, xp.expm1(xp.where(z > 0, 0, z))).astype(
            z.dtype, copy=False),
               lambda xp, z: xp.where(z <= 0, xp.exp(xp.minimum(z, 0)), 1.0).astype(z.dtype),
               lambda xp, z: xp.where(z < 0, xp.exp(xp.minimum(z, 0)), 0.0).astype(z.dtype)),
        # elu'(NaN) = 1, as torch (z <= 0 ? exp(z) : 1)
        wgsl=Code("select(expm1_s(z), z, z > 0.0)",
                  "select(1.0, exp_s(min(z, 0.0)), z <= 0.0 && !isnan_f(z))",
                  "select(0.0, exp_s(min(z, 0.0)), z < 0.0)"),
        cuda=Code("z > C(0) ? z : expm1(z)", "z <= C(0) ? m_exp(z) : C(1)",
                  "z < C(0) ? m_exp(z) : C(0)")),
    Act("softplus", "z",
        np=_np(_softplus,
               lambda xp, z: xp.where(z > SOFTPLUS_THRESHOLD, 1.0, _sigmoid(xp, z)).astype(
                   z.dtype),
               lambda xp, z: xp.where(z < SOFTPLUS_THRESHOLD,
                                      xp.multiply(*_sigmoid_pair(xp, z)), 0.0).astype(z.dtype)),
        wgsl=Code("softplus_s(z)", "select(sigmoid_s(z), 1.0, z > 20.0)",
                  "select(0.0, sigmoid_d_s(z), z < 20.0)"),
        cuda=Code("softplus_f(z)", "z > C(20) ? C(1) : sigm(z)",
                  "z >= C(20) ? C(0) : sigm(z) * sigm(-z)")),
    Act("mish", "z",
        np=_np(lambda xp, z: z * xp.tanh(_softplus(xp, z)), _MISH_DZ, _MISH_D2, d1=_MISH_D1),
        # the lower tail as z exp(z): softplus(z) = exp(z) is subnormal there and may be flushed
        wgsl=Code("select(z * tanh_s(softplus_s(z)), mul_exp(z, z), z < -80.0)",
                  "let sp = softplus_s(z);\n"
                  "    return tanh_s(sp) + z * sech2_s(sp) * sigmoid_s(z);",
                  "let sp = softplus_s(z);\n"
                  "    let t = tanh_s(sp);\n"
                  "    let q = sig_pair(z);\n"
                  "    return sech2_s(sp) * (2.0 * q.x + z * q.x * (q.y - 2.0 * t * q.x));"),
        cuda=Code("z < C(K_TAIL) ? mul_exp(z, z) : z * m_tanh(softplus_f(z))",
                  "C sp = softplus_f(z); return m_tanh(sp) + z * sech2(sp) * sigm(z);",
                  "C sp = softplus_f(z), t = m_tanh(sp), s = sigm(z);\n"
                  "    return sech2(sp) * (C(2) * s + z * s * (sigm(-z) - C(2) * t * s));")),
    Act("hardswish", "z", smooth=False,
        np=_np(lambda xp, z: z * xp.minimum(xp.maximum(z + 3, 0), 6) / 6,   # NaN stays NaN (cupy too)
               lambda xp, z: xp.where(z <= -3, 0.0, xp.where(z < 3, z / 3 + 0.5, 1.0)).astype(
                   z.dtype),
               lambda xp, z: xp.where((z > -3) & (z < 3), 1.0 / 3, 0.0).astype(z.dtype)),
        wgsl=Code("let r = z + 3.0;\n"
                  "    return z * select(select(r, 6.0, r > 6.0), 0.0, r < 0.0) / 6.0;",
                  "select(select(1.0, z / 3.0 + 0.5, z < 3.0), 0.0, z <= -3.0)",
                  "select(0.0, 1.0 / 3.0, z > -3.0 && z < 3.0)"),
        cuda=Code("C r = z + C(3); return z * (r < C(0) ? C(0) : (r > C(6) ? C(6) : r)) / C(6);",
                  "z <= C(-3) ? C(0) : (z < C(3) ? z / C(3) + C(0.5) : C(1))",
                  "(z > C(-3) && z < C(3)) ? C(1) / C(3) : C(0)")),
)}


def get_act(name):
    act = ACT.get(name) if isinstance(name, str) else None
    if act is None:
        raise UnknownActivationError(f"unknown activation {name!r}; expected one of {list(ACT)}")
    return act
