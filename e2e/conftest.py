"""End-to-end fixtures: build (or reuse) web/dist, serve it on a free 127.0.0.1 port, drive the system
Chromium (WebGPU on) with pytest-playwright, block + record every request that leaves localhost, collect
console errors, save screenshots into test-results/e2e/.

    pytest e2e                      # builds web/dist first when missing or older than its sources
    NUMR_E2E_BUILD=never pytest e2e # use web/dist as it is;  =always: rebuild first
    NUMR_CHROMIUM=/path/to/chrome   # another Chromium (default: chromium / chromium-browser on PATH)

Never `playwright install`: the browser is the system one (executable_path).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "web" / "dist"
ARTIFACTS = ROOT / "test-results" / "e2e"
CHROMIUM_ARGS = [
    "--enable-unsafe-webgpu",
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}
# pages that boot Pyodide + run numr_web on SwiftShader need generous timeouts (milliseconds)
BOOT_TIMEOUT_MS = 120_000


def _load_serve():
    # by path: numr_web.serve needs only the standard library, not the engine
    spec = importlib.util.spec_from_file_location("numr_web_serve", ROOT / "numr_web" / "serve.py")
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


def _newest_source_mtime():
    newest = 0.0
    for base in ("numr_web", "shaders", "web/src", "web/py", "web/public/golden"):
        for p in (ROOT / base).rglob("*"):
            if p.is_file() and "__pycache__" not in p.parts:
                newest = max(newest, p.stat().st_mtime)
    for p in list((ROOT / "web").glob("*.html")) + [ROOT / "package-lock.json", ROOT / "vite.config.js",
                                                     ROOT / "scripts" / "make_golden.py"]:
        if p.is_file():
            newest = max(newest, p.stat().st_mtime)
    return newest


@pytest.fixture(scope="session")
def web_dist():
    serve = _load_serve()
    mode = os.environ.get("NUMR_E2E_BUILD", "auto")
    built = serve.is_built(DIST)
    stale = built and _newest_source_mtime() > (DIST / "index.html").stat().st_mtime
    if mode == "always" or (mode == "auto" and (not built or stale)):
        subprocess.run(["bash", str(ROOT / "scripts" / "build-web.sh")], cwd=ROOT, check=True,
                       stdout=sys.stderr)
    if not serve.is_built(DIST):
        pytest.exit(f"e2e: {DIST} is not built (run scripts/build-web.sh)", 2)
    return DIST


@pytest.fixture(scope="session")
def server_url(web_dist):
    serve = _load_serve()
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
    return {**browser_context_args, "viewport": {"width": 1280, "height": 900}}


class App:
    """A page of the app plus what it did: console errors, page errors, requests not to localhost."""

    def __init__(self, page, base_url, name):
        self.page, self.base_url, self.name = page, base_url, name
        self.console_errors: list[str] = []
        self.console_lines: list[str] = []
        self.external_requests: list[str] = []
        page.on("console", self._on_console)
        page.on("pageerror", lambda exc: self.console_errors.append(f"pageerror: {exc}"))
        page.context.route("**/*", self._route)
        page.set_default_timeout(BOOT_TIMEOUT_MS)

    def _on_console(self, msg):
        self.console_lines.append(f"{msg.type}: {msg.text}")
        if msg.type == "error":
            self.console_errors.append(msg.text)

    def _route(self, route):
        url = route.request.url
        host = urlparse(url).hostname or ""
        if url.startswith(("data:", "blob:", "about:")) or host in LOCAL_HOSTS:
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
                 try { await Promise.race([window.numrReady, to]); return 'ready'; }
                 catch (e) { return 'error: ' + (e && e.message || e); }
               }""", timeout)
        assert state == "ready", f"numrReady failed on {self.name}: {state}"

    def py(self, code):
        """Run Python (top-level await allowed) in the page; returns the JS-converted result.
        Raises playwright's Error carrying the Python traceback text on a Python exception."""
        return self.page.evaluate(
            """async (code) => {
                 const py = await window.numrReady;
                 const r = await py.runPythonAsync(code);
                 return (r && r.toJs) ? r.toJs({dict_converter: Object.fromEntries}) : r;
               }""", code)

    def screenshot(self, tag=""):
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{self.name}{'-' + tag if tag else ''}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def assert_clean(self):
        assert not self.external_requests, f"requests left localhost: {self.external_requests}"
        assert not self.console_errors, "console errors:\n" + "\n".join(self.console_errors)


@pytest.fixture
def app(page, server_url, request):
    """App wrapper for one test; saves a screenshot and the console log into test-results/e2e/ at the end."""
    a = App(page, server_url, request.node.name.replace("[", "-").replace("]", "").replace("/", "_"))
    yield a
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        a.screenshot("final")
    except Exception as e:  # the page may be gone; the log still helps
        a.console_lines.append(f"(screenshot failed: {e})")
    (ARTIFACTS / f"{a.name}-console.log").write_text("\n".join(a.console_lines) + "\n")
