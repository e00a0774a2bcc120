"""Third derivatives of the ACT rows, composed from differentiable ops (so the fourth and later
come from autograd): the VJP of activation(x, name, "d2") is g * act'''(x), and for rows that
save their output ("y" rows) the VJP of activation(s, name, "ds") is g * d(ds)/ds, a constant.
Only used with create_graph=True three levels deep, so composing is fast enough.

Written with Tensor methods (they resolve at run time), so this module imports no op family.
Kinks follow the ACT table's conventions (torch's): relu, leaky_relu, hardswish and "none" have
act''' = 0; elu's is exp(z) for z < 0 and 0 from z = 0 on; softplus's is 0 above its threshold.
"""
from __future__ import annotations

from .activations import GELU_A, GELU_C, INV_SQRT_2PI, SOFTPLUS_THRESHOLD

# d/ds of the "ds" function of each "y" row (ds is linear in s for every one of them)
DDS = {"none": 0.0, "relu": 0.0, "leaky_relu": 0.0, "sigmoid": -2.0, "tanh": -2.0}

_BIG = 1e4   # |z| beyond which every term below has underflowed: keeps z**k finite (no 0 * inf)


def _sig_pair(z):
    return z.sigmoid(), (-z).sigmoid()          # s, 1 - s without cancellation


def _sigmoid_d3(z):
    s, q = _sig_pair(z)
    sq = s * q
    return sq * (1 - 6 * sq)


def _tanh_d3(z):
    t = z.tanh()
    h = 4 * (2 * z).sigmoid() * (-2 * z).sigmoid()          # 1 - t^2 without cancellation
    return -2 * h * (1 - 3 * t * t)


def _silu_d3(z):
    # f = z s: f''' = 3 s'' + z s''' with s'' = s q (q - s), s''' = s q (1 - 6 s q)
    s, q = _sig_pair(z)
    sq = s * q
    return sq * (3 * (q - s) + z.clamp(-_BIG, _BIG) * (1 - 6 * sq))


def _gelu_d3(z):
    # f = z Phi(z): f'' = phi (2 - z^2), f''' = phi z (z^2 - 4)
    zc = z.clamp(-_BIG, _BIG)
    phi = (zc * zc * -0.5).exp() * INV_SQRT_2PI
    return phi * zc * (zc * zc - 4)


def _gelu_tanh_d3(z):
    # f = z (1 + T(u)) / 2, u = c (z + a z^3), h = 1 - T^2:
    # f'' = h A, A = u' + z (u'' - 2 T u'^2) / 2;  f''' = h (A' - 2 T u' A)
    zc = z.clamp(-_BIG, _BIG)
    u = GELU_C * (zc + GELU_A * zc * zc * zc)
    sp, sq = (2 * u).sigmoid(), (-2 * u).sigmoid()
    t, h = sp - sq, 4 * sp * sq                  # tanh u and 1 - tanh^2 u, overflow-safe
    du = GELU_C * (1 + 3 * GELU_A * zc * zc)
    ddu = 6 * GELU_C * GELU_A * zc
    dddu = 6 * GELU_C * GELU_A
    a = du + 0.5 * zc * (ddu - 2 * t * du * du)
    da = ddu + 0.5 * (ddu - 2 * t * du * du) \
        + 0.5 * zc * (dddu - 2 * h * du * du * du - 4 * t * du * ddu)
    return h * (da - 2 * t * du * a)


def _softplus_d3(z):
    s, q = _sig_pair(z)
    return (z < SOFTPLUS_THRESHOLD).astype(z.dtype) * s * q * (q - s)


def _mish_d3(z):
    # f = z T(sp), sp = softplus (no threshold, as torch's mish), sp' = s, s' = s q;
    # f'' = h B, B = 2 s + z s (q - 2 T s);  f''' = h (B' - 2 T s B)
    zc = z.clamp(-_BIG, _BIG)
    s, q = _sig_pair(z)
    ez = (-z.abs()).exp()
    spl = z.clamp(min=0) + ez.log1p()           # softplus without overflow
    t = spl.tanh()
    h = 4 * (2 * spl).sigmoid() * (-2 * spl).sigmoid()     # 1 - t^2 without cancellation
    inner = q - 2 * t * s
    b = 2 * s + zc * s * inner
    d_inner = -s * q - 2 * h * s * s - 2 * t * s * q
    db = 2 * s * q + s * inner + zc * (s * q * inner + s * d_inner)
    return h * (db - 2 * t * s * b)


def _elu_d3(z):
    return (z < 0).astype(z.dtype) * z.clamp(max=0).exp()


D3 = {"sigmoid": _sigmoid_d3, "tanh": _tanh_d3, "silu": _silu_d3, "gelu": _gelu_d3,
      "gelu_tanh": _gelu_tanh_d3, "softplus": _softplus_d3, "mish": _mish_d3, "elu": _elu_d3}
_ZERO = ("none", "relu", "leaky_relu", "hardswish")


def d3_vjp(x, g, name):
    """g * act'''(x) (the VJP of act''), built from differentiable ops."""
    if name in _ZERO:
        return g._new_full(g.shape, 0)
    return g * D3[name](x)


def dds_vjp(s, g, name):
    """g * d(ds)/ds for a row that saves its output."""
    c = DDS[name]
    return g._new_full(g.shape, 0) if c == 0.0 else g * c

