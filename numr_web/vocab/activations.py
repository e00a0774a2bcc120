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
leaky_relu's slope is 0.01, elu's and celu's alpha 1, selu's constants torch's, softplus has
beta 1 and threshold 20.
Every formula is overflow-safe for any finite input.
"""
from __future__ import annotations

from ..errors import UnknownActivationError
from . import act_d3 as D3
from .act_numpy import (  # noqa: F401  (the constants and Code are part of the table's surface)
    GELU_A, GELU_C, GELU_TANH_CLIP, GELU_TANH_EXP, INV_SQRT_2PI, LEAKY_SLOPE, SOFTPLUS_THRESHOLD,
    SQRT1_2, Code, _GELU_D2, _GELU_DZ, _GELU_TANH_D2, _MISH_D1, _MISH_D2, _MISH_DZ, _SILU_D1,
    _SILU_D2, _SILU_DZ, _gelu_d1, _gelu_fwd, _gelu_tanh_d1, _gelu_tanh_dz, _gelu_tanh_fwd, _np,
    SELU_ALPHA, SELU_SCALE, _elu_np, _ones, _relu_fwd, _sech2, _softsign_d2, _softsign_dz,
    _tanhshrink, _tanhshrink_dz, _sigmoid, _sigmoid_d2, _sigmoid_pair, _softplus, _times_dy, _zeros)

class Act:
    """One activation: `saves`, its Code in numpy, WGSL and CUDA, and what autograd needs beyond
    them: `d3`, the third derivative as a function of a Tensor (composed from Tensor methods, so
    the fourth and later orders follow from autograd) and, for rows that save y, `dds` (the
    constant d(ds)/ds). `piecewise`: a piecewise polynomial of degree <= 2 (none, relu,
    leaky_relu, hardswish): its third derivative is 0 wherever it is defined (no `d3`), and its
    code is a few selects, cheap enough to run inside a GEMM's epilogue
    (backends/webgpu/launch_gemm.py: EPILOGUE_ACTS)."""
    __slots__ = ("name", "saves", "np", "wgsl", "cuda", "smooth", "piecewise", "d3", "dds")

    def __init__(self, name, saves, np, wgsl, cuda, smooth=True, piecewise=False, d3=None,
                 dds=None):
        if saves not in ("y", "z"):
            raise ValueError(f"activation {name}: saves must be 'y' or 'z'")
        if saves == "y" and None in (np.d1, np.ds, wgsl.d1, wgsl.ds, cuda.d1, cuda.ds, dds):
            raise ValueError(f"activation {name} saves y: it needs d1 and ds in every language, "
                             "and dds")
        if (d3 is None) != piecewise:
            raise ValueError(f"activation {name}: give d3 (the third derivative) unless the row "
                             "is piecewise (then it is 0), and not both")
        self.name, self.saves, self.np, self.wgsl, self.cuda = name, saves, np, wgsl, cuda
        self.smooth = smooth       # False: a kink (finite differences must avoid it)
        self.piecewise, self.d3, self.dds = piecewise, d3, dds

    @property
    def code(self):
        """Index of the row: the activation's number in generated WGSL and CUDA."""
        return list(ACT).index(self.name)

    def d3_vjp(self, x, g):
        """g * act'''(x), the VJP of act'' (x, g: Tensors)."""
        return g._new_full(g.shape, 0) if self.d3 is None else g * self.d3(x)

    def dds_vjp(self, s, g):
        """g * d(ds)/ds for a row that saves its output."""
        return g._new_full(g.shape, 0) if self.dds == 0.0 else g * self.dds

    def __repr__(self):
        return f"Act({self.name!r})"


def _k(c, expr, one):
    """expr times the constant c in a code string (nothing where c is 1)."""
    return expr if c == 1 else f"{one}({c!r}) * {expr}" if one else f"{c!r} * {expr}"


def _elu_wgsl(scale, alpha):
    la = scale * alpha                         # elu'(NaN) = scale, as torch (z <= 0 ? ... : scale)
    return Code(f"select({_k(la, 'expm1_s(z)', '')}, {_k(scale, 'z', '')}, z > 0.0)",
                f"select({scale!r}, {_k(la, 'exp_s(min(z, 0.0))', '')}, z <= 0.0 && !isnan_f(z))",
                f"select(0.0, {_k(la, 'exp_s(min(z, 0.0))', '')}, z < 0.0)")


def _elu_cuda(scale, alpha):
    la = scale * alpha
    return Code(f"z > C(0) ? {_k(scale, 'z', 'C')} : {_k(la, 'expm1(z)', 'C')}",
                f"z <= C(0) ? {_k(la, 'm_exp(z)', 'C')} : C({scale!r})",
                f"z < C(0) ? {_k(la, 'm_exp(z)', 'C')} : C(0)")


# -- THE TABLE ----------------------------------------------------------------------------------------
ACT = {a.name: a for a in (
    Act("none", "y", piecewise=True, dds=0.0,
        np=_np(lambda xp, z: z, _ones, _zeros,
               d1=lambda xp, dy, s, y=None: dy, ds=_zeros),
        wgsl=Code("z", "1.0", "0.0", d1="dy", ds="0.0"),
        cuda=Code("z", "C(1)", "C(0)", d1="dy", ds="C(0)")),
    Act("relu", "y", smooth=False, piecewise=True, dds=0.0,
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
    Act("sigmoid", "y", d3=D3.sigmoid, dds=-2.0,
        np=_np(_sigmoid, lambda xp, z: xp.multiply(*_sigmoid_pair(xp, z)), _sigmoid_d2,
               d1=lambda xp, dy, s, y=None: dy * (1 - s) * s, ds=lambda xp, s: 1 - 2 * s),
        wgsl=Code("sigmoid_s(z)", "sigmoid_d_s(z)",
                  "let sp = sig_pair(z); return sigmoid_d_s(z) * (sp.y - sp.x);",
                  d1="dy * (s * (1.0 - s))", ds="1.0 - 2.0 * s"),
        cuda=Code("sigm(z)", "sigm(z) * sigm(-z)",
                  "C s = sigm(z), q = sigm(-z); return s * q * (q - s);",
                  d1="dy * s * (C(1) - s)", ds="C(1) - C(2) * s")),
    Act("tanh", "y", d3=D3.tanh, dds=-2.0,
        np=_np(lambda xp, z: xp.tanh(z, out=z), _sech2,
               lambda xp, z: -2 * xp.tanh(z) * _sech2(xp, z),
               d1=lambda xp, dy, s, y=None: dy * (1 - s * s), ds=lambda xp, s: -2 * s),
        wgsl=Code("tanh_s(z)", "sech2_s(z)", "-2.0 * tanh_s(z) * sech2_s(z)",
                  d1="dy * (1.0 - s * s)", ds="-2.0 * s"),
        cuda=Code("m_tanh(z)", "sech2(z)", "C(-2) * m_tanh(z) * sech2(z)",
                  d1="dy * (C(1) - s * s)", ds="C(-2) * s")),
    Act("silu", "z", d3=D3.silu,
        np=_np(lambda xp, z: z * _sigmoid(xp, z), _SILU_DZ, _SILU_D2, d1=_SILU_D1),
        wgsl=Code("silu_s(z)",
                  "let sp = sig_pair(z); return sp.x * (1.0 + z * sp.y);",
                  "let sp = sig_pair(z); return sigmoid_d_s(z) * (2.0 + z * (sp.y - sp.x));"),
        cuda=Code("z < C(K_TAIL) ? mul_exp(z, z) : z * sigm(z)", "sigm(z) * (C(1) + z * sigm(-z))",
                  "C s = sigm(z), q = sigm(-z); return s * q * (C(2) + z * (q - s));")),
    Act("gelu", "z", d3=D3.gelu,
        np=_np(_gelu_fwd, _GELU_DZ, _GELU_D2, d1=_gelu_d1),
        wgsl=Code("gelu_s(z)", "gelu_dz(z)", "phi_pdf(z) * (2.0 - z * z)"),
        cuda=Code("z * cdf(z)", "C p = pdf(z); return cdf(z) + (p == C(0) ? C(0) : z * p);",
                  "C p = pdf(z); return p == C(0) ? C(0) : p * (C(2) - z * z);")),
    Act("gelu_tanh", "z", d3=D3.gelu_tanh,
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
    Act("leaky_relu", "y", smooth=False, piecewise=True, dds=0.0,
        np=_np(lambda xp, z: xp.where(z > 0, z, z * LEAKY_SLOPE).astype(z.dtype, copy=False),
               lambda xp, z: xp.where(z > 0, 1.0, LEAKY_SLOPE).astype(z.dtype), _zeros,
               d1=lambda xp, dy, s, y=None: xp.where(s > 0, dy, dy * LEAKY_SLOPE).astype(
                   dy.dtype, copy=False),
               ds=_zeros),
        wgsl=Code("select(0.01 * z, z, z > 0.0)", "select(0.01, 1.0, z > 0.0)", "0.0",
                  d1="select(0.01 * dy, dy, s > 0.0)", ds="0.0"),
        cuda=Code("z > C(0) ? z : C(0.01) * z", "z > C(0) ? C(1) : C(0.01)", "C(0)",
                  d1="s > C(0) ? dy : C(0.01) * dy", ds="C(0)")),
    Act("elu", "z", smooth=False, d3=D3.elu,
        # saves z: elu'(z) = exp(z) from z, as torch; from y it would be y + 1, which cancels
        # (0 in float32 below z = -17). act'' is 0 at z = 0 (torch masks it with z < 0).
        np=_elu_np(1.0, 1.0), wgsl=_elu_wgsl(1.0, 1.0), cuda=_elu_cuda(1.0, 1.0)),
    Act("softplus", "z", d3=D3.softplus,
        np=_np(_softplus,
               lambda xp, z: xp.where(z > SOFTPLUS_THRESHOLD, 1.0, _sigmoid(xp, z)).astype(
                   z.dtype),
               lambda xp, z: xp.where(z < SOFTPLUS_THRESHOLD,
                                      xp.multiply(*_sigmoid_pair(xp, z)), 0.0).astype(z.dtype)),
        wgsl=Code("softplus_s(z)", "select(sigmoid_s(z), 1.0, z > 20.0)",
                  "select(0.0, sigmoid_d_s(z), z < 20.0)"),
        cuda=Code("softplus_f(z)", "z > C(20) ? C(1) : sigm(z)",
                  "z >= C(20) ? C(0) : sigm(z) * sigm(-z)")),
    Act("mish", "z", d3=D3.mish,
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
    Act("hardswish", "z", smooth=False, piecewise=True,
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
    Act("selu", "z", smooth=False, d3=D3.selu,
        np=_elu_np(SELU_SCALE, SELU_ALPHA), wgsl=_elu_wgsl(SELU_SCALE, SELU_ALPHA),
        cuda=_elu_cuda(SELU_SCALE, SELU_ALPHA)),
    Act("celu", "z", smooth=False, d3=D3.elu,     # torch's default alpha = 1: elu's formulas
        np=_elu_np(1.0, 1.0), wgsl=_elu_wgsl(1.0, 1.0), cuda=_elu_cuda(1.0, 1.0)),
    Act("softsign", "z", smooth=False, d3=D3.softsign,      # (act'' jumps at 0)
        np=_np(lambda xp, z: z / (1 + xp.abs(z)), _softsign_dz, _softsign_d2),
        wgsl=Code("z / (1.0 + abs(z))", "let a = 1.0 + abs(z);\n    return 1.0 / (a * a);",
                  "let a = 1.0 + abs(z);\n    return -2.0 * sign(z) / (a * a * a);"),
        cuda=Code("z / (C(1) + (z < C(0) ? -z : z))",
                  "C a = C(1) + (z < C(0) ? -z : z); return C(1) / (a * a);",
                  "C a = C(1) + (z < C(0) ? -z : z);\n"
                  "    return (z > C(0) ? C(-2) : (z < C(0) ? C(2) : C(0))) / (a * a * a);")),
    Act("tanhshrink", "z", d3=D3.tanhshrink,
        np=_np(_tanhshrink, _tanhshrink_dz,
               lambda xp, z: 2 * xp.tanh(z) * _sech2(xp, z)),
        wgsl=Code("tanhshrink_s(z)", "let t = tanh_s(z);\n    return t * t;",
                  "2.0 * tanh_s(z) * sech2_s(z)"),
        cuda=Code("m_tanhshrink(z)", "C t = m_tanh(z); return t * t;",
                  "C(2) * m_tanh(z) * sech2(z)")),
)}


def get_act(name):
    act = ACT.get(name) if isinstance(name, str) else None
    if act is None:
        raise UnknownActivationError(f"unknown activation {name!r}; expected one of {list(ACT)}")
    return act
