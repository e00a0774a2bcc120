"""Reductions: sum, mean, max, min over any axes; argmax/argmin; softmax / log_softmax.

Keyword names are torch's (dim=, keepdim=) and numpy's (axis=, keepdims=) alike.
"""
from __future__ import annotations

import sys
from collections import namedtuple

from .. import dtypes as dt
from .. import shapes as sh
from ..autograd import apply
from ..errors import DTypeError, IndexOutOfRangeError, ShapeError
from ..autocast_state import active as amp_active, cast as amp_cast
from ..tensor import Tensor
from .common import method_class, need_tensor
from .elementwise import where
from ..vocab.registry import OPS, register


def _reduce_vjp(n, g):
    x, axes, op = n.args[0], n.attrs["axes"], n.attrs["op"]
    kshape = sh.reduced_shape(x.shape, axes, True)
    gk = g.reshape(kshape)
    if op == "sum":
        return (gk.expand(x.shape),)
    if op == "mean":
        return ((gk / sh.prod(x.shape[a] for a in axes)).expand(x.shape),)
    if op == "prod":
        return (gk * _prod_others(x, axes, n.output().reshape(kshape)),)
    mask = (x == n.output().reshape(kshape)).astype(g.dtype)    # ties share the gradient
    return (gk * mask / mask.sum(axes, keepdims=True),)


def _prod_others(x, axes, out):
    """d prod / d x_i = product of the other elements, also where x_i == 0 (torch's)."""
    zero = x == 0
    nz = zero.astype(x.dtype).sum(axes, keepdims=True)
    others = where(zero, 1.0, x).prod(axes, keepdims=True)
    return where(zero, where(nz == 1, others, 0.0), out / where(zero, 1.0, x))


register("reduce", lambda be, x, op, axes, keepdims: (be.reduce(op, x, axes, keepdims), None),
         _reduce_vjp, save_out=lambda attrs: attrs["op"] not in ("sum", "mean"),
         backward_name="ReduceBackward", vjp_reads_saved=False,   # max/min/prod: Node.output checks
         keeps_inputs=lambda attrs: attrs["op"] not in ("sum", "mean"))   # those read x too
register("argmax", lambda be, x, axis, keepdims: (be.argmax(x, axis, keepdims), None), None)


def _softmax_vjp(n, g):
    y, axis = n.output(), n.attrs["axis"]
    if n.attrs["log"]:                     # d log_softmax: g - softmax * sum(g)
        return (g - y.exp() * g.sum(axis, keepdims=True),)
    return (y * (g - (g * y).sum(axis, keepdims=True)),)


register("softmax", lambda be, x, axis, log: (be.softmax(x, axis, log), None), _softmax_vjp,
         save_out=True)


def axis_args(dim, axis, keepdim, keepdims):
    """Merge torch's (dim, keepdim) and numpy's (axis, keepdims) spellings."""
    if dim is not None and axis is not None:
        raise ShapeError("give either dim= or axis=, not both")
    return (dim if dim is not None else axis), bool(keepdim or keepdims)


def _all_if_empty(axis):
    """torch reads dim=() / dim=[] as every dim."""
    return None if isinstance(axis, (tuple, list)) and not axis else axis


def reduce_op(op, x, axis=None, keepdims=False):
    need_tensor(x, op)
    axis = _all_if_empty(axis)
    axes = sh.normalize_axes(axis, x.ndim)
    if op in ("max", "min") and any(x.shape[a] == 0 for a in axes) or \
            op in ("max", "min") and x.size == 0 and axis is None:
        raise IndexOutOfRangeError(f"{op} of an empty dimension is undefined (shape {x.shape}); "
                                   "give a non-empty tensor or reduce over another dim")
    if op == "mean" and not x.dtype.is_floating:
        raise DTypeError(f"mean of a {x.dtype.name} tensor needs a floating dtype; use "
                         "x.float().mean()")
    if op == "sum" and x.dtype is dt.bool_:
        x = x.astype(dt.int32)
    if not axes:                      # 0-d tensor: nothing to reduce, but a new tensor (torch)
        return x.clone()
    return apply(OPS["reduce"], x, op=op, axes=axes, keepdims=bool(keepdims))


def sum(x, dim=None, keepdim=False, *, axis=None, keepdims=False, dtype=None):  # noqa: A001
    if amp_active() is not None:
        x, = amp_cast('sum', x)
    axis, keep = axis_args(dim, axis, keepdim, keepdims)
    if dtype is not None:
        x = x.astype(dtype)
    return reduce_op("sum", x, axis, keep)


def mean(x, dim=None, keepdim=False, *, axis=None, keepdims=False, dtype=None):
    axis, keep = axis_args(dim, axis, keepdim, keepdims)
    if dtype is not None:
        x = x.astype(dtype)
    return reduce_op("mean", x, axis, keep)


def prod(x, dim=None, keepdim=False, *, axis=None, keepdims=False, dtype=None):
    if amp_active() is not None:
        x, = amp_cast('prod', x)
    axis, keep = axis_args(dim, axis, keepdim, keepdims)
    if dtype is not None:
        x = x.astype(dtype)
    if x.dtype is dt.bool_:
        x = x.astype(dt.int32)
    return reduce_op("prod", x, axis, keep)


def logsumexp(x, dim, keepdim=False):
    """log(sum(exp(x))) over dim without overflow; its gradient is softmax(x)."""
    if amp_active() is not None:
        x, = amp_cast('logsumexp', x)
    if not x.dtype.is_floating:
        x = x.astype(dt.default_float)
    if any(x.shape[a] == 0 for a in sh.normalize_axes(dim, x.ndim)):
        return x.exp().sum(dim, keepdim=keepdim).log()      # an empty sum: log(0) = -inf
    m = reduce_op("max", x.detach(), dim, True)
    m = where(m.abs() < float("inf"), m, 0.0)             # all -inf (or inf) rows stay so
    out = ((x - m).exp().sum(dim, keepdim=True)).log() + m
    return out if keepdim else out.squeeze(dim)


def var(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance with torch's `correction` (1: Bessel's); N - correction <= 0 gives inf/nan.
    torch's overloads: var(x, unbiased) (a bool first) and var(x, dim, unbiased, keepdim)."""
    return _var(x, dim, correction, keepdim, unbiased, "var").astype(x.dtype)


def _var(x, dim, correction, keepdim, unbiased, name):
    """The variance, float16 / bfloat16 computed in float32 (torch's accumulation type: the
    squares of a float16 tensor overflow where the variance, or its square root, does not)."""
    if isinstance(dim, bool):                  # var(x, True): the unbiased overload
        dim, unbiased = None, dim
    if unbiased is not None:
        if correction is not None:
            raise DTypeError(f"{name}: give either unbiased or correction, not both")
        correction = 1 if unbiased else 0
    correction = 1 if correction is None else correction
    need_tensor(x, name)
    if not x.dtype.is_floating:
        raise DTypeError(f"{name} of a {x.dtype.name} tensor needs a floating dtype; use x.float()")
    if x.dtype in dt.NARROW_FLOATS:
        x = x.astype(dt.float32)
    axes = sh.normalize_axes(_all_if_empty(dim), x.ndim)
    n = sh.prod(x.shape[a] for a in axes)
    d = x - x.mean(axes, keepdim=True) if axes else x * 0
    out = (d * d).sum(axes, keepdim=keepdim) / float(n - correction)
    return out * float("nan") if n == 0 else out     # no values: NaN, as torch


def _count_nonzero(x, dim, keepdim):
    dim = _all_if_empty(dim)
    return (x != 0).astype(dt.int32).sum(dim, keepdim=keepdim) if x.ndim else \
        (x != 0).astype(dt.int32)


def all_(x, dim=None, keepdim=False, *, axis=None, keepdims=False):
    """True where every element (along dim) is non-zero (NaN counts as non-zero); empty: True."""
    dim, keep = axis_args(dim, axis, keepdim, keepdims)
    return _count_nonzero(x == 0, dim, keep) == 0


def any_(x, dim=None, keepdim=False, *, axis=None, keepdims=False):
    """True where some element (along dim) is non-zero (NaN counts as non-zero); empty: False."""
    dim, keep = axis_args(dim, axis, keepdim, keepdims)
    return _count_nonzero(x, dim, keep) > 0


def std(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _var(x, dim, correction, keepdim, unbiased, "std").sqrt().astype(x.dtype)


# torch.return_types.max / min: what x.max(dim=d) gives (values, indices)
MaxResult = namedtuple("max", ("values", "indices"))
MinResult = namedtuple("min", ("values", "indices"))


def _torch_is_numr_web():
    """True once numr_web.install_as_torch() made `import torch` give numr_web.torch: every
    torch.Tensor method call is then torch code, and torch's x.max(d) is (values, indices)."""
    mod = sys.modules.get("torch")
    return getattr(mod, "__name__", None) == "numr_web.torch"


def _maxmin(op, x, dim, keepdim, axis, keepdims):
    if isinstance(axis, Tensor):                 # torch's x.max(other): elementwise
        return getattr(x, "maximum" if op == "max" else "minimum")(axis)
    pair = dim is not None or (axis is not None and _torch_is_numr_web())
    axis, keep = axis_args(dim, axis, keepdim, keepdims)
    if not (pair and isinstance(axis, int)):
        return reduce_op(op, x, axis, keep)
    result = MaxResult if op == "max" else MinResult
    if x.ndim == 0:                             # dim 0 or -1 of a 0-d tensor: itself, index 0
        sh.normalize_axis(axis, 1)
        return result(x.clone(), _arg("arg" + op, x, None, False, None, False))
    idx = _arg("arg" + op, x, axis, True, None, False)
    values = x.gather(axis, idx)            # the gradient goes to the index returned, as torch's
    if not keep:
        values, idx = values.squeeze(axis), idx.squeeze(axis)
    return result(values, idx)


def max(x, axis=None, keepdims=False, *, dim=None, keepdim=False):  # noqa: A001
    """The largest values over axis (every element when None), as numpy's (argmax gives the
    indices). torch's forms: x.max(dim=d) is torch's (values, indices) pair (.values,
    .indices), and so are x.max(d) and x.max(axis=d) once install_as_torch() is in effect
    (README's table of differences); x.max(other) is the elementwise maximum."""
    return _maxmin("max", x, dim, keepdim, axis, keepdims)


def min(x, axis=None, keepdims=False, *, dim=None, keepdim=False):  # noqa: A001
    return _maxmin("min", x, dim, keepdim, axis, keepdims)


def _arg(op, x, dim, keepdim, axis, keepdims):
    axis, keep = axis_args(dim, axis, keepdim, keepdims)
    if axis is not None:
        axis = sh.normalize_axis(axis, x.ndim)
        if x.ndim and x.shape[axis] == 0:
            raise IndexOutOfRangeError(f"{op} over an empty dimension is undefined (shape "
                                       f"{x.shape}); reduce over a non-empty dim")
        if x.size == 0:               # a non-empty dim of a tensor empty elsewhere: empty result
            shape = sh.reduced_shape(x.shape, (axis,), keep)
            return Tensor._wrap(x._backend.full(shape, 0, dt.int32), dt.int32, x.device,
                                x._backend)
    if x.size == 0:
        raise IndexOutOfRangeError(f"{op} of an empty tensor (shape {x.shape}) is undefined; "
                                   "give a tensor with at least one element")
    if op == "argmin":                  # argmax of an order-reversing map: ~x = -x - 1 for
        if x.dtype is dt.bool_:           # integers (-x overflows at -2**31), -x for floats
            x = x.astype(dt.int32)
        x = -x if x.dtype.is_floating else ~x
    if axis is not None and x.ndim == 0:
        axis = None
    return apply(OPS["argmax"], x, axis=axis, keepdims=keep)


def argmax(x, dim=None, keepdim=False, *, axis=None, keepdims=False):
    return _arg("argmax", x, dim, keepdim, axis, keepdims)


def argmin(x, dim=None, keepdim=False, *, axis=None, keepdims=False):
    return _arg("argmin", x, dim, keepdim, axis, keepdims)


def _softmax(x, dim, axis, log):
    axis, _ = axis_args(dim, axis, False, False)
    axis = -1 if axis is None else axis
    if not x.dtype.is_floating:
        x = x.astype(dt.default_float)
    if x.ndim == 0:                               # one element: softmax 1, log_softmax 0
        sh.normalize_axis(axis, 0)
        return _softmax(x.reshape(1), None, 0, log).reshape(())
    axis = sh.normalize_axis(axis, x.ndim)
    if x.size == 0:
        return x * 1
    return apply(OPS["softmax"], x, axis=axis, log=log)


def softmax(x, dim=None, *, axis=None, dtype=None):
    """torch.softmax; dtype casts the input first (torch's dtype=)."""
    if amp_active() is not None:
        x, = amp_cast('softmax', x)
    return _softmax(x if dtype is None else need_tensor(x, "softmax").astype(dtype), dim, axis,
                    False)


def log_softmax(x, dim=None, *, axis=None, dtype=None):
    if amp_active() is not None:
        x, = amp_cast('log_softmax', x)
    return _softmax(x if dtype is None else need_tensor(x, "log_softmax").astype(dtype), dim, axis,
                    True)


ReductionsMethods = method_class(
    "ReductionsMethods", sum=sum, mean=mean, max=max, min=min, argmax=argmax, argmin=argmin,
    softmax=softmax, log_softmax=log_softmax, prod=prod, logsumexp=logsumexp,
    var=var, std=std, all=all_, any=any_)
