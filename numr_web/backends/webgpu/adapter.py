"""The GPU adapter protocol: the only thing that differs between native wgpu-py and the browser.

The webgpu backend (backend.py, kernels.py, buffers.py) talks to the GPU exclusively through this
small interface, so it never imports wgpu or touches `js`. Implementations:

  * adapter_native.NativeAdapter   wgpu-py (wgpu-native over Vulkan / Metal / DX12)
  * adapter_browser.BrowserAdapter `js.navigator.gpu` in Pyodide

Everything an implementation must provide is listed on `GPUAdapter`; objects it returns (buffers,
pipelines) are opaque to the backend and only ever handed back to the same adapter.

Queue work is fire-and-forget: `submit` returns at once; only `read_buffer` / `read_buffer_async`
wait for the GPU. Errors must surface as numr_web.errors subclasses (KernelError naming the kernel
for shader / pipeline / bind-group validation errors and device loss; BackendUnavailableError
when no adapter exists) — never hang.
"""
from __future__ import annotations

# Limits the backend relies on (WebGPU names, camelCase as in the spec). An adapter requests the
# adapter's own maximum for each of them when it creates the device (browser defaults are the
# spec minimums, e.g. 128 MiB per storage binding), and reports the granted values in `limits`.
WANTED_LIMITS = (
    "maxStorageBufferBindingSize",
    "maxBufferSize",
    "maxComputeWorkgroupsPerDimension",
    "maxComputeInvocationsPerWorkgroup",
    "maxComputeWorkgroupSizeX",
    "maxComputeWorkgroupSizeY",
    "maxComputeWorkgroupStorageSize",
    "maxStorageBuffersPerShaderStage",
    "maxUniformBufferBindingSize",
    "minStorageBufferOffsetAlignment",
    "minUniformBufferOffsetAlignment",
)
# Optional features requested when the adapter has them: "subgroup" is wgpu-native's name of the
# browser's "subgroups" (subgroup builtins in WGSL); `features` reports either as "subgroup";
# "timestamp-query" lets nr.profile time each dispatch.
WANTED_FEATURES = ("shader-f16", "subgroup", "subgroups", "timestamp-query")
FEATURE_ALIASES = {"subgroups": "subgroup"}


def canonical_features(names):
    """The backend's names of granted features ("subgroups" -> "subgroup")."""
    return frozenset(FEATURE_ALIASES.get(n, n) for n in names)


class Binding:
    """One bind-group entry: buffer range [offset, offset + size) at @binding(index), group 0."""

    __slots__ = ("index", "buffer", "offset", "size")

    def __init__(self, index, buffer, offset, size):
        self.index, self.buffer, self.offset, self.size = index, buffer, offset, size

    def __repr__(self):
        return f"Binding({self.index}, off={self.offset}, size={self.size})"


class Dispatch:
    """One compute dispatch: pipeline (from create_pipeline), its bindings, workgroup counts."""

    __slots__ = ("pipeline", "bindings", "groups", "label")

    def __init__(self, pipeline, bindings, groups, label):
        self.pipeline, self.bindings, self.groups, self.label = pipeline, bindings, groups, label


class GPUAdapter:
    """Abstract GPU adapter. Attributes set by implementations:

    name      adapter / device name, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
    backend   "Vulkan", "Metal", "D3D12", "WebGPU (browser)", ...
    limits    dict: every name of WANTED_LIMITS -> the value granted to the device
    features  frozenset of enabled feature names (e.g. {"shader-f16", "subgroup"})
    wgsl_enables  {feature: shader file} of the `enable` directive the adapter's shader compiler
              needs in front of a module using the feature (the browser's:
              {"subgroup": "enable_subgroups.wgsl"}; wgpu-native's compiler wants none)
    """

    name = "?"
    backend = "?"
    can_block = True          # read_buffer can wait for the GPU (a browser without JSPI cannot)
    can_timestamp = False     # submit(..., timed=True) and read_timings() work
    limits: dict = {}
    features: frozenset = frozenset()
    wgsl_enables: dict = {}

    def info(self) -> dict:
        """Details for `numr-web info`: name, backend, limits, features, library versions."""
        return {"adapter": self.name, "backend": self.backend, "limits": dict(self.limits),
                "features": sorted(self.features)}

    # -- buffers -----------------------------------------------------------------------------------
    def create_buffer(self, size: int, usage: str):
        """A new buffer of `size` bytes (a multiple of 4). usage: "storage" (STORAGE | COPY_SRC |
        COPY_DST) or "uniform" (UNIFORM | COPY_DST). Contents are zero."""
        raise NotImplementedError

    def destroy_buffer(self, buffer) -> None:
        """Free the GPU memory now (the pool calls this when trimming)."""
        raise NotImplementedError

    def write_buffer(self, buffer, offset: int, data) -> None:
        """Queue a write of `data` (bytes-like, length a multiple of 4) at byte `offset`: ordered
        after every earlier `submit` and before every later one (GPUQueue.writeBuffer)."""
        raise NotImplementedError

    def read_buffer(self, buffer, offset: int, size: int) -> bytes:
        """Synchronous readback of `size` bytes (offset and size multiples of 4), after all
        submitted work. The browser implements it with JSPI (pyodide.ffi.run_sync) where available."""
        raise NotImplementedError

    async def read_buffer_async(self, buffer, offset: int, size: int) -> bytes:
        """Awaitable readback (mapAsync); the default calls read_buffer."""
        return self.read_buffer(buffer, offset, size)

    # -- pipelines and work ----------------------------------------------------------------------
    def create_pipeline(self, label: str, code: str, entry_point: str, constants: dict):
        """Compile WGSL `code` and create a compute pipeline (layout "auto") for `entry_point`
        with the pipeline-overridable `constants` ({name: number}). Raises KernelError naming
        `label` with the compiler's message on any validation error. The backend caches it."""
        raise NotImplementedError

    def submit(self, dispatches: list, timed: bool = False) -> None:
        """Encode `dispatches` (Dispatch records, in order) into one command buffer — bind groups
        from pipeline layout 0 and the Binding ranges, one compute pass — and submit it once.
        timed (where `can_timestamp`): each dispatch in a pass of its own with timestamp writes,
        for read_timings. Raises KernelError (naming the dispatch's label) on validation errors
        or device loss."""
        raise NotImplementedError

    def read_timings(self) -> list:
        """The GPU time in ms of every dispatch submitted timed since the last call, in order
        (waits for the GPU)."""
        raise NotImplementedError
