"""End-to-end: the numr_web web app in headless Chromium with WebGPU (SwiftShader on CPU machines).
The pages run numr_web in a Web Worker (their default); `?mode=main` runs it on the page.

    pytest e2e -s          # -s shows the benchmark / training figures printed below

Every test ends with `app.assert_clean()`: no console errors and no request that left localhost.
Screenshots and console logs land in test-results/e2e/.
"""
from __future__ import annotations

import json
import math
import os

import pytest
from playwright.sync_api import Error as PlaywrightError

from e2e_support import FUSION_STATS, LONG_MS, check_parity

# Training run sized for SwiftShader on a 2-core machine; still >= 90 % test accuracy.
TRAIN_QUERY = os.environ.get("NUMR_E2E_TRAIN", "hidden=64&epochs=8&batch=64&lr=0.01&activation=relu")
BENCH_QUERY = os.environ.get("NUMR_E2E_BENCH", "m=1024&k=256&n=256&acts=relu,gelu&warmup=1&reps=3")
# Main-thread responsiveness while the worker trains: the page only renders, so it may spend at most
# this share of the training time in long tasks (> 50 ms), none longer than MAX_LONG_TASK_MS. Loose on
# purpose for a loaded 2-core CI machine (measured here: 0-2 long tasks, <= 2 % blocked). This bounds
# what the user feels; where the engine runs (the worker) is checked by test_boot_webgpu_and_engine.
# (The small demo model would pass this even on the page's thread: its steps yield to the event loop
# at every `await loss.read()` and their Python part stays under 50 ms on this machine.)
MAX_BLOCKED_SHARE = 0.25
MAX_LONG_TASK_MS = 1000
DIGIT_IMAGES = """
from numr_web.data import load_digits
_p, _l = load_digits()
[[list(_p[64 * i:64 * (i + 1)]), int(_l[i])] for i in range(10)]"""


def test_boot_webgpu_and_engine(app):
    """numrReady resolves; numr_web runs in the page's worker on the browser's WebGPU."""
    app.goto("index.html")
    assert app.page.get_attribute("#numr-status", "data-state") == "ready"
    gpu = app.page.evaluate("""async () => {
        const a = await navigator.gpu.requestAdapter();
        return a ? {arch: a.info.architecture, vendor: a.info.vendor} : null; }""")
    assert gpu, "navigator.gpu.requestAdapter() returned null"
    res = app.py("""
import sys, js, numr_web as nr
from pyodide.ffi import can_run_sync
x = nr.tensor([[1.0, 2.0], [3.0, 4.0]], device="webgpu", requires_grad=True)
default = [nr.ones(2).device, nr.nn.Linear(2, 3).weight.device]   # no numpy (cpu) in Pyodide
y = nr.matmul_bias_activation(x, x, nr.tensor([0.5, -10.0], device="webgpu"), activation="relu")
y.sum().backward()
{"platform": sys.platform, "scope": str(js.constructor.name), "devices": nr.available_devices(),
 "default": default,
 "device": y.device, "y_async": await y.read(), "grad": await x.grad.read(),
 "y_sync": y.tolist() if can_run_sync() else None}
""")
    print(f"\nbrowser adapter: {gpu}; {res['devices']}; numr_web runs in {res['scope']}")
    assert res["platform"] == "emscripten"
    assert res["scope"] == "DedicatedWorkerGlobalScope"
    assert app.page.evaluate("() => window.numrClient.mode") == "worker"
    assert app.page.evaluate("() => crossOriginIsolated") is True       # COOP/COEP from numr-web serve
    assert "webgpu" in res["devices"] and res["device"] == "webgpu"
    assert res["default"] == ["webgpu", "webgpu"]       # boot.py: NUMR_DEVICE=webgpu without cpu
    assert res["y_async"] == [[7.5, 0.0], [15.5, 12.0]]
    assert res["y_sync"] in (None, res["y_async"])
    assert res["grad"] == [[5.0, 6.0], [9.0, 11.0]]        # mask [[1, 0], [1, 1]]
    app.assert_clean()


def test_gpu_errors_are_numr_errors(app):
    """Invalid WGSL compiled in the browser raises KernelError (a NumrError) with the compiler's text."""
    app.goto("index.html")
    res = app.py("""
import numr_web as nr
from numr_web.backends import get_backend
try:
    get_backend("webgpu").kernels.compile_source("broken_kernel", "fn main( {", "main")
    r = "no error"
except nr.NumrError as e:
    r = f"{type(e).__name__}: {e}"
r""")
    assert res.startswith("KernelError") and "broken_kernel" in res, res
    app.assert_clean()


def test_captured_training_step_in_the_browser(app):
    """nr.capture in Pyodide: the step's dispatches recorded once and replayed, with the eager
    step's losses (same kernels, same order: identical), read back only with `await t.read()`."""
    app.goto("index.html")
    res = app.py("""
import numr_web as nr
from numr_web import nn

def make():
    model = nn.MLP([8, 16, 3], activation="gelu", device="webgpu", seed=1)
    opt = nn.optim.Adam(model.parameters(), lr=0.01, capturable=True)
    def step(x, y):
        opt.zero_grad()
        loss = nr.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step

x = nr.randn((4, 8), device="webgpu", seed=0)
y = nr.tensor([0, 1, 2, 1], device="webgpu")
eager, run = make(), nr.capture(make())
le = [await eager(x, y).read() for _ in range(4)]
lc = [await run(x, y).read() for _ in range(4)]
{"eager": le, "captured": lc, "graphs": len(run.graphs), "eager_fallbacks": len(run.eager)}
""")
    assert res["graphs"] == 1 and res["eager_fallbacks"] == 0, res
    assert res["captured"] == res["eager"] and res["eager"][3] < res["eager"][0], res
    app.assert_clean()


FUSION_ON_OFF = """
from pyodide.ffi import can_run_sync
import numr_web as nr
from numr_web import nn
from numr_web.backends import get_backend

be = get_backend("webgpu")


def make():
    model = nn.Sequential(nn.Linear(8, 16, device="webgpu", seed=1), nn.LayerNorm(16, device="webgpu"),
                          nn.GELU(), nn.Linear(16, 3, device="webgpu", seed=2))
    opt = nn.optim.AdamW(model.parameters(), lr=0.01, capturable=True)

    def step(x, y, t):
        opt.zero_grad()
        logits = model(x)
        loss = nr.cross_entropy(logits, y)
        loss += 0.1 * nr.smooth_l1_loss(nr.tanh(logits), t) + 0.01 * nr.norm(logits)
        top = nr.topk(logits, 2, dim=1).values                       # bitonic network, no readback
        loss = loss + 0.05 * (top[:, 0] - top[:, 1]).square().mean() + 0.01 * nr.median(logits)
        loss = loss + 0.01 * nr.logcumsumexp(logits, 1)[:, -1].mean()
        loss.backward()
        opt.step()
        return loss
    return step


async def run(fuse):
    be.fuse = fuse
    before = dict(be.info()["dispatches"])
    x = nr.randn((6, 8), device="webgpu", seed=0)
    y = nr.tensor([0, 1, 2, 1, 0, 2], device="webgpu")
    t = nr.randn((6, 3), device="webgpu", seed=3) * 0.5
    eager, captured = make(), nr.capture(make())
    le = [await eager(x, y, t).read() for _ in range(3)]
    lc = [await captured(x, y, t).read() for _ in range(3)]
    after = be.info()["dispatches"]
    diff = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
    return {"eager": le, "captured": lc, "graphs": len(captured.graphs),
            "dispatches": sum(diff.values()),
            "fused": sum(v for k, v in diff.items() if k.startswith("fused."))}

was = be.fuse
try:
    res = {"on": await run(True), "off": await run(False)}
finally:
    be.fuse = was
res["fusion"] = be.info()["fusion"]
res["can_run_sync"] = can_run_sync()
res"""


def test_fusion_on_off_without_jspi(make_app):
    """Elementwise fusion (on by default) in the browser, on a browser without JSPI: a training step
    with LayerNorm/GELU/AdamW, the new losses, in-place `+=`, norm, topk and median (the bitonic
    network: no readback) and logcumsumexp, eager and nr.capture'd, gives the same losses bit for bit
    with fusion on and off; on, fused kernels run and the step needs fewer dispatches."""
    app = make_app(jspi=False)
    app.goto("index.html")
    res = app.py(FUSION_ON_OFF)
    on, off = res["on"], res["off"]
    print(f"\nfusion in the browser: {on['dispatches']} dispatches ({on['fused']} fused kernels) vs "
          f"{off['dispatches']} unfused; {res['fusion']}")
    assert res["can_run_sync"] is False
    assert on["graphs"] == off["graphs"] == 1
    assert on["eager"] == on["captured"] == off["eager"] == off["captured"], res
    assert on["eager"][-1] < on["eager"][0], res
    assert on["fused"] > 0 and off["fused"] == 0, res
    assert on["dispatches"] < off["dispatches"], res
    assert res["fusion"]["enabled"] is True          # the page's setting is restored
    app.assert_clean()


# the same step with each of the browser adapter's two encoders (FUSION_ON_OFF's make and run)
ENCODERS = FUSION_ON_OFF[:FUSION_ON_OFF.index("was = be.fuse")] + """
ad = be.adapter
was = ad.js_encode
res = {}
try:
    for on in (True, False):
        ad.js_encode = on
        res[be.info()["encoder"]] = await run(True)
finally:
    ad.js_encode = was
res
"""


def test_python_encoder_gives_the_same_step(app):
    """The Python encoder (what NUMR_WEBGPU_JS_ENCODE=0 or a page whose Content-Security-Policy
    forbids making encode.js a function gets) runs a training step, eager and nr.capture'd, to
    the same losses bit for bit as encode.js, with the same dispatches."""
    app.goto("index.html")
    res = app.py(ENCODERS)
    js, py = res["encode.js"], res["python"]
    assert js["eager"] == js["captured"] == py["eager"] == py["captured"], res
    assert js["eager"][-1] < js["eager"][0], res
    assert js["dispatches"] == py["dispatches"] and js["fused"] == py["fused"] > 0, res
    app.assert_clean()


GEMM_TILES = """
import math
import numr_web as nr
from numr_web.backends import get_backend
be = get_backend("webgpu")
a = nr.randn((256, 96), device="webgpu", seed=0)
b = nr.randn((96, 320), device="webgpu", seed=1)
bias = nr.randn((320,), device="webgpu", seed=2)
res = {"workgroup_bytes": be.adapter.limits["maxComputeWorkgroupStorageSize"]}
try:
    for tile in ("64", "auto"):
        be.gemm_tile = tile
        before = dict(be.info()["dispatches"])
        out = await nr.matmul_bias_activation(a, b, bias, "gelu").read()
        ran = sorted(k for k, v in be.info()["dispatches"].items()
                     if v != before.get(k, 0) and k.startswith("matmul"))
        res[tile] = {"out": [x for row in out for x in row], "ran": ran}
finally:
    be.gemm_tile = "auto"
res["max_diff"] = max(abs(x - y) for x, y in zip(res["64"]["out"], res["auto"]["out"]))
res["finite"] = all(math.isfinite(x) for x in res["auto"]["out"])
del res["64"]["out"], res["auto"]["out"]
res
"""


def test_large_gemm_tile_in_the_browser(app):
    """Where the browser grants 32 KiB of workgroup memory, a 256 x 96 x 320 Linear + GELU runs
    on gemm_v4's 128 x 128 tile (XOR-swizzled a tile) and agrees with the 64 x 64 kernel to float32
    rounding of a 96-term sum (the two sum in different orders)."""
    app.goto("index.html")
    res = app.py(GEMM_TILES)
    print(f"\nbrowser GEMM tiles: {res}")
    assert res["64"]["ran"] == ["matmul.gemm"], res
    assert res["auto"]["ran"] == (["matmul.gemm_v4"] if res["workgroup_bytes"] >= 32768
                                  else ["matmul.gemm"]), res
    assert res["finite"] and res["max_diff"] <= 2e-5, res      # |z| <~ 40: ~2^-19 absolute
    app.assert_clean()


def test_python_shape_error_surfaces(app):
    """A Python exception comes back as its text (ShapeError), promptly, not a hang."""
    app.goto("index.html")
    # 1. through the page's Python console (what a user sees)
    app.page.click("#numr-console summary")
    app.page.fill("#py-input", "import numr_web as nr\n"
                               "a = nr.ones((2, 3), device='webgpu')\n"
                               "b = nr.ones((4, 5), device='webgpu')\n"
                               "a @ b")
    app.page.click("#py-run")
    app.page.wait_for_selector("#py-output[data-state=error]", timeout=30_000)
    text = app.page.inner_text("#py-output")
    assert "ShapeError" in text, text
    # 2. through window.numrReady (what a script sees): the rejection carries the traceback
    with pytest.raises(PlaywrightError) as ei:
        app.py("import numr_web as nr\nnr.tensor([[1.0, 2.0]], device='webgpu') + "
               "nr.tensor([1.0, 2.0, 3.0], device='webgpu')")
    assert "ShapeError" in str(ei.value), str(ei.value)
    # the page is still usable afterwards
    assert app.py("import numr_web as nr\nawait (nr.ones((3,), device='webgpu') * 2).read()") == [2.0, 2.0, 2.0]
    app.assert_clean()


def test_training_playground(app):
    """Trains the MLP in the worker to >= 90 % test accuracy while the page stays responsive; shows
    that kernels compile before step 1; the pad classifies during and after training."""
    app.goto(f"index.html?{TRAIN_QUERY}&autostart=1")
    # Classify before the first step (the kernels compile for seconds): says so, shows no digit
    app.page.wait_for_selector("#classify:not([disabled])")
    early = app.page.evaluate("""() => {
        if (window.numrTrain.losses.length) return 'step 1 came first';
        document.getElementById('classify').click();
        return [document.getElementById('classify-error').textContent,
                document.getElementById('prediction').dataset.value]; }""")
    assert early[0].startswith("model not trained yet") and early[1] == "", early
    app.wait_state("window.numrTrain.losses.length >= 1 ? 'stepping' : window.numrTrain.state",
                   ["stepping", "error", "done"])
    # classify while the model trains (two tasks in one worker: one trains, one reads under no_grad)
    during = app.page.evaluate("async () => window.numrClassify(new Array(64).fill(8))")
    assert len(during) == 10 and abs(sum(during) - 1) < 1e-4
    state = app.wait_state("window.numrTrain.state", ["done", "error", "stopped"], LONG_MS)
    ui = app.page.evaluate("() => window.numrTrain")
    assert state == "done", ui.get("error")
    r = ui["result"]
    print(f"\ntraining ({TRAIN_QUERY}): test accuracy {r['test_acc']:.4f}, {r['steps']} steps in "
          f"{r['seconds']:.1f} s; per-epoch accuracy {[round(a['acc'], 3) for a in ui['accs']]}")
    assert r["test_acc"] >= 0.90
    fusion = app.py(FUSION_STATS)
    print(f"fusion: {fusion}")
    assert fusion["fuse"] == 1 and fusion["chains"] > 0 and fusion["fused_dispatches"] > 0, fusion
    assert float(app.page.get_attribute("#test-acc", "data-value")) == pytest.approx(r["test_acc"])
    assert len(ui["losses"]) == r["steps"] and not r["stopped"]
    # progress while the kernels compile: said before the first step arrived
    before_step1 = [e["text"] for e in ui["statusLog"] if e["step"] == 0]
    assert any("compiling the WebGPU kernels" in t for t in before_step1), before_step1
    assert app.page.get_attribute("#train-progress", "value") == str(r["steps"])
    assert "latest loss" in app.page.get_attribute("#chart", "aria-label")
    for axis in ("data-ticks-x", "data-ticks-y"):           # round ticks: 0, s, 2s, … with s = 1, 2, 2.5 or 5 x 10^k
        ticks = [float(v) for v in app.page.get_attribute("#chart", axis).split(",")]
        step = ticks[1] - ticks[0]
        mant = step / 10 ** math.floor(math.log10(step))
        assert ticks[0] == 0 and any(abs(mant - m) < 1e-9 for m in (1, 2, 2.5, 5)), (axis, ticks)
        assert all(abs(t - i * step) < 1e-9 * max(1, t) for i, t in enumerate(ticks)), (axis, ticks)

    # responsiveness: main-thread long tasks between the first step and the end (the page marks both)
    lt = app.page.evaluate("() => window.__longTasks")
    assert lt is not None, "this Chromium has no longtask PerformanceObserver"
    span = app.page.evaluate("() => performance.getEntriesByName('numr-train-end')[0]?.startTime "
                             "- performance.getEntriesByName('numr-train-step1')[0]?.startTime")
    assert span and span > 0, "the page did not mark the training span"
    start = app.page.evaluate("() => performance.getEntriesByName('numr-train-step1')[0].startTime")
    inside = [e for e in lt if e["start"] >= start and e["start"] <= start + span]
    blocked = sum(e["duration"] for e in inside)
    longest = max([e["duration"] for e in inside] or [0])
    print(f"main thread during {span / 1000:.1f} s of training: {len(inside)} long tasks, "
          f"{blocked:.0f} ms blocked ({100 * blocked / span:.1f} %), longest {longest:.0f} ms")
    assert blocked <= MAX_BLOCKED_SHARE * span and longest <= MAX_LONG_TASK_MS

    # draw a "1" on the pad with the mouse: the model classifies it (any digit is a valid answer)
    box = app.page.locator("#pad").bounding_box()
    x = box["x"] + box["width"] / 2
    app.page.mouse.move(x, box["y"] + 30)
    app.page.mouse.down()
    for i in range(1, 11):
        app.page.mouse.move(x, box["y"] + 30 + i * (box["height"] - 60) / 10)
    app.page.mouse.up()
    app.page.wait_for_function("document.getElementById('prediction').dataset.value !== ''", timeout=60_000)
    pred = app.page.get_attribute("#prediction", "data-value")
    assert pred in [str(d) for d in range(10)]
    # and real digit images through the same path as the pad are classified correctly
    images = app.py(DIGIT_IMAGES)
    probs = app.page.evaluate("(ims) => Promise.all(ims.map(([pix]) => window.numrClassify(pix)))", images)
    guesses = [max(range(10), key=lambda i: p[i]) for p in probs]
    right = sum(g == label for g, (_, label) in zip(guesses, images))
    print(f"pad stroke classified as {pred}; 10 digit images: {right} right ({guesses})")
    assert all(abs(sum(p) - 1.0) < 1e-4 for p in probs) and right >= 8
    app.screenshot("trained")
    app.assert_clean()


CNN_QUERY = os.environ.get("NUMR_E2E_CNN", "model=cnn&channels=8&hidden=32&epochs=2&batch=64&lr=0.01")


def test_cnn_option(app):
    """The playground's CNN option: numr_web.models.cnn.DigitsCNN (conv + bias + ReLU fused) trains in
    the worker through the same loop; the loss falls, the test accuracy is shown, digits classify."""
    app.goto(f"index.html?{CNN_QUERY}")
    page = app.page
    page.wait_for_selector("#train:not([disabled])")
    assert page.input_value("#model") == "cnn"
    assert page.is_visible("#channels") and page.is_hidden("#layers") and page.is_hidden("#activation")
    page.fill("#channels", "0")                   # checked next to its field, nothing starts
    page.click("#train")
    assert "at least 1" in page.inner_text("#channels-error")
    assert page.evaluate("() => window.numrTrain.state") == "idle"
    page.fill("#channels", dict(kv.split("=") for kv in CNN_QUERY.split("&"))["channels"])
    page.click("#train")
    state = app.wait_state("window.numrTrain.state", ["done", "error", "stopped"], LONG_MS)
    ui = page.evaluate("() => window.numrTrain")
    assert state == "done", ui.get("error")
    r, losses = ui["result"], [p["loss"] for p in ui["losses"]]
    print(f"\nCNN ({CNN_QUERY}): test accuracy {r['test_acc']:.4f}, {r['steps']} steps in "
          f"{r['seconds']:.1f} s; loss {losses[0]:.3f} -> {sum(losses[-5:]) / 5:.3f} (mean of the last 5)")
    assert any("conv" in e["text"] for e in ui["statusLog"]), ui["statusLog"][:3]
    assert len(losses) == r["steps"] and not r["stopped"]
    assert 2.0 < losses[0] < 2.6                  # ln(10) = 2.30 at the start
    assert sum(losses[-5:]) / 5 < losses[0] - 1.0, losses
    assert r["test_acc"] >= 0.85
    images = app.py(DIGIT_IMAGES)
    # one at a time: concurrent CNN forwards each queue gather's device-side index check, and merging
    # two queued checks can compile a kernel mid-way (a JSPI suspension) while another task takes the
    # checks (numr_web/backends/base.py check_later; TypeError) -- an engine bug, reported
    probs = page.evaluate("async (ims) => { const out = []; "
                          "for (const [pix] of ims) out.push(await window.numrClassify(pix)); return out; }", images)
    right = sum(max(range(10), key=lambda i: p[i]) == label for p, (_, label) in zip(probs, images))
    assert all(abs(sum(p) - 1.0) < 1e-4 for p in probs) and right >= 8
    app.screenshot("cnn")
    app.assert_clean()


def test_settings_stop_and_error_banner(app):
    """Bad settings get a message next to their field and start nothing (URL values too: the default
    stays); a failed run shows the red banner, the next run clears it; Stop ends a run within one
    step and says 'stopped'."""
    app.goto("index.html?activation=bogus&model=rnn&optimizer=adam&hidden=16&epochs=1")
    page = app.page
    page.wait_for_selector("#train:not([disabled])")
    # the URL's choices that are not on the menus: message beside the field, default kept
    assert page.input_value("#activation") == "relu" and page.input_value("#model") == "mlp"
    assert "activation=bogus (from the URL) is not one of relu, gelu" in page.inner_text("#activation-error")
    assert "using relu" in page.inner_text("#activation-error")
    assert "model=rnn" in page.inner_text("#model-error") and "mlp, cnn" in page.inner_text("#model-error")
    assert page.inner_text("#optimizer-error") == "" and page.is_hidden("#numr-error")
    # a run that fails in Python (a menu entry the engine does not know): the red banner
    page.evaluate("() => { const s = document.getElementById('activation'); s.add(new Option('bogus')); s.value = 'bogus'; }")
    page.click("#train")
    assert app.wait_state("window.numrTrain.state", ["error", "done"]) == "error"
    assert page.is_visible("#numr-error") and "activation" in page.inner_text("#numr-error")
    page.select_option("#activation", "mish")     # an activation added through the table
    assert page.inner_text("#activation-error") == ""      # a new choice clears the URL's message
    for field, value, words in [("batch", "0", "at least 1"), ("hidden", "", "enter a number"),
                                ("lr", "-1", "more than 0"), ("epochs", "2.5", "whole number")]:
        page.fill(f"#{field}", value)
        page.click("#train")
        assert words in page.inner_text(f"#{field}-error"), field
        assert page.get_attribute(f"#{field}", "aria-invalid") == "true"
        assert page.evaluate("() => window.numrTrain.state") == "error"      # nothing started
        page.fill(f"#{field}", {"batch": "256", "hidden": "16", "lr": "0.01", "epochs": "50"}[field])
    page.click("#train")
    app.wait_state("window.numrTrain.losses.length >= 3 ? 'stepping' : window.numrTrain.state",
                   ["stepping", "error", "done"])
    assert page.is_hidden("#numr-error")          # the new run cleared the old error
    assert page.inner_text("#batch-error") == ""
    seen = page.evaluate("() => { const n = window.numrTrain.losses.length; "
                         "document.getElementById('stop').click(); return n; }")
    assert app.wait_state("window.numrTrain.state", ["stopped", "done", "error"]) == "stopped"
    r = page.evaluate("() => window.numrTrain.result")
    # the step in progress when Stop landed finishes (its event may still be on the way): at most 2
    assert r["stopped"] and seen <= r["steps"] <= seen + 2, (seen, r)
    assert "stopped after step" in page.inner_text("#train-status")
    assert r["steps"] < 50 * 6
    app.assert_clean()


def test_parity_page(app):
    """Every op and the fused layer (fwd + bwd, every activation) on WebGPU match the cpu golden values."""
    app.goto("parity.html?autorun=1")
    check_parity(app)
    assert app.page.evaluate("() => window.numrClient.mode") == "worker"
    app.assert_clean()


def test_bench_page(app):
    """Bad sizes are refused next to their fields; then numr_web vs TensorFlow.js (WebGPU) fused Linear
    fwd + bwd: both timings, the ratio (lower is better), the max difference."""
    q = dict(kv.split("=") for kv in BENCH_QUERY.split("&"))
    bad = {**q, "m": "0", "reps": "0", "acts": "relu,nope"}
    app.goto("bench.html?" + "&".join(f"{k}={v}" for k, v in bad.items()) + "&autorun=1")
    page = app.page
    assert app.wait_state("document.getElementById('bench-status').dataset.state",
                          ["invalid", "running", "done", "error"]) == "invalid"
    assert "at least 1" in page.inner_text("#m-error") and "at least 1" in page.inner_text("#reps-error")
    assert "nope" in page.inner_text("#acts-error")
    assert page.locator("#results tbody tr").count() == 0
    page.fill("#m", q["m"]); page.fill("#reps", q["reps"]); page.fill("#acts", q["acts"])
    page.click("#run")
    app.wait_state("document.getElementById('bench-status').dataset.state", ["done", "error"], LONG_MS)
    res = page.evaluate("() => window.benchResult")
    app.screenshot("bench")
    assert not res.get("error"), res.get("error")
    print(f"\nbenchmark (fused Linear fwd+bwd, {res['shape']}, median of {res['reps']}, "
          f"TF.js {res['tfjs_version']} on {res['tfjs_backend']}):")
    for r in res["rows"]:
        print(f"  {r['activation']:5s} numr_web {r['ours_ms']:8.1f} ms   TF.js {r['tfjs_ms']:8.1f} ms   "
              f"ratio {r['ratio']:.2f}   max|diff| y {r['diff']['y']:.2e} da {r['diff']['da']:.2e} "
              f"dw {r['diff']['dw']:.2e} db {r['diff']['db']:.2e} (rel {r['max_rel']:.2e})")
    out = os.environ.get("NUMR_E2E_BENCH_JSON")
    if out:
        with open(out, "w") as f:
            json.dump(res, f, indent=1)
    assert [r["activation"] for r in res["rows"]] == q["acts"].split(",")
    for r in res["rows"]:
        assert r["ours_ms"] > 0 and r["tfjs_ms"] > 0
        assert r["ratio"] == pytest.approx(r["ours_ms"] / r["tfjs_ms"])
        assert r["max_rel"] < 1e-3, r["diff"]       # same math on both sides
        row = page.locator(f"#results tr[data-activation={r['activation']}]")
        assert row.locator(".ratio").inner_text().endswith("×")
    assert "lower is better" in page.inner_text("#results thead")
    assert "lower is better" in page.inner_text("#bench-status")
    # Stop: a long run ends after the iteration in progress; finished rows stay
    page.fill("#m", "64"); page.fill("#k", "32"); page.fill("#n", "32"); page.fill("#reps", "100")
    page.fill("#acts", "relu,gelu")
    page.click("#run")
    page.wait_for_function("() => /relu .*repetition [2-9]/.test(document.getElementById('bench-status').textContent)",
                           timeout=120_000)
    page.click("#stop")
    assert app.wait_state("document.getElementById('bench-status').dataset.state",
                          ["stopped", "done", "error"], 60_000) == "stopped"
    res = page.evaluate("() => window.benchResult")
    assert res["stopped"] is True and res["rows"] == [], res
    assert page.inner_text("#bench-status").startswith("stopped during relu, repetition")
    assert page.is_disabled("#stop") and page.is_enabled("#run")
    app.assert_clean()


def test_no_external_requests_on_any_page(app):
    """Every page loads with everything from localhost and no console errors."""
    for name in ("index.html", "gpt.html", "model.html", "parity.html", "bench.html?mode=main"):
        app.goto(name)
    app.assert_clean()
