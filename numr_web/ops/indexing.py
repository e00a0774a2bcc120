"""Indexing with tensors: gather, index_select, x[int_tensor], x[bool_mask], and what is built on
them (flip, tril/triu, masked_fill). The gradient of a gather is a scatter-add: deterministic on
every backend (a fixed summation order, no float atomics). Index values are checked on the device
and reported at the next readback (nothing here reads back) — except boolean masks, whose result
size depends on the values: x[mask] reads the mask back."""
from __future__ import annotations

from .. import dtypes as dt
from .. import shapes as sh
from ..autograd import apply
from ..creation import arange, tensor
from ..errors import CheckMessage, DTypeError, IndexOutOfRangeError, ShapeError
from ..tensor import Tensor
from .common import attach_methods, check_same_device
from .elementwise import where
from .shape_ops import getitem as basic_getitem
from .registry import OPS, register

register("gather", lambda be, x, index, axis: (be.gather(x, axis, index), None),
         lambda n, g: (apply(OPS["scatter_add"], n.args[1], g, shape=n.args[0].shape,
                             axis=n.attrs["axis"]), None))
register("scatter_add", lambda be, index, src, shape, axis: (be.scatter_add(shape, axis, index,
                                                                            src), None),
         lambda n, g: (None, apply(OPS["gather"], g, n.args[0], axis=n.attrs["axis"])),
         vjp_reads_saved=False)


def _index_tensor(index, like, what):
    if not isinstance(index, Tensor):
        index = tensor(index, device=like.device)
    check_same_device(like, index)
    if index.dtype.kind != "i":
        raise DTypeError(f"{what}: indices must be integers (int32), got {index.dtype.name}")
    return index


def _check_range(index, n, what, negative_ok=False):
    lo = -n if negative_ok else 0
    if index.size:
        bad = ((index < lo) | (index >= n)).max()
        index._backend.check_later(bad._data, CheckMessage(
            f"{what}: an index is out of range for a dimension of size {n} (valid: "
            f"{lo}..{n - 1})", IndexOutOfRangeError))


def gather(x, dim, index):
    """out[i][j] = x[i][index[i][j]] along dim (torch.gather)."""
    if x.ndim == 0:
        raise ShapeError("gather needs a tensor with at least one dimension; reshape it to (1,)")
    index = _index_tensor(index, x, "gather")
    dim = sh.normalize_axis(dim, x.ndim)
    if index.ndim != x.ndim:
        raise ShapeError(f"gather: index must have x's {x.ndim} dims, got shape {index.shape}")
    for d, (a, b) in enumerate(zip(index.shape, x.shape)):
        if d != dim and a > b:
            raise ShapeError(f"gather: index shape {index.shape} exceeds x's {x.shape} in dim {d}")
    _check_range(index, x.shape[dim], "gather")
    return apply(OPS["gather"], x, index, axis=dim)


def index_select(x, dim, index):
    """x's slices at the 1-D `index` along dim (torch.index_select)."""
    if x.ndim == 0:
        raise ShapeError("index_select needs a tensor with at least one dimension; reshape it to "
                         "(1,)")
    index = _index_tensor(index, x, "index_select")
    if index.ndim > 1:
        raise ShapeError(f"index_select: index must be 1-D, got shape {index.shape}")
    dim = sh.normalize_axis(dim, x.ndim)
    _check_range(index, x.shape[dim], "index_select")
    return _take(x, dim, index.reshape(-1))


def _take(x, dim, index1d):
    """x's slices at the 1-D index1d along dim, as a gather with the index broadcast."""
    shape = x.shape[:dim] + (index1d.shape[0],) + x.shape[dim + 1:]
    view = (1,) * dim + (index1d.shape[0],) + (1,) * (x.ndim - dim - 1)
    return apply(OPS["gather"], x, index1d.reshape(view).expand(shape), axis=dim)


def embedding(indices, weight, padding_idx=None):
    """weight's rows at `indices` (any shape): out has shape indices.shape + (dim,); the row
    padding_idx gets no gradient (torch's padding_idx)."""
    if not isinstance(weight, Tensor):
        raise DTypeError(f"embedding: weight must be a Tensor, got {type(weight).__name__}")
    indices = _index_tensor(indices, weight, "embedding")
    if weight.ndim != 2:
        raise ShapeError(f"embedding: weight must be (num_embeddings, dim), got {weight.shape}")
    pad = padding_index(padding_idx, weight.shape[0])
    _check_range(indices, weight.shape[0], "embedding")
    out = _take(weight, 0, indices.reshape(-1)).reshape(indices.shape + (weight.shape[1],))
    if pad is not None and out.requires_grad:       # same values; no gradient from those rows
        out = where((indices == pad).unsqueeze(-1), out.detach(), out)
    return out


def padding_index(padding_idx, n):
    """torch's padding_idx: None, or an int in [-n, n) (negative counts from the end)."""
    if padding_idx is None:
        return None
    p = sh.as_int(padding_idx, "embedding padding_idx")
    if not -n <= p < n:
        raise IndexOutOfRangeError(f"embedding: padding_idx {p} must be within "
                                   f"num_embeddings ({n}): -{n} <= padding_idx < {n}")
    return p % n


def flip(x, dims):
    dims = dims if isinstance(dims, (list, tuple)) else (dims,)
    if x.ndim == 0:                   # dims 0 / -1 of a 0-d tensor: itself
        for d in dims:
            sh.normalize_axis(d, 0)
        return x
    axes = [sh.normalize_axis(d, x.ndim) for d in dims]
    if len(set(axes)) != len(axes):
        raise ShapeError(f"flip: dims {tuple(dims)} name a dim more than once; give each once")
    for d in axes:
        n = x.shape[d]
        if n > 1:
            x = _take(x, d, arange(n - 1, -1, -1, device=x.device))
    return x


def _tri(x, diagonal, lower):
    if x.ndim < 2:
        raise ShapeError(f"{'tril' if lower else 'triu'} needs at least 2 dims, got {x.shape}")
    m, n = x.shape[-2:]
    offset = arange(n, device=x.device).reshape(1, n) - arange(m, device=x.device).reshape(m, 1)
    keep = (offset <= diagonal) if lower else (offset >= diagonal)
    return where(keep, x, False if x.dtype is dt.bool_ else 0)   # bool stays bool


def tril(x, diagonal=0):
    return _tri(x, sh.as_int(diagonal, "diagonal"), True)


def triu(x, diagonal=0):
    return _tri(x, sh.as_int(diagonal, "diagonal"), False)


def masked_fill(x, mask, value):
    mask = mask if isinstance(mask, Tensor) else tensor(mask, device=x.device)
    if mask.dtype is not dt.bool_:
        raise DTypeError(f"masked_fill: mask must be bool, got {mask.dtype.name}")
    if isinstance(value, Tensor):
        if value.ndim:
            raise ShapeError("masked_fill: value must be a number or a 0-d tensor")
        value = value.astype(x.dtype)
    out = where(mask, value, x)
    return out.astype(x.dtype) if out.dtype is not x.dtype else out


def _is_advanced(i):
    return isinstance(i, Tensor) or (isinstance(i, (list, tuple)) and not isinstance(i, str))


def getitem(x, index):
    """Basic indexing (ints, slices, ..., None) plus integer index tensors / lists (broadcast
    together), or a boolean mask (which reads the mask back: its result size depends on its
    values)."""
    items = index if isinstance(index, tuple) else (index,)
    adv = [k for k, i in enumerate(items) if _is_advanced(i)]
    if not adv:
        return basic_getitem(x, index)
    if len(adv) > 1:
        return _multi_getitem(x, items, adv)
    k = adv[0]
    idx = _as_index(x, items[k])
    if idx.dtype is dt.bool_:
        if len(items) != 1:
            raise ShapeError("a boolean mask index must be the only index")
        return _mask_select(x, idx)
    if idx.dtype.kind != "i":
        raise DTypeError(f"index tensors must be int32 or bool, got {idx.dtype.name}")
    # the dim the tensor indexes: count the real dims consumed by the basic indices before it
    before = items[:k]
    if any(i is Ellipsis for i in before):
        dim = x.ndim - sum(1 for i in items[k + 1:] if i is not None and i is not Ellipsis) - 1
    else:
        dim = sum(1 for i in before if i is not None)
    placeholder = items[:k] + (slice(None),) + items[k + 1:]
    y = basic_getitem(x, placeholder)
    dim_y = dim - sum(1 for i in before if isinstance(i, int)) + \
        sum(1 for i in before if i is None)
    n = y.shape[dim_y]
    _check_range(idx, n, "index", negative_ok=True)
    flat = where(idx < 0, idx + n, idx).reshape(-1)
    out = _take(y, dim_y, flat)
    return out.reshape(y.shape[:dim_y] + idx.shape + y.shape[dim_y + 1:])


def _as_index(x, item):
    idx = item if isinstance(item, Tensor) else \
        tensor(item, device=x.device, dtype="int32" if _flat(item) == [] else None)
    check_same_device(x, idx)
    return idx


def _multi_getitem(x, items, adv):
    """Several index tensors (torch's and numpy's advanced indexing): the basic indices first, then
    the index tensors, broadcast together to B, pick elements of their dims; B takes the place of
    those dims where they are adjacent in the basic result, else it leads (torch's rule)."""
    idxs = [_as_index(x, items[k]) for k in adv]
    for t in idxs:
        if t.dtype.kind != "i":
            raise DTypeError(f"index tensors must be int32 (a bool mask must be the only index), "
                             f"got {t.dtype.name}")
    y = basic_getitem(x, tuple(slice(None) if k in adv else i for k, i in enumerate(items)))
    pos, d = [], 0                     # each advanced entry's dim in y
    real = sum(1 for i in items if i is not None and i is not Ellipsis)
    for k, i in enumerate(items):
        if k in adv:
            pos.append(d)
        if i is Ellipsis:
            d += x.ndim - real
        elif not isinstance(i, int) or isinstance(i, bool):
            d += 1
    sizes = [y.shape[p] for p in pos]
    if sh.prod(sizes) >= 2 ** 31:
        raise ShapeError(f"indexing dims of sizes {sizes} together: more than 2^31 - 1 elements "
                         "(int32 indices); index them step by step")
    B = sh.broadcast_shapes(*[t.shape for t in idxs])
    flat, stride = None, 1
    for t, n in reversed(list(zip(idxs, sizes))):
        _check_range(t, n, "index", negative_ok=True)
        term = where(t < 0, t + n, t).expand(B) * stride
        flat, stride = term if flat is None else flat + term, stride * n
    rest = [p for p in range(y.ndim) if p not in pos]
    rows = y.permute(pos + rest).reshape((sh.prod(sizes),) + tuple(y.shape[p] for p in rest))
    out = _take(rows, 0, flat.reshape(-1)).reshape(B + rows.shape[1:])
    if pos[-1] - pos[0] == len(pos) - 1 and pos[0]:      # adjacent: B where those dims were
        nb, lead = len(B), pos[0]
        out = out.permute([nb + i for i in range(lead)] + list(range(nb)) +
                          [nb + i for i in range(lead, len(rest))])
    return out


def _mask_select(x, mask):
    if mask.shape != x.shape[:mask.ndim]:
        raise ShapeError(f"boolean mask of shape {mask.shape} does not match the tensor's "
                         f"leading dims {x.shape[:mask.ndim]}")
    hits = [i for i, m in enumerate(_flat(mask.tolist())) if m]      # the readback
    rows = x.reshape((sh.prod(mask.shape),) + x.shape[mask.ndim:])
    idx = tensor(hits, dtype="int32", device=x.device) if hits else \
        tensor([], dtype="int32", device=x.device)
    return _take(rows, 0, idx)


def _flat(v):
    if not isinstance(v, list):
        return [v]
    out = []
    for e in v:
        out.extend(_flat(e))
    return out


attach_methods(__getitem__=getitem, gather=gather,
               index_select=index_select, flip=flip, tril=tril, triu=triu,
               masked_fill=masked_fill)
