"""The webgpu device: every backend primitive as WGSL kernels (shaders/*.wgsl) through a GPUAdapter.

Neither wgpu nor numpy is imported here (the browser has neither): the adapter is
adapter_native.NativeAdapter under CPython and the Pyodide adapter in a browser.

Handles are GPUArray views: (Storage, shape, dtype, element strides, element offset), so reshape of
a dense tensor, permute, expand (stride 0) and basic slicing are free; kernels read strided operands.
Dispatches are recorded and submitted together (one queue submit per batch, at most `BATCH`
dispatches, and before any readback). Tensors larger than maxStorageBufferBindingSize are processed
in chunks by the elementwise kernels and the reductions; other kernels refuse them with a
BackendLimitError naming the limit and the size.
"""
from __future__ import annotations

import math
import os
import struct
import sys

from ...dtypes import bool_, float16, float32, float64, int32
from ...errors import BackendLimitError, BackendUnavailableError, DTypeError, NumrError
from ...ops.activations import ACT
from ..base import Backend
from .adapter import Binding, Dispatch
from .buffers import BufferPool
from .kernels import KernelCache

# storage bytes per element (bool is one u32 per element in WGSL)
_SITEM = {"float32": 4, "int32": 4, "bool": 4, "float16": 2}
UNARY_CODE = {"neg": 0, "abs": 1, "exp": 2, "log": 3, "sqrt": 4, "sin": 5, "cos": 6, "sign": 7,
              "copy": 8, "erf": 12}
BINARY_CODE = {"add": 0, "sub": 1, "mul": 2, "div": 3, "pow": 4, "maximum": 5, "minimum": 6}
COMPARE_CODE = {"eq": 0, "ne": 1, "lt": 2, "le": 3, "gt": 4, "ge": 5}
REDUCE_CODE = {"sum": 0, "mean": 1, "max": 2, "min": 3}
ACT_BWD = 7                     # binary op code of dz = dy * act'(saved)
MAXD = 8                        # dims per shape in the metadata block
META_BYTES = 256                # metadata block per dispatch
BATCH = 256                     # dispatches per queue submit (metadata arena slots)
WG = 256                        # invocations per workgroup of the 1-D kernels
MAX_GROUPS = 65535
V4W_WG_BYTES = (1056 + 1024) * 16   # workgroup memory of gemm_v4 (As4 + Bs4 in matmul.wgsl)
GEMM_K_BUDGETED = 4096              # K per GEMM launch under a loop budget (about 10 loop
                                    # iterations per K element in the 8x8 kernels: < 65535)


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _dense_strides(shape):
    st, acc = [], 1
    for s in reversed(shape):
        st.append(acc)
        acc *= s
    return tuple(reversed(st))


def _f32_bits(v):
    return struct.unpack("<I", struct.pack("<f", float(v)))[0]


def _broadcast(*shapes):
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


def _coalesce(shape, stride_lists):
    """Drop size-1 dims and merge adjacent dims that are contiguous in every operand."""
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


def _reshape_strides(shape, strides, newshape):
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
    """A strided view of a GPU buffer. shape/strides/offset in elements of `dtype`."""

    __slots__ = ("storage", "shape", "dtype", "strides", "offset")

    def __init__(self, storage, shape, dtype, strides=None, offset=0):
        self.storage = storage
        self.shape = tuple(shape)
        self.dtype = dtype
        self.strides = tuple(strides) if strides is not None else _dense_strides(self.shape)
        self.offset = offset

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return _prod(self.shape)

    @property
    def is_contiguous(self):
        return all(st == ds for s, st, ds in zip(self.shape, self.strides,
                                                 _dense_strides(self.shape)) if s != 1)

    def span(self):
        """Elements from offset to the last element addressed, + 1 (0 if empty)."""
        if self.size == 0:
            return 0
        return 1 + sum((s - 1) * st for s, st in zip(self.shape, self.strides))

    def __repr__(self):
        return f"GPUArray(shape={self.shape}, dtype={self.dtype.name}, strides={self.strides}, " \
               f"offset={self.offset})"


class _Tensor:
    """A tensor operand of one dispatch, in coalesced form: binding index, view, strides."""
    __slots__ = ("index", "arr", "strides", "offset")

    def __init__(self, index, arr, strides, offset):
        self.index, self.arr, self.strides, self.offset = index, arr, strides, offset


def _default_adapter():
    if sys.platform == "emscripten":
        from .adapter_browser import BrowserAdapter  # written by the browser issue
        return BrowserAdapter.get()
    from .adapter_native import NativeAdapter
    return NativeAdapter()


_shared_adapter = None


def shared_adapter():
    global _shared_adapter
    if _shared_adapter is None:
        _shared_adapter = _default_adapter()
    return _shared_adapter


class WebGPUBackend(Backend):
    device = "webgpu"

    def __init__(self, adapter=None, max_binding_size=None):
        self.adapter = adapter or shared_adapter()
        lim = self.adapter.limits
        self.binding_limit = int(lim.get("maxStorageBufferBindingSize") or (128 << 20))
        env = os.environ.get("NUMR_WEBGPU_MAX_BINDING")
        if max_binding_size is None and env:
            max_binding_size = int(env)
        if max_binding_size:
            self.binding_limit = min(self.binding_limit, int(max_binding_size))
        self.binding_limit -= self.binding_limit % 4
        self.align = max(int(lim.get("minStorageBufferOffsetAlignment") or 256), 4)
        ualign = int(lim.get("minUniformBufferOffsetAlignment") or 256)
        if META_BYTES % ualign:
            raise BackendUnavailableError(f"minUniformBufferOffsetAlignment {ualign} > 256")
        self.max_buffer = int(lim.get("maxBufferSize") or (256 << 20))
        # Mesa's llvmpipe (lavapipe) stops an invocation's loops after 65535 iterations in total
        # (nested loops included) and silently carries on: every kernel launch is scheduled so
        # that no invocation comes near it (NUMR_WEBGPU_LOOP_BUDGET overrides, 0 = unlimited).
        env_budget = os.environ.get("NUMR_WEBGPU_LOOP_BUDGET")
        self.loop_budget = int(env_budget) if env_budget else (
            60000 if "llvmpipe" in str(getattr(self.adapter, "name", "")).lower() else 0)
        self.f16 = "shader-f16" in self.adapter.features
        self.kernels = KernelCache(self.adapter)
        self._pending = []
        self._meta = bytearray(BATCH * META_BYTES)
        self.pool = BufferPool(self.adapter, self.max_buffer, lambda: bool(self._pending))
        self._arena = self.adapter.create_buffer(BATCH * META_BYTES, "uniform")
        self._dummy_r = self.adapter.create_buffer(256, "storage")
        self._dummy_w = self.adapter.create_buffer(256, "storage")
        self.submits = 0
        self.dispatches = 0
        # GEMM kernel: 64x64 tile with 4x4 per invocation ("gemm", measured 23 TFLOP/s on the H200
        # and the fastest on lavapipe) or 128x128 with 8x8 ("gemm_big", 22 TFLOP/s on the H200).
        # NUMR_WEBGPU_GEMM_TILE=128 selects gemm_big; =v4 selects gemm_v4 (128x64 tile, 8x4 per
        # invocation, vec4 global loads, double-buffered; =v4w: the same with 128x128 and 8x8)
        # where both operands are vec4-aligned row-major views, gemm elsewhere.
        # Default ("auto"): v4w for large GEMMs where the device grants its 33 KiB of workgroup
        # memory (24.8 TFLOP/s on the H200 against 23.8 for gemm), gemm elsewhere (browsers and
        # lavapipe grant 32 KiB).
        t = os.environ.get("NUMR_WEBGPU_GEMM_TILE") or "auto"
        self.gemm_tile = int(t) if t.isdigit() else t
        self._v4w_fits = self.adapter.limits.get("maxComputeWorkgroupStorageSize", 0) >= V4W_WG_BYTES

    # -- availability ------------------------------------------------------------------------------
    @classmethod
    def probe(cls):
        try:
            ad = shared_adapter()
        except NumrError as e:
            return False, str(e)
        except Exception as e:
            return False, f"{type(e).__name__}: {e}"
        return True, f"{ad.name} ({ad.backend})"

    def info(self):
        d = dict(self.adapter.info())
        d["max_binding_bytes_used"] = self.binding_limit
        d["pool"] = self.pool.stats()
        d["pipelines"] = len(self.kernels)
        return d

    # -- dtype checks --------------------------------------------------------------------------------
    def _check_dtype(self, dtype):
        if dtype is float64:
            raise DTypeError("float64 is not supported on webgpu (WGSL has no 64-bit floats); "
                             "use float32")
        if dtype is float16 and not self.f16:
            raise DTypeError("float16 needs the WebGPU feature 'shader-f16', which this adapter "
                             f"({self.adapter.name}) lacks; use float32")
        if dtype.name not in _SITEM:
            raise DTypeError(f"dtype {dtype.name} is not supported on webgpu")
        return dtype

    def dtype_of(self, h):
        return h.dtype

    # -- submission ----------------------------------------------------------------------------------
    def flush(self):
        """Submit every recorded dispatch (one queue submit)."""
        if not self._pending:
            return
        n = len(self._pending)
        self.adapter.write_buffer(self._arena, 0, bytes(self._meta[:n * META_BYTES]))
        pend, self._pending = self._pending, []
        self.adapter.submit(pend)
        self.submits += 1
        self.pool.submits += 1

    def _launch(self, kfile, entry, dtype, consts, words, tensors, groups, out_dtype=None):
        """Record one dispatch. words: {index: u32}; tensors: [(binding index, Storage, byte
        offset, byte size)]."""
        if len(self._pending) >= BATCH:
            self.flush()
        pipe = self.kernels.pipeline(kfile, entry, dtype, out_dtype, consts)
        slot = len(self._pending)
        meta = [0] * 64
        for k, v in words.items():
            meta[k] = v & 0xFFFFFFFF
        struct.pack_into("<64I", self._meta, slot * META_BYTES, *meta)
        binds = [Binding(0, self._arena, slot * META_BYTES, META_BYTES)]
        for idx, raw, off, size in tensors:
            binds.append(Binding(idx, raw, off, size))
        label = f"{kfile[:-5]}.{entry}"
        self._pending.append(Dispatch(pipe, binds, groups, label))
        self.dispatches += 1

    # workgroups per 1-D dispatch; more work -> grid-stride loop (65535 measured best on the H200:
    # copy 3.5 TB/s vs 3.2 with one workgroup per 256 elements)
    grid_cap = MAX_GROUPS

    def _grid(self, n):
        groups = max(1, -(-n // WG))
        groups = min(groups, self.grid_cap)
        gx = min(groups, MAX_GROUPS)
        return (gx, -(-groups // gx), 1)

    def _bind(self, t, lo, span):
        """(raw, aligned byte offset, byte size, element offset inside the binding) for the
        elements [lo, lo + span) of view t's storage."""
        isz = _SITEM[t.dtype.name]
        start = (lo * isz) // self.align * self.align
        end = (lo + max(span, 1)) * isz
        size = -(-(end - start) // 16) * 16        # whole vec4s for the vectorised kernels
        size = min(size, t.storage.nbytes - start)
        if size > self.binding_limit:
            raise BackendLimitError(
                f"a {t.dtype.name} tensor of shape {t.shape} needs a {size}-byte storage binding, "
                f"more than maxStorageBufferBindingSize ({self.binding_limit} bytes); this "
                f"operation cannot be split into chunks (make the tensor smaller)")
        return t.storage.raw, start, size, lo - start // isz

    def _alloc(self, shape, dtype, upload=False):
        n = _prod(shape)
        st = self.pool.alloc(max(n, 1) * _SITEM[dtype.name], upload=upload)
        return GPUArray(st, shape, dtype)

    # -- generic elementwise launcher -------------------------------------------------------------
    def _ew(self, entry, dtype, out, ins, consts, words=None, out_dtype=None, kfile="elementwise.wgsl"):
        """out: a view (dense or strided) to write; ins: up to 3 views (a, b, cond) of out.shape
        (already expanded) or None. Chunks along the leading coalesced dim when a binding would
        exceed the limit."""
        n = out.size
        if n == 0:
            return out
        views = [out] + [v for v in ins if v is not None]
        slots = [0] + [i + 1 for i, v in enumerate(ins) if v is not None]
        shape, strides = _coalesce(out.shape, [v.strides for v in views])
        if len(shape) > MAXD:
            raise BackendLimitError(f"tensor with {len(shape)} non-mergeable dims; at most {MAXD}")
        if not shape:
            shape, strides = [1], [[1] for _ in views]
        flat = len(shape) == 1 and all(s[0] == 1 for s in strides)
        consts = dict(consts)
        consts["FLAT"] = int(flat)
        base = dict(words or {})
        inner = [1 + sum((d - 1) * st for d, st in zip(shape[1:], s[1:])) for s in strides]
        isz = [_SITEM[v.dtype.name] for v in views]
        # rows of the leading dim per chunk so that every binding fits
        room = self.binding_limit - self.align
        rows = shape[0]
        for s, inn, sz in zip(strides, inner, isz):
            if (inn * sz) > room:
                raise BackendLimitError(
                    f"a {views[0].dtype.name} tensor of shape {out.shape} needs more than "
                    f"maxStorageBufferBindingSize ({self.binding_limit} bytes) per row of its "
                    f"leading dimension; this view cannot be processed in chunks (make it "
                    f"contiguous or smaller)")
            if s[0] > 0 and ((shape[0] - 1) * s[0] + inn) * sz > room:
                rows = min(rows, max(1, (room // sz - inn) // s[0] + 1))
        bind_idx = {"unary": (1, 2), "binary": (1, 2, 3), "compare": (5, 2, 3),
                    "where_": (1, 2, 3, 4), "astype": (7, 2), "copy": (1, 2)}[entry]
        ecnt = _prod(shape[1:])
        for r0 in range(0, shape[0], rows):
            r = min(rows, shape[0] - r0)
            w = dict(base)
            w[0] = r * ecnt
            w[1] = len(shape)
            w[16] = r
            for k, d in enumerate(shape[1:], 1):
                w[16 + k] = d
            tensors = []
            for v, slot, s, inn in zip(views, slots, strides, inner):
                lo = v.offset + r0 * s[0]
                span = (r - 1) * s[0] + inn
                raw, off, size, rel = self._bind(v, lo, span)
                tensors.append((bind_idx[slot], raw, off, size))
                w[8 + slot] = rel
                for k, st in enumerate(s):
                    w[24 + 8 * slot + k] = st
            cnt = r * ecnt
            if flat and entry in ("unary", "binary", "copy") and cnt >= 4 and \
                    all(w[8 + slot] % 4 == 0 for slot in slots):
                cnt = self._launch_vec4(entry, dtype, consts, w, tensors, slots, cnt)
                if not cnt:
                    continue
            self._add_dummies(entry, slots, tensors)
            self._launch(kfile, "unary" if entry == "copy" else entry, dtype, consts, w, tensors,
                         self._grid(cnt), out_dtype)
        return out

    def _launch_vec4(self, entry, dtype, consts, w, tensors, slots, cnt):
        """The dense part of a FLAT unary/binary op with vec4 loads; returns the scalar tail
        count (w is updated to describe the tail)."""
        n4 = cnt // 4
        w4 = dict(w)
        w4[0] = n4
        vec_idx = {0: 11, 1: 9, 2: 10}
        t4 = []
        for (idx, raw, off, size), slot in zip(tensors, slots):
            w4[8 + slot] = w[8 + slot] // 4
            t4.append((vec_idx[slot], raw, off, size))
        if entry == "binary":
            for idx in (9, 10):
                if all(t[0] != idx for t in t4):
                    t4.append((idx, self._dummy_r, 0, 256))
        self._launch("elementwise.wgsl", "unary4" if entry != "binary" else "binary4", dtype,
                     {k: v for k, v in consts.items() if k != "FLAT"}, w4, t4, self._grid(n4))
        tail = cnt - 4 * n4
        if tail:
            w[0] = tail
            w[16] = tail
            for slot in slots:
                w[8 + slot] += 4 * n4
        return tail

    def _add_dummies(self, entry, slots, tensors):
        need = {"binary": (2, 3), "compare": (2, 3), "where_": (2, 3)}.get(entry, ())
        for idx in need:
            if all(t[0] != idx for t in tensors):
                tensors.append((idx, self._dummy_r, 0, 256))

    # -- memory --------------------------------------------------------------------------------------
    def from_host(self, host, dtype):
        self._check_dtype(dtype)
        if hasattr(host, "buf") and hasattr(host, "shape") and not hasattr(host, "tobytes"):
            shape = tuple(host.shape)
            raw = memoryview(host.buf).cast("B")
        else:  # numpy (or anything with .shape and .tobytes())
            shape = tuple(int(s) for s in host.shape)
            raw = memoryview(host.tobytes()).cast("B")
        n = _prod(shape)
        if n == 0:
            return self._alloc(shape, dtype)
        if dtype is bool_:
            if len(raw) != n:
                raw = memoryview(bytes(1 if v else 0 for v in raw.cast(
                    {4 * n: "I", 2 * n: "H"}.get(len(raw), "B"))))
            packed = self._upload_bytes(raw)
            out = self._alloc(shape, dtype)
            self._launch("elementwise.wgsl", "bool_unpack", bool_, {}, {0: n, 8: 0},
                         [(1, out.storage.raw, 0, min(out.storage.nbytes, self._cap(out))),
                          (8, packed.raw, 0, packed.nbytes)], self._grid(n))
            return out
        if len(raw) != n * dtype.itemsize:
            raise DTypeError(f"host data has {len(raw)} bytes, expected {n} x {dtype.itemsize} "
                             f"for {dtype.name} of shape {shape}")
        st = self._upload_bytes(raw)
        return GPUArray(st, shape, dtype)

    def _cap(self, arr):
        if arr.storage.nbytes > self.binding_limit:
            raise BackendLimitError(
                f"a {arr.dtype.name} tensor of {arr.size} elements ({arr.storage.nbytes} bytes) "
                f"exceeds maxStorageBufferBindingSize ({self.binding_limit} bytes) for this op")
        return arr.storage.nbytes

    def _upload_bytes(self, raw):
        nbytes = len(raw)
        st = self.pool.alloc(nbytes, upload=True)
        pad = (-nbytes) % 4
        data = bytes(raw) + b"\0" * pad if pad else raw
        self.adapter.write_buffer(st.raw, 0, data)
        return st

    def _readable(self, h):
        if h.is_contiguous and (h.offset * _SITEM[h.dtype.name]) % 4 == 0:
            return h
        return self._copy(h)

    def _finish_bytes(self, h, data):
        nb = h.size * _SITEM[h.dtype.name]
        mv = memoryview(data)[:nb]
        if h.dtype is bool_:
            return bytes(mv[::4])
        return bytes(mv)

    def _read_range(self, h):
        """(readable view, buffer, byte offset, byte size rounded up to 4) for a readback."""
        h = self._readable(h)
        self.flush()
        isz = _SITEM[h.dtype.name]
        return h, h.storage.raw, h.offset * isz, -(-(h.size * isz) // 4) * 4

    def to_bytes(self, h):
        if h.size == 0:
            return b""
        h, buf, off, size = self._read_range(h)
        return self._finish_bytes(h, self.adapter.read_buffer(buf, off, size))

    async def read_bytes_async(self, h):
        """to_bytes for the browser: awaits the GPU instead of blocking."""
        if h.size == 0:
            return b""
        h, buf, off, size = self._read_range(h)
        return self._finish_bytes(h, await self.adapter.read_buffer_async(buf, off, size))

    # -- scalar encoding -----------------------------------------------------------------------------
    @staticmethod
    def _scalar_bits(value, dtype):
        if dtype.kind == "f":
            return _f32_bits(value)
        return int(value) & 0xFFFFFFFF

    # -- creation --------------------------------------------------------------------------------------
    def full(self, shape, value, dtype):
        self._check_dtype(dtype)
        out = self._alloc(tuple(shape), dtype)
        self._fill(out, value)
        return out

    def _fill(self, out, value):
        n = out.size
        if n == 0:
            return out
        w = {0: n, 2: self._scalar_bits(value, out.dtype), 8: 0}
        self._launch("elementwise.wgsl", "fill", out.dtype, {}, w,
                     [(1, out.storage.raw, 0, self._cap(out))], self._grid(n))
        return out

    def arange(self, start, stop, step, dtype):
        self._check_dtype(dtype)
        n = max(0, math.ceil((stop - start) / step))
        out = self._alloc((n,), dtype)
        if n:
            w = {0: n, 2: self._scalar_bits(start, dtype), 3: self._scalar_bits(step, dtype), 8: 0}
            self._launch("elementwise.wgsl", "arange", dtype, {}, w,
                         [(1, out.storage.raw, 0, self._cap(out))], self._grid(n))
        return out

    def random(self, shape, dtype, seed, kind):
        self._check_dtype(dtype)
        if seed is None:
            import random as _r
            seed = _r.getrandbits(64)
        seed = int(seed) & 0xFFFFFFFFFFFFFFFF
        out = self._alloc(tuple(shape), dtype)
        n = out.size
        if n:
            w = {0: n, 2: seed & 0xFFFFFFFF, 3: seed >> 32, 4: int(dtype is float16), 8: 0}
            self._launch("elementwise.wgsl", "random", dtype, {"OP": 0 if kind == "uniform" else 1},
                         w, [(1, out.storage.raw, 0, self._cap(out))], self._grid(n))
        return out

    # -- elementwise -----------------------------------------------------------------------------------
    def _copy(self, h, out=None):
        out = out if out is not None else self._alloc(h.shape, h.dtype)
        return self._ew("copy", h.dtype, out, [h], {"OP": UNARY_CODE["copy"]})

    def contiguous(self, h):
        if h.is_contiguous:
            return h
        return self._copy(h)

    def astype(self, h, dtype):
        self._check_dtype(dtype)
        if dtype is h.dtype:
            return h
        out = self._alloc(h.shape, dtype)
        return self._ew("astype", h.dtype, out, [h], {}, out_dtype=dtype)

    def unary(self, op, h):
        out = self._alloc(h.shape, h.dtype)
        return self._ew("unary", h.dtype, out, [h], {"OP": UNARY_CODE[op]})

    def activation(self, name, z, order=0):
        out = self._alloc(z.shape, z.dtype)
        return self._ew("unary", z.dtype, out, [z], {"OP": 9 + order, "ACT": ACT[name].code})

    def _operands(self, shape, *xs):
        return [self.expand(x, shape) if isinstance(x, GPUArray) else None for x in xs]

    def binary(self, op, a, b):
        ha = isinstance(a, GPUArray)
        hb = isinstance(b, GPUArray)
        dtype = a.dtype if ha else b.dtype
        shape = _broadcast(*[x.shape for x in (a, b) if isinstance(x, GPUArray)])
        va, vb = self._operands(shape, a, b)
        consts = {"A_SCALAR": int(not ha), "B_SCALAR": int(not hb)}
        words = {}
        if not ha:
            words[2] = self._scalar_bits(a, dtype)
        if not hb:
            words[3] = self._scalar_bits(b, dtype)
        if op in COMPARE_CODE:
            consts["OP"] = COMPARE_CODE[op]
            out = self._alloc(shape, bool_)
            return self._ew("compare", dtype, out, [va, vb], consts, words)
        consts["OP"] = BINARY_CODE[op]
        out = self._alloc(shape, dtype)
        return self._ew("binary", dtype, out, [va, vb], consts, words)

    def where(self, cond, a, b):
        ha = isinstance(a, GPUArray)
        hb = isinstance(b, GPUArray)
        dtype = a.dtype if ha else b.dtype
        shape = _broadcast(cond.shape, *[x.shape for x in (a, b) if isinstance(x, GPUArray)])
        va, vb, vc = self._operands(shape, a, b, cond)
        consts = {"A_SCALAR": int(not ha), "B_SCALAR": int(not hb)}
        words = {}
        if not ha:
            words[2] = self._scalar_bits(a, dtype)
        if not hb:
            words[3] = self._scalar_bits(b, dtype)
        out = self._alloc(shape, dtype)
        return self._ew("where_", dtype, out, [va, vb, vc], consts, words)

    # -- reductions --------------------------------------------------------------------------------
    def _reduce_words(self, h, kept, red, out_strides_kept=None, out_strides_red=None):
        """Metadata (words 1-3, 16-63) of a (kept) x (reduced) view of h."""
        kshape, (kin, kout) = _coalesce([h.shape[i] for i in kept],
                                        [[h.strides[i] for i in kept],
                                         out_strides_kept or _dense_strides([h.shape[i] for i in kept])])
        rshape, (rin, rout) = _coalesce([h.shape[i] for i in red],
                                        [[h.strides[i] for i in red],
                                         out_strides_red or [0] * len(red)])
        if not rshape:
            rshape, rin, rout = [1], [0], [0]
        if len(kshape) > MAXD or len(rshape) > MAXD:
            raise BackendLimitError(f"reduction over a view with more than {MAXD} non-mergeable dims")
        w = {1: len(kshape), 2: len(rshape), 3: _prod(rshape)}
        for k, (s, a, o) in enumerate(zip(kshape, kin, kout)):
            w[16 + k], w[32 + k], w[48 + k] = s, a, o
        for k, (s, a, o) in enumerate(zip(rshape, rin, rout)):
            w[24 + k], w[40 + k], w[56 + k] = s, a, o
        return w

    def _reduce_into(self, entry_base, op_code, h, axes, out, out_binding, red_out_strides=None,
                     out_kept_strides=None):
        kept = [i for i in range(h.ndim) if i not in axes]
        red = [i for i in range(h.ndim) if i in axes]
        n_out = _prod([h.shape[i] for i in kept])
        w = self._reduce_words(h, kept, red, out_kept_strides, red_out_strides)
        R = w[3]
        if n_out == 0:
            return out
        w[0] = n_out
        raw, off, size, rel = self._bind(h, h.offset, h.span())
        w[8] = rel
        oraw, ooff, osize, orel = self._bind(out, out.offset, out.span())
        w[9] = orel
        w[4], w[5], w[7] = R, 1, R
        tensors = [(2, raw, off, size), (out_binding, oraw, ooff, osize)]
        # schedule: a workgroup per output for few long reductions along a dense axis; else one
        # invocation per output (coalesced when the kept axis is the dense one), with the
        # reduction split into chunks + a second pass when there are too few outputs
        kin_dense = w[1] > 0 and w[32 + w[1] - 1] == 1
        budget = self.loop_budget
        per_elem = 2 + w[2]                 # loop iterations per element: its own + the offset loop
        if budget and R * per_elem > budget // 2 and (entry_base != "reduce" or w[2] != 1):
            if entry_base != "reduce":
                raise BackendLimitError(
                    f"{entry_base} over {R} elements per row exceeds this adapter's shader loop "
                    f"limit (~{budget // per_elem} elements; Mesa llvmpipe); use a GPU adapter")
            # make the reduced dims one dense trailing axis, then reduce that in chunks
            perm = kept + red
            hc = self._copy(self.permute(h, tuple(perm)))
            hc = self.reshape(hc, tuple(h.shape[i] for i in kept) + (R,))
            oc = self.reshape(out, tuple(h.shape[i] for i in kept)) if out.is_contiguous else out
            self._reduce_into(entry_base, op_code, hc, (len(kept),), oc, out_binding)
            return out
        wg_ok = not budget or (-(-R // WG)) * per_elem + 64 < budget // 2
        if R >= 256 and n_out < 4096 and not kin_dense and wg_ok:
            self._launch("reduce.wgsl", entry_base + "_wg", h.dtype, {"OP": op_code}, w, tensors,
                         self._grid_wg(n_out))
            return out
        too_long = budget and R * per_elem > budget // 2
        if entry_base == "reduce" and (R >= 512 and n_out < (1 << 18) or too_long) and w[2] == 1:
            chunks = min(-(-R // 64), max(1, (1 << 19) // n_out))   # ~2^19 invocations
            if budget:
                chunks = max(chunks, -(-R * per_elem // (budget // 2)))
            rc = -(-R // chunks)
            chunks = -(-R // rc)
            if chunks > 1:
                # pass 1: one partial result per (chunk, output)
                part = self._alloc((chunks, n_out), h.dtype)
                praw, poff, psize, prel = self._bind(part, 0, part.size)
                w1 = dict(w)
                w1[4], w1[5], w1[9] = rc, chunks, prel
                self._launch("reduce.wgsl", "reduce_thread", h.dtype,
                             {"OP": 0 if op_code == 1 else op_code}, w1,
                             [(2, raw, off, size), (1, praw, poff, psize)], self._grid(n_out * chunks))
                if not (budget and chunks * per_elem > budget // 2):
                    # pass 2: each output combines its partials in one invocation
                    w2 = self._reduce_words(part, [1], [0])
                    w2.update({0: n_out, 4: chunks, 5: 1, 7: R, 8: prel, 9: orel})
                    self._launch("reduce.wgsl", "reduce_thread", h.dtype, {"OP": op_code}, w2,
                                 [(2, praw, poff, psize), (1, oraw, ooff, osize)], self._grid(n_out))
                    return out
                # too many partials for one invocation's loop budget: reduce them in turn (a tree)
                op = {v: k for k, v in REDUCE_CODE.items()}[op_code]
                r = self.reduce("sum" if op == "mean" else op, part, (0,), False)
                if op == "mean":
                    r = self.binary("div", r, float(R)) if h.dtype.kind == "f" else \
                        self.astype(self.binary("div", self.astype(r, float32), float(R)), h.dtype)
                self._copy(self.reshape(r, out.shape), out)
                return out
        self._launch("reduce.wgsl", entry_base + "_thread", h.dtype, {"OP": op_code}, w, tensors,
                     self._grid(n_out))
        return out

    @staticmethod
    def _grid_wg(n):
        n = min(n, MAX_GROUPS * 64)
        gx = min(n, MAX_GROUPS)
        return (gx, -(-n // gx), 1)

    def reduce(self, op, h, axes, keepdims):
        axes = tuple(sorted(set(axes)))
        kshape = tuple(1 if i in axes else s for i, s in enumerate(h.shape)) if keepdims else \
            tuple(s for i, s in enumerate(h.shape) if i not in axes)
        R = _prod([h.shape[i] for i in axes])
        if R == 0 or h.size == 0:
            if op in ("max", "min") and R == 0 and _prod(kshape):
                raise NumrError(f"{op} of an empty axis has no identity")
            return self.full(kshape, 0 if op == "sum" else float("nan"), h.dtype)
        if h.span() * _SITEM[h.dtype.name] + self.align > self.binding_limit:
            return self._reduce_chunked(op, h, axes, keepdims)
        out = self._alloc(kshape, h.dtype)
        return self._reduce_into("reduce", REDUCE_CODE[op], h, axes, out, 1)

    def _reduce_chunked(self, op, h, axes, keepdims):
        """A reduction whose input exceeds one storage binding: split along the leading axis.
        Kept leading axis: reduce each block of rows into its slice of the output. Reduced
        leading axis: reduce each block to a partial result and combine partials elementwise."""
        lead = min(range(h.ndim), key=lambda i: (h.shape[i] == 1, i))
        size_row = _SITEM[h.dtype.name] * (h.span() - (h.shape[lead] - 1) * h.strides[lead])
        room = self.binding_limit - self.align
        if size_row > room:
            raise BackendLimitError(
                f"reducing a {h.dtype.name} tensor of shape {h.shape} ({h.span() * _SITEM[h.dtype.name]} "
                f"bytes) exceeds maxStorageBufferBindingSize ({self.binding_limit} bytes) per "
                f"row; it cannot be processed in chunks")
        rows = max(1, (room - size_row) // max(1, _SITEM[h.dtype.name] * h.strides[lead]) + 1)
        rows = min(rows, h.shape[lead])
        idx = [(0, s, 1) for s in h.shape]
        total = h.shape[lead]
        if lead not in axes:
            parts = []
            for r0 in range(0, total, rows):
                idx[lead] = (r0, min(total, r0 + rows), 1)
                parts.append(self.reduce(op, self.slice(h, tuple(idx)), axes, True))
            out = self.concat(parts, lead) if len(parts) > 1 else parts[0]
        else:
            sub = "sum" if op == "mean" else op
            comb = {"sum": "add", "max": "maximum", "min": "minimum"}[sub]
            out = None
            for r0 in range(0, total, rows):
                idx[lead] = (r0, min(total, r0 + rows), 1)
                p = self.reduce(sub, self.slice(h, tuple(idx)), axes, True)
                out = p if out is None else self.binary(comb, out, p)
            if op == "mean":
                R = _prod([h.shape[i] for i in axes])
                out = self.binary("div", out, float(R)) if h.dtype.kind == "f" else \
                    self.astype(self.binary("div", self.astype(out, float32), float(R)), h.dtype)
        if not keepdims:
            out = self.reshape(out, tuple(s for i, s in enumerate(out.shape) if i not in axes))
        return out

    def argmax(self, h, axis, keepdims):
        axes = tuple(range(h.ndim)) if axis is None else (axis,)
        if axis is None:
            shape = (1,) * h.ndim if keepdims else ()
        else:
            shape = tuple(1 if i == axis else s for i, s in enumerate(h.shape)) if keepdims else \
                tuple(s for i, s in enumerate(h.shape) if i != axis)
        out = self._alloc(shape, int32)
        if h.size == 0:
            raise NumrError("argmax of an empty tensor")
        return self._reduce_into("argmax", 0, h, axes, out, 3)

    def softmax(self, h, axis, log):
        out = self._alloc(h.shape, h.dtype)
        if h.size == 0:
            return out
        kept = [i for i in range(h.ndim) if i != axis]
        dense = out.strides
        return self._reduce_into("softmax", int(bool(log)), h, (axis,), out, 1,
                                 red_out_strides=[dense[axis]],
                                 out_kept_strides=[dense[i] for i in kept])

    def one_hot(self, labels, n, dtype):
        self._check_dtype(dtype)
        out = self._alloc(labels.shape + (n,), dtype)
        total = out.size
        if total == 0:
            return out
        shape, (st,) = _coalesce(labels.shape, [labels.strides])
        if not shape:
            shape, st = [1], [0]
        raw, off, size, rel = self._bind(labels, labels.offset, labels.span())
        w = {0: total, 1: len(shape), 2: n, 8: 0, 9: rel}
        for k, (s, t) in enumerate(zip(shape, st)):
            w[16 + k], w[32 + k] = s, t
        self._launch("elementwise.wgsl", "one_hot", dtype, {}, w,
                     [(1, out.storage.raw, 0, self._cap(out)), (6, raw, off, size)],
                     self._grid(total))
        return out

    # -- linear algebra ---------------------------------------------------------------------------
    def matmul(self, a, b):
        return self._gemm(a, b, None, "none", False)[0]

    def gemm_bias_act(self, a, b, bias, act):
        row = ACT[act]
        return self._gemm(a, b, bias, act, row.grad_from == "z")

    def _gemm_split_k(self, a, b, bias, act, want_z, shape):
        """z = sum of GEMMs over K blocks (each short enough for the loop budget), then bias and
        activation as separate primitives. Also the K == 0 case (z = 0)."""
        K = a.shape[-1]
        z = self.full(shape, 0, a.dtype) if K == 0 else None
        for k0 in range(0, K, GEMM_K_BUDGETED):
            k1 = min(K, k0 + GEMM_K_BUDGETED)
            pa = self.slice(a, tuple((0, s, 1) for s in a.shape[:-1]) + ((k0, k1, 1),))
            pb = self.slice(b, tuple((0, s, 1) for s in b.shape[:-2]) + ((k0, k1, 1),) +
                            ((0, b.shape[-1], 1),))
            part = self._gemm(pa, pb, None, "none", False)[0]
            z = part if z is None else self.binary("add", z, part)
        if bias is not None:
            z = self.binary("add", z, bias)
        y = z if act == "none" else self.activation(act, z, 0)
        return y, (z if want_z else None)

    def _gemm(self, a, b, bias, act, want_z):
        if a.dtype is bool_:
            raise DTypeError("matmul of bool tensors is not supported on webgpu")
        M, K = a.shape[-2], a.shape[-1]
        N = b.shape[-1]
        bshape = _broadcast(a.shape[:-2], b.shape[:-2])
        nb = _prod(bshape)
        out = self._alloc(bshape + (M, N), a.dtype)
        z = self._alloc(bshape + (M, N), a.dtype) if want_z else None
        if out.size == 0:
            return out, z
        if K == 0 or (self.loop_budget and K > GEMM_K_BUDGETED):
            return self._gemm_split_k(a, b, bias, act, want_z, bshape + (M, N))
        ea = self.expand(a, bshape + (M, K))
        eb = self.expand(b, bshape + (K, N))
        nbd = len(bshape)
        bsh, (sa, sb) = _coalesce(list(bshape), [list(ea.strides[:nbd]), list(eb.strides[:nbd])])
        sam, sak = ea.strides[-2], ea.strides[-1]
        sbk, sbn = eb.strides[-2], eb.strides[-1]
        # fold the batch into M when b is shared and a's batch is contiguous with its rows
        if len(bsh) == 1 and sb[0] == 0 and sa[0] == M * sam and sam != 0:
            M, bsh, sa, sb, nb = M * bsh[0], [], [], [], 1
        elif not bsh:
            nb = 1
        if len(bsh) > MAXD:
            raise BackendLimitError(f"matmul with more than {MAXD} non-mergeable batch dims")
        w = {0: M, 1: N, 2: K, 3: len(bsh), 12: sam, 13: sak, 14: sbk, 15: sbn}
        for k, (s, x, y) in enumerate(zip(bsh, sa, sb)):
            w[16 + k], w[24 + k], w[32 + k] = s, x, y
        araw, aoff, asz, arel = self._bind(a, a.offset, ea.span())
        braw, boff, bsz, brel = self._bind(b, b.offset, eb.span())
        oraw, ooff, osz, orel = self._bind(out, 0, out.size)
        w[8], w[9], w[10] = orel, arel, brel
        tensors = [(1, oraw, ooff, osz), (2, araw, aoff, asz), (3, braw, boff, bsz)]
        if bias is not None:
            xraw, xoff, xsz, xrel = self._bind(bias, bias.offset, bias.span())
            tensors.append((4, xraw, xoff, xsz))
            w[11], w[5] = xrel, bias.strides[-1] if bias.ndim else 0
        else:
            tensors.append((4, self._dummy_r, 0, 256))
        if z is not None:
            zraw, zoff, zsz, zrel = self._bind(z, 0, z.size)
            tensors.append((5, zraw, zoff, zsz))
            w[6] = zrel
        else:
            tensors.append((5, self._dummy_w, 0, 256))
        gt = str(self.gemm_tile)
        if gt == "auto":
            gt = "v4w" if self._v4w_fits and M >= 256 and N >= 256 else "64"
        # gemm_v4 reads a and b as vec4s: rows contiguous, every row / batch start 4-aligned
        v4 = gt in ("v4", "v4w") and sak == 1 and sbn == 1 and K % 4 == 0 and N % 4 == 0 and \
            all(x % 4 == 0 for x in [sam, sbk, arel, brel] + list(sa) + list(sb))
        big = M >= 128 and N >= 128 and gt == "128"
        wide = v4 and gt == "v4w"
        tm, tn = (128, 128 if wide else 64) if v4 else ((128, 128) if big else (64, 64))
        consts = {"ACT": ACT[act].code, "HAS_BIAS": int(bias is not None), "WRITE_Z": int(z is not None),
                  "CHECK": int(M % tm != 0 or N % tn != 0 or K % 16 != 0)}
        if v4:
            entry = "gemm_v4"
            consts["V4_WIDE"] = int(wide)
            tensors[1:3] = [(6, araw, aoff, asz), (7, braw, boff, bsz)]
        else:
            entry = "gemm_big" if big else "gemm"
            consts["A_MLANES"] = int(sam == 1 and sak != 1)
            consts["B_KLANES"] = int(sbk == 1 and sbn != 1)
        gx, gy = -(-N // tn), -(-M // tm)
        if gx > MAX_GROUPS or gy > MAX_GROUPS:
            raise BackendLimitError(f"matmul output {M}x{N} needs more than {MAX_GROUPS} "
                                    "workgroups per dimension")
        for b0 in range(0, nb, MAX_GROUPS):
            w[4] = b0
            self._launch("matmul.wgsl", entry, a.dtype, consts, dict(w),
                         list(tensors),
                         (gx, gy, min(MAX_GROUPS, nb - b0)))
        return out, z

    def act_backward(self, act, dy, y, z, with_bias_grad):
        # one pass over dy and ONE saved tensor: z when the table saves it (act.wgsl recomputes
        # erf / sigmoid from z, cheaper than reading y too on a memory-bound kernel), else y
        saved = z if z is not None else y
        shape = _broadcast(dy.shape, saved.shape)
        vd, vs = self._operands(shape, dy, saved)
        dz = self._alloc(shape, dy.dtype)
        self._ew("binary", dy.dtype, dz, [vd, vs], {"OP": ACT_BWD, "ACT": ACT[act].code,
                                                     "A_SCALAR": 0, "B_SCALAR": 0})
        dbias = None
        if with_bias_grad:
            dbias = self.reduce("sum", dz, tuple(range(dz.ndim - 1)), False) if dz.ndim > 1 else dz
        return dz, dbias

    # -- shapes and copies -------------------------------------------------------------------------
    def reshape(self, h, shape):
        shape = tuple(shape)
        if h.is_contiguous or h.size == 0:
            return GPUArray(h.storage, shape, h.dtype, None, h.offset)
        st = _reshape_strides(h.shape, h.strides, shape)
        if st is not None:                      # a view after all (numpy's no-copy rule)
            return GPUArray(h.storage, shape, h.dtype, st, h.offset)
        return self.reshape(self._copy(h), shape)

    def permute(self, h, perm):
        return GPUArray(h.storage, tuple(h.shape[p] for p in perm), h.dtype,
                        tuple(h.strides[p] for p in perm), h.offset)

    def expand(self, h, shape):
        shape = tuple(shape)
        if shape == h.shape:
            return h
        pad = len(shape) - h.ndim
        strides = [0] * pad
        for s, hs, st in zip(shape[pad:], h.shape, h.strides):
            strides.append(0 if hs == 1 and s != 1 else st)
        return GPUArray(h.storage, shape, h.dtype, strides, h.offset)

    def slice(self, h, index):
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
        return GPUArray(h.storage, shape, h.dtype, strides, off)

    def unslice(self, g, shape, index):
        out = self.full(tuple(shape), 0, g.dtype)
        view = self.slice(out, index)
        if view.size:
            self._copy(self.expand(g, view.shape), out=view)
        return out

    def concat(self, hs, axis):
        shape = list(hs[0].shape)
        shape[axis] = sum(h.shape[axis] for h in hs)
        out = self._alloc(tuple(shape), hs[0].dtype)
        pos = 0
        for h in hs:
            d = h.shape[axis]
            if d:
                idx = [(0, s, 1) for s in shape]
                idx[axis] = (pos, pos + d, 1)
                self._copy(h, out=self.slice(out, tuple(idx)))
            pos += d
        return out
