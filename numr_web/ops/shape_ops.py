"""Shape and copy ops: reshape, permute, expand, basic indexing, concat and what is built on them.
Backends return views where they can (reshape of a dense tensor, permute, expand, slicing)."""
from __future__ import annotations

from .. import dtypes as dt
from .. import shapes as sh
from ..autograd import apply
from ..errors import BackendLimitError, ShapeError
from ..tensor import Tensor
from .common import method_class, check_same_device, sum_to_shape
from ..vocab.registry import OPS, register


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _concat_vjp(n, g):
    axis, start, out = n.attrs["axis"], 0, []
    for x in n.args:
        idx = tuple((0, d, 1) if i != axis else (start, start + x.shape[axis], 1)
                    for i, d in enumerate(g.shape))
        out.append(apply(OPS["slice"], g, index=idx))
        start += x.shape[axis]
    return tuple(out)


register("reshape", lambda be, x, shape: (be.reshape(x, shape), None),
         lambda n, g: (g.reshape(n.args[0].shape),), vjp_reads_saved=False)
register("permute", lambda be, x, perm: (be.permute(x, perm), None),
         lambda n, g: (g.permute(_inverse(n.attrs["perm"])),), vjp_reads_saved=False)
register("expand", lambda be, x, shape: (be.expand(x, shape), None),
         lambda n, g: (sum_to_shape(g, n.args[0].shape),), vjp_reads_saved=False)
register("slice", lambda be, x, index: (be.slice(x, index), None),
         lambda n, g: (apply(OPS["unslice"], g, shape=n.args[0].shape, index=n.attrs["index"]),),
         vjp_reads_saved=False)
register("unslice", lambda be, g, shape, index: (be.unslice(g, shape, index), None),
         lambda n, g: (apply(OPS["slice"], g, index=n.attrs["index"]),), vjp_reads_saved=False)


def _concat(be, *xs, axis, join=False):
    """join (split's backward, on gradients nobody else writes): a view where the pieces already
    lie side by side in one buffer (be.joined: attention's dq, dk, dv of a fused qkv projection)."""
    h = be.joined(list(xs), axis) if join else None
    return (h if h is not None else be.concat(list(xs), axis)), None


register("concat", _concat, _concat_vjp, vjp_reads_saved=False)
register("clone", lambda be, x: (be.copy(x), None), lambda n, g: (g,), vjp_reads_saved=False)


def _pieces(shape, axis, sizes):
    start = 0
    for s in sizes:
        yield tuple((0, d, 1) if i != axis else (start, start + s, 1) for i, d in enumerate(shape))
        start += s


def _split_vjp(n, gs):
    """One concat of the pieces' gradients (zeros for a piece nobody used), not a zero-filled
    copy of the input per piece summed afterwards."""
    like = next(g for g in gs if g is not None)
    shape, axis = n.args[0].shape, n.attrs["axis"]
    parts = [g if g is not None else like.new_zeros(tuple(b - a for a, b, _ in idx))
             for g, idx in zip(gs, _pieces(shape, axis, n.attrs["sizes"]))]
    return (apply(OPS["concat"], *parts, axis=axis, join=True),)


register("split", lambda be, x, axis, sizes: (tuple(be.slice(x, idx) for idx in
                                                    _pieces(x.shape, axis, sizes)), None),
         _split_vjp, vjp_reads_saved=False)


def _shape_args(shape):
    """f(2, 3) and f((2, 3)) alike."""
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        return tuple(shape[0])
    return shape


def _kw(kw, name, fn):
    if set(kw) != {name}:
        raise ShapeError(f"{fn}: unexpected keyword arguments {sorted(kw)}; give the sizes "
                         f"positionally or as {name}=(...)")
    return kw[name]


def reshape(x, *shape, **kw):
    if kw:                                        # x.reshape(shape=(...)), torch's keyword
        shape = (_kw(kw, "shape", "reshape"),)
    new = sh.reshape_target(x.shape, _shape_args(shape))
    if new == x.shape and not x.requires_grad:
        return x
    return apply(OPS["reshape"], x, shape=new)


def permute(x, *perm, **kw):
    if kw:                                        # x.permute(dims=(...)), torch's keyword
        perm = (_kw(kw, "dims", "permute"),)
    perm = tuple(sh.normalize_axis(p, x.ndim) for p in _shape_args(perm))
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError(f"permute: {perm} is not a permutation of the {x.ndim} axes of a "
                         f"tensor of shape {x.shape}")
    return apply(OPS["permute"], x, perm=perm)


def transpose(x, dim0=-2, dim1=-1):
    if x.ndim < 2 and (dim0, dim1) == (-2, -1):
        return x
    a, b = sh.normalize_axis(dim0, x.ndim), sh.normalize_axis(dim1, x.ndim)
    if x.ndim == 0:                   # dims 0 / -1 of a 0-d tensor: itself (as torch)
        return x
    perm = list(range(x.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return permute(x, perm)


def expand(x, *shape):
    shape = tuple(sh.as_int(s, "expand size") for s in _shape_args(shape))
    lead = len(shape) - x.ndim
    if lead < 0:
        raise ShapeError(f"expand: the target {shape} has fewer dims than the tensor {x.shape}")
    if any(s == -1 for s in shape[:lead]):
        raise ShapeError(f"expand: -1 (keep the size) is only allowed for existing dimensions, "
                         f"not for the {lead} new leading one(s) in {shape}")
    shape = tuple(s if s != -1 else x.shape[i - lead] for i, s in enumerate(shape))
    if any(s < 0 for s in shape):
        raise ShapeError(f"expand: sizes must be non-negative (or -1 to keep one), got {shape}")
    if not all(d == s or d == 1 for d, s in zip(x.shape, shape[lead:])):
        raise ShapeError(f"cannot expand a tensor of shape {x.shape} to {shape}; each "
                         "dimension must match or be 1 in the tensor")
    if shape == x.shape:
        return x
    limit = x._backend.max_elements(x.dtype)
    if sh.prod(shape) > limit:         # anything reading the view would allocate it
        raise BackendLimitError(f"expand: {shape} has {sh.prod(shape)} elements, more than the "
                                f"{x.device} device can hold ({limit})")
    return apply(OPS["expand"], x, shape=shape)


def getitem(x, index):
    idx, new_axes, out_shape = sh.normalize_index(index, x.shape)
    out = apply(OPS["slice"], x, index=idx)
    if new_axes:
        out = out.reshape(out_shape)
    return out


def concat(tensors, dim=0, *, axis=None):
    ts = list(tensors)
    if not ts:
        raise ShapeError("concat needs at least one tensor")
    if not all(isinstance(t, Tensor) for t in ts):
        raise ShapeError("concat takes a sequence of Tensors")
    check_same_device(*ts)
    if any(t.ndim == 0 for t in ts):
        raise ShapeError("concat: 0-d tensors cannot be concatenated; use stack, or reshape "
                         "them to (1,) first")
    d = dt.result_type(*ts)
    ts = [t.astype(d) for t in ts]
    axis = sh.normalize_axis(dim if axis is None else axis, ts[0].ndim)
    for t in ts[1:]:
        if t.ndim != ts[0].ndim or any(x != y for i, (x, y) in enumerate(zip(t.shape, ts[0].shape))
                                       if i != axis):
            raise ShapeError(f"concat: shapes {ts[0].shape} and {t.shape} differ outside dim "
                             f"{axis}; all other dimensions must match")
    return apply(OPS["concat"], *ts, axis=axis)


def stack(tensors, dim=0, *, axis=None):
    ts = list(tensors)
    if not ts:
        raise ShapeError("stack needs at least one tensor")
    for t in ts[1:]:
        if t.shape != ts[0].shape:
            raise ShapeError(f"stack: all tensors must have one shape, got {ts[0].shape} and "
                             f"{t.shape}")
    axis = sh.normalize_axis(dim if axis is None else axis, ts[0].ndim + 1)
    return concat([t.reshape(t.shape[:axis] + (1,) + t.shape[axis:]) for t in ts], axis)


def squeeze(x, dim=None):
    if dim is None:
        return reshape(x, tuple(d for d in x.shape if d != 1))
    dims = dim if isinstance(dim, (list, tuple)) else (dim,)
    dims = {sh.normalize_axis(d, x.ndim) for d in dims} if x.ndim else set()
    return reshape(x, tuple(d for i, d in enumerate(x.shape) if not (i in dims and d == 1)))


def unsqueeze(x, dim):
    dim = sh.normalize_axis(dim, x.ndim + 1)
    return reshape(x, x.shape[:dim] + (1,) + x.shape[dim:])


def flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return reshape(x, (1,))
    a, b = sh.normalize_axis(start_dim, x.ndim), sh.normalize_axis(end_dim, x.ndim)
    if a > b:
        raise ShapeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    return reshape(x, x.shape[:a] + (sh.prod(x.shape[a:b + 1]),) + x.shape[b + 1:])


def clone(x):
    return apply(OPS["clone"], x)


def contiguous(x):
    return x if not x._backend.is_view(x._data) else clone(x)


def stride(x, dim=None):
    """Element strides of x's layout as torch reports them: a view (transpose, slice, expand)
    keeps its base's memory and reports its strides; a computed result has the layout its
    backend gave it (dense on webgpu; numpy's / CuPy's choice on cpu / cuda)."""
    strides = x._backend.strides(x._data)
    return strides if dim is None else strides[sh.normalize_axis(dim, x.ndim)]


def is_contiguous(x, memory_format=None):
    """torch's rule: row-major strides, ignoring dims of size 1; an empty tensor is
    contiguous. Only the row-major format exists here."""
    if memory_format is not None and str(memory_format) != "torch.contiguous_format":
        raise ShapeError(f"is_contiguous: only the row-major (contiguous) format exists here, got "
                         f"memory_format={memory_format!r}")
    if x.size == 0:
        return True
    expected = 1
    for n, st in zip(reversed(x.shape), reversed(stride(x))):
        if n != 1:
            if st != expected:
                return False
            expected *= n
    return True


def narrow(x, dim, start, length):
    dim = sh.normalize_axis(dim, x.ndim)
    start, length = sh.as_int(start, "start"), sh.as_int(length, "length")
    if start < 0:
        start += x.shape[dim]
    if not 0 <= start <= start + length <= x.shape[dim] or length < 0:
        raise ShapeError(f"narrow: [{start}, {start + length}) is outside dim {dim} of size "
                         f"{x.shape[dim]}")
    return getitem(x, (slice(None),) * dim + (slice(start, start + length),))


def _need_dims(x, op):
    if x.ndim == 0:
        raise ShapeError(f"{op} needs a tensor with at least one dimension, got a 0-d tensor; "
                         "reshape it to (1,) first")


def split(x, split_size_or_sections, dim=0):
    _need_dims(x, "split")
    dim = sh.normalize_axis(dim, x.ndim)
    n = x.shape[dim]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [sh.as_int(s, "split size") for s in split_size_or_sections]
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise ShapeError(f"split: sections {sizes} must be non-negative and sum to the size "
                             f"{n} of dim {dim}")
    else:
        size = sh.as_int(split_size_or_sections, "split size")
        if size <= 0:
            raise ShapeError(f"split: the size must be positive, got {size}")
        sizes = [min(size, n - i) for i in range(0, n, size)] or [0]
    if len(sizes) == 1:
        return (narrow(x, dim, 0, n),)
    return apply(OPS["split"], x, axis=dim, sizes=tuple(sizes))


def chunk(x, chunks, dim=0):
    chunks = sh.as_int(chunks, "chunks")
    if chunks <= 0:
        raise ShapeError(f"chunk: chunks must be positive, got {chunks}")
    _need_dims(x, "chunk")
    n = x.shape[sh.normalize_axis(dim, x.ndim)]
    return split(x, max(1, -(-n // chunks)), dim)


def _T(self):
    return permute(self, tuple(reversed(range(self.ndim))))


def _iter(self):
    for i in range(len(self)):
        yield self[i]


ShapeOpsMethods = method_class(
    "ShapeOpsMethods", reshape=reshape, view=reshape, permute=permute, transpose=transpose,
    stride=stride, is_contiguous=is_contiguous, expand=expand, broadcast_to=expand,
    __getitem__=getitem, __iter__=_iter,
    T=property(_T), mT=property(lambda self: transpose(self, -2, -1)),
    flatten=flatten, squeeze=squeeze, unsqueeze=unsqueeze, clone=clone,
    contiguous=contiguous, narrow=narrow, split=split, chunk=chunk)
