"""The webgpu device: the Backend interface (numr_web/backends/base.py) on WGSL kernels.

Layers (none imports wgpu or numpy: the browser has neither):
  views.py                 GPUArray views and stride algebra (pure)
  contract.py, codegen.py  the named metadata / binding contract and the generated WGSL
  config.py                the knobs below and the process's one adapter
  kernels.py, dispatch.py  pipelines; metadata arena, batching, binding ranges, buffers
  graphs.py, timing.py     a step's dispatches recorded for nr.capture; nr.profile's timer
  fusion.py, codegen_fused.py  chains of elementwise ops recorded lazily, run as one kernel
  launch_elementwise.py, launch_reduce.py, launch_gemm.py, launch_index.py, launch_norm.py,
  launch_attention.py, launch_conv.py                       one launcher per kernel family
  backend_nn.py            the nn primitives (gather, norms, attention, im2col), a mixin
  backend_linalg.py        the GEMM schedules (split-K), a mixin
  backend.py (this)        the primitives, composed from views and launchers; it chooses the
                           schedules that need several launches (split-K GEMMs, reductions in
                           chunks above the binding limit, tree reductions, dense-first copies)
The GPU is reached through a GPUAdapter (adapter.py): adapter_native (wgpu-py) under CPython,
adapter_browser in Pyodide. Work is recorded and submitted in batches (dispatch.py).

Knobs (constructor argument / environment variable; the argument wins):
  max_binding_size  NUMR_WEBGPU_MAX_BINDING    bytes per storage binding, at most the adapter's
                    maxStorageBufferBindingSize; larger tensors are processed in chunks by the
                    elementwise kernels and reductions, refused by the others (BackendLimitError)
  loop_budget       NUMR_WEBGPU_LOOP_BUDGET    most loop iterations one shader invocation may run
                    (0: unlimited). Default 60000 on Mesa llvmpipe, which silently stops an
                    invocation's loops after 65535; long reductions and GEMMs are scheduled within it
  gemm_tile         NUMR_WEBGPU_GEMM_TILE      GEMM kernel: auto (default), 64, 128, v4, v4w, sg
                    (launch_gemm.py); attn_tile NUMR_WEBGPU_ATTN_TILE: attention tiles, auto
                    or e.g. "16x8x8" (launch_attention.py); both also assignable attributes
  max_workgroups    NUMR_WEBGPU_MAX_WORKGROUPS workgroups per 1-D dispatch (default 65535)
  fuse              NUMR_WEBGPU_FUSE           1 (default): chains of elementwise ops run as one
                    generated kernel each (fusion.py), bit-identical to 0 (one kernel per op); also
                    assignable as the attribute `fuse`. `settle()` flushes a pending chain
  submit_bytes      NUMR_WEBGPU_SUBMIT_BYTES   recorded dispatches go out in runs of 16, 32, ...
                    up to dispatch.BATCH after each readback (the GPU starts early on a short
                    run); above 0, also once the pending dispatches bind this many bytes
                    (default 0). Also the attribute `submit_bytes`
`info()` reports them, the pool, the pipelines, the submits, the dispatches per kernel (fused
kernels as "fused.fused_<inputs>_<outputs>"), the fusion counters ("fusion").
"""
from __future__ import annotations

import math

from ...dtypes import bool_, float16, float32, float64, int32
from ...errors import BackendUnavailableError, BackendLimitError, DTypeError, KernelError, NumrError
from ...vocab.registry import family_names
from ..base import Backend
from . import launch_elementwise as ew
from . import launch_gemm as gemm
from . import launch_reduce as red
from . import timing
from .backend_linalg import LinalgPrimitives
from .backend_nn import NNPrimitives
from .codegen import act_code, op_code
from .config import LLVMPIPE_LOOP_BUDGET, knob, shared_adapter
from .dispatch import SUBMIT_BYTES, Dispatcher
from .graphs import Recording
from .kernels import kernel_defined
from .views import (ITEMSIZE, GPUArray, broadcast_shapes, expanded, full_index, joined,
                    permuted, prod, reshaped, sliced, split_leading)

class WebGPUBackend(NNPrimitives, LinalgPrimitives, Backend):
    device = "webgpu"
    can_capture = True           # nr.capture records a step's dispatches (graphs.py)

    def __init__(self, adapter=None, max_binding_size=None, loop_budget=None, gemm_tile=None,
                 max_workgroups=None, fuse=None, submit_bytes=None, attn_tile=None):
        self.adapter = adapter or shared_adapter()
        lim = self.adapter.limits
        binding = int(lim.get("maxStorageBufferBindingSize") or (128 << 20))
        want = knob("max_binding_size", max_binding_size)
        if want:
            binding = min(binding, want)
        budget = knob("loop_budget", loop_budget)
        self.loop_budget = budget if budget is not None else (
            LLVMPIPE_LOOP_BUDGET if "llvmpipe" in str(getattr(self.adapter, "name", "")).lower()
            else 0)
        self.gemm_tile = knob("gemm_tile", gemm_tile, str) or "auto"
        self.attn_tile = knob("attn_tile", attn_tile, str) or "auto"
        # the dispatcher (dispatch.py): records launches, owns the arena, pool and pipelines
        self.d = Dispatcher(self.adapter, binding - binding % 4,
                            knob("max_workgroups", max_workgroups) or 65535)
        self.kernels = self.d.kernels
        f = knob("fuse", fuse)
        self.fuse = True if f is None else f
        sb = knob("submit_bytes", submit_bytes)
        self.submit_bytes = SUBMIT_BYTES if sb is None else sb
        self.pool = self.d.pool
        self.f16 = "shader-f16" in self.adapter.features
        self._gemm_caps = gemm.caps(self.adapter)
        self._compare = frozenset(family_names("compare"))

    @property
    def gemm_tile(self):
        return self._gemm_tile

    @gemm_tile.setter
    def gemm_tile(self, tile):
        if str(tile) not in gemm.GEMM_TILES:
            raise BackendUnavailableError(f"GEMM tile {tile!r} (NUMR_WEBGPU_GEMM_TILE): expected "
                                          f"one of {', '.join(gemm.GEMM_TILES)}")
        self._gemm_tile = str(tile)

    fuse = property(lambda self: self.d.fusion.enabled, lambda self, on: self.d.fusion.enable(on))
    submit_bytes = property(lambda self: self.d.submit_bytes,
                            lambda self, n: self.d.set_submit_bytes(n))

    def settle(self):
        """Record the pending chain of fused elementwise ops now (without submitting)."""
        self.d.fusion.flush()

    profile_timer = timing.timer

    binding_limit = property(lambda self: self.d.binding_limit)

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
        d["knobs"] = {"max_binding_size": self.binding_limit, "loop_budget": self.loop_budget,
                      "gemm_tile": self.gemm_tile, "max_workgroups": self.d.max_workgroups,
                      "fuse": int(self.fuse), "submit_bytes": self.submit_bytes,
                      "attn_tile": self.attn_tile}
        d["pool"] = self.pool.stats()
        d["pipelines"] = len(self.kernels)
        d["submits"] = self.d.submits
        d["dispatches"] = dict(self.d.counts)
        d["fusion"] = self.d.fusion.stats()
        return d

    @property
    def can_block(self):
        return self.adapter.can_block

    def flush(self):
        """Submit the recorded work now (a readback does it anyway)."""
        self.d.flush()

    def empty_cache(self):
        """Give the pool's free buffers back to the driver (torch.cuda.empty_cache's counterpart);
        tensors keep theirs. The recorded work is submitted first: it may still bind a freed
        buffer, which the adapter then destroys once that work is done."""
        self.d.flush()
        self.pool.trim()

    # -- dtypes and memory -----------------------------------------------------------------------------
    def check_dtype(self, dtype):
        if dtype is float64:
            raise DTypeError("float64 is not supported on webgpu (WGSL has no 64-bit floats); "
                             "use float32")
        if dtype is float16 and not self.f16:
            raise DTypeError("float16 needs the WebGPU feature 'shader-f16', which this adapter "
                             f"({self.adapter.name}) lacks; use float32")
        if dtype.name not in ITEMSIZE:
            raise DTypeError(f"dtype {dtype.name} is not supported on webgpu (WGSL has no "
                             f"{dtype.name}); use float32 or float16")
        return dtype

    def dtype_of(self, h):
        return h.dtype

    def covers(self, family, name):
        """Whether the elementwise vocabulary row has its kernel here (tests/test_architecture)."""
        return kernel_defined(family, name)

    def is_view(self, h):
        return h.view

    def strides(self, h):
        return tuple(h.strides)                              # GPUArray counts elements

    def max_elements(self, dtype):
        return self.d.max_buffer // ITEMSIZE[dtype.name] if dtype.name in ITEMSIZE else 0

    def from_host(self, host, dtype):
        self.check_dtype(dtype)
        if hasattr(host, "buf") and hasattr(host, "shape") and not hasattr(host, "tobytes"):
            shape, raw = tuple(host.shape), memoryview(host.buf).cast("B")
        else:  # numpy (or anything with .shape and .tobytes())
            shape, raw = tuple(int(s) for s in host.shape), memoryview(host.tobytes()).cast("B")
        n = prod(shape)
        if n == 0:
            return self.d.alloc(shape, dtype)
        if dtype is bool_:
            if len(raw) != n:
                raw = memoryview(bytes(1 if v else 0 for v in raw.cast(
                    {4 * n: "I", 2 * n: "H"}.get(len(raw), "B"))))
            return ew.bool_unpack(self.d, self.d.alloc(shape, dtype), self.d.upload(raw))
        if len(raw) != n * dtype.itemsize:
            raise DTypeError(f"host data has {len(raw)} bytes, expected {n} x {dtype.itemsize} "
                             f"for {dtype.name} of shape {shape}")
        return GPUArray(self.d.upload(raw), shape, dtype)

    def _read_range(self, h):
        """(readable view, buffer, byte offset, byte size rounded up to 4) for a readback."""
        if self.d.recording is not None:
            raise KernelError("webgpu step capture: the step reads a value back to the host (.item(), "
                              ".numpy(), .tolist(), print); a captured step must stay on the GPU")
        if not (h.is_contiguous and (h.offset * h.itemsize) % 4 == 0):
            h = self._copy(h)
        self.d.flush()
        self.pool.new_round()
        return h, h.storage.raw, h.offset * h.itemsize, -(-(h.size * h.itemsize) // 4) * 4

    @staticmethod
    def _finish_bytes(h, data):
        mv = memoryview(data)[:h.size * h.itemsize]
        return bytes(mv[::4]) if h.dtype is bool_ else bytes(mv)

    def to_bytes(self, h):
        self.raise_failed_checks()
        return self.to_bytes_unchecked(h)

    def to_bytes_unchecked(self, h):
        if h.size == 0:
            return b""
        h, buf, off, size = self._read_range(h)
        return self._finish_bytes(h, self.adapter.read_buffer(buf, off, size))

    async def read_bytes_async(self, h):
        """to_bytes for the browser: awaits the GPU instead of blocking."""
        await self.raise_failed_checks_async()
        return await self.read_bytes_unchecked_async(h)

    async def read_bytes_unchecked_async(self, h):
        if h.size == 0:
            return b""
        h, buf, off, size = self._read_range(h)
        return self._finish_bytes(h, await self.adapter.read_buffer_async(buf, off, size))

    # -- creation ------------------------------------------------------------------------------------
    def full(self, shape, value, dtype):
        self.check_dtype(dtype)
        return ew.fill(self.d, self.d.alloc(tuple(shape), dtype), value)

    def arange(self, start, stop, step, dtype):
        self.check_dtype(dtype)
        n = max(0, math.ceil((stop - start) / step))
        return ew.arange(self.d, self.d.alloc((n,), dtype), start, step)

    def random(self, shape, dtype, seed, kind):
        self.check_dtype(dtype)
        if seed is None:
            import random as _r
            seed = _r.getrandbits(64)
        return ew.random(self.d, self.d.alloc(tuple(shape), dtype),
                         int(seed) & 0xFFFFFFFFFFFFFFFF, kind)

    # -- elementwise -----------------------------------------------------------------------------------
    def _copy(self, h, out=None):
        out = out if out is not None else self.d.alloc(h.shape, h.dtype)
        return ew.strided(self.d, "unary", h.dtype, out, [h], {"OP": op_code("unary", "copy")})

    def copy(self, h):
        return self._copy(h)

    def assign(self, dst, src):
        if dst is not src:
            self._copy(self._copy(src) if dst.storage is src.storage else src, out=dst)

    def recording(self):
        return Recording(self)

    def contiguous(self, h):
        return h if h.is_contiguous else self._copy(h)

    def astype(self, h, dtype):
        self.check_dtype(dtype)
        if dtype is h.dtype:
            return h
        return ew.strided(self.d, "astype", h.dtype, self.d.alloc(h.shape, dtype), [h], {},
                          out_dtype=dtype)

    def unary(self, op, h):
        return self.d.fusion.record("unary", op, h.dtype, h.shape, (h,)) or ew.strided(
            self.d, "unary", h.dtype, self.d.alloc(h.shape, h.dtype), [h], {"OP": op_code("unary", op)})

    def activation(self, name, z, fn="fwd"):
        return self.d.fusion.record("unary", "act_" + fn, z.dtype, z.shape, (z,), name) or \
            ew.strided(self.d, "unary", z.dtype, self.d.alloc(z.shape, z.dtype), [z],
                       {"OP": op_code("unary", "act_" + fn), "ACT": act_code(name)})

    def _operands(self, x, y, *more):
        """(dtype, shape, expanded views or None for Python scalars, consts, scalar words) of
        operands a = x, b = y (either may be a scalar) and further handles (cond)."""
        dtype = x.dtype if isinstance(x, GPUArray) else y.dtype
        shape = broadcast_shapes(*[v.shape for v in (x, y) + more if isinstance(v, GPUArray)])
        views = [expanded(v, shape) if isinstance(v, GPUArray) else None for v in (x, y) + more]
        consts, scalars = {}, []
        for v, flag, word in ((x, "A_SCALAR", ew.L.SCALAR_A), (y, "B_SCALAR", ew.L.SCALAR_B)):
            consts[flag] = int(not isinstance(v, GPUArray))
            if consts[flag]:
                scalars.append((word, ew.scalar_bits(v, dtype)))
        return dtype, shape, views, consts, scalars

    def binary(self, op, a, b):
        dtype, shape, views, consts, scalars = self._operands(a, b)
        if op in self._compare:
            consts["OP"] = op_code("compare", op)
            return ew.strided(self.d, "compare", dtype, self.d.alloc(shape, bool_), views, consts,
                              scalars)
        consts["OP"] = op_code("binary", op)
        return self.d.fusion.record("binary", op, dtype, shape, (a, b)) or ew.strided(
            self.d, "binary", dtype, self.d.alloc(shape, dtype), views, consts, scalars)

    def where(self, cond, a, b):
        dtype, shape, views, consts, scalars = self._operands(a, b, cond)
        return ew.strided(self.d, "where_", dtype, self.d.alloc(shape, dtype), views, consts,
                          scalars)

    def act_backward(self, act, dy, s, y=None, bias_grad=False):
        # one pass over dy and ONE saved tensor (the table's choice: act.wgsl recomputes erf /
        # sigmoid from z, cheaper than reading y too on a memory-bound kernel)
        shape = broadcast_shapes(dy.shape, s.shape)
        if act == "none" and shape == dy.shape and dy.ndim > 1:   # act' = 1: dz is dy itself
            dz = dy
        else:
            dz = self.d.fusion.record("binary", "act_d1", dy.dtype, shape, (dy, s), act) or \
                ew.strided(self.d, "binary", dy.dtype, self.d.alloc(shape, dy.dtype),
                           [expanded(dy, shape), expanded(s, shape)],
                           {"OP": op_code("binary", "act_d1"), "ACT": act_code(act),
                            "A_SCALAR": 0, "B_SCALAR": 0})
        dbias = None
        if bias_grad:
            dbias = self.reduce("sum", dz, tuple(range(dz.ndim - 1)), False) if dz.ndim > 1 else dz
        return dz, dbias

    # -- reductions ------------------------------------------------------------------------------------
    def reduce(self, op, h, axes, keepdims):
        axes = tuple(sorted(set(axes)))
        kshape = tuple(1 if i in axes else s for i, s in enumerate(h.shape)) if keepdims else \
            tuple(s for i, s in enumerate(h.shape) if i not in axes)
        R = prod([h.shape[i] for i in axes])
        if R == 0 or h.size == 0:
            if op in ("max", "min") and R == 0 and prod(kshape):
                raise NumrError(f"{op} of an empty axis has no identity")
            return self.full(kshape, {"sum": 0, "prod": 1}.get(op, float("nan")), h.dtype)
        if h.span() * h.itemsize + self.d.align > self.binding_limit:
            return self._reduce_chunked(op, h, axes, keepdims)
        return self._reduce_into("reduce", op, h, axes, self.d.alloc(kshape, h.dtype))

    def _mean_of_sum(self, s, count, dtype):
        if dtype.kind == "f":
            return self.binary("div", s, float(count))
        return self.astype(self.binary("div", self.astype(s, float32), float(count)), dtype)

    def _reduce_into(self, kind, op, h, axes, out, red_out=None, kept_out=None):
        """Reduce h over `axes` into view out with the schedule launch_reduce.plan picks."""
        kept = [i for i in range(h.ndim) if i not in axes]
        red_axes = [i for i in range(h.ndim) if i in axes]
        n_out = prod([h.shape[i] for i in kept])
        w = red.words(h, kept, red_axes, kept_out, red_out)
        if n_out == 0:
            return out
        R = w[red.L.R]
        cpu = self.cpu_adapter
        schedule, chunks, rc = red.plan(kind, R, n_out, w[red.L.NR], red.kept_dense(w),
                                        self.loop_budget, cpu)
        if schedule == "dense_first":       # the reduced dims as one dense trailing axis
            hc = self._copy(permuted(h, tuple(kept + red_axes)))
            hc = self.reshape(hc, tuple(h.shape[i] for i in kept) + (R,))
            oc = self.reshape(out, tuple(h.shape[i] for i in kept)) if out.is_contiguous else out
            self._reduce_into(kind, op, hc, (len(kept),), oc)
            return out
        if schedule == "tree":              # partials per chunk, then a reduction of those
            part = red.partials(self.d, op, h, w, n_out, chunks, rc)
            r = self.reduce("sum" if op == "mean" else op, part, (0,), False)
            if op == "mean":
                r = self._mean_of_sum(r, R, h.dtype)
            self._copy(self.reshape(r, out.shape), out)
            return out
        return red.run(self.d, schedule, kind, op, h, w, out, n_out, chunks, rc, cpu)

    def _reduce_chunked(self, op, h, axes, keepdims):
        """A reduction whose input exceeds one storage binding: split along the leading axis.
        Kept leading axis: reduce each block of rows into its slice of the output. Reduced
        leading axis: reduce each block to a partial result and combine partials elementwise."""
        lead, row_bytes = split_leading(h)
        room = self.binding_limit - self.d.align
        if row_bytes > room:
            raise BackendLimitError(
                f"reducing a {h.dtype.name} tensor of shape {h.shape} ({h.span() * h.itemsize} "
                f"bytes) exceeds maxStorageBufferBindingSize ({self.binding_limit} bytes) per "
                f"row; it cannot be processed in chunks")
        rows = min(h.shape[lead], max(1, (room - row_bytes) // max(1, h.itemsize * h.strides[lead]) + 1))
        idx = full_index(h.shape)
        total = h.shape[lead]
        if lead not in axes:
            parts = []
            for r0 in range(0, total, rows):
                idx[lead] = (r0, min(total, r0 + rows), 1)
                parts.append(self.reduce(op, sliced(h, idx), axes, True))
            out = self.concat(parts, lead) if len(parts) > 1 else parts[0]
        else:
            sub = "sum" if op == "mean" else op
            comb = {"sum": "add", "prod": "mul", "max": "maximum", "min": "minimum"}[sub]
            out = None
            for r0 in range(0, total, rows):
                idx[lead] = (r0, min(total, r0 + rows), 1)
                p = self.reduce(sub, sliced(h, idx), axes, True)
                out = p if out is None else self.binary(comb, out, p)
            if op == "mean":
                out = self._mean_of_sum(out, prod([h.shape[i] for i in axes]), h.dtype)
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
        if h.size == 0:
            raise NumrError("argmax of an empty tensor")
        return self._reduce_into("argmax", None, h, axes, self.d.alloc(shape, int32))

    def softmax(self, h, axis, log):
        out = self.d.alloc(h.shape, h.dtype)
        if h.size == 0:
            return out
        dense = out.strides
        return self._reduce_into("softmax", bool(log), h, (axis,), out, red_out=[dense[axis]],
                                 kept_out=[dense[i] for i in range(h.ndim) if i != axis])

    def one_hot(self, labels, n, dtype):
        self.check_dtype(dtype)
        return ew.one_hot(self.d, self.d.alloc(labels.shape + (n,), dtype), labels, n)

    # -- shapes and copies -----------------------------------------------------------------------------
    def reshape(self, h, shape):
        v = reshaped(h, shape)
        return v if v is not None else reshaped(self._copy(h), shape)

    def permute(self, h, perm):
        return permuted(h, perm)

    def expand(self, h, shape):
        return expanded(h, shape)

    def slice(self, h, index):
        return sliced(h, index)

    def unslice(self, g, shape, index):
        out = self.full(tuple(shape), 0, g.dtype)
        view = sliced(out, index)
        if view.size:
            self._copy(expanded(g, view.shape), out=view)
        return out

    def joined(self, hs, axis):
        return joined(hs, axis)

    def concat(self, hs, axis):
        shape = list(hs[0].shape)
        shape[axis] = sum(h.shape[axis] for h in hs)
        out = self.d.alloc(tuple(shape), hs[0].dtype)
        pos = 0
        for h in hs:
            d = h.shape[axis]
            if d:
                idx = full_index(shape)
                idx[axis] = (pos, pos + d, 1)
                self._copy(h, out=sliced(out, idx))
            pos += d
        return out
