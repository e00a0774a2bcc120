"""Array views and stride algebra of the webgpu backend: pure Python, no GPU, no numpy.

A GPUArray is a strided view (storage, shape, dtype, element strides, element offset) of one GPU
buffer, so reshape of a dense tensor, permute, expand (stride 0) and basic slicing make views
without running a kernel. The functions below compute those views, merge dims for the kernels
(`coalesce`), split work into chunks that fit a storage binding (`chunk_rows`) and the byte range
a view needs bound (`byte_range`). Tested without a GPU (tests/test_webgpu_views.py).
"""
from __future__ import annotations

from ...shapes import dense_strides

# storage bytes per element (bool is one u32 per element in WGSL)
ITEMSIZE = {"float32": 4, "int32": 4, "bool": 4, "float16": 2}


def prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def broadcast_shapes(*shapes):
    """numpy's broadcast of shapes already known to be compatible (the ops layer checked)."""
    nd = max(len(s) for s in shapes)
    out = []
    for i in range(nd):
        d = 1
        for s in shapes:
            k = i - (nd - len(s))
            if k >= 0 and s[k] != 1:
                d = s[k]
        out.append(d)
    return tuple(out)


def coalesce(shape, stride_lists):
    """Drop size-1 dims and merge adjacent dims that are contiguous in every operand.
    Returns (shape, [strides of each operand]) as lists; () becomes []."""
    nshape, nstr = [], [[] for _ in stride_lists]
    for i, s in enumerate(shape):
        if s == 1:
            continue
        if nshape and all(ns[-1] == sl[i] * s for ns, sl in zip(nstr, stride_lists)):
            nshape[-1] *= s
            for ns, sl in zip(nstr, stride_lists):
                ns[-1] = sl[i]
            continue
        nshape.append(s)
        for ns, sl in zip(nstr, stride_lists):
            ns.append(sl[i])
    return nshape, nstr


def reshape_strides(shape, strides, newshape):
    """Strides that let a strided view take `newshape` without a copy, or None (numpy's rule:
    every group of old dims merged or split must be contiguous within itself)."""
    old = [(s, st) for s, st in zip(shape, strides) if s != 1]
    new = [1] * len(newshape)
    oi = ni = 0
    while ni < len(newshape) and oi < len(old):
        np_, op = newshape[ni], old[oi][0]
        nj, oj = ni + 1, oi + 1
        while np_ != op:
            if np_ < op:
                np_ *= newshape[nj]
                nj += 1
            else:
                op *= old[oj][0]
                oj += 1
        for k in range(oi, oj - 1):
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return None
        new[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            new[k - 1] = new[k] * newshape[k]
        ni, oi = nj, oj
    return tuple(new)


class GPUArray:
    """A strided view of a GPU buffer. shape/strides/offset in elements of `dtype`; `storage`
    is a buffers.Storage (anything with .raw and .nbytes)."""

    __slots__ = ("storage", "shape", "dtype", "strides", "offset", "view", "source")

    def __init__(self, storage, shape, dtype, strides=None, offset=0, view=False, source=None):
        self.storage = storage
        self.view = view          # made by reshape / permute / expand / slice of another array
        self.source = source      # permuted: the array permuted (the inverse permutation gives it)
        self.shape = tuple(shape)
        self.dtype = dtype
        self.strides = tuple(strides) if strides is not None else dense_strides(self.shape)
        self.offset = offset

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return prod(self.shape)

    @property
    def itemsize(self):
        return ITEMSIZE[self.dtype.name]

    @property
    def is_contiguous(self):
        return all(st == ds for s, st, ds in zip(self.shape, self.strides,
                                                 dense_strides(self.shape)) if s != 1)

    def span(self):
        """Elements from offset to the last element addressed, + 1 (0 if empty)."""
        if self.size == 0:
            return 0
        return 1 + sum((s - 1) * st for s, st in zip(self.shape, self.strides))

    def __repr__(self):
        return f"GPUArray(shape={self.shape}, dtype={self.dtype.name}, strides={self.strides}, " \
               f"offset={self.offset})"


# -- views: new GPUArrays of the same storage -------------------------------------------------------
def permuted(h, perm):
    """h's axes permuted; h's own source where that undoes h's permutation (x.T.T is x: the
    transposed GEMM result a weight's gradient arrives as is then no view to copy)."""
    shape, strides = tuple(h.shape[p] for p in perm), tuple(h.strides[p] for p in perm)
    src = h.source
    if src is not None and src.shape == shape and src.strides == strides and \
            src.offset == h.offset:
        return src
    return GPUArray(h.storage, shape, h.dtype, strides, h.offset, True, h)


def expanded(h, shape):
    """Broadcast to `shape` (same rank or more): stride 0 on new and stretched dims."""
    shape = tuple(shape)
    if shape == h.shape:
        return h
    pad = len(shape) - h.ndim
    strides = [0] * pad
    for s, hs, st in zip(shape[pad:], h.shape, h.strides):
        strides.append(0 if hs == 1 and s != 1 else st)
    return GPUArray(h.storage, shape, h.dtype, strides, h.offset, True)


def sliced(h, index):
    """index: one entry per leading dim, an int (dim dropped) or a normalised (start, stop, step)."""
    index = tuple(index) + tuple((0, s, 1) for s in h.shape[len(index):])
    off = h.offset
    shape, strides = [], []
    for ix, s, st in zip(index, h.shape, h.strides):
        if isinstance(ix, int):
            off += ix * st
            continue
        start, stop, step = ix
        ln = max(0, -(-(stop - start) // step))
        if ln:
            off += start * st
        shape.append(ln)
        strides.append(st * step)
    return GPUArray(h.storage, shape, h.dtype, strides, off, True)


def reshaped(h, shape):
    """A view of h with `shape` (h itself for its own shape), or None when the data must be
    copied first."""
    shape = tuple(shape)
    if shape == h.shape:
        return h
    if h.is_contiguous or h.size == 0:
        return GPUArray(h.storage, shape, h.dtype, None, h.offset, True)
    st = reshape_strides(h.shape, h.strides, shape)
    return None if st is None else GPUArray(h.storage, shape, h.dtype, st, h.offset, True)


def full_index(shape):
    """The index selecting everything of `shape` (as a list, to modify one dim)."""
    return [(0, s, 1) for s in shape]


# -- binding ranges and chunks ----------------------------------------------------------------------
def joined(hs, axis):
    """The concatenation of views hs along `axis` as a view, where they lie side by side in one
    buffer (same storage, dtype and strides, each starting where the one before ends along axis);
    None otherwise."""
    h0 = hs[0]
    if any(h.storage is not h0.storage or h.dtype is not h0.dtype or h.strides != h0.strides
           for h in hs) or h0.strides[axis] <= 0:
        return None
    pos = h0.offset
    for h in hs:
        if h.offset != pos:
            return None
        pos += h.shape[axis] * h.strides[axis]
    shape = list(h0.shape)
    shape[axis] = sum(h.shape[axis] for h in hs)
    return GPUArray(h0.storage, shape, h0.dtype, h0.strides, h0.offset, True)


def byte_range(lo, span, itemsize, align, nbytes):
    """The storage binding for elements [lo, lo + span) of a buffer of `nbytes`: (byte offset
    aligned down to `align`, byte size in whole 16-byte vec4s but within the buffer, element
    offset of `lo` inside the binding)."""
    start = (lo * itemsize) // align * align
    end = (lo + max(span, 1)) * itemsize
    size = min(-(-(end - start) // 16) * 16, nbytes - start)
    return start, size, lo - start // itemsize


def chunk_rows(shape, strides, itemsizes, room):
    """Rows of the leading dim of a coalesced iteration space per chunk, so that every operand's
    binding (the rows it spans, in bytes) stays within `room`; None when one row alone does not
    fit. strides: per operand, aligned with shape."""
    rows = shape[0]
    for s, sz in zip(strides, itemsizes):
        inner = 1 + sum((d - 1) * st for d, st in zip(shape[1:], s[1:]))
        if inner * sz > room:
            return None
        if s[0] > 0 and ((shape[0] - 1) * s[0] + inner) * sz > room:
            rows = min(rows, max(1, (room // sz - inner) // s[0] + 1))
    return rows


def split_leading(h):
    """For a reduction too large for one binding: the axis to split (the first one longer than 1)
    and the bytes one index of it spans with the dims after it."""
    lead = min(range(h.ndim), key=lambda i: (h.shape[i] == 1, i))
    row_bytes = h.itemsize * (h.span() - (h.shape[lead] - 1) * h.strides[lead])
    return lead, row_bytes
