"""GPUAdapter over the browser's WebGPU (`js.navigator.gpu`) through Pyodide's JS interop.

Chosen by the webgpu backend when sys.platform == "emscripten". Same protocol as adapter_native
(see adapter.py); the same WGSL from numr_web/shaders is compiled here.

Device creation is asynchronous in a browser. The web app awaits `init_device()` once at start-up
(web/py/boot.py); `BrowserAdapter()` then reuses that device. Without it, `BrowserAdapter()` creates
the device synchronously through JSPI (`pyodide.ffi.run_sync`) where the runtime supports that.

Readback: `read_buffer_async` (what `await t.read()` uses) always works; the synchronous
`read_buffer` (t.tolist(), t.item(), ...) blocks through JSPI where available and otherwise raises
an error saying to `await t.read()`.

Errors: every GPU call runs inside WebGPU error scopes. Pipeline creation is checked at once when JSPI
is available (else at the next readback); queue work is checked at the next readback (a read waits
for the GPU anyway). Validation errors become KernelError naming the kernel, out-of-memory
BackendLimitError, a lost device KernelError.
"""
from __future__ import annotations

import array
import os
import re

from ...errors import BackendLimitError, BackendUnavailableError, KernelError
from .adapter import WANTED_FEATURES, WANTED_LIMITS, GPUAdapter, canonical_features

try:  # only importable inside Pyodide
    import js
    from pyodide.ffi import JsException, to_js
    try:
        from pyodide.ffi import can_run_sync, run_sync
    except ImportError:  # older Pyodide: no JSPI helpers
        can_run_sync = run_sync = None
except ImportError:  # pragma: no cover - native Python
    js = None

_STATE: dict = {"adapter": None, "device": None, "info": None, "lost": None}


def _obj(d):
    return to_js(d, dict_converter=js.Object.fromEntries)


def _can_block():
    return run_sync is not None and can_run_sync()


def probe():
    """(ok, description-or-reason); never raises."""
    if js is None:
        return False, "not running in a browser (Pyodide)"
    try:
        gpu = getattr(js.navigator, "gpu", None)
    except Exception as e:  # pragma: no cover
        return False, f"{type(e).__name__}: {e}"
    if not gpu:
        return False, ("this browser has no WebGPU (navigator.gpu is missing); use a recent "
                       "Chrome/Edge/Safari/Firefox, on Linux Chromium with --enable-unsafe-webgpu")
    if _STATE["device"] is not None:
        return True, _STATE["info"]
    if _can_block():
        return True, "navigator.gpu (device created on first use)"
    return False, ("the WebGPU device is not initialised: await "
                   "numr_web.backends.webgpu.adapter_browser.init_device() first")


async def init_device(power_preference="high-performance"):
    """Request the adapter and the device (once); returns a one-line description."""
    if _STATE["device"] is not None:
        return _STATE["info"]
    ok, why = probe()
    if js is None or not getattr(js.navigator, "gpu", None):
        raise BackendUnavailableError(why)
    adapter = await js.navigator.gpu.requestAdapter(_obj({"powerPreference": power_preference}))
    if not adapter:  # JsNull / None
        raise BackendUnavailableError("navigator.gpu.requestAdapter() returned no adapter "
                                      "(WebGPU disabled or blocklisted for this GPU)")
    alim = adapter.limits
    required = {}
    for name in WANTED_LIMITS:
        v = getattr(alim, name, None)
        if v is not None and name.startswith("max"):
            required[name] = v
    feats = [f for f in WANTED_FEATURES if adapter.features.has(f)]
    try:
        device = await adapter.requestDevice(_obj({"requiredLimits": required,
                                                   "requiredFeatures": feats}))
    except JsException as e:
        raise BackendUnavailableError(f"could not create a WebGPU device: {e}") from e
    _STATE["adapter"], _STATE["device"] = adapter, device

    def on_lost(info):
        _STATE["lost"] = f"{getattr(info, 'reason', '?')}: {getattr(info, 'message', '')}"
    device.lost.then(on_lost)
    ai = getattr(adapter, "info", None)
    name = " ".join(str(x) for x in (getattr(ai, "vendor", ""), getattr(ai, "architecture", ""),
                                     getattr(ai, "description", "")) if x) or "browser adapter"
    _STATE["name"] = name
    _STATE["info"] = f"{name} (WebGPU in the browser)"
    return _STATE["info"]


def _init_sync():
    if _STATE["device"] is None:
        if not _can_block():
            raise BackendUnavailableError(
                "the browser's WebGPU device is created asynchronously: "
                "`await numr_web.backends.webgpu.adapter_browser.init_device()` first "
                "(the numr_web web app does this before window.numrReady resolves)")
        run_sync(init_device())


def _error_text(err):
    return str(getattr(err, "message", err))


# -- encoding a submit in JavaScript (encode.js) ----------------------------------------------------
ENCODER_PARAMS = ("device", "queue", "pipes", "layouts", "bufs", "nums")
_FAILED_AT = re.compile(r"numr dispatch (\d+): ")


def pack_dispatches(dispatches):
    """encode.js's arguments for `dispatches`: (pipelines, their bind-group layouts, buffers,
    nums), each pipeline and buffer listed once; nums as encode.js describes it. Pure Python."""
    pipes, layouts, bufs, nums = [], [], [], []
    pipe_at, buf_at = {}, {}
    for d in dispatches:
        pipe, layout = d.pipeline[0], d.pipeline[1]
        p = pipe_at.get(id(pipe))
        if p is None:
            p = pipe_at[id(pipe)] = len(pipes)
            pipes.append(pipe)
            layouts.append(layout)
        nums.append(p)
        nums.append(len(d.bindings))
        for b in d.bindings:
            i = buf_at.get(id(b.buffer))
            if i is None:
                i = buf_at[id(b.buffer)] = len(bufs)
                bufs.append(b.buffer)
            nums.extend((b.index, i, b.offset, b.size))
        g = tuple(d.groups) + (1, 1, 1)
        nums.extend(g[:3])
    return pipes, layouts, bufs, nums


def _encoder():
    """encode.js as a JS function; None where the page forbids making one (a
    Content-Security-Policy without 'unsafe-eval'): submit then encodes dispatch by dispatch from
    Python."""
    from importlib.resources import files
    body = (files(__package__) / "encode.js").read_text(encoding="utf-8")
    try:
        return js.Function.new(*ENCODER_PARAMS, body)
    except JsException:     # EvalError: this page's Content-Security-Policy forbids it
        return None


class BrowserAdapter(GPUAdapter):
    backend = "WebGPU (browser)"
    _instance = None

    @property
    def can_block(self):
        return _can_block()

    @classmethod
    def get(cls):
        """The one adapter of this page (the device from init_device(), or created via JSPI)."""
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def __init__(self, power_preference="high-performance"):
        if js is None:
            raise BackendUnavailableError("adapter_browser needs Pyodide (sys.platform == 'emscripten')")
        _init_sync()
        self.adapter, self.device = _STATE["adapter"], _STATE["device"]
        self.name = _STATE.get("name", "?")
        self._queue = self.device.queue
        dlim = self.device.limits
        self.limits = {n: getattr(dlim, n, None) for n in WANTED_LIMITS}
        self.features = canonical_features(f for f in WANTED_FEATURES
                                           if self.device.features.has(f))
        self.wgsl_enables = {"subgroup": "enable_subgroups.wgsl"}   # Tint wants the directive
        U = js.GPUBufferUsage
        self._usage = {"storage": U.STORAGE | U.COPY_SRC | U.COPY_DST,
                       "uniform": U.UNIFORM | U.COPY_DST}
        self._map_usage = U.MAP_READ | U.COPY_DST
        self._map_read = js.GPUMapMode.READ
        self._pending = []          # [(label, Promise<GPUError|null>)] not yet checked
        self._errors = []           # uncaptured errors (should not happen: everything is scoped)

        def on_uncaptured(ev):
            self._errors.append(("?", ev.error))
        self.device.onuncapturederror = on_uncaptured
        self._encoder = None        # encode.js as a function, made when first asked for
        self.js_encode = os.environ.get("NUMR_WEBGPU_JS_ENCODE", "1").strip() != "0"

    @property
    def js_encode(self):
        """True: a queue submit is encoded by one call of encode.js; False: dispatch by dispatch
        from Python. Starts as NUMR_WEBGPU_JS_ENCODE says (default 1); assignable. Stays False on
        a page whose Content-Security-Policy forbids making the function (tried once, and only
        when asked for: a refused attempt is reported by the page)."""
        return self._encode is not None

    @js_encode.setter
    def js_encode(self, on):
        if on and self._encoder is None:
            self._encoder = _encoder() or False        # False: the page forbids it
        self._encode = (self._encoder or None) if on else None

    def info(self):
        d = super().info()
        d["library"] = "Pyodide + navigator.gpu"
        d["encoder"] = "encode.js" if self.js_encode else "python"
        try:
            d["user_agent"] = str(js.navigator.userAgent)
        except Exception:  # pragma: no cover
            pass
        return d

    # -- errors ------------------------------------------------------------------------------------
    def _push(self):
        self.device.pushErrorScope("out-of-memory")
        self.device.pushErrorScope("validation")

    def _pop(self, label):
        self._pending.append((label, self.device.popErrorScope()))
        self._pending.append((label, self.device.popErrorScope()))

    def _raise(self, label, err):
        kind = str(getattr(getattr(err, "constructor", None), "name", "")) or type(err).__name__
        msg = _error_text(err)
        if "OutOfMemory" in kind:
            raise BackendLimitError(f"the GPU ran out of memory in {label!r}: {msg}")
        raise KernelError(f"kernel {label!r} failed: {kind}: {msg}")

    def _check_lost(self):
        if _STATE["lost"] is not None:
            raise KernelError(f"the WebGPU device was lost ({_STATE['lost']}); reload the page")

    async def _check_async(self):
        self._check_lost()
        pending, self._pending = self._pending, []
        first = None
        if pending:
            results = await js.Promise.all(to_js([p for _, p in pending]))
            for (label, _), err in zip(pending, results):
                if err:
                    first = (label, err)
                    break
        if first is None and self._errors:
            first = self._errors.pop(0)
        if first is not None:
            self._raise(*first)

    # -- buffers -----------------------------------------------------------------------------------
    def create_buffer(self, size, usage):
        self._check_lost()
        self._push()
        try:
            buf = self.device.createBuffer(_obj({"size": int(size), "usage": self._usage[usage]}))
        except JsException as e:
            raise KernelError(f"create_buffer({size} bytes, {usage}) failed: {e}") from e
        finally:
            self._pop(f"create_buffer({size} bytes)")
        return buf

    def destroy_buffer(self, buffer):
        buffer.destroy()

    def write_buffer(self, buffer, offset, data):
        mv = memoryview(data)
        if mv.format != "B" or mv.ndim != 1:
            mv = mv.cast("B")
        n = mv.nbytes
        if n == 0:
            return
        u8 = js.Uint8Array.new(n)
        u8.assign(mv)
        self._queue.writeBuffer(buffer, int(offset), u8)

    async def read_buffer_async(self, buffer, offset, size):
        size = int(size)
        if size == 0:
            await self._check_async()
            return b""
        self._push()
        staging = self.device.createBuffer(_obj({"size": size, "usage": self._map_usage}))
        enc = self.device.createCommandEncoder()
        enc.copyBufferToBuffer(buffer, int(offset), staging, 0, size)
        self._queue.submit([enc.finish()])
        self._pop("readback")
        try:
            await staging.mapAsync(self._map_read)
        except JsException as e:
            await self._check_async()          # a scoped error explains the failure better
            self._check_lost()
            raise KernelError(f"reading back a buffer failed: {e}") from e
        try:
            data = js.Uint8Array.new(staging.getMappedRange()).to_bytes()
        finally:
            staging.unmap()
            staging.destroy()
        await self._check_async()
        return data

    def read_buffer(self, buffer, offset, size):
        if not _can_block():
            raise BackendLimitError(
                "synchronous readback of a webgpu tensor is not possible here (this browser or "
                "call context has no JSPI stack switching): use `await t.read()` instead of "
                "t.tolist() / t.item() / float(t)")
        return run_sync(self.read_buffer_async(buffer, offset, size))

    # -- pipelines and work ------------------------------------------------------------------------
    def create_pipeline(self, label, code, entry_point, constants):
        self._check_lost()
        dev = self.device
        dev.pushErrorScope("validation")
        try:
            module = dev.createShaderModule(_obj({"label": label, "code": code}))
            compute = {"module": module, "entryPoint": entry_point}
            if constants:
                compute["constants"] = {k: float(v) for k, v in constants.items()}
            pipe = dev.createComputePipeline(_obj({"label": label, "layout": "auto",
                                                   "compute": compute}))
            layout = pipe.getBindGroupLayout(0)
        except JsException as e:
            dev.popErrorScope()
            raise KernelError(f"kernel {label!r} failed to compile: {e}") from e
        err_p = dev.popErrorScope()
        if _can_block():
            err = run_sync(err_p)
            if err:
                raise KernelError(f"kernel {label!r} failed to compile: {_error_text(err)}")
        else:
            self._pending.append((label, err_p))
        return (pipe, layout, label)

    def submit(self, dispatches, timed=False):
        self._check_lost()
        if not dispatches:
            return
        self._push()
        try:
            if self._encode is not None:
                self._submit_js(dispatches)
            else:
                self._submit_py(dispatches)
        finally:
            labels = ", ".join(dict.fromkeys(d.label for d in dispatches))
            self._pop(labels if len(labels) < 300 else labels[:300] + "…")

    def _submit_js(self, dispatches):
        """One call of encode.js for the whole submit."""
        pipes, layouts, bufs, nums = pack_dispatches(dispatches)
        packed = js.Float64Array.new(len(nums))
        packed.assign(array.array("d", nums))
        try:
            self._encode(self.device, self._queue, to_js(pipes), to_js(layouts), to_js(bufs),
                         packed)
        except JsException as e:
            m = _FAILED_AT.search(str(e))
            at = int(m.group(1)) if m else len(dispatches)
            label = dispatches[at].label if at < len(dispatches) else "submit"
            raise KernelError(f"kernel {label!r} failed: {e}") from e

    def _submit_py(self, dispatches):
        """Dispatch by dispatch from Python (where encode.js cannot be made a function)."""
        dev = self.device
        label = "?"
        try:
            enc = dev.createCommandEncoder()
            cp = enc.beginComputePass()
            for d in dispatches:
                label = d.label
                pipe, layout, _ = d.pipeline
                entries = [{"binding": b.index, "resource": {"buffer": b.buffer,
                                                             "offset": int(b.offset),
                                                             "size": int(b.size)}}
                           for b in d.bindings]
                bg = dev.createBindGroup(_obj({"layout": layout, "entries": entries}))
                cp.setPipeline(pipe)
                cp.setBindGroup(0, bg)
                cp.dispatchWorkgroups(*[int(g) for g in d.groups])
            cp.end()
            label = "submit"
            self._queue.submit([enc.finish()])
        except JsException as e:
            raise KernelError(f"kernel {label!r} failed: {e}") from e
