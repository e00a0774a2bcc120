"""How the cpu backend cuts one op into blocks for its worker threads (cpu_threads.py): pure
planning over numpy arrays' shapes and strides, no threads here.

An elementwise op's output takes the memory order of its first full-size operand (as numpy's
own output would: a transposed input gives a transposed output); the blocks are pieces of the
outermost axis of that order, or of the flat array when every operand lies in that order
densely. Blocks never cut the innermost axes, so numpy runs the same inner loops (the same SIMD
code per element) on a block as on the whole array: a blocked result is bit-identical.
"""
from __future__ import annotations

import math

try:
    import numpy as np
except ImportError:         # no numpy (the browser): NumpyBackend.probe says so
    np = None

from . import cpu_threads

# Elements per block of a multi-pass formula (an activation, a norm): its temporaries stay in a
# core's L2 cache between passes.
CACHE_BLOCK = 1 << 16
# The smallest block of a one-pass op (a block costs a few microseconds of Python).
MIN_BLOCK = 1 << 15


def big(*arrays):
    """Whether an op on these operands is large enough for blocks (cpu_threads.parallel_min)."""
    return max((getattr(a, "size", 0) for a in arrays), default=0) >= cpu_threads.parallel_min()


def one_pass_block(n):
    """Block size for an op that passes over its data once: a few blocks per thread."""
    return max(MIN_BLOCK, -(-n // (4 * cpu_threads.num_threads())))


def _is_array(x):
    return isinstance(x, np.ndarray) and x.ndim > 0


class Plan:
    """Blocks of an elementwise op with output `shape` over `operands` (arrays, numpy scalars
    or Python numbers; arrays broadcast to `shape`). `alloc(dtype)` makes the output;
    `view(x, i)` is operand (or output) x's part in block i; `n` blocks."""

    def __init__(self, shape, operands, block):
        self.shape = tuple(shape)
        nd = len(self.shape)
        full = [x for x in operands if _is_array(x) and x.shape == self.shape]
        self.perm = _memory_order(full[0]) if full else tuple(range(nd))
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
        inv = [0] * len(self.perm)
        for i, p in enumerate(self.perm):
            inv[p] = i
        return np.empty([self.shape[p] for p in self.perm], dtype).transpose(inv)

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


def _memory_order(x):
    """x's axes from the largest stride to the smallest (ties in axis order): C order for a
    C-contiguous array."""
    return tuple(sorted(range(x.ndim), key=lambda d: -abs(x.strides[d])))


def _dense_in(x, perm):
    """Whether x, its axes taken in `perm` order, is C-contiguous (a flat view exists)."""
    expect = x.itemsize
    for d in reversed(perm):
        if x.shape[d] != 1:
            if x.strides[d] != expect:
                return False
            expect *= x.shape[d]
    return True


def row_blocks(rows, row_size, block=CACHE_BLOCK):
    """[(start, stop), ...] of rows, each about `block` elements (at least one row)."""
    return cpu_threads.blocks(rows, max(1, block // max(1, row_size)))


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
