"""The rest of torch's elementwise math: round (decimals=), frac, fmod and atan2 (their rows,
kernels and VJPs: numr_web/vocab/elementwise.py; the other rows' functions are generated:
ops/generated.py), numpy's aliases (arcsin, fix, ...), and the predicates and comparisons torch
has as functions (composites of existing rows: no kernel).
"""
from __future__ import annotations

import math

from .. import dtypes as dt
from ..errors import DTypeError
from ..tensor import Tensor
from .common import method_class, need_tensor
from .elementwise import binary, unary, where
from .generated import FUNCTIONS

_LARGEST = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38,
            "float64": 1.7976931348623157e308}


def round(input, *, decimals=0):  # noqa: A001, A002 (torch's names)
    """Half to even (torch.round); with decimals, round(x 10^d) / 10^d as torch computes it. Not
    generated from its row: decimals= is no row's argument."""
    if not isinstance(decimals, int) or isinstance(decimals, bool):
        raise DTypeError(f"round: decimals must be an int, got {type(decimals).__name__}")
    x = need_tensor(input, "round")
    if not x.dtype.is_floating:                # integers are already whole (torch returns them)
        if x.dtype is dt.bool_:
            raise DTypeError("round of a bool tensor is not defined (as in torch); convert it "
                             "with .astype('int32') or .float()")
        return x.clone()
    if decimals == 0:
        return unary("round", x)
    if decimals < 0:                 # torch divides by 10^-d (exact), not x * 10^d (inexact)
        scale = 10.0 ** -decimals
        return unary("round", x / scale) * scale
    scale = 10.0 ** decimals
    return unary("round", x * scale) / scale


# public rows (numr_web/vocab/elementwise.py): generated; the ones used or aliased here
reciprocal, trunc, asin, acos, atan = (FUNCTIONS[n] for n in (
    "reciprocal", "trunc", "asin", "acos", "atan"))
arcsin, arccos, arctan, fix = asin, acos, atan, trunc


def _rdiv(x, other):
    """other / x for a non-Tensor other, as torch computes it (Tensor.__rdiv__):
    x.reciprocal() * other, two roundings (a true division differs by an ulp on some inputs)."""
    return reciprocal(x) * other


def frac(x):
    """x - trunc(x), with x's sign (torch.frac)."""
    return x - trunc(x)


def fmod(input, other):  # noqa: A002 (torch's names)
    """The remainder of a / b with the sign of a (C's fmod, torch.fmod); % is torch.remainder."""
    a, b = input, other
    if not any(isinstance(v, Tensor) for v in (a, b)):
        raise DTypeError("fmod needs at least one Tensor operand")
    if dt.result_type(a, b) is dt.bool_:       # a bool operand with a number promotes, as torch
        raise DTypeError("fmod of bool operands is not defined (as in torch); convert one with "
                         ".astype('int32')")
    return binary("fmod", a, b)


def atan2(input, other):  # noqa: A002
    """The angle of the point (b, a) (torch.atan2(input, other)); integers are computed as float32."""
    a, b = input, other
    if not any(isinstance(v, Tensor) for v in (a, b)):
        raise DTypeError("atan2 needs at least one Tensor operand")
    if not dt.result_type(a, b).is_floating:
        a, b = (v.astype(dt.default_float) if isinstance(v, Tensor) else float(v) for v in (a, b))
    return binary("atan2", a, b)


arctan2 = atan2


def _is_bool(x):
    return isinstance(x, bool) or getattr(x, "dtype", None) is dt.bool_


# -- predicates and comparisons as functions (composites) ---------------------------------------------
def isnan(x):
    return need_tensor(x, "isnan") != x                        # integers: all False


def isinf(x):
    x = need_tensor(x, "isinf")
    if not x.dtype.is_floating:
        return x != x
    return abs(x) == math.inf


def isposinf(x):
    x = need_tensor(x, "isposinf")
    return x == math.inf if x.dtype.is_floating else x != x


def isneginf(x):
    x = need_tensor(x, "isneginf")
    return x == -math.inf if x.dtype.is_floating else x != x


def isfinite(x):
    x = need_tensor(x, "isfinite")
    if not x.dtype.is_floating:
        return x == x
    return abs(x) < math.inf                            # NaN compares False


def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    """NaN -> nan, +inf -> posinf, -inf -> neginf (default: the dtype's largest/lowest finite)."""
    x = need_tensor(x, "nan_to_num")
    if not x.dtype.is_floating:
        return x.clone()
    big = _LARGEST[x.dtype.name]
    out = where(x != x, nan, x)
    out = where(out == math.inf, big if posinf is None else posinf, out)
    return where(out == -math.inf, -big if neginf is None else neginf, out)


def square(x):
    x = need_tensor(x, "square")
    if x.dtype is dt.bool_:                    # torch squares bools as integers (pow(x, 2))
        x = x.astype(dt.int32)
    return x * x


def logical_not(x):
    return need_tensor(x, "logical_not") == 0


def _logical(name, op):
    def fn(a, b):
        need_tensor(a, name)
        return op(a != 0, b != 0 if isinstance(b, Tensor) else bool(b))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"torch.{name}: elementwise on truth values (nonzero is True); a bool tensor."
    return fn


logical_and = _logical("logical_and", lambda a, b: a & b)
logical_or = _logical("logical_or", lambda a, b: a | b)
logical_xor = _logical("logical_xor", lambda a, b: a ^ b)


def _compare(name, op):
    def fn(a, b):
        return op(need_tensor(a, name), b)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"torch.{name}(input, other): elementwise comparison, a bool tensor."
    return fn


eq = _compare("eq", lambda a, b: a == b)
ne = _compare("ne", lambda a, b: a != b)
lt = _compare("lt", lambda a, b: a < b)
le = _compare("le", lambda a, b: a <= b)
gt = _compare("gt", lambda a, b: a > b)
ge = _compare("ge", lambda a, b: a >= b)
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne


def isclose(a, b, rtol=1e-5, atol=1e-8, equal_nan=False):
    """|a - b| <= atol + rtol |b| (torch.isclose); infinities are close only to themselves."""
    a = need_tensor(a, "isclose")
    if rtol < 0 or atol < 0:
        raise DTypeError(f"isclose: rtol and atol must be >= 0, got rtol={rtol}, atol={atol}")
    if isinstance(b, Tensor) and b.dtype is not a.dtype:
        raise DTypeError(f"isclose/allclose: dtypes differ ({a.dtype.name} and {b.dtype.name}), "
                         "as torch refuses; convert one with .to(other.dtype)")
    b = b if isinstance(b, Tensor) else a * 0 + b
    if not (a.dtype.is_floating or b.dtype.is_floating):
        return a == b
    close = (a == b) | (isfinite(a) & isfinite(b) & (abs(a - b) <= atol + rtol * abs(b)))
    if equal_nan:
        close = close | ((a != a) & (b != b))
    return close


def allclose(a, b, rtol=1e-5, atol=1e-8, equal_nan=False):
    """True when every element is isclose (one readback)."""
    a = need_tensor(a, "allclose").detach()
    return bool(isclose(a, b.detach() if isinstance(b, Tensor) else b, rtol, atol,
                        equal_nan).all().item())


def equal(a, b):
    """True when a and b have the same shape and the same elements (torch.equal)."""
    a, b = need_tensor(a, "equal").detach(), need_tensor(b, "equal").detach()
    return a.shape == b.shape and bool((a == b).all().item())


def lerp(start, end, weight):
    """start + weight (end - start) (torch.lerp)."""
    return need_tensor(start, "lerp") + weight * (end - start)


MathOpsMethods = method_class(
    "MathOpsMethods",
    round=round, fix=fix, frac=frac, arcsin=asin, arccos=acos, arctan=atan, fmod=fmod,
    atan2=atan2, arctan2=atan2,
    isnan=isnan, isinf=isinf, isposinf=isposinf, isneginf=isneginf, isfinite=isfinite,
    nan_to_num=nan_to_num, square=square, logical_and=logical_and, logical_or=logical_or,
    logical_xor=logical_xor, eq=eq, ne=ne, lt=lt, le=le, gt=gt, ge=ge, greater=gt,
    greater_equal=ge, less=lt, less_equal=le, not_equal=ne, isclose=isclose, allclose=allclose,
    equal=equal, lerp=lerp, logical_not=logical_not, __rtruediv__=_rdiv,
)
