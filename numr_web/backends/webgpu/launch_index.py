"""Launcher of shaders/index.wgsl: gather along one axis and its adjoint scatter_add.

Both take strided views (the index is often a 1-D index broadcast with stride 0, as x[idx] and
embedding make it) and write a dense output. scatter_add runs one invocation per output element
that scans the index positions along the axis in order (deterministic, no atomics); the positions
are cut into dispatches of at most `chunk` (the loop budget), each continuing the previous sums.
A 1-D index broadcast over the other dims (x[idx], index_select, embedding) takes a segmented
reduction instead (seg_count, seg_total, seg_offsets, seg_place: a stable counting sort of the
positions by value, parallel over (chunk of SEG_CHUNK positions, value) pairs; seg_sum: each output
sums its value's segment), in the same order, with the same bits.
"""
from __future__ import annotations

from ...dtypes import int32
from ...errors import BackendLimitError
from .contract import INDEX, MAXD
from .views import prod

SEG_CHUNK = 256                     # positions per chunk of the counting sort

K = INDEX
L = K.layout
_FILE = K.name


def _words(shape, axis, axis_len):
    if len(shape) > MAXD:
        raise BackendLimitError(f"indexing a tensor of {len(shape)} dims; at most {MAXD}")
    w = L.new()
    w[L.NDIM], w[L.AXIS], w[L.AXIS_LEN] = len(shape), axis, axis_len
    w[L.SHAPE:L.SHAPE + len(shape)] = shape
    return w


def gather(d, x, axis, index, out):
    """out (dense, index's shape) = x gathered along axis at index (int32 view)."""
    if out.size == 0:
        return out
    w = _words(index.shape, axis, x.shape[axis])
    w[L.N] = out.size
    w[L.STRIDES_A:L.STRIDES_A + x.ndim] = x.strides
    w[L.STRIDES_IDX:L.STRIDES_IDX + index.ndim] = index.strides
    abuf, w[L.OFFSET_A] = d.bind(x, x.offset, x.span())
    ibuf, w[L.OFFSET_IDX] = d.bind(index, index.offset, index.span())
    obuf, w[L.OFFSET_OUT] = d.bind(out, out.offset, out.span())
    d.launch(_FILE, "gather", x.dtype, {}, w, {"out": obuf, "a": abuf, "idx": ibuf},
             d.grid(out.size))
    return out


def scatter_add(d, out, axis, index, src, chunk):
    """out (dense, zeros not needed) = the scatter-add of src at index along axis. chunk: index
    positions per dispatch (0: all in one)."""
    if out.size == 0:
        return out
    if src.is_contiguous and _segmentable(out, axis, index, chunk):
        return _segmented(d, out, axis, index, src, chunk)
    w = _words(out.shape, axis, out.shape[axis])
    w[L.N] = out.size
    w[L.IDX_SHAPE:L.IDX_SHAPE + index.ndim] = index.shape
    w[L.STRIDES_A:L.STRIDES_A + src.ndim] = src.strides
    w[L.STRIDES_IDX:L.STRIDES_IDX + index.ndim] = index.strides
    n = index.shape[axis]
    bufs = {}
    if src.size:
        bufs["a"], w[L.OFFSET_A] = d.bind(src, src.offset, src.span())
        bufs["idx"], w[L.OFFSET_IDX] = d.bind(index, index.offset, index.span())
    else:
        n = 0
    bufs["out"], w[L.OFFSET_OUT] = d.bind(out, out.offset, out.span())
    step = chunk or max(n, 1)
    for i0 in range(0, max(n, 1), step):
        wc = list(w)
        wc[L.I0], wc[L.I1], wc[L.ACCUM] = i0, min(n, i0 + step), int(i0 > 0)
        d.launch(_FILE, "scatter_add", src.dtype, {}, wc, bufs, d.grid(out.size))
    return out


def _segmentable(out, axis, index, chunk):
    """A 1-D index (stride 0 elsewhere) of the output's shape off the axis, within the budget."""
    n, nv = index.shape[axis], out.shape[axis]
    return (n > 0 and all(st == 0 or sz == 1 for dd, (sz, st) in
                          enumerate(zip(index.shape, index.strides)) if dd != axis)
            and all(a == b for dd, (a, b) in enumerate(zip(index.shape, out.shape)) if dd != axis)
            and (not chunk or max(n, nv + -(-n // SEG_CHUNK)) + 16 <= chunk))


def _segmented(d, out, axis, index, src, chunk):
    n, nv = index.shape[axis], out.shape[axis]
    nc = -(-n // SEG_CHUNK)
    seg = d.alloc(((nc + 2) * nv,), int32)
    perm = d.alloc((n,), int32)
    w = L.new()
    w[L.N], w[L.AXIS_LEN], w[L.SEG_I], w[L.INNER] = out.size, nv, n, prod(out.shape[axis + 1:])
    w[L.IDX_STRIDE], w[L.SEG_CHUNK], w[L.SEG_CHUNKS] = index.strides[axis], SEG_CHUNK, nc
    ibuf, w[L.OFFSET_IDX] = d.bind(index, index.offset, index.span())
    sbuf, _ = d.bind(seg, 0, seg.size)
    pbuf, _ = d.bind(perm, 0, perm.size)
    d.launch(_FILE, "seg_count", src.dtype, {}, w, {"idx": ibuf, "seg": sbuf}, d.grid(nc * nv))
    d.launch(_FILE, "seg_total", src.dtype, {}, w, {"seg": sbuf}, d.grid(nv))
    d.launch(_FILE, "seg_offsets", src.dtype, {}, w, {"seg": sbuf}, d.grid(nv))
    d.launch(_FILE, "seg_place", src.dtype, {}, w, {"idx": ibuf, "seg": sbuf, "perm": pbuf},
             d.grid(nc * nv))
    bufs = {"seg": sbuf, "perm": pbuf}
    bufs["a"], w[L.OFFSET_A] = d.bind(src, src.offset, src.span())
    bufs["out"], w[L.OFFSET_OUT] = d.bind(out, out.offset, out.span())
    d.launch(_FILE, "seg_sum", src.dtype, {}, w, bufs, d.grid(out.size))
    return out
