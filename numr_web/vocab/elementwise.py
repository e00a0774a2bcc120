"""The elementwise rows: one `Elem` per unary, binary and compare op, everything about it in one
place. A row gives
  * `family`: the kernel family that runs it: "unary" (x -> out), "binary" (a, b -> out, one
    operand may be a Python scalar) or "compare" (a, b -> bool). Its WGSL kernel is the function
    `<family>_<name>` of shaders/elementwise_ops.wgsl (the `switch` that calls it is generated);
    numpy and CuPy run `numpy`: the array module's function of that name, or f(xp, *arrays);
  * `dtype`: "any" (the operands' dtype, torch's promotion), "float" (integers and bool are
    computed as float32), "int" (integer and bool tensors only), "round" (floats; an integer
    tensor is returned as a copy);
  * `vjp`: the gradient, written with Tensor methods and operators (they resolve at run time, so
    this layer imports no op): unary g, x, y -> gx; binary g, a, b, y -> (ga, gb), a or b possibly
    a Python number (y: the output, given when `save_out`), each of ga, gb a tensor or a
    zero-argument function run only where that operand needs a gradient; None: not
    differentiable;
    `reads`: False when the VJP needs no saved tensor (only shapes);
  * `public`: the op layer makes nr.<name>(input[, other]), the method x.<name>(), the in-place
    x.<name>_() and the package export from the row; rows without it are internal (bitwise_not,
    the compares: operators) or have hand-written functions in ops/ for what a row cannot say
    (round's decimals=, the binary arithmetic's scalar and dtype special cases);
  * `domain`: the inputs parity tests draw (one (lo, hi) per operand);
  * `options`: keyword arguments of the public function besides the operands, with their
    defaults, and `prepare(x, **options)`: the operand as the kernel then takes it (logit's eps
    clamps the input).
"""
from __future__ import annotations

import math

from ._divmod import np_floor_divide, np_remainder
from ._erf import erf as erf_xp

KERNEL_FAMILIES = ("unary", "binary", "compare")
DTYPE_CLASSES = ("any", "float", "int", "round")
_TWO_OVER_SQRT_PI = 1.1283791670955126
_LN2, _LN10 = math.log(2.0), math.log(10.0)


class Elem:
    __slots__ = ("name", "family", "numpy", "vjp", "dtype", "save_out", "reads", "public",
                 "domain", "doc", "options", "prepare")

    def __init__(self, name, family, numpy, vjp=None, dtype="any", save_out=False, reads=True,
                 public=False, domain=None, doc=None, options=None, prepare=None):
        if family not in KERNEL_FAMILIES or dtype not in DTYPE_CLASSES:
            raise ValueError(f"elementwise row {name}: family {family!r} / dtype {dtype!r}")
        self.name, self.family, self.numpy, self.vjp, self.dtype = name, family, numpy, vjp, dtype
        self.save_out, self.reads, self.public, self.doc = save_out, reads, public, doc
        arity = 1 if family == "unary" else 2
        self.domain = tuple(domain) if domain else ((-2.0, 2.0),) * arity
        self.options, self.prepare = dict(options or {}), prepare

    def __repr__(self):
        return f"Elem({self.name!r}, {self.family!r})"


def _u(name, numpy, vjp, **kw):
    return Elem(name, "unary", numpy, vjp, **kw)


def _b(name, numpy, vjp, **kw):
    return Elem(name, "binary", numpy, vjp, **kw)


def _zero(*args):
    return args[0] * 0


def _round(xp, x):
    return xp.rint(x)                        # half to even, as torch.round


def _sign(xp, x):
    return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)     # torch: sign(-0), NaN -> +0


def _maxmin(g, a, b, is_max):
    wins = ((a > b) if is_max else (a < b)).astype(g.dtype)
    w = wins + (a == b).astype(g.dtype) * 0.5      # ties share the gradient, as in torch
    return g * w, g * (1 - w)


def _pow(g, a, b, y):
    """d(a**b)/da = b a**(b-1), 0 where b == 0; d/db = a**b log(a), 0 where a == 0 (torch's)."""
    ga = gb = None
    ta, tb = hasattr(a, "shape"), hasattr(b, "shape")
    if ta:
        if tb:
            ga = (g * b * a ** (b - 1)).where(b != 0, 0.0)
        else:
            ga = g * 0 if b == 0 else g * b * a ** (b - 1)
    if tb:
        if ta:
            gb = (g * y * a.log()).where(a != 0, 0.0)
        else:
            gb = g * y * (math.log(a) if a > 0 else 0.0)
    return ga, gb


def _xlogy_np(xp, a, b):
    """a log(b), 0 where a == 0 unless b is NaN (torch.special.xlogy). One operand may be a
    Python number (CuPy's where takes arrays only)."""
    r = a * xp.log(b)
    if isinstance(a, (int, float)):
        return r if a != 0 else xp.where(b != b, b, xp.zeros_like(b))
    r = xp.where(a == 0, 0, r)
    if isinstance(b, (int, float)):         # (a Python bool is no condition for CuPy's where)
        return xp.full_like(r, b) if b != b else r
    return xp.where(b != b, b, r)


def _xlogy(g, a, b, y):
    """d/da: log(b), 0 where a == 0 (torch's: xlogy(a != 0, b)); d/db: a / b."""
    ga = g * (a != 0).astype(g.dtype).xlogy(b) if hasattr(a, "shape") else None
    return ga, (g * a / b if hasattr(b, "shape") else None)


def _sinc_np(xp, x):
    return xp.sinc(x)                        # sin(pi x) / (pi x), 1 at 0 (numpy's is torch's)


def _sinc(g, x, y):
    """(cos(pi x) - sinc(x)) / x, 0 at x = 0 (torch's)."""
    px = x * math.pi
    return (g * (px.cos() - y) / x).where(x != 0, 0.0)


def _compare(name, numpy):
    return Elem(name, "compare", numpy)


# -- THE ROWS: their order is each family's kernel numbering ------------------------------------------
ROWS = {r.name: r for r in (
    _u("neg", "negative", lambda g, x, y: -g, reads=False, public=True),
    _u("abs", "abs", lambda g, x, y: g * x.sign(), public=True),
    _u("exp", "exp", lambda g, x, y: g * y, dtype="float", save_out=True,   # exp' = exp: reuse y
       public=True),
    _u("log", "log", lambda g, x, y: g / x, dtype="float", domain=[(0.1, 3.0)], public=True),
    _u("sqrt", "sqrt", lambda g, x, y: g / (y * 2), dtype="float", save_out=True,
       domain=[(0.1, 3.0)], public=True),
    _u("sin", "sin", lambda g, x, y: g * x.cos(), dtype="float", public=True),
    _u("cos", "cos", lambda g, x, y: -(g * x.sin()), dtype="float", public=True),
    _u("sign", _sign, _zero, reads=False, public=True),
    _u("erf", erf_xp, lambda g, x, y: g * (x * x * -1).exp() * _TWO_OVER_SQRT_PI, dtype="float",
       public=True),
    _u("log1p", "log1p", lambda g, x, y: g / (x + 1), dtype="float", domain=[(-0.5, 2.0)],
       public=True),
    # expm1' = exp, not y + 1: that cancels to 0 where exp(x) is below float32's epsilon
    _u("expm1", "expm1", lambda g, x, y: g * x.exp(), dtype="float", public=True),
    _u("rsqrt", lambda xp, x: 1 / xp.sqrt(x), lambda g, x, y: g * y ** 3 * -0.5, dtype="float",
       save_out=True, domain=[(0.1, 3.0)], public=True),
    _u("bitwise_not", "invert", None, dtype="int"),
    # rounding: zero gradient almost everywhere, as torch
    _u("floor", "floor", _zero, dtype="round", reads=False, public=True),
    _u("ceil", "ceil", _zero, dtype="round", reads=False, public=True),
    _u("round", _round, _zero, dtype="round", reads=False),
    _u("trunc", "trunc", _zero, dtype="round", reads=False, public=True),
    # float math; derivatives reuse the output where it is their ingredient
    _u("reciprocal", "reciprocal", lambda g, x, y: -(g * y * y), dtype="float", public=True, save_out=True,
       domain=[(0.5, 3.0)]),
    _u("exp2", "exp2", lambda g, x, y: g * y * _LN2, dtype="float", public=True, save_out=True),
    _u("log2", "log2", lambda g, x, y: g / (x * _LN2), dtype="float", public=True, domain=[(0.1, 3.0)]),
    _u("log10", "log10", lambda g, x, y: g / (x * _LN10), dtype="float", public=True, domain=[(0.1, 3.0)]),
    _u("tan", "tan", lambda g, x, y: g * (y * y + 1), dtype="float", public=True, save_out=True,
       domain=[(-1.2, 1.2)]),
    _u("sinh", "sinh", lambda g, x, y: g * x.cosh(), dtype="float", public=True),
    _u("cosh", "cosh", lambda g, x, y: g * x.sinh(), dtype="float", public=True),
    _u("asin", "arcsin", lambda g, x, y: g * (1 - x * x).rsqrt(), dtype="float", public=True,
       domain=[(-0.9, 0.9)]),
    _u("acos", "arccos", lambda g, x, y: -(g * (1 - x * x).rsqrt()), dtype="float", public=True,
       domain=[(-0.9, 0.9)]),
    _u("atan", "arctan", lambda g, x, y: g / (x * x + 1), dtype="float", public=True),
    _u("cbrt", "cbrt", lambda g, x, y: g / (y * y * 3), dtype="float", save_out=True,
       public=True, domain=[(-3.0, 3.0)]),
    _u("logit", lambda xp, x: xp.log(x / (1 - x)), lambda g, x, y: g / (x * (1 - x)),
       dtype="float", public=True, domain=[(0.05, 0.95)], options={"eps": None},
       prepare=lambda x, eps: x if eps is None else x.clamp(eps, 1 - eps),
       doc="torch.logit(input, eps=None): log(x / (1 - x)), x the input clamped to "
           "[eps, 1 - eps] when eps is given (its gradient 0 outside); NaN outside [0, 1]."),
    _u("sinc", _sinc_np, _sinc, dtype="float", save_out=True, public=True,
       domain=[(-3.0, 3.0)], doc="torch.sinc: sin(pi x) / (pi x), 1 at 0."),

    _b("add", "add", lambda g, a, b, y: (g, g), reads=False),
    _b("sub", "subtract", lambda g, a, b, y: (g, -g), reads=False),
    # a side written `lambda: ...` runs only where that operand needs a gradient (a mask, a
    # mean's count): its kernels are not launched for nothing
    _b("mul", "multiply", lambda g, a, b, y: (lambda: g * b, lambda: g * a)),
    _b("div", "true_divide", lambda g, a, b, y: (lambda: g / b, lambda: -(g * a) / (b * b))),
    _b("pow", "power", _pow, save_out=True),
    _b("maximum", "maximum", lambda g, a, b, y: _maxmin(g, a, b, True)),
    _b("minimum", "minimum", lambda g, a, b, y: _maxmin(g, a, b, False)),
    _b("floor_divide", np_floor_divide, lambda g, a, b, y: (g * 0, g * 0), reads=False),
    _b("remainder", np_remainder, lambda g, a, b, y: (g, lambda: -(g * (a // b)))),
    _b("bitwise_and", "bitwise_and", None, dtype="int"),
    _b("bitwise_or", "bitwise_or", None, dtype="int"),
    _b("bitwise_xor", "bitwise_xor", None, dtype="int"),
    _b("fmod", "fmod", lambda g, a, b, y: (g, lambda: -(g * (a / b).trunc()))),
    _b("atan2", "arctan2",
       lambda g, a, b, y: (lambda: g * b / (a * a + b * b),
                           lambda: -(g * a) / (a * a + b * b))),
    _b("xlogy", _xlogy_np, _xlogy, dtype="float", public=True, domain=[(-2.0, 2.0), (0.1, 3.0)],
       doc="torch.xlogy(a, b) (= torch.special.xlogy): a log(b), 0 where a == 0 (unless b is "
           "NaN); integer and bool operands are computed as float32."),

    _compare("eq", "equal"), _compare("ne", "not_equal"), _compare("lt", "less"),
    _compare("le", "less_equal"), _compare("gt", "greater"), _compare("ge", "greater_equal"),
)}


def rows(family=None, dtype=None, public=None):
    """The rows of one family / dtype class / publicity, in table order."""
    return tuple(r for r in ROWS.values() if (family is None or r.family == family)
                 and (dtype is None or r.dtype == dtype) and (public is None or r.public == public))
