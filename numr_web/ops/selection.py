"""torch's selections that return named tuples and have no kernel of their own: mode, aminmax,
cummax, cummin (functions and Tensor methods), composed of scans and reductions. Indices are int32
(torch.long here); the gradient goes to the selected elements, as torch's."""
from __future__ import annotations

import collections

from .. import dtypes as dt
from ..creation import arange
from ..errors import DTypeError
from ..tensor import Tensor
from .composites import _scan, amax, amin
from .elementwise import maximum, minimum, where
from .math_ops import isnan

ModeResult = collections.namedtuple("mode", ("values", "indices"))
AminmaxResult = collections.namedtuple("aminmax", ("min", "max"))
CummaxResult = collections.namedtuple("cummax", ("values", "indices"))
CumminResult = collections.namedtuple("cummin", ("values", "indices"))


def _lowest(x, sign):
    """The identity of a running max (sign 1) or min (sign -1) in x's dtype."""
    if x.dtype.is_floating:
        return -sign * float("inf")
    if x.dtype is dt.bool_:
        return sign < 0
    return -2 ** 31 if sign > 0 else 2 ** 31 - 1


def _running(x, dim, op, result):
    """cummax / cummin: the running extremum along dim (NaN propagates, as torch) and the index of
    its last occurrence so far (torch's: a tie moves the index forward; after a NaN, the last
    NaN's)."""
    if not isinstance(x, Tensor):
        raise DTypeError(f"torch.{result.__name__}: expected a tensor, got {type(x).__name__}")
    values = _scan(x, dim, maximum if op == "max" else minimum, _lowest(x, 1 if op == "max" else -1))
    if x.ndim == 0:
        return result(values, arange(1, device=x.device).reshape(()))
    d = dim % x.ndim
    shape = [1] * x.ndim
    shape[d] = x.shape[d]
    pos = arange(x.shape[d], device=x.device).reshape(tuple(shape)).expand(x.shape)
    hit = x.detach() == values.detach()
    if x.dtype.is_floating:
        hit = hit | isnan(x.detach())
    idx = _scan(where(hit, pos, -1), d, maximum, -1)
    return result(x.gather(d, idx), idx)    # the gradient goes to the indices, as torch's


def cummax(input, dim):  # noqa: A002
    """torch.cummax(input, dim): (values, indices) of the running maximum along dim."""
    return _running(input, dim, "max", CummaxResult)


def cummin(input, dim):  # noqa: A002
    """torch.cummin(input, dim): (values, indices) of the running minimum along dim."""
    return _running(input, dim, "min", CumminResult)


def aminmax(input, *, dim=None, keepdim=False):  # noqa: A002
    """torch.aminmax: (min, max) over dim (every element when None), fields .min and .max."""
    dims = () if dim is None else dim
    return AminmaxResult(amin(input, dims, keepdim), amax(input, dims, keepdim))


def mode(input, dim=-1, keepdim=False):  # noqa: A002
    """torch.mode: the most frequent value along dim (the smallest of equally frequent ones)
    and the index of its last occurrence, as torch's cpu kernel. Counts compare every pair of a
    row (n^2 work per row of n): meant for the short rows mode is used on."""
    x = input.detach()
    if x.ndim == 0:
        return ModeResult(input.clone(), arange(1, device=x.device).reshape(()))
    d = dim % x.ndim
    xm = x.movedim(d, -1)
    counts = (xm.unsqueeze(-1) == xm.unsqueeze(-2)).astype(dt.int32).sum(-1)
    best = counts == counts.amax(-1, keepdim=True)
    value = where(best, xm, _lowest(xm, -1)).amin(-1, keepdim=True)
    pos = arange(xm.shape[-1], device=x.device)
    idx = where(xm == value, pos, -1).amax(-1, keepdim=True).movedim(-1, d)
    values = input.gather(d, idx)
    if not keepdim:
        values, idx = values.squeeze(d), idx.squeeze(d)
    return ModeResult(values, idx)


class SelectionMethods:
    """x.mode(), x.aminmax(), x.cummax(dim), x.cummin(dim)."""
    mode = mode
    aminmax = aminmax
    cummax = cummax
    cummin = cummin
