"""End-to-end fixtures: build (or reuse) web/dist, serve it on a free 127.0.0.1 port, drive the system
Chromium (WebGPU on) with pytest-playwright, block + record every request that leaves localhost, collect
console errors, save screenshots into test-results/e2e/.

    pytest e2e                      # builds web/dist first when missing or older than its sources
    NUMR_E2E_BUILD=never pytest e2e # use web/dist as it is;  =always: rebuild first
    NUMR_CHROMIUM=/path/to/chrome   # another Chromium (default: chromium / chromium-browser on PATH)

Never `playwright install`: the browser is the system one (executable_path).

Browsers without JSPI: Chromium 137+ ships JSPI with no switch to turn it off (checked on 156:
--js-flags=--no-experimental-wasm-jspi and --disable-features=WebAssemblyJSPromiseIntegration both
leave WebAssembly.Suspending in place). `App(..., jspi=False)` therefore removes WebAssembly.Suspending
and WebAssembly.promising in front of Pyodide's loader (pyodide.mjs, rewritten on its way to the page
or the worker), which is what Pyodide feature-tests; the tests check in the page / worker that it is
off (`pyodide.ffi.can_run_sync()` is False).
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from e2e_support import (CHROMIUM_ARGS, DIST, NO_WEBGPU_ARGS, ROOT, App,
                         _chromium, _test_name, load_serve)


@pytest.fixture(scope="session")
def web_dist():
    serve = load_serve()
    mode = os.environ.get("NUMR_E2E_BUILD", "auto")
    built = serve.is_built(DIST)
    if mode == "always" or (mode == "auto" and (not built or serve.is_stale(ROOT))):
        subprocess.run(["bash", str(ROOT / "scripts" / "build-web.sh")], cwd=ROOT, check=True,
                       stdout=sys.stderr, env={**os.environ, "PYTHON": sys.executable})
    if not serve.is_built(DIST):
        pytest.exit(f"e2e: {DIST} is not built (run scripts/build-web.sh)", 2)
    return DIST


@pytest.fixture(scope="session")
def server_url(web_dist):
    serve = load_serve()
    srv, url = serve.start_background(web_dist, port=0, quiet=True)
    yield url
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": _chromium(), "headless": True,
            "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    # service workers off here: they would answer requests before the route that checks them
    # (the offline test makes its own context with them on)
    return {**browser_context_args, "viewport": {"width": 1280, "height": 900},
            "service_workers": "block"}


@pytest.fixture(scope="session")
def no_webgpu_browser(playwright):
    """Chromium started with WebGPU disabled (no --enable-unsafe-webgpu, plus --disable-webgpu)."""
    b = playwright.chromium.launch(executable_path=_chromium(), headless=True, args=NO_WEBGPU_ARGS)
    yield b
    b.close()


@pytest.fixture
def app(page, server_url, request):
    """App wrapper for one test; saves a screenshot and the console log into test-results/e2e/ at the end."""
    a = App(page, server_url, _test_name(request))
    yield a
    a.save_log()


@pytest.fixture
def make_app(browser, server_url, request):
    """make_app(jspi=True, browser=None, **context_args) -> App on a fresh context (e.g. a phone
    viewport, JSPI removed, the no-WebGPU browser); closed at the end of the test."""
    made = []

    def make(jspi=True, browser_=None, **ctx):
        ctx.setdefault("service_workers", "block")
        ctx.setdefault("viewport", {"width": 1280, "height": 900})
        context = (browser_ or browser).new_context(**ctx)
        a = App(context.new_page(), server_url, f"{_test_name(request)}-{len(made)}", jspi=jspi)
        made.append((a, context))
        return a
    yield make
    for a, context in made:
        a.save_log()
        context.close()
