"""Launcher of shaders/index.wgsl: gather along one axis and its adjoint scatter_add.

Both take strided views (the index is often a 1-D index broadcast with stride 0, as x[idx] and
embedding make it) and write a dense output. scatter_add runs one invocation per output element
that scans the index positions along the axis in order (deterministic, no atomics); the positions
are cut into dispatches of at most `chunk` (the loop budget), each continuing the previous sums.
"""
from __future__ import annotations

from ...errors import BackendLimitError
from .contract import INDEX, MAXD

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
