"""Shared by the e2e fixtures (conftest.py) and tests: the App page wrapper, the server loader,
Chromium lookup, launch arguments and the parity check."""
from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "web" / "dist"
ARTIFACTS = ROOT / "test-results" / "e2e"
BASE_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
CHROMIUM_ARGS = ["--enable-unsafe-webgpu", *BASE_ARGS]
NO_WEBGPU_ARGS = ["--disable-webgpu", *BASE_ARGS]     # and no --enable-unsafe-webgpu
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}
# pages that boot Pyodide + run numr_web on SwiftShader need generous timeouts (milliseconds)
BOOT_TIMEOUT_MS = 120_000
LONG_MS = 480_000          # a full training / parity / benchmark run
NO_JSPI_PRELUDE = "delete WebAssembly.Suspending; delete WebAssembly.promising;\n"
# main-thread long tasks (PerformanceObserver 'longtask'), recorded from the first byte of the page
LONGTASK_SCRIPT = """
window.__longTasks = [];
try {
  new PerformanceObserver((list) => { for (const e of list.getEntries())
      window.__longTasks.push({start: e.startTime, duration: e.duration}); })
    .observe({type: 'longtask', buffered: true});
} catch (e) { window.__longTasks = null; }
"""


# where the page trained: elementwise fusion on (the default) and the fused kernels it ran
FUSION_STATS = """
from numr_web.backends import get_backend
_i = get_backend("webgpu").info()
{"fuse": _i["knobs"]["fuse"], "chains": _i["fusion"]["kernels"],
 "fused_dispatches": sum(v for k, v in _i["dispatches"].items() if k.startswith("fused.")),
 "dispatches": sum(_i["dispatches"].values())}"""


def load_serve():
    # by path: numr_web.apps.serve needs only the standard library, not the engine
    spec = importlib.util.spec_from_file_location("numr_web_serve", ROOT / "numr_web" / "apps" / "serve.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _chromium():
    exe = os.environ.get("NUMR_CHROMIUM")
    if exe:
        return exe
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    pytest.exit("e2e: no Chromium found (install the distro's chromium package or set NUMR_CHROMIUM)", 2)


class App:
    """A page of the app plus what it did: console errors, page errors, requests not to localhost."""

    def __init__(self, page, base_url, name, jspi=True):
        self.page, self.base_url, self.name, self.jspi = page, base_url, name, jspi
        self.console_errors: list[str] = []
        self.console_lines: list[str] = []
        self.external_requests: list[str] = []
        page.on("console", self._on_console)
        page.on("pageerror", lambda exc: self.console_errors.append(f"pageerror: {exc}"))
        page.context.route("**/*", self._route)
        page.add_init_script(LONGTASK_SCRIPT)
        page.set_default_timeout(BOOT_TIMEOUT_MS)

    def _on_console(self, msg):
        self.console_lines.append(f"{msg.type}: {msg.text}")
        if msg.type == "error":
            self.console_errors.append(msg.text)

    def _route(self, route):
        url = route.request.url
        host = urlparse(url).hostname or ""
        if url.startswith(("data:", "blob:", "about:")) or host in LOCAL_HOSTS:
            if not self.jspi and url.split("?")[0].endswith("/pyodide/pyodide.mjs"):
                resp = route.fetch()
                route.fulfill(response=resp, body=NO_JSPI_PRELUDE + resp.text())
            else:
                route.continue_()
        else:
            self.external_requests.append(url)
            route.abort("blockedbyclient")

    def goto(self, path, wait_ready=True):
        self.page.goto(self.base_url + path)
        if wait_ready:
            self.wait_ready()
        return self.page

    def wait_ready(self, timeout=BOOT_TIMEOUT_MS):
        """Wait for window.numrReady; raise with the page's error text if it rejected."""
        state = self.page.evaluate(
            """async (ms) => {
                 const to = new Promise((_, rej) => setTimeout(() => rej(new Error('timeout')), ms));
                 const exists = (async () => { while (!window.numrReady) await new Promise((r) => setTimeout(r, 50));
                                               return window.numrReady; })();
                 try { await Promise.race([exists, to]); return 'ready'; }
                 catch (e) { return 'error: ' + (e && e.message || e); }
               }""", timeout)
        assert state == "ready", f"numrReady failed on {self.name}: {state}"

    def py(self, code):
        """Run Python (top-level await allowed) where the page runs numr_web (its worker, or the page
        with ?mode=main); returns the JS-converted result. Raises playwright's Error carrying the
        Python traceback text on a Python exception."""
        return self.page.evaluate(
            """async (code) => {
                 const py = await window.numrReady;
                 const r = await py.runPythonAsync(code);
                 return (r && r.toJs) ? r.toJs({dict_converter: Object.fromEntries}) : r;
               }""", code)

    def wait_state(self, expr, states, timeout=480_000):
        """Wait until the JS expression `expr` is one of `states`; returns it."""
        self.page.wait_for_function(f"() => {states!r}.includes({expr})", timeout=timeout, polling=250)
        return self.page.evaluate(f"() => {expr}")

    def screenshot(self, tag=""):
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{self.name}{'-' + tag if tag else ''}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def assert_clean(self):
        assert not self.external_requests, f"requests left localhost: {self.external_requests}"
        assert not self.console_errors, "console errors:\n" + "\n".join(self.console_errors)

    def save_log(self):
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        try:
            self.screenshot("final")
        except Exception as e:  # the page may be gone; the log still helps
            self.console_lines.append(f"(screenshot failed: {e})")
        (ARTIFACTS / f"{self.name}-console.log").write_text("\n".join(self.console_lines) + "\n")


def _test_name(request):
    return request.node.name.replace("[", "-").replace("]", "").replace("/", "_")


def check_parity(app, min_rows=150):
    app.page.wait_for_function("() => window.parityResult !== null", timeout=LONG_MS, polling=500)
    res = app.page.evaluate("() => window.parityResult")
    rows = res.get("rows", [])
    print(f"\nparity: {res.get('status')} — {len(rows)} cases, worst error/tolerance "
          f"{res.get('max_worst')}, {res.get('seconds', 0):.1f} s")
    for r in rows:
        if r["status"] != "PASS":
            print(f"  FAIL {r['name']}: worst {r.get('worst')} max_abs {r.get('max_abs')} {r.get('error')}")
    app.screenshot("parity")
    assert res.get("error") is None, res.get("error")
    assert len(rows) >= min_rows
    if min_rows >= 150:
        groups = {r["group"] for r in rows}
        assert {"unary", "binary", "compare", "reduce", "shape", "matmul", "activation", "softmax",
                "loss", "fused", "fused2", "math", "composite", "sort", "inplace", "nn",
                "fusion"} <= groups
        fused = {r["name"] for r in rows if r["group"] == "fused"}
        fused2 = {r["name"] for r in rows if r["group"] == "fused2"}
        for act in ("none", "relu", "sigmoid", "tanh", "silu", "gelu", "gelu_tanh", "leaky_relu",
                    "elu", "softplus", "mish", "hardswish"):
            assert f"matmul_bias_activation {act}" in fused
            assert act == "none" or f"matmul_bias_activation {act} 2nd order" in fused2
    assert [r["name"] for r in rows if r["status"] != "PASS"] == []
    assert res["status"] == "PASS"
    assert app.page.get_attribute("#verdict", "data-status") == "PASS"
    assert app.page.locator("#results tbody tr").count() == len(rows)
    return res
