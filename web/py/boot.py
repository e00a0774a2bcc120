# Runs once per Pyodide (web/src/lib/boot.js; in the page or in the worker): installs the numr_web
# wheel from this origin, imports it and brings up the browser WebGPU device. Defines numr_boot and
# numr_console.
import contextlib
import io
import os
import sys

import micropip
from pyodide.code import eval_code_async

_console_ns = {}


async def numr_boot(wheel_url, progress):
    await micropip.install(wheel_url, deps=False)
    progress("importing numr_web…")
    import numr_web as nr
    info = {"version": getattr(nr, "__version__", "?"), "python": sys.version.split()[0]}
    progress("requesting the WebGPU device…")
    from numr_web.backends import probe
    from numr_web.backends.webgpu import adapter_browser
    info["webgpu"] = await adapter_browser.init_device()
    info["devices"] = list(nr.available_devices())
    if "webgpu" not in info["devices"]:
        raise RuntimeError(f"numr_web's webgpu device is not usable here: {probe('webgpu')[1]}")
    if "cpu" not in info["devices"]:
        # Pyodide has no numpy, so the usual default device (cpu) cannot run here: without this,
        # nr.ones(3), nn.Linear(6, 8) or clip_grad_norm_([]) would raise BackendUnavailableError
        os.environ.setdefault("NUMR_DEVICE", "webgpu")
    info["default_device"] = os.environ.get("NUMR_DEVICE") or "cpu"
    try:
        from pyodide.ffi import can_run_sync
        info["jspi"] = bool(can_run_sync())
    except ImportError:
        info["jspi"] = False
    _console_ns["nr"] = nr
    from pyodide.ffi import to_js
    import js
    return to_js(info, dict_converter=js.Object.fromEntries)


async def numr_console(code, emit=None, should_stop=None):
    """Run console code (top-level await allowed); return its stdout + the last expression's repr.
    Exceptions propagate (the page shows the Python exception text)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        result = await eval_code_async(str(code), _console_ns)
    out = buf.getvalue()
    if result is not None:
        out += repr(result)
    return out or "(no output)"
