"""GPUAdapter over wgpu-py (wgpu-native: Vulkan, Metal, DX12, GL). The only module importing wgpu."""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile

from ...errors import BackendUnavailableError, KernelError
from .adapter import WANTED_FEATURES, WANTED_LIMITS, GPUAdapter, canonical_features


def _snake(name):
    return re.sub(r"([A-Z])", lambda m: "-" + m.group(1).lower(), name)


@contextlib.contextmanager
def _runtime_dir():
    """Mesa's Vulkan driver prints `XDG_RUNTIME_DIR is invalid or not set` (twice) while creating
    an adapter in a session without one (ssh, containers, CI): a private, empty one meanwhile."""
    if os.environ.get("XDG_RUNTIME_DIR"):
        yield
        return
    d = tempfile.mkdtemp(prefix="numr-web-runtime-")      # mode 0700, as the spec asks
    os.environ["XDG_RUNTIME_DIR"] = d
    try:
        yield
    finally:
        if os.environ.get("XDG_RUNTIME_DIR") == d:
            del os.environ["XDG_RUNTIME_DIR"]
        shutil.rmtree(d, ignore_errors=True)


class NativeAdapter(GPUAdapter):
    def __init__(self, power_preference="high-performance"):
        try:
            import wgpu
        except ImportError as e:
            raise BackendUnavailableError(
                "wgpu is not installed (pip install 'numr-web[wgpu]')") from e
        self._wgpu = wgpu
        try:
            with _runtime_dir():
                adapter = wgpu.gpu.request_adapter_sync(power_preference=power_preference)
        except Exception as e:
            raise BackendUnavailableError(f"no WebGPU adapter: {type(e).__name__}: {e}") from e
        if adapter is None:
            raise BackendUnavailableError("no WebGPU adapter found (no Vulkan/Metal/DX12 driver?)")
        alim = adapter.limits
        required = {}
        for name in WANTED_LIMITS:
            key = _snake(name)
            if key in alim and alim[key] is not None:
                required[key] = alim[key]
        feats = [f for f in WANTED_FEATURES if f in adapter.features]
        try:
            self.device = adapter.request_device_sync(required_features=feats,
                                                      required_limits=required)
        except Exception as e:
            raise BackendUnavailableError(f"could not create a WebGPU device: {e}") from e
        self.adapter = adapter
        info = adapter.info
        self.name = info.get("device") or info.get("description") or "?"
        self.backend = info.get("backend_type", "?")
        self.adapter_type = info.get("adapter_type", "?")
        dlim = self.device.limits
        self.limits = {n: dlim.get(_snake(n), alim.get(_snake(n))) for n in WANTED_LIMITS}
        self.features = canonical_features(f for f in feats if f in self.device.features)
        self._queue = self.device.queue
        self.can_timestamp = "timestamp-query" in self.features
        self._timed = []            # (query set, resolve buffer, dispatches) per timed submit
        self._bind_groups = {}      # (pipeline, bindings) -> bind group: training loops repeat them
        from wgpu.backends.wgpu_native import _api, _ffi       # the C API wgpu-py wraps
        self._c = (_ffi.ffi, _api.libf, _ffi.lib.wgpuBindGroupRelease)
        U = wgpu.BufferUsage
        self._usage = {"storage": U.STORAGE | U.COPY_SRC | U.COPY_DST,
                       "uniform": U.UNIFORM | U.COPY_DST}

    def info(self):
        d = super().info()
        d["adapter_type"] = self.adapter_type
        d["library"] = f"wgpu-py {self._wgpu.__version__}"
        return d

    # -- buffers -------------------------------------------------------------------------------------
    def create_buffer(self, size, usage):
        try:
            return self.device.create_buffer(size=size, usage=self._usage[usage])
        except Exception as e:
            raise KernelError(f"create_buffer({size} bytes, {usage}) failed: {e}") from e

    def destroy_buffer(self, buffer):
        self._bind_groups.clear()
        buffer.destroy()

    def write_buffer(self, buffer, offset, data):
        self._queue.write_buffer(buffer, offset, data)

    def read_buffer(self, buffer, offset, size):
        try:
            return bytes(self._queue.read_buffer(buffer, offset, size))
        except Exception as e:
            raise KernelError(f"reading back a buffer failed (device lost?): "
                              f"{type(e).__name__}: {e}") from e

    # -- pipelines and work ------------------------------------------------------------------------
    def create_pipeline(self, label, code, entry_point, constants):
        try:
            module = self.device.create_shader_module(label=label, code=code)
            pipe = self.device.create_compute_pipeline(
                label=label, layout="auto",
                compute={"module": module, "entry_point": entry_point,
                         "constants": {k: float(v) for k, v in constants.items()}})
            layout = pipe.get_bind_group_layout(0)
        except Exception as e:
            raise KernelError(f"kernel {label!r} failed to compile: {type(e).__name__}: {e}") from e
        return (pipe, layout)

    def submit(self, dispatches, timed=False):
        """Encode the dispatches into one command buffer and submit it. The per-dispatch calls
        (a bind group made on a cache miss; set pipeline, set bind group, dispatch) go straight
        to wgpu-native through wgpu-py's error-checked C functions, several times cheaper than
        wgpu-py's Python wrappers (docs/benchmarks.md)."""
        dev = self.device
        ffi, libf, _ = self._c
        set_pipeline = libf.wgpuComputePassEncoderSetPipeline
        set_bind_group = libf.wgpuComputePassEncoderSetBindGroup
        dispatch = libf.wgpuComputePassEncoderDispatchWorkgroups
        null = ffi.NULL
        label = "?"
        try:
            enc = dev.create_command_encoder()
            qs = None
            if timed and dispatches:
                qs = dev.create_query_set(type="timestamp", count=2 * len(dispatches))
            cp = None if qs is not None else enc.begin_compute_pass()
            cache = self._bind_groups
            for i, d in enumerate(dispatches):
                label = d.label
                pipe, layout = d.pipeline
                key = (id(pipe),) + tuple((b.index, id(b.buffer), b.offset, b.size)
                                          for b in d.bindings)
                bg = cache.get(key)
                if bg is None:
                    bg = self._bind_group(layout, d.bindings)
                    if len(cache) >= 4096:
                        cache.pop(next(iter(cache)))
                    cache[key] = (bg, d.bindings, pipe)   # keeps them alive: ids stay unique
                else:
                    bg = bg[0]
                if qs is not None:                # nr.profile: a pass per dispatch, timed
                    cp = enc.begin_compute_pass(timestamp_writes={
                        "query_set": qs, "beginning_of_pass_write_index": 2 * i,
                        "end_of_pass_write_index": 2 * i + 1})
                h = cp._internal
                set_pipeline(h, pipe._internal)
                set_bind_group(h, 0, bg, 0, null)
                dispatch(h, *d.groups)
                if qs is not None:
                    cp.end()
            if qs is None:
                cp.end()
            else:
                U = self._wgpu.BufferUsage
                buf = dev.create_buffer(size=16 * len(dispatches),
                                        usage=U.QUERY_RESOLVE | U.COPY_SRC)
                enc.resolve_query_set(qs, 0, 2 * len(dispatches), buf, 0)
                self._timed.append((qs, buf, len(dispatches)))
            label = "submit"
            self._queue.submit([enc.finish()])
        except Exception as e:
            raise KernelError(f"kernel {label!r} failed: {type(e).__name__}: {e}") from e

    def _bind_group(self, layout, bindings):
        """A bind group of buffer bindings, made through the C API; released when the returned
        handle is collected (the cache drops it)."""
        ffi, libf, release = self._c
        entries = ffi.new("WGPUBindGroupEntry[]", len(bindings))
        for e, b in zip(entries, bindings):
            e.binding, e.buffer, e.offset, e.size = b.index, b.buffer._internal, b.offset, b.size
        desc = ffi.new("WGPUBindGroupDescriptor *")
        desc.layout, desc.entries, desc.entryCount = layout._internal, entries, len(bindings)
        handle = libf.wgpuDeviceCreateBindGroup(self.device._internal, desc)
        if handle == ffi.NULL:
            raise KernelError("wgpuDeviceCreateBindGroup returned no bind group")
        return ffi.gc(handle, release)

    def read_timings(self):
        import struct
        period = self._timestamp_period()
        out = []
        for qs, buf, n in self._timed:
            t = struct.unpack(f"<{2 * n}Q", self.read_buffer(buf, 0, 16 * n))
            out.extend(max(t[2 * i + 1] - t[2 * i], 0) * period / 1e6 for i in range(n))
            buf.destroy()
            qs.destroy()
        self._timed = []
        return out

    def _timestamp_period(self):
        """Nanoseconds per timestamp tick (wgpu-native resolves raw ticks)."""
        try:
            from wgpu.backends.wgpu_native._ffi import lib
            return float(lib.wgpuQueueGetTimestampPeriod(self._queue._internal))
        except Exception:
            return 1.0
