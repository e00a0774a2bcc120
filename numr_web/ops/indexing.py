"""Indexing with tensors: gather, index_select, x[i, :, j] with integer index tensors / lists,
x[bool_mask], and what is built on them (flip, tril/triu, masked_fill). The gradient of a gather
is a scatter-add: deterministic on every backend (a fixed summation order, no float atomics).
Index tensors are checked on the device and reported at the next readback (nothing here reads
back; python lists are checked on the host at once) — except boolean masks, whose result size
depends on the values: x[mask] reads the mask back."""
from __future__ import annotations

from .. import dtypes as dt
from .. import shapes as sh
from ..autograd import apply
from ..creation import arange, tensor
from ..errors import BackendLimitError, DTypeError, IndexOutOfRangeError, ShapeError
from ..tensor import Tensor
from .common import method_class, check_same_device
from .elementwise import where
from .shape_ops import getitem as basic_getitem
from ..vocab.registry import OPS, register

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
        valid = f"valid: {lo}..{n - 1}" if n else "no index is valid"
        index._backend.check_later(
            bad._data, what, f"an index is out of range for a dimension of size {n} ({valid})",
            IndexOutOfRangeError)


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
    if x.ndim == 0:                   # dims 0 / -1 of a 0-d tensor: a copy of it
        for d in dims:
            sh.normalize_axis(d, 0)
        return x.clone()
    axes = [sh.normalize_axis(d, x.ndim) for d in dims]
    if len(set(axes)) != len(axes):
        raise ShapeError(f"flip: dims {tuple(dims)} name a dim more than once; give each once")
    out = x
    for d in axes:
        n = x.shape[d]
        if n > 1:
            out = _take(out, d, arange(n - 1, -1, -1, device=x.device))
    return out if out is not x else x.clone()   # flip copies (torch), also of size-1 dims


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
    return isinstance(i, (Tensor, list, tuple)) or \
        (getattr(i, "ndim", 0) >= 1 and hasattr(i, "dtype"))       # a numpy array of indices


def _as_index(i, x):
    """An advanced index as a tensor on x's device; a python list is range-checked later on the
    host (it is already there)."""
    if isinstance(i, Tensor):
        check_same_device(x, i)
        return i
    return tensor(i, device=x.device, dtype="int32" if _flat(i) == [] else None)


def _y_dims(items, adv, ndim):
    """The dims of basic_getitem(x, items with every advanced index a full slice) that the
    advanced indices index (ints select first, None adds a dim, ... fills the rest: torch's
    rule)."""
    consumed = sum(1 for i in items if i is not None and i is not Ellipsis)
    dims, y = [], 0
    for k, i in enumerate(items):
        if i is Ellipsis:
            y += ndim - consumed
        elif k in adv:
            dims.append(y)
            y += 1
        elif i is None or isinstance(i, slice):
            y += 1
    return dims


def getitem(x, index):
    """Basic indexing (ints, slices, ..., None) plus integer index tensors / lists (broadcast
    together; torch's placement of their dims: where the first one is when they are adjacent,
    else first), or a boolean mask (which reads the mask back: its result size depends on its
    values). Every advanced index becomes one flat index into x's indexed dims: a gather, whose
    gradient is a deterministic scatter-add."""
    items = index if isinstance(index, tuple) else (index,)
    adv = [k for k, i in enumerate(items) if _is_advanced(i)]
    if not adv:
        return basic_getitem(x, index)
    items = tuple(i.tolist() if k in adv and not isinstance(i, (Tensor, list, tuple)) else i
                  for k, i in enumerate(items))     # numpy arrays: host lists, checked at once
    idxs = [_as_index(items[k], x) for k in adv]
    if any(i.dtype is dt.bool_ for i in idxs):
        if len(items) == 1:
            return _mask_select(x, idxs[0])
        return getitem(x, _masks_as_indices(x, items, dict(zip(adv, idxs))))
    for i in idxs:
        if i.dtype.kind != "i":
            raise DTypeError(f"index tensors must be int32 or bool, got {i.dtype.name}")
    placeholder = tuple(slice(None) if k in adv else i for k, i in enumerate(items))
    y = basic_getitem(x, placeholder)          # checks the basic indices (count, ints in range)
    dims = _y_dims(items, adv, x.ndim)
    sizes = [y.shape[d] for d in dims]
    for k, i, n in zip(adv, idxs, sizes):
        if isinstance(items[k], Tensor):
            _check_range(i, n, "x[index]", negative_ok=True)
        else:                                  # a list: check it now, before any device work
            bad = [v for v in _flat(items[k]) if not -n <= v < n]
            if bad:
                raise IndexOutOfRangeError(f"index {bad[0]} is out of range for a dimension of "
                                           f"size {n} (valid: {-n}..{n - 1})")
    for k in reversed(range(len(idxs))):       # a 0-d index tensor selects, as an int (torch)
        if idxs[k].ndim == 0:
            i, n, d = idxs[k], sizes[k], dims[k]
            picked = _take(y, d, where(i < 0, i + n, i).reshape(1))
            y = picked.reshape(y.shape[:d] + y.shape[d + 1:])
            del idxs[k], sizes[k], dims[k]
            dims[k:] = [e - 1 for e in dims[k:]]
    if not idxs:
        return y
    try:
        bshape = sh.broadcast_shapes(*(i.shape for i in idxs))
    except ShapeError:
        raise ShapeError("index tensors of shapes " + ", ".join(str(i.shape) for i in idxs) +
                         " do not broadcast together") from None
    total = sh.prod(sizes)
    if total >= 2 ** 31:
        raise BackendLimitError(f"the indexed dims hold {total} elements; int32 indices reach "
                                "2**31 - 1: index step by step")
    flat, stride = None, 1
    for i, n in reversed(list(zip(idxs, sizes))):
        term = where(i < 0, i + n, i)
        term = term * stride if stride != 1 else term
        flat = term if flat is None else flat + term
        stride *= n
    adjacent = dims == list(range(dims[0], dims[0] + len(dims)))
    if not adjacent:                           # the advanced dims go first, as torch / numpy
        rest = [d for d in range(y.ndim) if d not in dims]
        y, dims = y.permute(dims + rest), list(range(len(dims)))
    d0 = dims[0]
    rows = y.reshape(y.shape[:d0] + (total,) + y.shape[dims[-1] + 1:])
    out = _take(rows, d0, flat.expand(bshape).reshape(-1))
    return out.reshape(rows.shape[:d0] + bshape + rows.shape[d0 + 1:])


def _masks_as_indices(x, items, given):
    """x[mask, idx] as torch: each boolean mask becomes its nonzero coordinates, one index list
    per dim it covers (a readback of the mask: the count depends on its values)."""
    width = [given[k].ndim if k in given and given[k].dtype is dt.bool_ else
             (0 if i is None or i is Ellipsis else 1) for k, i in enumerate(items)]
    out, d = [], 0
    for k, i in enumerate(items):
        if k in given and given[k].dtype is dt.bool_:
            mask = given[k]
            if mask.shape != x.shape[d:d + mask.ndim]:
                raise ShapeError(f"boolean mask of shape {mask.shape} does not match the "
                                 f"indexed dims {x.shape[d:d + mask.ndim]} of the tensor")
            hits = [j for j, m in enumerate(_flat(mask.tolist())) if m]      # the readback
            for n, stride in zip(mask.shape, sh.dense_strides(mask.shape)):
                out.append([h // stride % n for h in hits] if hits else
                           tensor([], dtype="int32", device=x.device))
        else:
            out.append(i)
        d += x.ndim - sum(width) if i is Ellipsis else width[k]
    return tuple(out)


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


IndexingMethods = method_class(
    "IndexingMethods", __getitem__=getitem, gather=gather,
    index_select=index_select, flip=flip, tril=tril, triu=triu,
    masked_fill=masked_fill)
