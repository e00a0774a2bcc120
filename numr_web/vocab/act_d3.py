"""Third derivatives of the ACT rows (numr_web/vocab/activations.py: each row's `d3`), composed
from Tensor methods (they resolve at run time, so this module imports no op and autograd gives
the fourth and later orders): the VJP of activation(x, name, "d2") is g * act'''(x).
Only used with create_graph=True three levels deep, so composing is fast enough.

Kinks follow the ACT table's conventions (torch's): elu's is exp(z) for z < 0 and 0 from z = 0
on; softplus's is 0 above its threshold; the piecewise rows (relu, ...) have none.
"""
from __future__ import annotations

from .act_numpy import GELU_A, GELU_C, INV_SQRT_2PI, SELU_ALPHA, SELU_SCALE, SOFTPLUS_THRESHOLD

_BIG = 1e4   # |z| beyond which every term below has underflowed: keeps z**k finite (no 0 * inf)


def _sig_pair(z):
    return z.sigmoid(), (-z).sigmoid()          # s, 1 - s without cancellation


def sigmoid(z):
    s, q = _sig_pair(z)
    sq = s * q
    return sq * (1 - 6 * sq)


def tanh(z):
    t = z.tanh()
    h = 4 * (2 * z).sigmoid() * (-2 * z).sigmoid()          # 1 - t^2 without cancellation
    return -2 * h * (1 - 3 * t * t)


def silu(z):
    # f = z s: f''' = 3 s'' + z s''' with s'' = s q (q - s), s''' = s q (1 - 6 s q)
    s, q = _sig_pair(z)
    sq = s * q
    return sq * (3 * (q - s) + z.clamp(-_BIG, _BIG) * (1 - 6 * sq))


def gelu(z):
    # f = z Phi(z): f'' = phi (2 - z^2), f''' = phi z (z^2 - 4)
    zc = z.clamp(-_BIG, _BIG)
    phi = (zc * zc * -0.5).exp() * INV_SQRT_2PI
    return phi * zc * (zc * zc - 4)


def gelu_tanh(z):
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


def softplus(z):
    s, q = _sig_pair(z)
    return (z < SOFTPLUS_THRESHOLD).astype(z.dtype) * s * q * (q - s)


def mish(z):
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


def elu(z):
    return (z < 0).astype(z.dtype) * z.clamp(max=0).exp()


def selu(z):
    return (z < 0).astype(z.dtype) * z.clamp(max=0).exp() * (SELU_SCALE * SELU_ALPHA)


def softsign(z):
    return 6 / (1 + z.abs()) ** 4              # z != 0 (f'' jumps there)


def tanhshrink(z):
    # f1 = T^2, f2 = 2 T h, f3 = 2 h (h - 2 T^2), h = 1 - T^2 without cancellation
    t = z.tanh()
    h = 4 * (2 * z).sigmoid() * (-2 * z).sigmoid()
    return 2 * h * (h - 2 * t * t)
