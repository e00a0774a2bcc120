"""Elementwise ops: the rows of numr_web/vocab/elementwise.py registered as ops (a forward on the
row's kernel family, the row's VJP), `unary` / `binary` with their dtype rules (the public rows'
functions call them: ops/generated.py), the binary arithmetic with special cases, where, clamp,
the activations of the ACT table and their fused backward, and the Tensor's operators.

Kernel families: "unary" (x -> out), "binary" (a, b -> out of the operands' dtype; one operand may
be a Python scalar, kept as an attribute, never uploaded), "compare" (a, b -> bool). Each row's
kernel is `unary_<name>` / `binary_<name>` / `compare_<name>` in shaders/elementwise_ops.wgsl.
"""
from __future__ import annotations

from .. import dtypes as dt
from .. import shapes as sh
from ..autocast_state import POLICY as AMP_POLICY, active as amp_active, cast as amp_cast
from ..autograd import apply
from ..errors import DTypeError, GradientError
from ..gradmode import is_grad_enabled
from ..profiler import call as profiled
from ..vocab.activations import ACT, get_act
from ..vocab.elementwise import rows
from ..vocab.registry import OPS, register
from ..tensor import Tensor
from .common import (as_tensor, method_class, check_output_size, check_same_device, need_tensor,
                     sum_to_shape)


# -- the rows as ops ----------------------------------------------------------------------------------
def _unary_vjp(row):
    if row.save_out:
        return lambda n, g: (row.vjp(g, n.args[0], n.output()),)
    return lambda n, g: (row.vjp(g, n.args[0], None),)


def _binary_forward(name):
    def fwd(be, *xs, scalar=None, reverse=False):
        if len(xs) == 2:
            return be.binary(name, xs[0], xs[1]), None
        return (be.binary(name, scalar, xs[0]) if reverse else be.binary(name, xs[0], scalar)), None
    return fwd


def _operands(n):
    """(a, b) of a binary node, one of them possibly a Python scalar."""
    if len(n.args) == 2:
        return n.args
    s = n.attrs["scalar"]
    return (s, n.args[0]) if n.attrs["reverse"] else (n.args[0], s)


def _binary_vjp(row):
    def vjp(n, g):
        a, b = _operands(n)
        ga, gb = row.vjp(g, a, b, n.output() if row.save_out else None)
        pairs = ((a, ga), (b, gb))
        if len(n.args) == 1:                      # one operand was a Python scalar: no gradient
            pairs = (pairs[1],) if n.attrs["reverse"] else (pairs[0],)
        out = []
        for (x, gx), (_, _, needed) in zip(pairs, n.edges):
            if gx is not None and not isinstance(gx, Tensor):   # a row's deferred side
                gx = gx() if needed else None
            out.append(None if gx is None else sum_to_shape(gx, x.shape))
        return tuple(out)
    return vjp


for _row in rows():
    if _row.family == "unary":
        register(_row.name, lambda be, x, _n=_row.name: (be.unary(_n, x), None),
                 None if _row.vjp is None else _unary_vjp(_row), save_out=_row.save_out,
                 vjp_reads_saved=_row.reads, family="unary", numpy=_row.numpy)
    else:
        register(_row.name, _binary_forward(_row.name),
                 None if _row.vjp is None else _binary_vjp(_row), save_out=_row.save_out,
                 vjp_reads_saved=_row.reads, family=_row.family, numpy=_row.numpy)

_COMPARE = frozenset(r.name for r in rows("compare"))

register("where", lambda be, c, a, b: (be.where(c, a, b), None),
         lambda n, g: (None, sum_to_shape(where(n.args[0], g, 0.0), n.args[1].shape),
                       sum_to_shape(where(n.args[0], 0.0, g), n.args[2].shape)))


# -- activations: act^(fn)(x) from the ACT table, and the fused backward dy * act'(.) -----------------
def _activation_vjp(n, g):
    x, name, fn = n.args[0], n.attrs["name"], n.attrs["fn"]
    if fn == "fwd":
        act = ACT[name]
        y = n.output()
        return (act_backward(g, y if act.saves == "y" else x, name, y=y if act.saves == "z"
                             else None),)
    if fn == "dz":
        return (g * activation(x, name, "d2"),)
    if fn == "d2":                              # third derivatives: the row's d3 (composed)
        return (ACT[name].d3_vjp(x, g),)
    if fn == "ds":
        return (ACT[name].dds_vjp(x, g),)
    raise GradientError(f"activation {name!r}: no derivative of fn={fn!r}")


register("activation", lambda be, x, name, fn: (be.activation(name, x, fn), None),
         _activation_vjp, save_out=True, backward_name="ActivationBackward")


def _act_backward_forward(be, dy, s, *hint, name, bias_grad):
    dz, db = be.act_backward(name, dy, s, hint[0] if hint else None, bias_grad)
    return ((dz, db) if bias_grad else dz), None


def _act_backward_vjp(n, g):
    """dz = dy * f(s) (f = act' written in the saved tensor s): d/d(dy) is the same fused op on
    the incoming gradient, d/ds is g * dy * f'(s). A bias-gradient output adds its gradient,
    broadcast over the rows, to dz's."""
    dy, s = n.args[0], n.args[1]
    name = n.attrs["name"]
    g_dz, g_db = g if n.attrs["bias_grad"] else (g, None)
    total = g_dz if g_db is None else (g_db if g_dz is None else g_dz + g_db)
    if total.shape != dy.shape:
        total = total.expand(dy.shape)
    g_dy = act_backward(total, s, name) if dy.requires_grad else None
    g_s = None
    if s.requires_grad:
        g_s = total * dy * activation(s, name, "ds" if ACT[name].saves == "y" else "d2")
    return (g_dy, g_s) + ((None,) if len(n.args) == 3 else ())


register("act_backward", _act_backward_forward, _act_backward_vjp,
         backward_name="ActBackwardBackward")


def activation(x, name, fn="fwd"):
    """fn(x) for an ACT row: "fwd" the activation, "dz" and "d2" its derivatives, "ds" the
    derivative of act' written in the saved output (see numr_web.ops.activations)."""
    get_act(name)
    if name == "softplus" and amp_active() is not None:
        x, = amp_cast("softplus", x)
    if x.dtype.kind != "f":
        x = x.astype(dt.default_float)
    if not x._requires_grad or not is_grad_enabled():    # nothing to record: skip the Op machinery
        be = x._backend
        out = profiled("activation", be, (x,), be.activation, name, x._data, fn)
        return Tensor._wrap(out, x.dtype, x.device, be)
    return apply(OPS["activation"], x, name=name, fn=fn)


def act_backward(dy, s, name, y=None, bias_grad=False):
    """The fused activation backward: dz = dy * act'(.) from the saved tensor s, in one pass;
    with bias_grad, also dz summed over every axis but the last (one output more)."""
    args = (dy, s) if y is None else (dy, s, y)
    return apply(OPS["act_backward"], *args, name=name, bias_grad=bool(bias_grad))


def relu(x):
    if isinstance(x, Tensor) and not x.dtype.is_floating:     # torch: int32 stays int32, no bool
        if x.dtype is dt.bool_:
            raise DTypeError("relu of a bool tensor is not defined (as in torch); convert it with "
                             ".astype('int32') or .float()")
        return binary("maximum", x, 0)
    return activation(x, "relu")
def sigmoid(x): return activation(x, "sigmoid")
def tanh(x): return activation(x, "tanh")
def silu(x): return activation(x, "silu")


def gelu(x, approximate="none"):
    """GELU: exact (erf) by default, the tanh form with approximate="tanh" (torch's names)."""
    if approximate not in ("none", "tanh"):
        raise DTypeError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return activation(x, "gelu" if approximate == "none" else "gelu_tanh")


def _table_function(name):
    def fn(x):
        return activation(x, name)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name}(x): the {name!r} row of the ACT table (numr_web/vocab/activations.py)."
    return fn


# nr.<name>(x) for every row of the ACT table without a function above (leaky_relu, elu, softplus,
# mish, hardswish, gelu_tanh, ...): a row added to the table is a function too
TABLE_FUNCTIONS = {n: _table_function(n) for n in ACT
                   if n not in ("none", "relu", "sigmoid", "tanh", "silu", "gelu")}


# -- public functions: dtype rules, broadcasting, scalars ----------------------------------------------
_FLOAT_ONLY = frozenset(r.name for r in rows(dtype="float"))
_INT_ONLY = frozenset(r.name for r in rows(dtype="int"))


def unary(name, x):
    need_tensor(x, name)
    if amp_active() is not None and name in AMP_POLICY:       # exp, log, rsqrt ...: float32
        x, = amp_cast(name, x)
    if name in _INT_ONLY:
        if x.dtype.is_floating:
            raise DTypeError(f"{name} needs an integer or bool tensor, got {x.dtype.name}")
    elif x.dtype is dt.bool_ and name == "sign":              # torch: sign of a bool is itself
        return binary("ne", x, False)
    elif x.dtype is dt.bool_ and name in ("neg", "abs"):
        raise DTypeError(f"{name} of a bool tensor is not defined; use ~x for logical not, or "
                         "convert with .astype('int32')")
    elif name in _FLOAT_ONLY and not x.dtype.is_floating:
        x = x.astype(dt.default_float)
    return apply(OPS[name], x)


def _is_bool(x):
    return getattr(x, "dtype", None) is dt.bool_ or isinstance(x, bool) or \
        getattr(getattr(x, "dtype", None), "kind", "") == "b"


def _check_int_pow(a, b):
    """A negative scalar exponent of an integer base is refused (as torch does); a tensor
    exponent's negative entries are computed as torch does (_int_pow)."""
    if not isinstance(b, Tensor) and b < 0:
        raise DTypeError("pow: integers to negative integer powers are not allowed; convert the "
                         "base to a float dtype first (x.float() ** n)")


def _result_dtype(name, a, b):
    if name == "sub" and (_is_bool(a) or _is_bool(b)):
        raise DTypeError("subtraction with a bool operand is not supported (as in torch); use ^ "
                         "(logical xor) or ~ (logical not), or convert with .astype('int32')")
    d = dt.result_type(a, b)
    if name == "pow" and not d.is_floating and d is not dt.bool_:
        _check_int_pow(a, b)
    if name in _INT_ONLY:
        if d.is_floating:
            raise DTypeError(f"{name} needs integer or bool operands, got {d.name}")
        return d
    if name in _FLOAT_ONLY and not d.is_floating:     # integers and bool computed as float32
        return dt.default_float
    if d is dt.bool_:
        if name in ("floor_divide", "remainder"):
            raise DTypeError(f"{name} of bool operands is not defined (as in torch); convert one "
                             "with .astype('int32')")
        if name in ("div", "pow"):
            return dt.default_float if name == "div" else dt.int32
    if name == "div" and not d.is_floating:
        return dt.default_float
    return d


def _int_pow(a, b, d):
    """Integer a ** b for an integer tensor b, as torch: where b < 0 the power is 1 for a = 1,
    +-1 for a = -1 and 0 otherwise (no readback of the exponent)."""
    a = as_tensor(a, b, d) if not isinstance(a, Tensor) else a.astype(d)
    b = b.astype(d)
    neg = b < 0
    pos = apply(OPS["pow"], *_same_device(a, where(neg, 0, b)))
    odd = (b % 2) == 1
    small = where(a == 1, 1, where(a == -1, where(odd, -1, 1), 0))
    return where(neg, small, pos).astype(d)


def _same_device(a, b):
    if a.device != b.device:
        check_same_device(a, b)
    sa, sb = a._data.shape, b._data.shape
    if sa != sb:
        check_output_size(a, sh.broadcast_shapes(sa, sb), a.dtype, "pow")
    return a, b


def binary(name, a, b):
    """Elementwise binary op with broadcasting, torch's type promotion and Python scalars."""
    if name == "pow" and amp_active() is not None:              # autocast: pow in float32
        a, b = amp_cast("pow", a, b)
    if name == "pow" and _is_bool(a) and _is_bool(b):         # torch: bool ** bool is bool
        if isinstance(a, Tensor) and isinstance(b, Tensor):
            raise DTypeError("pow of two bool tensors is not defined (as in torch); convert one "
                             "with .astype('int32')")
        cast = [x.astype(dt.int32) if isinstance(x, Tensor) else int(x) for x in (a, b)]
        return binary("pow", *cast).astype(dt.bool_)
    if name == "pow" and isinstance(b, Tensor) and not b.dtype.is_floating:
        d = dt.result_type(a, b)
        if not d.is_floating and d is not dt.bool_:
            return _int_pow(a, b, d)
    t, s, rev = (a, b, False) if type(b) in dt.PY_NUMBERS else (b, a, True)
    if type(s) in dt.PY_NUMBERS and isinstance(t, Tensor) and t.dtype.kind == "f" \
            and t.dtype not in dt.NARROW_FLOATS and name not in _INT_ONLY:
        # the common case, a float tensor and a Python number: the tensor's dtype, no promotion
        s = float(s)
        if not (t._requires_grad and is_grad_enabled()):
            be = t._backend
            out = profiled(name, be, (t,), be.binary, *((name, s, t._data) if rev else
                                                        (name, t._data, s)))
            return t._wrap(out, dt.bool_ if name in _COMPARE else t.dtype, t.device, be)
        return apply(OPS[name], t, scalar=s, reverse=rev)
    ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
    if ta and tb:
        if a.device != b.device:
            check_same_device(a, b)
        if a.dtype is b.dtype and a.dtype.kind == "f" and name not in _INT_ONLY:
            d = a.dtype                                  # the common case: nothing to promote
        else:
            d = _result_dtype(name, a, b)
            a, b = a.astype(d), b.astype(d)
        sa, sb = a._data.shape, b._data.shape
        if sa != sb:
            check_output_size(a, sh.broadcast_shapes(sa, sb), d, name)
        if not (a._requires_grad or b._requires_grad) or not is_grad_enabled():
            be = a._backend      # fast path: nothing to record, skip the Op machinery
            out = profiled(name, be, (a, b), be.binary, name, a._data, b._data)
            return a._wrap(out, dt.bool_ if name in _COMPARE else d, a.device, be)
        return apply(OPS[name], a, b)
    if not ta and not tb:
        raise DTypeError(f"{name} needs at least one Tensor operand")
    t, s = (b, a) if not ta else (a, b)
    if not dt.is_scalar(s):
        if s is None or isinstance(s, (str, bytes)) or not hasattr(s, "__len__") and \
                not hasattr(s, "shape"):
            raise DTypeError(f"unsupported operand {type(s).__name__} for {name}; expected a "
                             "Tensor, int, float or bool")
        s = as_tensor(s, t)
        return binary(name, s, t) if not ta else binary(name, t, s)
    d = _result_dtype(name, t, s)
    if d is not t.dtype:
        t = t.astype(d)
    s = s.item() if hasattr(s, "item") else s
    s = float(s) if d.kind == "f" else int(s)
    if d in dt.NARROW_FLOATS and not (name in ("mul", "div") or name == "floor_divide" and ta):
        # as torch rounds the scalar operand of a float16 / bfloat16 op (x == 0.1 holds where
        # x = float16(0.1); x + 1e10 is x + inf; x ** 3.3 is x ** 3.30078), except in x * s,
        # x / s, s / x and x // s, which keep the scalar's precision
        s = dt.round_to(s, d)
    if d.kind != "f" and not -2 ** 31 <= s < 2 ** 31:
        raise DTypeError(f"{name}: the scalar {s} does not fit the {d.name} operand "
                         "(-2**31..2**31-1); use a float scalar or convert the tensor with "
                         ".astype('float64')")
    return apply(OPS[name], t, scalar=s, reverse=not ta)


def where(condition, input, other):  # noqa: A002 (torch's names)
    cond, a, b = condition, input, other
    like = next((x for x in (cond, a, b) if isinstance(x, Tensor)), None)
    if like is None:
        raise DTypeError("where needs at least one Tensor argument")
    cond = as_tensor(cond, like)
    if cond.dtype is not dt.bool_:
        raise DTypeError(f"where expected condition to be a boolean tensor, but got "
                         f"{cond.dtype.name} (as torch refuses it); pass a bool tensor, e.g. "
                         "where(cond != 0, a, b)")
    d = dt.result_type(*[x for x in (a, b)])
    a = as_tensor(a, like, d) if not isinstance(a, Tensor) else a.astype(d)
    b = as_tensor(b, like, d) if not isinstance(b, Tensor) else b.astype(d)
    check_same_device(cond, a, b)
    shape = sh.broadcast_shapes(cond.shape, a.shape, b.shape)
    return apply(OPS["where"], cond, a.expand(shape), b.expand(shape))


def clamp(x, min=None, max=None):  # noqa: A002
    """Limit x to [min, max] (either may be None); the gradient passes where x is inside,
    boundaries included (torch's)."""
    if min is None and max is None:
        raise DTypeError("clamp needs min or max")
    out = x
    if min is not None:
        out = where(_beyond(out < min, min), min, out)
    if max is not None:
        out = where(_beyond(out > max, max), max, out)
    return out


def _beyond(outside, bound):
    """Where clamp takes the bound: outside it, and everywhere the bound is NaN (torch)."""
    if isinstance(bound, Tensor):
        return outside | (bound != bound) if bound.dtype.is_floating else outside
    return outside | True if isinstance(bound, float) and bound != bound else outside
def maximum(a, b): return binary("maximum", a, b)
def minimum(a, b): return binary("minimum", a, b)
def floor_divide(a, b): return binary("floor_divide", a, b)
def remainder(a, b): return binary("remainder", a, b)
def pow(a, b): return binary("pow", a, b)    # noqa: A001


def _neg(x):
    return unary("neg", x)            # -x; nr.neg, x.neg() and x.neg_() are generated from the row


def _abs(x):
    return unary("abs", x)            # abs(x); nr.abs and x.abs() likewise


def _pos(x):
    if x.dtype is dt.bool_:
        raise DTypeError("the + operator on a bool tensor is not supported (as in torch); use "
                         "the tensor itself, or x.int() for numbers")
    return x                          # torch's +x is x itself


def _invert(x):
    if x.dtype is dt.bool_:
        return binary("eq", x, False)
    return unary("bitwise_not", x)


def _not_comparable(b):
    """None, strings and other objects: == is False and != True, as in torch (and Python)."""
    return b is None or isinstance(b, (str, bytes)) or not (
        isinstance(b, (Tensor, list, tuple)) or dt.is_scalar(b) or hasattr(b, "__array__")
        or hasattr(b, "__dlpack__"))


def _eq(a, b):
    if _not_comparable(b):
        return False
    return binary("eq", a, b)


def _ne(a, b):
    if _not_comparable(b):
        return True
    return binary("ne", a, b)


def _b(name, reverse=False):
    if reverse:
        return lambda self, o: binary(name, o, self)
    return lambda self, o: binary(name, self, o)


ElementwiseMethods = method_class(
    "ElementwiseMethods",
    __add__=_b("add"), __radd__=_b("add", True), __sub__=_b("sub"), __rsub__=_b("sub", True),
    __mul__=_b("mul"), __rmul__=_b("mul", True), __truediv__=_b("div"),
    __rtruediv__=_b("div", True), __pow__=_b("pow"), __rpow__=_b("pow", True),
    __floordiv__=_b("floor_divide"), __rfloordiv__=_b("floor_divide", True),
    __mod__=_b("remainder"), __rmod__=_b("remainder", True),
    __and__=_b("bitwise_and"), __rand__=_b("bitwise_and", True),
    __or__=_b("bitwise_or"), __ror__=_b("bitwise_or", True),
    __xor__=_b("bitwise_xor"), __rxor__=_b("bitwise_xor", True),
    __eq__=_eq, __ne__=_ne, __lt__=_b("lt"), __le__=_b("le"), __gt__=_b("gt"), __ge__=_b("ge"),
    __neg__=_neg, __pos__=_pos, __abs__=_abs, __invert__=_invert, clamp=clamp, clip=clamp,
    relu=relu, sigmoid=sigmoid, tanh=tanh, maximum=maximum, minimum=minimum, pow=pow,
    logical_not=_invert,
)
