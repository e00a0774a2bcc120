"""Launches of the fused attention kernels (no T x T scores in memory), two families:

* attention_tiled.cu, for float32 and float16 up to head dim 128: FlashAttention-2's schedule on
  the SIMT pipes with full float32 products. Forward: a block per (batch, BR query rows), key
  tiles in shared memory, online softmax, the log-sum-exp kept (float32). Backward: one kernel per
  query block for dq (it also writes delta = rowsum(dout * out)), one per key block for dk and dv;
  no atomics, so gradients are deterministic. Tile shapes: TILES (per kernel and padded head dim:
  warps a block, rows a thread, tile columns), a knob (`Attention.tiles`) that bench/attention.py
  can sweep. Their shared memory is opted in past 48 KiB where the device allows it.
* attention.cu, one thread a query (key) row: float64, and where the device cannot give a tiled
  kernel its shared memory.

None where a case is outside both (head dims over 128, a mask whose batch dims do not coalesce
into 4, a dtype without a kernel): the caller then takes the composed path (cuBLAS products and
elementwise kernels).
"""
from __future__ import annotations

from ...shapes import prod
from . import codegen as G

ATT_ROWS = 64                              # attention.cu's ATT_ROWS: threads (rows) per block
ROW_LENGTHS = (16, 32, 64, 128)            # attention.cu's register row lengths (template DM)
MASK_NONE, MASK_BOOL, MASK_ADD = 0, 1, 2   # attention.cu's ATT_MASK_*
MASK_KINDS = (MASK_NONE, MASK_BOOL, MASK_ADD)
MASK_BATCH_DIMS = 4                        # coalesced batch dims a mask view may have
MAX_ROW_BLOCKS = 65535                     # grid.y limit

# -- attention_tiled.cu ---------------------------------------------------------------------------
TILED_TYPES = ("float", "half_t")          # storage types with tiled kernels (computed in float)
TILED_DIMS = (32, 64, 128)                 # its padded head dims (template DM)
KERNELS = {"fwd": "attn_fwd_t", "dq": "attn_bwd_dq_t", "dkv": "attn_bwd_dkv_t"}
# (warps a block, rows a thread, tile columns) by kernel and padded head dim; a block holds
# 4 * warps * rows rows. Chosen so that no kernel spills (nvcc -Xptxas -v, sm_90)
TILES = {"fwd": {32: (4, 4, 64), 64: (4, 4, 64), 128: (4, 4, 32)},
         "dq": {32: (4, 4, 64), 64: (4, 4, 64), 128: (4, 4, 32)},
         "dkv": {32: (4, 4, 64), 64: (4, 4, 64), 128: (4, 4, 32)}}
PAD = 4                                    # attention_tiled.cu's ATT_PAD (floats a shared row)
FLOAT_BYTES = 4                            # the shared tiles hold float32
DEFAULT_SMEM = 48 * 1024                   # shared memory a block gets without opting in
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
VEC_QK, VEC_V = 1, 2                       # the kernels' `vec` bits: 4-element rows readable


def block_rows(tile):
    warps, rows, _ = tile
    return 4 * warps * rows


def smem_bytes(kernel, dm, tile):
    """Dynamic shared memory of a tiled kernel: attention_tiled.cu's att_smem_fwd / _dq / _dkv."""
    warps, rows, cols = tile
    br, ld, sw = block_rows(tile), dm + PAD, 4 * rows + PAD
    scores = warps * cols * sw                       # the warps' transposed score tiles
    if kernel == "fwd":                              # q block, k and v tiles
        floats = (br + 2 * cols) * ld + scores
    elif kernel == "dq":                             # q and dout blocks, k and v tiles
        floats = (2 * br + 2 * cols) * ld + scores
    else:                                            # k and v blocks, q and dout tiles, lse, delta
        floats = (2 * br + 2 * cols) * ld + scores + 2 * cols
    return floats * FLOAT_BYTES


def _row_length(q, v):
    n = max(q.shape[-1], v.shape[-1])
    return next((m for m in ROW_LENGTHS if m >= n), None)


def _mask_args(mask):
    """(pointer, kind, [nb, shape x4, strides x4, sq, sk]) of a (B..., TQ, TK) mask view, or None
    when its batch dims do not coalesce into MASK_BATCH_DIMS."""
    if mask is None:
        return 0, MASK_NONE, [0] * 11
    item = mask.dtype.itemsize
    st = [s // item for s in mask.strides]
    dims = [(n, s) for n, s in zip(mask.shape[:-2], st[:-2]) if n != 1]
    merged = []
    for n, s in dims:
        if merged and merged[-1][1] == s * n:          # contiguous with the previous dim: one dim
            merged[-1] = (merged[-1][0] * n, s)
        else:
            merged.append((n, s))
    if len(merged) > MASK_BATCH_DIMS:
        return None
    merged += [(1, 0)] * (MASK_BATCH_DIMS - len(merged))
    nb = sum(1 for n, _ in merged if n != 1)
    return (mask.data.ptr, MASK_BOOL if mask.dtype.char == "?" else MASK_ADD,
            [nb] + [n for n, _ in merged] + [s for _, s in merged] + [st[-2], st[-1]])


def _vec_bits(d, dv, itemsize, qk, vs):
    """The `vec` argument: rows of d (dv) elements read 4 at a time where d % 4 == 0 and every
    array of that group starts on a 4-element boundary."""
    align = 4 * itemsize
    ok = lambda n, arrs: n % 4 == 0 and all(a.data.ptr % align == 0 for a in arrs)   # noqa: E731
    return (VEC_QK if ok(d, qk) else 0) | (VEC_V if ok(dv, vs) else 0)


class Attention:
    def __init__(self, be):
        self.be = be
        self._smem_limit = None
        self._opted = {}                  # name expression -> dynamic shared memory allowed
        self.tiles = TILES

    @property
    def tiles(self):
        """The tiled kernels' shapes, as TILES (a tuning knob: bench/attention.py --sweep)."""
        return self._tiles

    @tiles.setter
    def tiles(self, table):
        self._tiles = {k: dict(table[k]) for k in KERNELS}
        self._dims = {}                   # (type, head dim) -> tiled head dim or None
        self._launch = {}                 # (kernel, type, head dim, mask kind) -> _tiled_fn

    # -- planning ----------------------------------------------------------------------------------
    def _plan(self, q, k, v, mask):
        be = self.be
        ct = be._ct.get(q.dtype.char)
        dm = _row_length(q, v)
        margs = _mask_args(mask)
        B = prod(q.shape[:-2])
        T = max(q.shape[-2], k.shape[-2])
        if ct is None or dm is None or margs is None or -(-T // ATT_ROWS) > MAX_ROW_BLOCKS:
            return None
        return ct, dm, margs, B, (q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1])

    def _tiled(self, ct, dm, TQ, TK):
        """The padded head dim of the tiled kernels for this case, or None (the row kernels)."""
        key = (ct, dm)
        tdm = self._dims.get(key, 0)
        if tdm == 0:
            tdm = self._dims[key] = self._tiled_dim(ct, dm)
        if tdm is None:
            return None
        for kernel, rows in (("fwd", TQ), ("dq", TQ), ("dkv", TK)):
            if -(-rows // block_rows(self._tiles[kernel][tdm])) > MAX_ROW_BLOCKS:
                return None
        return tdm

    def _tiled_dim(self, ct, dm):
        if ct not in TILED_TYPES:
            return None
        tdm = next(m for m in TILED_DIMS if m >= dm)
        fits = all(smem_bytes(n, tdm, self._tiles[n][tdm]) <= self._device_smem() for n in KERNELS)
        return tdm if fits else None

    def _device_smem(self):
        if self._smem_limit is None:
            rt = self.be.xp.cuda.runtime
            props = rt.getDeviceProperties(rt.getDevice())
            self._smem_limit = int(props.get("sharedMemPerBlockOptin", 0)) or DEFAULT_SMEM
        return self._smem_limit

    # -- kernels -----------------------------------------------------------------------------------
    def _fn(self, kernel, ct, dm, kind):
        family = lambda: (G.attention(n, ct, dm, m) for n in ("attn_fwd", "attn_bwd_dq",   # noqa: E731
                                                                "attn_bwd_dkv")
                          for m in MASK_KINDS)
        return self.be.kernels.function(G.attention(kernel, ct, dm, kind), family)

    def _tiled_fn(self, kernel, ct, dm, kind):
        """(compiled kernel, block threads, block rows, shared bytes) of a tiled kernel; the whole
        family of this (type, head dim) compiles at once."""
        key = (kernel, ct, dm, kind)
        got = self._launch.get(key)
        if got is None:
            tiles = {n: self._tiles[n][dm] for n in KERNELS}
            family = lambda: (G.attention_tiled(KERNELS[n], ct, dm, m, *tiles[n])   # noqa: E731
                              for n in KERNELS for m in MASK_KINDS)
            name = G.attention_tiled(KERNELS[kernel], ct, dm, kind, *tiles[kernel])
            fn = self.be.kernels.function(name, family)
            smem = smem_bytes(kernel, dm, tiles[kernel])
            if smem > DEFAULT_SMEM and self._opted.get(name, 0) < smem:
                _allow_smem(fn, smem)
                self._opted[name] = smem
            got = self._launch[key] = fn, 32 * tiles[kernel][0], block_rows(tiles[kernel]), smem
        return got

    def _dense(self, *ts):
        return [self.be.xp.ascontiguousarray(t) for t in ts]

    # -- forward / backward ------------------------------------------------------------------------
    def forward(self, q, k, v, mask, causal, scale):
        plan = self._plan(q, k, v, mask)
        if plan is None:
            return None
        ct, dm, (mp, kind, mw), B, (TQ, TK, D, DV) = plan
        xp = self.be.xp
        tdm = self._tiled(ct, dm, TQ, TK)
        out = xp.empty(q.shape[:-1] + (DV,), dtype=q.dtype)
        lse = xp.empty(q.shape[:-1], dtype=xp.float32 if tdm else q.dtype)
        if not (B and TQ):
            return out, lse
        qc, kc, vc = self._dense(q, k, v)
        if tdm:
            fn, threads, rows, smem = self._tiled_fn("fwd", ct, tdm, kind)
            vec = _vec_bits(D, DV, q.dtype.itemsize, (qc, kc), (vc, out))
            fn((B, -(-TQ // rows)), (threads,),
               (qc, kc, vc, mp, out, lse, TQ, TK, D, DV, int(causal), *mw, float(scale), vec),
               shared_mem=smem)
        else:
            self._fn("attn_fwd", ct, dm, kind)(
                (B, -(-TQ // ATT_ROWS)), (ATT_ROWS,),
                (qc, kc, vc, mp, out, lse, TQ, TK, D, DV, int(causal), *mw, float(scale)))
        return out, lse

    def backward(self, do, q, k, v, out, lse, mask, causal, scale):
        plan = self._plan(q, k, v, mask)
        if plan is None:
            return None
        ct, dm, (mp, kind, mw), B, (TQ, TK, D, DV) = plan
        xp = self.be.xp
        dq, dk, dv = (xp.empty(t.shape, dtype=q.dtype) for t in (q, k, v))
        if not (B and TQ and TK):
            for t in (dq, dk, dv):
                t.fill(0)
            return dq, dk, dv
        qc, kc, vc, doc, oc, lc = self._dense(q, k, v, do, out, lse)
        # the forward's choice shows in its lse: float32 from the tiled kernels
        tdm = self._tiled(ct, dm, TQ, TK) if lc.dtype == xp.float32 else None
        if tdm:
            return self._tiled_backward(tdm, ct, kind, mp, mw, B, (TQ, TK, D, DV), causal, scale,
                                        qc, kc, vc, doc, oc, lc, dq, dk, dv)
        delta = xp.empty(q.shape[:-1], dtype=xp.float64 if ct == "double" else xp.float32)
        self._fn("attn_bwd_dq", ct, dm, kind)(
            (B, -(-TQ // ATT_ROWS)), (ATT_ROWS,),
            (qc, kc, vc, mp, doc, oc, lc, dq, delta, TQ, TK, D, DV, int(causal), *mw,
             float(scale)))
        self._fn("attn_bwd_dkv", ct, dm, kind)(
            (B, -(-TK // ATT_ROWS)), (ATT_ROWS,),
            (qc, kc, vc, mp, doc, lc, delta, dk, dv, TQ, TK, D, DV, int(causal), *mw,
             float(scale)))
        return dq, dk, dv

    def _tiled_backward(self, dm, ct, kind, mp, mw, B, dims, causal, scale,
                        qc, kc, vc, doc, oc, lc, dq, dk, dv):
        TQ, TK, D, DV = dims
        delta = self.be.xp.empty(lc.shape, dtype=self.be.xp.float32)
        vec = _vec_bits(D, DV, qc.dtype.itemsize, (qc, kc, dq, dk), (vc, doc, oc, dv))
        tail = (TQ, TK, D, DV, int(causal), *mw, float(scale), vec)
        fn, threads, rows, smem = self._tiled_fn("dq", ct, dm, kind)
        fn((B, -(-TQ // rows)), (threads,), (qc, kc, vc, mp, doc, oc, lc, dq, delta) + tail,
           shared_mem=smem)
        fn, threads, rows, smem = self._tiled_fn("dkv", ct, dm, kind)
        fn((B, -(-TK // rows)), (threads,), (qc, kc, vc, mp, doc, lc, delta, dk, dv) + tail,
           shared_mem=smem)
        return dq, dk, dv


def _allow_smem(fn, nbytes):
    """Let kernel `fn` take `nbytes` of dynamic shared memory (past the 48 KiB default)."""
    try:
        fn.max_dynamic_shared_size_bytes = nbytes
    except AttributeError:
        from cupy_backends.cuda.api import driver
        driver.funcSetAttribute(getattr(fn, "kernel", fn).ptr,
                                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)
