"""Sorting: argsort (a row: the backend's stable sort where it declares `can_argsort`, otherwise a
bitonic network of existing ops), and sort / topk / kthvalue / median / msort built on it.

Values are gathered from x at the sorted indices, so their gradient is gather's (a scatter-add
into the positions they came from), exactly torch's. Orders are torch's: NaN is larger than +inf
(last ascending, first descending), ties keep their original order (every sort here is stable).
"""
from __future__ import annotations

from collections import namedtuple

from .. import dtypes as dt
from .. import shapes as sh
from ..autograd import apply
from ..creation import arange, full
from ..errors import IndexOutOfRangeError
from ..gradmode import no_grad
from .common import method_class, need_tensor
from .elementwise import where
from ..vocab.registry import OPS, register
from .shape_ops import concat, stack

register("argsort", lambda be, x, axis, descending: (be.argsort(x, axis, descending), None), None)

SortResult = namedtuple("sort", ("values", "indices"))
TopkResult = namedtuple("topk", ("values", "indices"))
KthvalueResult = namedtuple("kthvalue", ("values", "indices"))
MedianResult = namedtuple("median", ("values", "indices"))


# -- the bitonic network (devices without a sort primitive) ------------------------------------------
def _keys(x, descending):
    """(rank class, value): their lexicographic order, then the position, is torch's order."""
    if x.dtype is dt.bool_:
        x = x.astype(dt.int32)
    if x.dtype.is_floating:
        nan = x != x
        cls = nan.astype(dt.int32) * (-1 if descending else 1)
        val = where(nan, 0.0, x)
        val = -val if descending else val
    else:
        cls = x.astype(dt.int32) * 0
        val = ~x if descending else x                 # ~v = -v - 1 reverses without overflow
    return cls, val


def _pad(t, m, value):
    n = t.shape[-1]
    if m == n:
        return t
    return concat([t, full(t.shape[:-1] + (m - n,), value, dtype=t.dtype, device=t.device)], -1)


def _bitonic_argsort(x, descending):
    """Indices sorting x along its last dim: log2(m)(log2(m)+1)/2 compare-exchange stages over
    m = the next power of two (padding sorts after everything)."""
    n = x.shape[-1]
    m = 1 << max(n - 1, 0).bit_length()
    cls, val = _keys(x, descending)
    cls, val = _pad(cls, m, 2), _pad(val, m, 0)              # padding: a class after NaN
    lead = x.shape[:-1]
    pos = arange(m, dtype=dt.int32, device=x.device).expand(lead + (m,))
    k = 2
    while k <= m:
        j = k // 2
        while j >= 1:
            blocks = m // (2 * j)
            split = lead + (blocks, 2, j)
            (ca, cb), (va, vb), (pa, pb) = ((t.reshape(split)[..., 0, :], t.reshape(split)[..., 1, :])
                                           for t in (cls, val, pos))
            less = (ca < cb) | ((ca == cb) & ((va < vb) | ((va == vb) & (pa < pb))))
            up = ((arange(blocks, dtype=dt.int32, device=x.device) * (2 * j)) & k) == 0
            keep = less == up.reshape(blocks, 1)
            cls, val, pos = (stack([where(keep, a, b), where(keep, b, a)], -2).reshape(lead + (m,))
                             for a, b in ((ca, cb), (va, vb), (pa, pb)))
            j //= 2
        k *= 2
    return pos[..., :n]


# -- public functions -----------------------------------------------------------------------------------
def argsort(x, dim=-1, descending=False, *, stable=False):
    """Indices (int32) that sort x along dim (torch.argsort); always stable."""
    x = need_tensor(x, "argsort")
    if x.ndim == 0:
        sh.normalize_axis(dim, 1)
        return full((), 0, dtype=dt.int32, device=x.device)
    d = sh.normalize_axis(dim, x.ndim)
    if x.shape[d] <= 1 or x.size == 0:
        shape = x.shape
        return arange(shape[d], dtype=dt.int32, device=x.device).reshape(
            (1,) * d + (shape[d],) + (1,) * (x.ndim - d - 1)).expand(shape).contiguous()
    with no_grad():
        if x._backend.can_argsort:
            return apply(OPS["argsort"], x.detach(), axis=d, descending=bool(descending))
        moved = x.detach().movedim(d, -1)
        return _bitonic_argsort(moved, bool(descending)).movedim(-1, d).contiguous()


def _gather(x, d, idx):
    return apply(OPS["gather"], x, idx, axis=d)


def sort(x, dim=-1, descending=False, *, stable=False):
    """(values, indices) sorted along dim (torch.sort); the values carry x's gradient."""
    x = need_tensor(x, "sort")
    idx = argsort(x, dim, descending)
    if x.ndim == 0:
        return SortResult(x.clone(), idx)
    return SortResult(_gather(x, sh.normalize_axis(dim, x.ndim), idx), idx)


def msort(x):
    return sort(x, 0).values


def topk(x, k, dim=-1, largest=True, sorted=True):  # noqa: A002 (torch's name)
    """The k largest (smallest with largest=False) along dim, in order, and their indices."""
    x = need_tensor(x, "topk")
    k = sh.as_int(k, "topk k")
    d = sh.normalize_axis(dim, max(x.ndim, 1))
    n = x.shape[d] if x.ndim else 1
    if not 0 <= k <= n:
        raise IndexOutOfRangeError(f"topk: k={k} is out of range for a dimension of size {n} "
                                   f"(valid: 0..{n})")
    if x.ndim == 0:
        return TopkResult(x.clone() if k else x.reshape(1)[:0].reshape(()), argsort(x))
    idx = argsort(x, d, descending=largest).narrow(d, 0, k)
    return TopkResult(_gather(x, d, idx), idx)


def kthvalue(x, k, dim=-1, keepdim=False):
    """The k-th smallest (1-based) along dim and its index (torch.kthvalue)."""
    x = need_tensor(x, "kthvalue")
    k = sh.as_int(k, "kthvalue k")
    d = sh.normalize_axis(dim, max(x.ndim, 1))
    n = x.shape[d] if x.ndim else 1
    if not 1 <= k <= n:
        raise IndexOutOfRangeError(f"kthvalue: k={k} is out of range for a dimension of size {n} "
                                   f"(valid: 1..{n})")
    if x.ndim == 0:
        return KthvalueResult(x.clone(), argsort(x))
    idx = argsort(x, d).narrow(d, k - 1, 1)
    vals = _gather(x, d, idx)
    if not keepdim:
        vals, idx = vals.squeeze(d), idx.squeeze(d)
    return KthvalueResult(vals, idx)


def median(x, dim=None, keepdim=False):
    """The lower median (torch.median): NaN where the slice holds a NaN. Without dim, the value
    over all elements; with dim, (values, indices)."""
    x = need_tensor(x, "median")
    if dim is None:
        if x.size == 0:
            raise IndexOutOfRangeError("median of an empty tensor is undefined")
        return median(x.reshape(-1), 0).values
    d = sh.normalize_axis(dim, max(x.ndim, 1))
    if x.ndim == 0:
        return MedianResult(x.clone(), argsort(x))
    n = x.shape[d]
    if n == 0:
        raise IndexOutOfRangeError(f"median over an empty dimension (shape {x.shape})")
    idx = argsort(x, d)
    if x.dtype.is_floating:                     # sorted NaNs come last: take the first of them
        nans = (x != x).astype(dt.int32).sum(d, keepdims=True)
        at = where(nans > 0, n - nans, (n - 1) // 2)
    else:
        at = full(idx.narrow(d, 0, 1).shape, (n - 1) // 2, dtype=dt.int32, device=x.device)
    pick = _gather(idx, d, at)
    vals = _gather(x, d, pick)
    if not keepdim:
        vals, pick = vals.squeeze(d), pick.squeeze(d)
    return MedianResult(vals, pick)


SortingMethods = method_class(
    "SortingMethods", argsort=argsort, sort=sort, msort=msort, topk=topk, kthvalue=kthvalue,
    median=median)
