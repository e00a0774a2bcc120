"""The cpu backend's GEMMs on many cores: a large GEMM runs as tiles of its output, one
single-threaded BLAS call per tile, on the worker threads (cpu_threads.py), and the fused layer
(`gemm_bias_act`) adds the bias and applies the activation to each tile right after its GEMM,
while the tile is still in that core's cache. BLAS's own threads never run: after a threaded call
OpenBLAS's idle threads busy-wait for a while, taking the cores from the blocked elementwise ops
that follow. A GEMM with a long K and a small output runs as split-K instead.

Bits: every tile edge lies on a multiple of the rows / columns `tile_steps()` found for this
machine's BLAS (probed once: tiles of a whole call, at one thread, that give its bits; OpenBLAS's
SkylakeX sgemm keeps them for tiles of 64 rows and columns, its Haswell sgemm on AMD EPYC for
rows in multiples of 24 and for no cut of the columns), and each tile is large enough for
OpenBLAS's regular kernels (not its small-matrix ones), so each output sums its K in the order of
one single-threaded BLAS call on the whole matrices: the result is the same on any thread count,
and (1 thread or many) that of numpy's one call with BLAS at one thread (tests/test_cpu_gemm.py).
numpy's one call with BLAS's own threads splits some K (longer than BLAS's K block, not a
multiple of it; on the Haswell kernels any K) in another order than its single-threaded call, so
there it differs from both in the last bits: the one-call bits were never independent of the
machine's core count. float64 GEMMs stay one call with BLAS's own threads: OpenBLAS's dgemm
(SkylakeX) computes its last columns in another order when the rows are cut, so tiles would not
give one call's bits.
A mixin of NumpyBackend (numr_web/backends/numpy_backend.py)."""
from __future__ import annotations

import functools
import heapq
import math

try:
    import numpy as np
except ImportError:         # no numpy (the browser): NumpyBackend.probe says so
    np = None

from ..vocab.activations import ACT
from .cpu_blocks import big, blocks_or_one, is_narrow, pass_block, row_blocks, thread_block
from .cpu_blocks import widen as _widen
from .cpu_elementwise import jit_act
from .cpu_threads import (blocks, can_hold_blas, in_parallel, num_threads,
                          parallel_blas_for, parallel_for, parallel_min, single_threaded_blas)

_FLOAT32 = np.dtype(np.float32) if np else None
# A 2-D GEMM with a K at least SPLIT_K_MIN long and an output of at most SPLIT_K_MAX_OUT elements
# is computed as partial products over chunks of SPLIT_K_CHUNK (fixed: the result does not depend
# on the thread count)
SPLIT_K_MIN = 1 << 15
SPLIT_K_MAX_OUT = 1 << 18
SPLIT_K_CHUNK = 2048
# Candidate tile edges, in rows / columns: multiples of the sgemm kernels' micro-tiles (OpenBLAS's
# are 2 to 32 wide, 24 for the Haswell kernel's rows); tile_steps() keeps the first that gives the
# whole call's bits on this machine (finer steps balance the threads' tiles better).
TILE_STEPS = (64, 24, 96, 192)
# Multiply-adds of the smallest tile: OpenBLAS runs products under 100^3 (on AVX-512 CPUs) with
# its small-matrix kernels, which add in another order than its regular ones.
TILE_MIN_WORK = 1 << 21
# OpenBLAS runs a GEMM of fewer multiply-adds on one thread whatever its setting: no need to
# hold it.
BLAS_THREADED_MIN = 1 << 18
# Tiles per thread at most: a grid of more tiles than threads is chosen where its rounds balance
# better (gemm_tiles counts them), and then a core slowed by other work takes fewer.
TILES_PER_THREAD = 2
# What packing one element of a tile's operands costs, in multiply-adds (OpenBLAS copies a tile's
# rows of a and columns of b into its kernel's layout: memory-bound, ~20 multiply-adds' time)
PACK_COST = 16


def split_k(a, b):
    m, k = a.shape
    n = b.shape[1]
    return k >= SPLIT_K_MIN and m * n <= SPLIT_K_MAX_OUT and k >= 4 * max(m, n) and \
        a.dtype.kind == "f" and b.dtype == a.dtype


def _aligned(n, parts, step):
    """range(n) cut into about `parts` pieces whose edges lie on multiples of `step`."""
    size = -(-n // max(1, parts))
    return blocks(n, -(-size // step) * step)


@functools.lru_cache(maxsize=None)
def tile_steps():
    """(row step, column step): the first of TILE_STEPS at which tiles of a float32 GEMM's
    output, each one call with BLAS at one thread, give the whole call's bits on this machine
    (every operand layout, a K within and one past BLAS's K block, tiles of at least
    TILE_MIN_WORK multiply-adds as gemm_tiles makes them, out of reach of OpenBLAS's
    small-matrix kernels); None where none does: the output is then not cut along that axis.
    Probed once per process, at the first tiled GEMM (a few small GEMMs on one core)."""
    rng = np.random.default_rng(0)
    steps = [None, None]
    with single_threaded_blas():
        for step in TILE_STEPS:
            size = 2 * step + 37                 # edges at step and 2 step, a ragged last tile
            edges = [(0, step), (step, 2 * step), (2 * step, size)]
            ok = [True, True]
            for k in (257, 777):
                a0 = rng.standard_normal((size, k), dtype=np.float32)
                b0 = rng.standard_normal((k, size), dtype=np.float32)
                for a in (a0, np.asfortranarray(a0)):
                    for b in (b0, np.asfortranarray(b0)):
                        whole = a @ b
                        ok[0] = ok[0] and all(np.array_equal(a[r0:r1] @ b, whole[r0:r1])
                                              for r0, r1 in edges)
                        ok[1] = ok[1] and all(np.array_equal(a @ b[:, c0:c1], whole[:, c0:c1])
                                              for c0, c1 in edges)
            for axis in (0, 1):
                if ok[axis] and steps[axis] is None:
                    steps[axis] = step
            if None not in steps:
                break
    return tuple(steps)


@functools.lru_cache(maxsize=512)
def gemm_tiles(m, n, k, threads, steps):
    """[(r0, r1, c0, c1), ...]: the output tiles of an m x k by k x n GEMM for `threads`
    threads, or None when fewer than two tiles of at least TILE_MIN_WORK fit. Of the grids with
    edges on multiples of `steps` (rows, columns; None: that axis uncut) and at most
    TILES_PER_THREAD tiles a thread, the one whose tiles finish first when each thread takes the
    next tile as it frees up (the pool's order), counting each tile's multiply-adds and the
    packing of its rows of a and columns of b (PACK_COST multiply-adds an element): balanced
    rounds, square tiles."""
    cap = min(TILES_PER_THREAD * threads, m * n * k // TILE_MIN_WORK)
    if cap < 2:
        return None
    best = None
    for rows in _grids(m, cap, steps[0]):
        for cols in _grids(n, cap // len(rows), steps[1]):
            count = len(rows) * len(cols)
            if count < 2:
                continue
            sizes = [(r1 - r0) * k * (c1 - c0) + PACK_COST * k * (r1 - r0 + c1 - c0)
                     for r0, r1 in rows for c0, c1 in cols]
            if min(r1 - r0 for r0, r1 in rows) * min(c1 - c0 for c0, c1 in cols) * k < \
                    TILE_MIN_WORK:
                continue
            if count <= threads:
                finish = max(sizes)
            else:                                     # the next tile to the first free thread
                free = [0] * threads
                for w in sizes:
                    heapq.heapreplace(free, free[0] + w)
                finish = max(free)
            key = (finish, count)
            if best is None or key < best[0]:
                best = key, [(r0, r1, c0, c1) for r0, r1 in rows for c0, c1 in cols]
    return None if best is None else best[1]


def _grids(n, most, step):
    """The distinct cuts of range(n) into at most `most` pieces with edges on multiples of
    `step` (_aligned's); only the whole range when step is None."""
    if step is None:
        return [[(0, n)]]
    seen, out = set(), []
    for parts in range(1, min(most, -(-n // step)) + 1):
        cut = _aligned(n, parts, step)
        if len(cut) <= most and (cut[0][1], len(cut)) not in seen:
            seen.add((cut[0][1], len(cut)))
            out.append(cut)
    return out


class _Epilogue:
    """The fused layer's bias + activation over the GEMM's z (2-D, its dtype the computing one):
    y (of `dtype`) and, when the row saves it, z (of `dtype`), applied a tile at a time, in
    row pieces of about cpu_blocks.thread_block() elements (in cache on a few threads; larger on
    many, where each numpy call hands the GIL over)."""

    def __init__(self, z2, bias, row, dtype):
        self.z2, self.row = z2, row
        self.bias = None if bias is None else _widen(bias)
        self.keep_z = row.saves == "z"
        self.in_place = not self.keep_z and z2.dtype == dtype     # y overwrites z (nobody keeps z)
        self.y2 = z2 if self.in_place else np.empty(z2.shape, dtype)
        self.zs2 = z2 if not self.keep_z or z2.dtype == dtype else np.empty(z2.shape, dtype)
        self.fresh = self.keep_z and not row.np.keeps_z           # the formula would overwrite z
        self.jit = jit_act(row.name, dtype) if z2.dtype == dtype else None

    def tile(self, r0, r1, c0, c1):
        fwd, bias = self.row.np.fwd, self.bias
        if self.jit is not None:               # one compiled loop over the tile (cpu_jit.py)
            k, f = self.jit[:2]
            k.act_fwd(f, self.z2[r0:r1, c0:c1], k.none if bias is None else bias[c0:c1],
                      self.y2[r0:r1, c0:c1])
            return
        apply = self.row.name != "none" or not self.in_place
        for a, b in row_blocks(r1 - r0, c1 - c0, thread_block()):
            rs = slice(r0 + a, r0 + b)
            zb = self.z2[rs, c0:c1]
            if bias is not None:
                zb += bias[c0:c1]
            if apply:
                yb = fwd(np, zb.copy() if self.fresh else zb)
                if not (self.in_place and yb is zb):
                    self.y2[rs, c0:c1] = yb
            if self.zs2 is not self.z2:
                self.zs2[rs, c0:c1] = zb

    def result(self, shape):
        return self.y2.reshape(shape), (self.zs2.reshape(shape) if self.keep_z else None)


class CpuGemm:
    def _gemm_operands(self, a, b):
        """(a2, b, out shape) with a's batch dims folded into its rows when b is one matrix
        (float16 / bfloat16 widened to float32, densely copied where the fold needs a copy);
        None for a batched b (numpy's loop over the batch)."""
        if b.ndim != 2:
            return None
        if a.ndim > 2 and big(a) and (is_narrow(a) or self._needs_copy(a, (-1, a.shape[-1]))):
            a = self._dense_copy(a, np.float32 if is_narrow(a) else None)
        a, b = _widen(a), _widen(b)
        shape = a.shape[:-1] + b.shape[-1:]
        return a.reshape(math.prod(a.shape[:-1]), a.shape[-1]), b, shape

    def _tiles(self, a2, b):
        """The GEMM's tiles (one tile: one call with BLAS at one thread), or None for numpy's
        one call with BLAS as it is: fewer multiply-adds than parallel_min() or than BLAS would
        thread, nested in a block, not float32, or BLAS's threads cannot be held."""
        m, k = a2.shape
        n = b.shape[1]
        if m * n * k < max(parallel_min(), BLAS_THREADED_MIN) or in_parallel() or \
                a2.dtype != _FLOAT32 or b.dtype != _FLOAT32 or not can_hold_blas():
            return None
        threads = num_threads()
        return (gemm_tiles(m, n, k, threads, tile_steps()) if threads > 1 else None) or \
            [(0, m, 0, n)]

    def _gemm(self, a, b):
        ops = self._gemm_operands(a, b)
        if ops is None:
            return super()._gemm(a, b)
        a2, b2, shape = ops
        if split_k(a2, b2) and big(a2, b2):
            return self._gemm_split_k(a2, b2).reshape(shape)
        tiles = self._tiles(a2, b2)
        if tiles is None:
            return super()._gemm(a2, b2).reshape(shape)
        out = np.empty((a2.shape[0], b2.shape[1]), a2.dtype)
        self._run_tiles(a2, b2, out, tiles, None)
        return out.reshape(shape)

    def gemm_bias_act(self, a, b, bias, act):
        ops = self._gemm_operands(a, b)
        tiles = None if ops is None or split_k(ops[0], ops[1]) else self._tiles(ops[0], ops[1])
        if tiles is None:
            z = self._gemm(a, b) if ops is None else self._gemm(ops[0], ops[1]).reshape(ops[2])
            return self._epilogue(z, bias, ACT[act], a.dtype)     # the GEMM runs once
        a2, b2, shape = ops
        z2 = np.empty((a2.shape[0], b2.shape[1]), a2.dtype)
        ep = _Epilogue(z2, bias, ACT[act], a.dtype)
        self._run_tiles(a2, b2, z2, tiles, ep)
        return ep.result(shape)

    def _run_tiles(self, a2, b2, out, tiles, ep):
        """out = a2 @ b2, tile by tile on the threads with BLAS at one thread; ep.tile after
        each tile's GEMM."""

        def body(i):
            r0, r1, c0, c1 = tiles[i]
            np.matmul(a2[r0:r1], b2[:, c0:c1], out=out[r0:r1, c0:c1])
            if ep is not None:
                ep.tile(r0, r1, c0, c1)
        if len(tiles) == 1:
            with single_threaded_blas():
                body(0)
        else:
            parallel_blas_for(len(tiles), body)

    def _gemm_split_k(self, a, b):
        """a @ b as a sum of partial products over fixed K chunks, computed in parallel (BLAS at
        one thread each) and added in chunk order: BLAS splits only M and N among its threads,
        and a weight gradient's small output (a conv's C*k*k x O) over a long K (every pixel of
        the batch) keeps few of them busy. A different order of the K sum than BLAS's own, the
        same for every thread count; its error bound is no larger (tests/test_cpu_threads.py)."""
        parts = blocks(a.shape[1], SPLIT_K_CHUNK)
        partial = np.empty((len(parts), a.shape[0], b.shape[1]), np.result_type(a, b))

        def body(i):
            k0, k1 = parts[i]
            np.matmul(a[:, k0:k1], b[k0:k1], out=partial[i])
        parallel_blas_for(len(parts), body)
        return partial.sum(axis=0)

    def _epilogue(self, z, bias, row, dtype):
        """The bias + activation over a GEMM's z that ran as one call, in row blocks on the
        threads."""
        if z.ndim == 0 or not z.flags.c_contiguous or z.size == 0 or (
                z.size < parallel_min() and jit_act(row.name, z.dtype) is None):
            return super()._epilogue(z, bias, row, dtype)
        n = z.shape[-1]
        ep = _Epilogue(z.reshape(-1, n), bias, row, dtype)
        parts = blocks_or_one(ep.z2.shape[0], n, pass_block(z.size))

        def body(i):
            ep.tile(parts[i][0], parts[i][1], 0, n)
        parallel_for(len(parts), body)
        return ep.result(z.shape)
