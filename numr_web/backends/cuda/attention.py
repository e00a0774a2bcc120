"""Launches of the fused attention kernels (no T x T scores in memory), three families:

* attention_mma.cu ("tc"), float16 on sm_80 and newer: FlashAttention-2 on tensor cores
  (mma.sync m16n8k16, float32 accumulation, ldmatrix fragments; p and ds rounded to float16 for
  their products, as FlashAttention does).
* attention_tiled.cu ("simt"), float32 (and float16 where there are no tensor cores or
  `tensor_cores` is off): the same schedule on the SIMT pipes with full float32 products.
* attention.cu ("rows"), one thread a query (key) row: float64, and where the device cannot give
  a tiled kernel its shared memory.

The tiled families: forward a block per (batch, block of query rows) walking key tiles staged in
shared memory, online softmax, the log-sum-exp kept in float32; backward one kernel per query
block for dq (it also writes delta = rowsum(dout * out)) and one per key block for dk and dv, no
atomics, so gradients are deterministic. Tile shapes: TILES / TC_TILES, knobs of `Attention`
(`tiles`, `tc_tiles`; bench/attention.py --sweep times them); shared memory past 48 KiB is opted
in where the device allows it.

None where a case is outside every family (head dims over 128, a mask whose batch dims do not
coalesce into 4, a dtype without a kernel): the caller then takes the composed path (cuBLAS
products and elementwise kernels).
"""
from __future__ import annotations

from ...shapes import matrices_layout, prod
from . import codegen as G

ATT_ROWS = 64                              # attention.cu's ATT_ROWS: threads (rows) per block
ROW_LENGTHS = (16, 32, 64, 128)            # attention.cu's register row lengths (template DM)
MASK_NONE, MASK_BOOL, MASK_ADD = 0, 1, 2   # attention.cu's ATT_MASK_*
MASK_KINDS = (MASK_NONE, MASK_BOOL, MASK_ADD)
MASK_BATCH_DIMS = 4                        # coalesced batch dims a mask view may have
MAX_ROW_BLOCKS = 65535                     # grid.y limit
TILED_DIMS = (32, 64, 128)                 # the tiled kernels' padded head dims (template DM)
FLOAT_BYTES = 4
DEFAULT_SMEM = 48 * 1024                   # shared memory a block gets without opting in
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
VEC_QK, VEC_V = 1, 2                       # the tiled kernels' `vec` bits (vector rows readable)
STRIDED_ROLES = ("q", "k", "v", "o", "g", "dq", "dk", "dv")   # ATT_STRIDES' operands, in order
MIN_COLS = 16                              # a tile's columns are halved down to this to fit a device

# -- attention_tiled.cu: (warps a block, rows a thread, tile columns) by kernel and padded head
# dim; a block holds 4 * warps * rows rows. Chosen so that no kernel spills (nvcc -Xptxas -v, sm_90)
KERNELS = {"fwd": "attn_fwd_t", "dq": "attn_bwd_dq_t", "dkv": "attn_bwd_dkv_t"}
TILED_TYPES = ("float", "half_t")          # storage types (computed in float)
TILES = {"fwd": {32: (4, 4, 64), 64: (4, 4, 64), 128: (4, 4, 32)},
         "dq": {32: (4, 4, 64), 64: (4, 4, 64), 128: (4, 4, 32)},
         "dkv": {32: (4, 4, 64), 64: (4, 4, 64), 128: (4, 4, 32)}}
PAD = 4                                    # attention_tiled.cu's ATT_PAD (floats a shared row)
VEC_ELEMS = 4                              # its vector reads: 4 elements

# -- attention_mma.cu: (warps a block, tile columns); a block holds 16 * warps rows
TC_KERNELS = {"fwd": "attn_fwd_tc", "dq": "attn_bwd_dq_tc", "dkv": "attn_bwd_dkv_tc"}
TC_TYPES = ("half_t",)                     # 16-bit storage types with an AttTc<S>
TC_MIN_MAJOR = 8                           # mma.sync m16n8k16 (f32 accumulation): sm_80 on
TC_TILES = {"fwd": {32: (4, 64), 64: (4, 64), 128: (4, 64)},
            "dq": {32: (4, 64), 64: (4, 64), 128: (4, 64)},
            "dkv": {32: (4, 64), 64: (4, 64), 128: (4, 64)}}
HPAD = 8                                   # attention_mma.cu's ATT_HPAD (values a shared row)
TC_VEC_ELEMS = 8                           # its vector reads: 16 bytes


def block_rows(tile):
    """Rows a block of a tiled kernel holds (the tile: a TILES or a TC_TILES entry)."""
    return 4 * tile[0] * tile[1] if len(tile) == 3 else 16 * tile[0]


def smem_bytes(kernel, dm, tile):
    """Dynamic shared memory of an attention_tiled.cu kernel (its att_smem_fwd / _dq / _dkv)."""
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


def smem_bytes_tc(kernel, dm, tile, itemsize=2):
    """Dynamic shared memory of an attention_mma.cu kernel (its att_tc_smem_fwd / _bwd)."""
    warps, cols = tile
    if kernel == "fwd":                              # q block, k and v tiles
        return (16 * warps + 2 * cols) * (dm + HPAD) * itemsize
    # two blocks (q and dout, or k and v), two tiles, lse and delta of a tile
    return (32 * warps + 2 * cols) * (dm + HPAD) * itemsize + 2 * cols * FLOAT_BYTES


FAMILIES = {"tc": (TC_KERNELS, smem_bytes_tc, TC_VEC_ELEMS),
            "simt": (KERNELS, smem_bytes, VEC_ELEMS)}


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


def _vec_bits(elems, d, dv, qk, vs):
    """The `vec` argument: rows of d (dv) values read `elems` at a time where d % elems == 0 and
    every array of that group starts on such a vector's boundary, as does each of its rows."""
    def ok(n, arrs):
        return n % elems == 0 and all(a.data.ptr % (elems * a.dtype.itemsize) == 0 and
                                      all(s % elems == 0 for s in _layout(a)) for a in arrs)
    return (VEC_QK if ok(d, qk) else 0) | (VEC_V if ok(dv, vs) else 0)


def _layout(a):
    """(L0, L1, Lr) of attention_tiled.cu's ATT_STRIDES for a (..., T, n) array, in elements
    (shapes.matrices_layout), or None."""
    item = a.dtype.itemsize
    return matrices_layout(a.shape, [s // item for s in a.strides])


def _heads_outer(xp, shape, dtype):
    """An empty (..., H, T, n) array whose memory is laid out as (..., T, H, n): the usual merge
    of the heads afterwards (transpose(-3, -2).reshape(..., T, H * n)) is then a view."""
    if len(shape) < 3:
        return xp.empty(shape, dtype=dtype)
    buf = xp.empty(shape[:-3] + (shape[-2], shape[-3], shape[-1]), dtype=dtype)
    return buf.swapaxes(-2, -3)


class Attention:
    def __init__(self, be):
        self.be = be
        self._device = None               # (shared memory a block may opt in to, major version)
        self._opted = {}                  # name expression -> dynamic shared memory allowed
        self._tables = {"simt": TILES, "tc": TC_TILES}
        self._tensor_cores = True
        self._reset()

    # -- knobs (bench/attention.py sweeps them) -----------------------------------------------------
    @property
    def tiles(self):
        """attention_tiled.cu's tile shapes, as TILES."""
        return self._tables["simt"]

    @tiles.setter
    def tiles(self, table):
        self._tables["simt"] = {k: dict(table[k]) for k in KERNELS}
        self._reset()

    @property
    def tc_tiles(self):
        """attention_mma.cu's tile shapes, as TC_TILES."""
        return self._tables["tc"]

    @tc_tiles.setter
    def tc_tiles(self, table):
        self._tables["tc"] = {k: dict(table[k]) for k in KERNELS}
        self._reset()

    @property
    def tensor_cores(self):
        """float16 on tensor cores where the device has them (True), or on the SIMT kernels."""
        return self._tensor_cores

    @tensor_cores.setter
    def tensor_cores(self, on):
        self._tensor_cores = bool(on)
        self._reset()

    def _reset(self):
        self._paths = {}                  # (type, head dim) -> (family, head dim, tiles) or None
        self._launch = {}                 # (family, head dim, kernel, type, mask) -> _tiled_fn

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
        """(family, padded head dim, {kernel: tile}) of the tiled kernels for this case, or None
        (the row kernels)."""
        key = (ct, dm)
        path = self._paths.get(key, 0)
        if path == 0:
            path = self._paths[key] = self._choose(ct, dm)
        if path is None:
            return None
        for kernel, rows in (("fwd", TQ), ("dq", TQ), ("dkv", TK)):
            if -(-rows // block_rows(path[2][kernel])) > MAX_ROW_BLOCKS:
                return None
        return path

    def _choose(self, ct, dm):
        """The first family that runs this type with its tiles (their columns halved, down to
        MIN_COLS, where the device's shared memory cannot hold them)."""
        tdm = next(m for m in TILED_DIMS if m >= dm)
        smem, major = self._device_limits()
        families = []
        if ct in TC_TYPES and self._tensor_cores and major >= TC_MIN_MAJOR:
            families.append("tc")
        if ct in TILED_TYPES:
            families.append("simt")
        for fam in families:
            kernels, size, _ = FAMILIES[fam]
            tiles = {}
            for n in kernels:
                tile = self._tables[fam][n][tdm]
                while size(n, tdm, tile) > smem and tile[-1] > MIN_COLS:
                    tile = tile[:-1] + (tile[-1] // 2,)
                tiles[n] = tile
            if all(size(n, tdm, tiles[n]) <= smem for n in kernels):
                return fam, tdm, tiles
        return None

    def _device_limits(self):
        if self._device is None:
            rt = self.be.xp.cuda.runtime
            props = rt.getDeviceProperties(rt.getDevice())
            self._device = (int(props.get("sharedMemPerBlockOptin", 0)) or DEFAULT_SMEM,
                            int(props.get("major", 0)))
        return self._device

    # -- kernels -----------------------------------------------------------------------------------
    def _fn(self, kernel, ct, dm, kind):
        family = lambda: (G.attention(n, ct, dm, m) for n in ("attn_fwd", "attn_bwd_dq",   # noqa: E731
                                                                "attn_bwd_dkv")
                          for m in MASK_KINDS)
        return self.be.kernels.function(G.attention(kernel, ct, dm, kind), family)

    def _tiled_fn(self, path, kernel, ct, kind, dense=False):
        """(compiled kernel, block threads, block rows, shared bytes) of a tiled kernel (its
        variant for dense inputs where `dense`); the family's three kernels of this (type, head
        dim, mask kind, variant) compile together."""
        fam, dm, tiles = path
        key = (fam, dm, kernel, ct, kind, dense)
        got = self._launch.get(key)
        if got is None:
            kernels, size, _ = FAMILIES[fam]
            family = lambda: (G.attention_tiled(kernels[n], ct, dm, kind, *tiles[n],   # noqa: E731
                                                dense=dense) for n in kernels)
            name = G.attention_tiled(kernels[kernel], ct, dm, kind, *tiles[kernel], dense=dense)
            fn = self.be.kernels.function(name, family)
            smem = size(kernel, dm, tiles[kernel])
            if smem > DEFAULT_SMEM and self._opted.get(name, 0) < smem:
                _allow_smem(fn, smem)
                self._opted[name] = smem
            got = self._launch[key] = fn, 32 * tiles[kernel][0], block_rows(tiles[kernel]), smem
        return got

    def _dense(self, *ts):
        return [self.be.xp.ascontiguousarray(t) for t in ts]

    def _strided(self, *ts):
        """The arrays as the tiled kernels read them: as they are where _layout describes them
        (a head's view of a fused projection: no copy), else dense copies."""
        xp = self.be.xp
        return [t if _layout(t) is not None else xp.ascontiguousarray(t) for t in ts]

    @staticmethod
    def _all_dense(batch, *ts):
        """Whether the inputs are dense (..., T, n) arrays of this batch shape: the kernels'
        DENSE variant reads them with compile-time row strides."""
        return all(t.flags.c_contiguous and t.shape[:-2] == batch for t in ts)

    @staticmethod
    def _strides(shape, **arrays):
        """attention_tiled.cu's ATT_STRIDES: hn, then (L0, L1, Lr) of each role (0 where the
        kernel has no such operand)."""
        hn = shape[-3] if len(shape) > 2 else 1
        out = [hn]
        for role in STRIDED_ROLES:
            a = arrays.get(role)
            out += _layout(a) if a is not None else (0, 0, 0)
        return tuple(out)

    # -- forward / backward ------------------------------------------------------------------------
    def forward(self, q, k, v, mask, causal, scale):
        plan = self._plan(q, k, v, mask)
        if plan is None:
            return None
        ct, dm, (mp, kind, mw), B, (TQ, TK, D, DV) = plan
        xp = self.be.xp
        path = self._tiled(ct, dm, TQ, TK)
        shape = q.shape[:-1] + (DV,)
        out = _heads_outer(xp, shape, q.dtype) if path else xp.empty(shape, dtype=q.dtype)
        lse = xp.empty(q.shape[:-1], dtype=xp.float32 if path else q.dtype)
        if not (B and TQ):
            return out, lse
        if path:
            qc, kc, vc = self._strided(q, k, v)
            dense = self._all_dense(q.shape[:-2], qc, kc, vc)
            fn, threads, rows, smem = self._tiled_fn(path, "fwd", ct, kind, dense)
            vec = _vec_bits(FAMILIES[path[0]][2], D, DV, (qc, kc), (vc, out))
            fn((B, -(-TQ // rows)), (threads,),
               (qc, kc, vc, mp, out, lse, TQ, TK, D, DV, int(causal), *mw, float(scale), vec)
               + self._strides(q.shape, q=qc, k=kc, v=vc, o=out), shared_mem=smem)
        else:
            qc, kc, vc = self._dense(q, k, v)
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
        # the forward's choice shows in its lse: float32 from the tiled kernels
        path = self._tiled(ct, dm, TQ, TK) if lse.dtype == xp.float32 else None
        make = (lambda shape: _heads_outer(xp, shape, q.dtype)) if path else \
            (lambda shape: xp.empty(shape, dtype=q.dtype))
        # the heads of one fused projection get their gradients where they lie, in one array
        fused = path and q.shape == k.shape == v.shape and _layout(q) is not None and \
            self.be.grads_in_place(q, k, v)
        dq, dk, dv = fused or (make(t.shape) for t in (q, k, v))
        if not (B and TQ and TK):
            for t in (dq, dk, dv):
                t.fill(0)
            return dq, dk, dv
        if path:
            return self._tiled_backward(path, ct, kind, mp, mw, B, (TQ, TK, D, DV), causal, scale,
                                        *self._strided(q, k, v, do, out), lse, dq, dk, dv)
        qc, kc, vc, doc, oc, lc = self._dense(q, k, v, do, out, lse)
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

    def _tiled_backward(self, path, ct, kind, mp, mw, B, dims, causal, scale,
                        qc, kc, vc, doc, oc, lc, dq, dk, dv):
        TQ, TK, D, DV = dims
        lc = self.be.xp.ascontiguousarray(lc)
        delta = self.be.xp.empty(lc.shape, dtype=self.be.xp.float32)
        vec = _vec_bits(FAMILIES[path[0]][2], D, DV, (qc, kc, dq, dk), (vc, doc, oc, dv))
        tail = (TQ, TK, D, DV, int(causal), *mw, float(scale), vec) + self._strides(
            qc.shape, q=qc, k=kc, v=vc, o=oc, g=doc, dq=dq, dk=dk, dv=dv)
        dense = self._all_dense(qc.shape[:-2], qc, kc, vc, doc)
        fn, threads, rows, smem = self._tiled_fn(path, "dq", ct, kind, dense)
        fn((B, -(-TQ // rows)), (threads,), (qc, kc, vc, mp, doc, oc, lc, dq, delta) + tail,
           shared_mem=smem)
        fn, threads, rows, smem = self._tiled_fn(path, "dkv", ct, kind, dense)
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
