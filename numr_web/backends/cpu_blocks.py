"""How the cpu backend cuts one op into blocks for its worker threads (cpu_threads.py): pure
planning over numpy arrays' shapes and strides, no threads here.

An op's output takes the memory layout numpy's one call would give it (a transposed input gives a
transposed output): numpy is asked by running the op on a 2 x 2 x ... corner of its operands
(`probe`), which has the operands' strides. Matching layouts matter beyond strides: a later sum
adds in memory order. The blocks are pieces of the outermost axis of that layout, or of the
flat array when every operand lies in it densely. Blocks never cut the innermost axes, so numpy
runs the same inner loops (the same SIMD code per element) on a block as on the whole array: a
blocked result is bit-identical.
"""
from __future__ import annotations

import math

try:
    import numpy as np
except ImportError:         # no numpy (the browser): NumpyBackend.probe says so
    np = None

from . import cpu_threads
from .cpu_threads import SETTINGS, settings

# Elements per block of a multi-pass formula (an activation, a norm): its temporaries stay in a
# core's L2 cache between passes.
CACHE_BLOCK = 1 << 16
# The smallest block of a one-pass op (a block costs a few microseconds of Python).
MIN_BLOCK = 1 << 15


def is_narrow(x):
    """Whether x is a float16 or bfloat16 array (ml_dtypes' bfloat16: numpy kind "V", 2 bytes;
    numr has no other 2-byte float or void dtype): computed in float32 and rounded once."""
    d = getattr(x, "dtype", None)
    return d is not None and d.itemsize == 2 and d.kind in "fV"


def widen(x):
    """A float16 / bfloat16 array as float32; other arrays unchanged."""
    return x.astype(np.float32) if is_narrow(x) else x


def big(*arrays):
    """Whether an op on these operands is large enough for blocks (cpu_threads.parallel_min).
    (The hottest methods inline this test: a small op must cost what it did before blocks.)"""
    m = (SETTINGS[0] or settings())[1]
    for a in arrays:
        if getattr(a, "size", 0) >= m:
            return True
    return False


def pass_block(n):
    """Elements per block of a multi-pass formula (an activation, a norm) over n elements. On a
    few threads CACHE_BLOCK, whose temporaries stay in a core's L2 cache between passes. On more,
    larger: each numpy call of a block hands the GIL to another thread (~10-20 us on 16 threads,
    docs/benchmarks.md), so each call must do far more work than that: up to `thread_block()`,
    as long as every thread still gets a block."""
    return max(CACHE_BLOCK, min(thread_block(), -(-n // cpu_threads.num_threads())))


def thread_block():
    """The most elements a block of a multi-pass formula covers: CACHE_BLOCK up to 4 threads,
    growing with the thread count beyond (fewer numpy calls, fewer GIL handovers)."""
    return CACHE_BLOCK * max(1, cpu_threads.num_threads() // 4)


def one_pass_block(n):
    """Block size for an op that passes over its data once: two blocks per thread (a block's
    Python work holds the GIL: fewer, larger blocks leave more of it to the others), of at least
    MIN_BLOCK elements, growing as thread_block() does past 4 threads (a block of MIN_BLOCK
    takes about as long as a GIL handover on 16 threads)."""
    return max(MIN_BLOCK * max(1, cpu_threads.num_threads() // 4),
               -(-n // (2 * cpu_threads.num_threads())))


def _is_array(x):
    return isinstance(x, np.ndarray) and x.ndim > 0


class Plan:
    """Blocks of an elementwise op with output `shape` laid out in axis order `perm` (outermost
    first; C order by default) over `operands` (arrays, numpy scalars or Python numbers; arrays
    broadcast to `shape`). `alloc(dtype)` makes the output; `view(x, i)` is a prepared operand's
    (or the output's) part in block i; `n` blocks of about `block` elements."""

    def __init__(self, shape, operands, block, perm=None):
        self.shape = tuple(shape)
        nd = len(self.shape)
        self.perm = tuple(range(nd)) if perm is None else tuple(perm)
        # flat: every array operand is full-size and dense in the output's memory order
        self.flat = all(not _is_array(x) or (x.shape == self.shape and _dense_in(x, self.perm))
                        for x in operands)
        size = math.prod(self.shape)
        if self.flat:
            self.axis = None
            self.ranges = cpu_threads.blocks(size, block)
        else:
            outer = [d for d in self.perm if self.shape[d] > 1]
            self.axis = outer[0] if outer else 0
            inner = size // max(1, self.shape[self.axis])
            self.ranges = cpu_threads.blocks(self.shape[self.axis], -(-block // max(1, inner)))
        self.n = len(self.ranges)
        self._prepared = {}

    def alloc(self, dtype):
        return alloc(self.shape, dtype, self.perm)

    def prepare(self, x):
        """x as the blocks will read it: a flat view, or broadcast to the output's shape."""
        if not _is_array(x):
            return x
        key = id(x)
        got = self._prepared.get(key)
        if got is None or got[0] is not x:
            if self.flat:
                v = x.transpose(self.perm).reshape(-1)
            else:
                v = x if x.shape == self.shape else np.broadcast_to(x, self.shape)
            got = self._prepared[key] = (x, v)
        return got[1]

    def view(self, prepared, i):
        if not _is_array(prepared):
            return prepared
        a, b = self.ranges[i]
        if self.axis is None:
            return prepared[a:b]
        idx = [slice(None)] * len(self.shape)
        idx[self.axis] = slice(a, b)
        return prepared[tuple(idx)]


def alloc(shape, dtype, perm):
    """An empty array of `shape` whose axes lie in memory in `perm` order (outermost first)."""
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return np.empty([shape[p] for p in perm], dtype).transpose(inv)


def corner(x):
    """x's first (up to) 2 entries along every axis: an array with x's strides, to ask numpy
    which layout an op on x gives."""
    if not _is_array(x):
        return x
    return x[tuple(slice(0, 2) for _ in x.shape)]


def layout(r, nd):
    """The axis order (outermost first) of numpy's result r; C order unless r is an nd array.
    Ties (size-1 axes) keep C order, as numpy's own ordering does."""
    if not isinstance(r, np.ndarray) or r.ndim != nd:
        return tuple(range(nd))
    return tuple(sorted(range(nd), key=lambda d: -abs(r.strides[d]) if r.shape[d] > 1 else 0)) \
        if any(r.shape[d] > 1 for d in range(nd)) else tuple(range(nd))


def _dense_in(x, perm):
    """Whether x, its axes taken in `perm` order, is C-contiguous (a flat view exists)."""
    expect = x.itemsize
    for d in reversed(perm):
        if x.shape[d] != 1:
            if x.strides[d] != expect:
                return False
            expect *= x.shape[d]
    return True


def row_blocks(rows, row_size, block=None):
    """[(start, stop), ...] of rows, each about `block` elements (at least one row; by default
    pass_block's size for a multi-pass formula over all the rows)."""
    if block is None:
        block = pass_block(rows * row_size)
    return cpu_threads.blocks(rows, max(1, block // max(1, row_size)))


def blocks_or_one(rows, row_size, block):
    """row_blocks for an op of rows x row_size elements from parallel_min on, else one block
    (the compiled loops run at every size, on the threads only where blocks pay)."""
    if rows * row_size >= (SETTINGS[0] or settings())[1]:
        return row_blocks(rows, row_size, block)
    return [(0, rows)]


def column_blocks(cols, rows):
    """[(start, stop), ...] of columns for a column-wise reduction over `rows` rows: one or a
    few per thread, at least 16 columns each (a 64-byte cache line of float32)."""
    per = max(16, -(-cols // (2 * cpu_threads.num_threads())))
    return cpu_threads.blocks(cols, per)


def split_axis(x, axes):
    """Of `axes`, the one to cut x's work along: the outermost in memory (largest stride) of
    those longer than 1; None when there is none. Cutting the outermost leaves the inner loops
    numpy runs unchanged."""
    axes = [d for d in axes if x.shape[d] > 1]
    if not axes:
        return None
    return min(axes, key=lambda d: (-abs(x.strides[d]), d))
