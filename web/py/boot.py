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


async def numr_boot(wheel_url, progress, device="webgpu"):
    """Install numr_web from `wheel_url` and bring up `device`: "webgpu" (the browser's WebGPU) or
    "cpu" (numr_web's numpy backend; boot.js has loaded Pyodide's numpy). The device becomes the
    default of nr.tensor, nr.ones, nn.Linear ... (NUMR_DEVICE)."""
    await micropip.install(wheel_url, deps=False)
    progress("importing numr_web…")
    import numr_web as nr
    from numr_web.backends import probe
    info = {"version": getattr(nr, "__version__", "?"), "python": sys.version.split()[0],
            "device": device, "webgpu": None}
    if device == "webgpu":
        progress("requesting the WebGPU device…")
        from numr_web.backends.webgpu import adapter_browser
        info["webgpu"] = await adapter_browser.init_device()
    info["devices"] = list(nr.available_devices())
    if device not in info["devices"]:
        raise RuntimeError(f"numr_web's {device} device is not usable here: {probe(device)[1]}")
    # Pyodide has numpy only where boot.js loaded it (the cpu device): the default device is the one
    # booted, so nr.ones(3), nn.Linear(6, 8) or clip_grad_norm_([]) land there
    os.environ["NUMR_DEVICE"] = device
    info["default_device"] = device
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
