"""End-to-end, the browsers and installs users have: no JSPI (Safari, older Firefox), no WebGPU at
all, a phone, no network after the first visit, the app from a wheel with no Node and no checkout, and
the embedding example. Shares the app, server and browser of conftest.py."""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import venv

import pytest

from e2e_support import ROOT, App, check_parity, load_serve

PAGES = ("index.html", "gpt.html", "model.html", "parity.html", "bench.html", "embed.html")
SMALL_TRAIN = "hidden=32&epochs=3&batch=64&lr=0.01&activation=relu"
JSPI_STATE = """
import js
from pyodide.ffi import can_run_sync
import numr_web as nr
t = nr.tensor([[1.5, -2.0]], device="webgpu") * 2
try:
    t.tolist()
    sync = "no error"
except nr.NumrError as e:
    sync = f"{type(e).__name__}: {e}"
{"can_run_sync": can_run_sync(), "suspending": hasattr(js.WebAssembly, "Suspending"),
 "scope": str(js.constructor.name), "read": await t.read(), "sync": sync}
"""


@pytest.mark.parametrize("mode", ["main", "worker"])
def test_without_jspi(make_app, mode):
    """Without JSPI (checked where numr_web runs) the playground trains and the parity page passes;
    a blocking read raises a typed error that says to `await t.read()`."""
    app = make_app(jspi=False)
    app.goto(f"index.html?mode={mode}&{SMALL_TRAIN}")
    st = app.py(JSPI_STATE)
    assert st["can_run_sync"] is False and st["suspending"] is False, st
    assert st["scope"] == ("Window" if mode == "main" else "DedicatedWorkerGlobalScope")
    assert st["read"] == [[3.0, -4.0]]
    assert st["sync"].startswith(("BackendLimitError", "BackendUnavailableError")), st["sync"]
    assert "await t.read()" in st["sync"], st["sync"]
    app.page.click("#train")
    assert app.wait_state("window.numrTrain.state", ["done", "error", "stopped"]) == "done", \
        app.page.evaluate("() => window.numrTrain.error")
    acc = app.page.evaluate("() => window.numrTrain.result.test_acc")
    print(f"\nno JSPI, {mode} thread: test accuracy {acc:.3f}")
    assert acc >= 0.85
    app.goto(f"parity.html?mode={mode}&autorun=1", wait_ready=False)
    check_parity(app)
    app.assert_clean()


def _has_numpy(web_dist):
    """Whether this build ships Pyodide's numpy (the cpu fallback; scripts/build-web.sh 3b)."""
    return bool(json.loads((web_dist / "lib" / "wheels" / "manifest.json").read_text()).get("numpy"))


NO_NUMPY = ("this build has no numpy for Pyodide (npm's pyodide ships no package wheels and PyPI has "
            "no Pyodide build of numpy): set NUMR_PYODIDE_PACKAGES for scripts/build-web.sh")


@pytest.mark.parametrize("how", ["disabled", "api-missing"])
def test_no_webgpu(make_app, no_webgpu_browser, browser, web_dist, how):
    """Chromium started with WebGPU disabled, and a browser without navigator.gpu at all, in a build
    without the cpu fallback: every page says what is missing and how to get it; parity and bench say
    'skipped: no WebGPU'. (With the fallback: test_no_webgpu_trains_on_cpu.)"""
    if _has_numpy(web_dist):
        pytest.skip("this build has the cpu fallback: test_no_webgpu_trains_on_cpu covers it")
    app = make_app(browser_=no_webgpu_browser if how == "disabled" else browser)
    if how == "api-missing":
        app.page.add_init_script("delete Navigator.prototype.gpu;")
    for page in PAGES:
        app.goto(page, wait_ready=False)
        if page == "embed.html":
            app.page.wait_for_function("() => window.embedResult !== undefined")
            text = app.page.evaluate("() => window.embedResult")
            assert text.startswith("error: WebGPU is not available in Chrome"), text
            continue
        notice = app.page.locator("#no-webgpu")
        notice.wait_for()
        text = notice.inner_text()
        assert re.search(r"Chrome \d+ on Linux", text), text
        assert ("navigator.gpu is undefined" if how == "api-missing" else "requestAdapter() found no GPU adapter") in text
        assert "--enable-unsafe-webgpu" in text and "Safari 26" in text, text
        assert app.page.get_attribute("#numr-status", "data-state") == "no-webgpu"
        err = app.page.evaluate("() => window.numrReady.then(() => 'resolved', (e) => e.name)")
        assert err == "NoWebGPUError"
        if page == "parity.html":
            assert app.page.inner_text("#verdict") == "skipped: no WebGPU"
            assert app.page.get_attribute("#verdict", "data-status") == "SKIPPED"
        if page == "bench.html":
            app.page.wait_for_selector("#bench-status[data-state=skipped]")
            assert app.page.inner_text("#bench-status").startswith("skipped: no WebGPU")
        assert app.page.is_hidden("#numr-error")
        app.screenshot(page.split(".")[0])
    app.assert_clean()


CPU_GPT = "layers=1&dim=16&heads=2&context=8&batch=4&steps=3&max_new=20&autostart=1"


@pytest.mark.parametrize("mode", ["worker", "main"])
def test_no_webgpu_trains_on_cpu(make_app, no_webgpu_browser, web_dist, mode):
    """Chromium without WebGPU and a build with Pyodide's numpy: numr_web runs on the cpu device, the
    page says so in one line (no error box), the playground (MLP and CNN) and the GPT train, and the
    parity cases pass on cpu against the same golden values as WebGPU's."""
    if not _has_numpy(web_dist):
        pytest.skip(NO_NUMPY)
    app = make_app(browser_=no_webgpu_browser)
    app.goto(f"index.html?mode={mode}&{SMALL_TRAIN}")
    note = app.page.inner_text("#numr-device")
    assert note.startswith("Running on the cpu device (numpy in Pyodide): no WebGPU:"), note
    assert "requestAdapter() found no GPU adapter" in note and "--enable-unsafe-webgpu" in note, note
    assert app.page.locator("#no-webgpu").count() == 0 and app.page.is_hidden("#numr-error")
    assert app.py("import numr_web as nr\n[nr.ones(2).device, nr.available_devices()]")[0] == "cpu"
    for query in ("", "&model=cnn&channels=4&hidden=16&epochs=1"):
        app.goto(f"index.html?mode={mode}&{SMALL_TRAIN}{query}")
        app.page.click("#train")
        assert app.wait_state("window.numrTrain.state", ["done", "error", "stopped"]) == "done", \
            app.page.evaluate("() => window.numrTrain.error")
        acc = app.page.evaluate("() => window.numrTrain.result.test_acc")
        print(f"\ncpu in Pyodide ({mode}{query}): test accuracy {acc:.3f}")
        assert acc >= (0.85 if not query else 0.5)
    app.goto(f"gpt.html?mode={mode}&{CPU_GPT}")
    assert app.wait_state("window.numrGPT.state", ["done", "error"]) == "done", \
        app.page.evaluate("() => window.numrGPT.error")
    losses = [p["loss"] for p in app.page.evaluate("() => window.numrGPT.losses")]
    assert len(losses) == 3 and all(0 < v < 10 for v in losses), losses
    app.goto(f"model.html?mode={mode}")                 # the examples' device choice: cpu here
    app.page.wait_for_selector("#run:not([disabled])")
    app.page.fill("#code", "import torch\nd = torch.accelerator.current_accelerator() if "
                  "torch.accelerator.is_available() else torch.device('cpu')\n"
                  "print('on', (torch.ones(2, device=d) * 2).device)\n")
    app.page.click("#run")
    assert app.wait_state("window.numrModel.state", ["done", "error"]) == "done", \
        app.page.evaluate("() => window.numrModel.error")
    assert "# running on cpu" in app.page.evaluate("() => window.numrModel.output")
    assert "on cpu" in app.page.evaluate("() => window.numrModel.output")
    app.goto(f"parity.html?mode={mode}&autorun=1", wait_ready=False)
    check_parity(app)
    app.goto("bench.html", wait_ready=False)
    app.page.wait_for_selector("#bench-status[data-state=skipped]")
    app.assert_clean()


NO_SIDEWAYS = """() => {
  const W = document.documentElement.clientWidth, bad = [];
  if (document.documentElement.scrollWidth > W) bad.push('page scrolls sideways: ' + document.documentElement.scrollWidth + ' > ' + W);
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    if (r.width && r.height && el.checkVisibility() && (r.right > W + 1 || r.left < -1))
      bad.push(`${el.tagName}#${el.id}.${el.className}: ${Math.round(r.left)}..${Math.round(r.right)}`);
  }
  for (const el of document.querySelectorAll('.num, nav a')) {       // numbers and links: one line each
    if (!el.textContent.trim() || !el.checkVisibility()) continue;
    const range = document.createRange(); range.selectNodeContents(el);
    const tops = new Set([...range.getClientRects()].map((q) => Math.round(q.top)));
    if (tops.size > 1) bad.push(`wraps: ${el.tagName}#${el.id} "${el.textContent.trim()}"`);
  }
  return bad;
}"""


def test_phone_layout(make_app):
    """On a 390x844 phone no page scrolls sideways, nothing sticks out, numbers do not wrap, the whole
    nav is on screen; results (chart, parity and benchmark tables) included."""
    app = make_app(viewport={"width": 390, "height": 844}, device_scale_factor=3, is_mobile=True,
                   has_touch=True)
    page = app.page
    checks = {}
    app.goto("index.html?hidden=8&epochs=1&batch=256&autostart=1")
    assert app.wait_state("window.numrTrain.state", ["done", "error"]) == "done"
    checks["index.html"] = page.evaluate(NO_SIDEWAYS)
    app.goto("gpt.html?layers=1&dim=16&heads=2&context=8&batch=4&steps=2&max_new=40&autostart=1")
    assert app.wait_state("window.numrGPT.state", ["done", "error"]) == "done"
    app.wait_state("window.numrGPT.gen.state", ["done", "error"])
    checks["gpt.html"] = page.evaluate(NO_SIDEWAYS)
    app.goto("model.html")                 # the code box scrolls in itself; the output wraps
    page.wait_for_selector("#run:not([disabled])")
    page.fill("#code", "import torch\nfor step in range(3):\n    print(f'step {step}: loss {1 / (step + 1)}', 'x' * 300)\n")
    page.click("#run")
    assert app.wait_state("window.numrModel.state", ["done", "error"]) == "done"
    checks["model.html"] = page.evaluate(NO_SIDEWAYS)
    app.goto("parity.html?only=gelu&autorun=1", wait_ready=False)    # incl. the longest names
    check_parity(app, min_rows=3)
    checks["parity.html"] = page.evaluate(NO_SIDEWAYS)
    app.goto("bench.html?m=16&k=8&n=8&acts=relu&warmup=0&reps=1&autorun=1")
    app.wait_state("document.getElementById('bench-status').dataset.state", ["done", "error"])
    checks["bench.html"] = page.evaluate(NO_SIDEWAYS)
    nav = page.evaluate("() => [...document.querySelectorAll('nav a')].map((a) => a.getBoundingClientRect().right)")
    assert len(nav) == 5 and max(nav) <= 390
    app.screenshot("phone")
    assert checks == {"index.html": [], "gpt.html": [], "model.html": [], "parity.html": [], "bench.html": []}
    app.assert_clean()


def test_offline_after_first_visit(browser, web_dist, request):
    """First visit online; then the server is gone and the browser offline: a reload still boots
    numr_web (worker, Pyodide, wheels: all from the service worker's copy) and computes."""
    serve = load_serve()
    srv, url = serve.start_background(web_dist, port=0, quiet=True)   # its own origin, fresh SW
    context = browser.new_context(service_workers="allow")
    app = App(context.new_page(), url, request.node.name)
    try:
        app.goto("index.html")
        app.page.evaluate("async () => { await navigator.serviceWorker.ready; }")
        app.page.wait_for_function("() => navigator.serviceWorker.controller !== null")
        srv.shutdown()
        srv.server_close()
        context.set_offline(True)
        app.page.reload()
        app.wait_ready()
        res = app.py("import numr_web as nr\nawait (nr.arange(4, device='webgpu') * 2).read()")
        assert res == [0, 2, 4, 6]
        assert app.page.get_attribute("#numr-status", "data-state") == "ready"
        app.assert_clean()
    finally:
        app.save_log()
        context.close()
        srv.server_close()


def test_app_from_a_wheel_in_a_fresh_venv(page, tmp_path, web_dist):
    """`pip install numr-web` (a wheel built here, installed into a new venv outside the checkout) then
    `numr-web serve` with no Node on PATH serves the app from the installed package."""
    wheels = tmp_path / "wheels"
    args = [sys.executable, "-m", "build", "--wheel", "--outdir", str(wheels)]
    if importlib.util.find_spec("hatchling"):
        args.append("--no-isolation")          # else build fetches hatchling into an isolated env
    subprocess.run(args + [str(ROOT)], check=True, capture_output=True, cwd=ROOT)
    wheel = next(wheels.glob("numr_web-*.whl"))
    size_mb = wheel.stat().st_size / 2**20
    stated = re.search(r"It is about (\d+) MB", (ROOT / "README.md").read_text().replace("\n", " "))
    assert stated and abs(size_mb - int(stated.group(1))) < 1.5, (size_mb, "README's wheel size")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    vpy = env_dir / "bin" / "python"
    subprocess.run([str(vpy), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, cwd=tmp_path)
    path = str(env_dir / "bin")
    assert shutil.which("node", path=path) is None and shutil.which("npm", path=path) is None
    env = {"PATH": path, "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    out = subprocess.run([str(env_dir / "bin" / "numr-web"), "--version"], capture_output=True,
                         text=True, env=env, cwd=tmp_path, check=True)
    assert out.stdout.startswith("numr-web ")
    proc = subprocess.Popen([str(env_dir / "bin" / "numr-web"), "serve", "--port", "0", "--no-browser",
                             "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=tmp_path)
    try:
        line = proc.stdout.readline()
        m = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        assert m, line + proc.stderr.read()
        assert f"serving {env_dir}" in line and "site-packages/numr_web/web" in line, line
        print(f"\nwheel {wheel.name}: {size_mb:.1f} MB; {line.strip()}")
        app = App(page, m.group(1), "wheel-venv")
        app.goto("index.html")
        res = app.py("import numr_web as nr\nawait (nr.ones((2, 2), device='webgpu') @ nr.ones((2, 2), device='webgpu')).read()")
        assert res == [[2.0, 2.0], [2.0, 2.0]]
        app.assert_clean()
    finally:
        proc.terminate()
        proc.wait(10)


def test_embedding_example(app):
    """web/public/embed.html: `import { loadNumr } from "numr-web"` in 30 lines gives a page numr_web on
    WebGPU (autograd through the fused layer)."""
    src = ROOT / "web" / "public" / "embed.html"
    assert len(src.read_text().splitlines()) <= 30
    app.goto("embed.html", wait_ready=False)
    # an icon of its own: browsers do not ask the server for /favicon.ico (a 404 in the console)
    assert app.page.locator('link[rel="icon"]').count() == 1
    app.page.wait_for_function("() => window.embedResult !== undefined", timeout=120_000)
    text = app.page.evaluate("() => window.embedResult")
    assert text.startswith("y = [[") and "dy/dx = [[" in text and text.endswith("on webgpu"), text
    app.assert_clean()
