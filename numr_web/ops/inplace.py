"""In-place methods as torch names them: x.add_(y), x.mul_(2), x.zero_(), x.copy_(src),
x.uniform_(), x += y, x[1:, 0] = v, ...

A tensor object here is a reference to a value: an in-place op computes the new value with the
out-of-place op and re-points this tensor object at it, so every reference to the object (a
module's attribute, an optimizer's list, a tied weight) sees the new values; views taken before
the write keep the old ones (README's table of differences). Autograd stays exact the way torch's
does: the write bumps x._version, and backward through a node that recorded x before the write
raises GradientError (autograd.Node._check_versions) instead of using the new values; a leaf that
requires grad cannot be written while grad mode is on.
"""
from __future__ import annotations

from .. import dtypes as dt
from .. import shapes as sh
from ..autograd import apply
from ..creation import arange, full, rand, randn
from ..errors import DTypeError, GradientError, ShapeError
from ..gradmode import is_grad_enabled, no_grad
from ..tensor import Tensor
from .common import method_class, as_tensor, check_same_device
from .elementwise import where
from .generated import BINARY as _ROW_BINARY, UNARY as _ROW_UNARY
from .indexing import _is_advanced, _take, getitem as index_getitem
from ..vocab.registry import OPS
from .shape_ops import concat, expand, getitem as basic_getitem
from .sorting import argsort
from .torch_functions import add_alpha, div_rounded, sub_alpha


def _write(x, compute, what):
    """x <- compute(old x), keeping x's shape and dtype (torch's rules for an in-place result)."""
    if is_grad_enabled() and x._requires_grad and x.grad_fn is None:
        raise GradientError(f"{what}: a leaf tensor that requires grad cannot be modified in "
                            "place while grad mode is on (torch refuses it too); write it under "
                            "`with nr.no_grad():`, or compute a new tensor (y = x + ...)")
    old = x.detach()
    if x.grad_fn is not None:                     # the write joins the graph after x's node
        old._requires_grad, old.grad_fn, old._out_index = True, x.grad_fn, x._out_index
    new = compute(old)
    if not isinstance(new, Tensor):
        new = as_tensor(new, x, x.dtype)
    if new.shape != x.shape:
        raise ShapeError(f"{what}: the result has shape {new.shape}, but an in-place op must keep "
                         f"the tensor's shape {x.shape} (the other operand broadcasts to it, "
                         "not the tensor to the other)")
    if new.dtype is not x.dtype:
        if (new.dtype.is_floating and not x.dtype.is_floating) or \
                (x.dtype is dt.bool_ and new.dtype is not dt.bool_):
            raise DTypeError(f"{what}: the result is {new.dtype.name} and can not be stored in a "
                             f"{x.dtype.name} tensor in place (torch refuses it too); convert "
                             f"first: x = x.to({new.dtype.name!r})")
        new = new.astype(x.dtype)
    x._data = new._data
    if new.grad_fn is not None:                   # recorded: x is now the write's output
        x.grad_fn, x._requires_grad, x._out_index = new.grad_fn, True, new._out_index
    x._version += 1
    base = x.__dict__.get("_data_of")
    if base is not None:      # x is base.data: the write reaches base (and, as torch's .data,
        base._data = x._data  # bypasses autograd's version check)
    return x


def _own(x, old, args):
    """x.mul_(x): the operand that is x itself reads its value before the write."""
    return [old if a is x else a for a in args]


def _method(name, fn):
    def method(self, *args, **kwargs):
        return _write(self, lambda old: fn(old, *_own(self, old, args), **kwargs), f"{name}_")
    method.__name__ = method.__qualname__ = f"{name}_"
    method.__doc__ = f"In-place {name}: x.{name}_(...) is x = x.{name}(...) on this tensor object."
    return method


def _operator(fn):
    """x += y and friends: torch's in-place semantics (the tensor object changes)."""
    def method(self, other):
        return _write(self, lambda old: fn(old, *_own(self, old, (other,))), "in-place operator")
    return method


def _fill(x, value):
    if isinstance(value, Tensor):
        if value.ndim:
            raise ShapeError(f"fill_ takes a number or a 0-d tensor, got shape {value.shape}")
        return value.detach().astype(x.dtype).expand(x.shape) if not value.requires_grad else \
            value.astype(x.dtype).expand(x.shape)
    if not dt.is_scalar(value):
        raise DTypeError(f"fill_ takes a number, got {type(value).__name__}")
    return full(x.shape, value, dtype=x.dtype, device=x.device)


def _copy(x, src, non_blocking=False):
    src = as_tensor(src, x)
    if src.device != x.device:
        src = src.to(x.device)
    try:
        sh.broadcast_shapes(src.shape, x.shape)
        return expand(src.astype(x.dtype), x.shape)
    except ShapeError:
        raise ShapeError(f"copy_: a source of shape {src.shape} does not broadcast to the "
                         f"tensor's shape {x.shape}") from None


def _random_fill(kind):
    def fill(x, a=None, b=None, *, generator=None):
        if not x.dtype.is_floating:
            raise DTypeError(f"{kind}_ needs a floating-point tensor, got {x.dtype.name}")
        with no_grad():
            if kind == "uniform":
                lo, hi = (0.0 if a is None else a), (1.0 if b is None else b)
                r = rand(x.shape, generator=generator, dtype=x.dtype, device=x.device)
                return r * (hi - lo) + lo
            mean, std = (0.0 if a is None else a), (1.0 if b is None else b)
            if std < 0:
                raise DTypeError(f"normal_: std must be >= 0, got {std}")
            return randn(x.shape, generator=generator, dtype=x.dtype, device=x.device) * std + mean
    return fill


def setitem(x, index, value):
    """x[index] = value for basic indices (ints, slices, ..., None), a boolean mask, and integer
    index tensors / lists: the new value is where(position in the index, value, x), written in
    place; the gradient reaches value where it was written and x elsewhere (torch's index_put).
    A mask of x's shape with a scalar value needs no readback; other masks read the mask back."""
    if isinstance(index, Tensor) and index.dtype is dt.bool_ and index.shape == x.shape and \
            not (isinstance(value, Tensor) and value.ndim):
        if isinstance(value, Tensor) and value.device != x.device:
            raise DTypeError(f"x[mask] = v: v is on {value.device!r}, the tensor on "
                             f"{x.device!r}; move it with v.to({x.device!r})")
        check_same_device(x, index)
        # the value takes the tensor's dtype, as in torch (2.5 into an int32 tensor stores 2)
        v = value.astype(x.dtype) if isinstance(value, Tensor) else as_tensor(value, x, x.dtype)
        return _write(x, lambda old: where(index, v, old), "x[mask] = v")
    items = index if isinstance(index, tuple) else (index,)
    if isinstance(value, Tensor) and value.device != x.device:
        raise DTypeError(f"x[...] = v: v is on {value.device!r}, the tensor on {x.device!r}; "
                         f"move it with v.to({x.device!r})")
    if any(_is_advanced(i) for i in items):
        return _advanced_setitem(x, index, value)
    idx, _, _ = sh.normalize_index(index, x.shape)
    raw = apply(OPS["slice"], x.detach(), index=idx).shape     # what unslice places
    v = as_tensor(value, x, x.dtype if not isinstance(value, Tensor) else None)
    shown = basic_getitem(x.detach(), index).shape              # v broadcasts to x[index]
    try:
        sh.broadcast_shapes(v.shape, shown)
    except ShapeError:
        raise ShapeError(f"x[...] = v: v of shape {v.shape} does not broadcast to the indexed "
                         f"shape {shown}") from None

    def compute(old):
        vb = expand(v.astype(x.dtype), shown).reshape(raw)
        placed = apply(OPS["unslice"], vb, shape=x.shape, index=idx)
        hit = apply(OPS["unslice"], full(raw, True, dtype=dt.bool_, device=x.device),
                    shape=x.shape, index=idx)
        return where(hit, placed, old)
    return _write(x, compute, "x[...] = v")


def _advanced_setitem(x, index, value):
    """x[idx1, :, idx2] = v (torch's index_put): the flat positions that x[index] reads, the
    source element that each written position takes (the last write of a position wins, where
    torch leaves duplicates undefined), then a gather of v and a where: exact values, and the
    gradient reaches v at the positions it wrote and x elsewhere."""
    with no_grad():
        pos = index_getitem(arange(x.size, dtype=dt.int32, device=x.device).reshape(x.shape),
                            index)               # checks the indices as x[index] does
    v = as_tensor(value, x, x.dtype if not isinstance(value, Tensor) else None)
    try:
        sh.broadcast_shapes(v.shape, pos.shape)
    except ShapeError:
        raise ShapeError(f"x[...] = v: v of shape {v.shape} does not broadcast to the indexed "
                         f"shape {pos.shape}") from None
    n = pos.size
    if n == 0:
        return x
    with no_grad():
        flat = pos.reshape(-1)
        order = argsort(flat, stable=True)
        ranked = _take(flat, 0, order)
        last = concat([ranked[:-1] != ranked[1:], full((1,), True, dtype=dt.bool_,
                                                      device=x.device)]).astype(dt.int32)
        keep = apply(OPS["scatter_add"], order, last, shape=(n,), axis=0) > 0
        src = where(keep, arange(1, n + 1, dtype=dt.int32, device=x.device), 0)
        src = apply(OPS["scatter_add"], flat, src, shape=(x.size,), axis=0)   # 0: not written
        hit = (src > 0).reshape(x.shape)
        src = where(hit.reshape(-1), src - 1, 0)

    def compute(old):
        vb = expand(v.astype(x.dtype), pos.shape).reshape(-1)
        return where(hit, _take(vb, 0, src).reshape(x.shape), old)
    return _write(x, compute, "x[index] = v")


# x.<name>_() for the hand-written ops, then for every public row of the vocab (exp_, floor_, ...)
_UNARY = ("tanh", "sigmoid", "relu", "round", "square", "frac")
_BINARY = ("fmod", "clamp", "clamp_min", "clamp_max", "lerp",
           "masked_fill", "maximum", "minimum", "atan2", "nan_to_num", "tril", "triu")
_UNARY, _BINARY = _UNARY + _ROW_UNARY, _BINARY + _ROW_BINARY

InplaceMethods = method_class(
    "InplaceMethods",
    add_=_method("add", add_alpha), sub_=_method("sub", sub_alpha), div_=_method("div", div_rounded),
    mul_=_method("mul", lambda x, o: x * o), pow_=_method("pow", lambda x, o: x ** o),
    remainder_=_method("remainder", lambda x, o: x % o),
    floor_divide_=_method("floor_divide", lambda x, o: x // o),
    zero_=_method("zero", lambda x: full(x.shape, 0, dtype=x.dtype, device=x.device)),
    fill_=_method("fill", _fill), copy_=_method("copy", _copy),
    uniform_=_method("uniform", _random_fill("uniform")),
    normal_=_method("normal", _random_fill("normal")),
    __iadd__=_operator(lambda a, b: a + b), __isub__=_operator(lambda a, b: a - b),
    __imul__=_operator(lambda a, b: a * b), __itruediv__=_operator(lambda a, b: a / b),
    __ifloordiv__=_operator(lambda a, b: a // b), __imod__=_operator(lambda a, b: a % b),
    __ipow__=_operator(lambda a, b: a ** b), __iand__=_operator(lambda a, b: a & b),
    __ior__=_operator(lambda a, b: a | b), __ixor__=_operator(lambda a, b: a ^ b),
    __setitem__=setitem,
    **{f"{n}_": _method(n, lambda x, *a, _n=n, **k: getattr(x, _n)(*a, **k))
       for n in _UNARY + _BINARY},
)
