"""End-to-end: the numr_web web app in headless Chromium with WebGPU (SwiftShader on CPU machines).

    pytest e2e -s          # -s shows the benchmark / training figures printed below

Every test ends with `app.assert_clean()`: no console errors and no request that left localhost.
Screenshots and console logs land in test-results/e2e/.
"""
from __future__ import annotations

import json
import os

import pytest
from playwright.sync_api import Error as PlaywrightError

# Training run sized for SwiftShader on a 2-core machine; still >= 90 % test accuracy.
TRAIN_QUERY = os.environ.get("NUMR_E2E_TRAIN", "hidden=64&epochs=8&batch=64&lr=0.01&activation=relu")
BENCH_QUERY = os.environ.get("NUMR_E2E_BENCH", "m=1024&k=256&n=256&acts=relu,gelu&warmup=1&reps=3")
LONG_MS = 480_000


def test_boot_webgpu_and_engine(app):
    """numrReady resolves; numr_web runs on the browser's WebGPU; sync + async readback agree."""
    app.goto("index.html")
    assert app.page.get_attribute("#numr-status", "data-state") == "ready"
    gpu = app.page.evaluate("""async () => {
        const a = await navigator.gpu.requestAdapter();
        return a ? {arch: a.info.architecture, vendor: a.info.vendor} : null; }""")
    assert gpu, "navigator.gpu.requestAdapter() returned null"
    res = app.py("""
import sys, numr_web as nr
x = nr.tensor([[1.0, 2.0], [3.0, 4.0]], device="webgpu", requires_grad=True)
y = nr.matmul_bias_activation(x, x, nr.tensor([0.5, -10.0], device="webgpu"), activation="relu")
y.sum().backward()
{"platform": sys.platform, "devices": nr.available_devices(), "device": y.device,
 "y_async": await y.read(), "y_sync": y.tolist(), "grad": await x.grad.read()}
""")
    print(f"\nbrowser adapter: {gpu}; {res['devices']}")
    assert res["platform"] == "emscripten"
    assert "webgpu" in res["devices"]
    assert res["device"] == "webgpu"
    assert res["y_async"] == res["y_sync"] == [[7.5, 0.0], [15.5, 12.0]]
    # d/dx sum(relu(x @ x + b)) with mask [[1, 0], [1, 1]]
    assert res["grad"] == [[5.0, 6.0], [9.0, 11.0]]
    app.screenshot("ready")
    app.assert_clean()


def test_gpu_errors_are_numr_errors(app):
    """Invalid WGSL compiled on the page raises KernelError (a NumrError) with the compiler's text."""
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


def test_without_jspi(app):
    """Browsers without JSPI: everything is awaitable (`await t.read()`), and a synchronous read
    raises an error that says to `await t.read()` instead of hanging."""
    app.page.add_init_script("delete WebAssembly.Suspending; delete WebAssembly.promising;")
    app.goto("index.html")
    res = app.py("""
from pyodide.ffi import can_run_sync
import numr_web as nr
a = nr.tensor([[1.0, -2.0], [3.0, 4.0]], device="webgpu", requires_grad=True)
y = nr.matmul_bias_activation(a, a, nr.zeros((2,), device="webgpu"), activation="relu")
y.sum().backward()
out = {"jspi": can_run_sync(), "y": await y.read(), "grad": await a.grad.read()}
try:
    y.tolist()
    out["sync"] = "no error"
except nr.NumrError as e:
    out["sync"] = f"{type(e).__name__}: {e}"
out""")
    assert res["jspi"] is False
    assert res["y"] == [[0.0, 0.0], [15.0, 10.0]]
    assert res["grad"] == [[3.0, 3.0], [3.0, 11.0]]
    assert "await t.read()" in res["sync"], res["sync"]
    app.assert_clean()


def test_python_shape_error_surfaces(app):
    """A Python exception on the page comes back as its text (ShapeError), promptly, not a hang."""
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
    app.screenshot("shape-error")
    app.assert_clean()


def test_training_playground(app):
    """Trains the MLP on the digits data on WebGPU to >= 90 % test accuracy; the pad classifies."""
    app.goto(f"index.html?{TRAIN_QUERY}&autostart=1")
    app.page.wait_for_function(
        "() => ['done', 'error'].includes(window.numrTrain.state)", timeout=LONG_MS, polling=1000)
    state = app.page.evaluate("() => ({state: window.numrTrain.state, error: window.numrTrain.error, "
                              "result: window.numrTrain.result, accs: window.numrTrain.accs, "
                              "n_losses: window.numrTrain.losses.length})")
    assert state["state"] == "done", state.get("error")
    r = state["result"]
    print(f"\ntraining ({TRAIN_QUERY}): test accuracy {r['test_acc']:.4f}, {r['steps']} steps in "
          f"{r['seconds']:.1f} s; per-epoch accuracy {[round(a['acc'], 3) for a in state['accs']]}")
    assert r["test_acc"] >= 0.90
    assert float(app.page.get_attribute("#test-acc", "data-value")) == pytest.approx(r["test_acc"])
    assert state["n_losses"] == r["steps"]
    app.screenshot("trained")

    # draw a "1" on the pad with the mouse: the model classifies it (any digit is a valid answer)
    box = app.page.locator("#pad").bounding_box()
    x = box["x"] + box["width"] / 2
    app.page.mouse.move(x, box["y"] + 30)
    app.page.mouse.down()
    for i in range(1, 11):
        app.page.mouse.move(x, box["y"] + 30 + i * (box["height"] - 60) / 10)
    app.page.mouse.up()
    app.page.wait_for_function("document.getElementById('prediction').dataset.value !== ''",
                               timeout=60_000)
    pred = app.page.get_attribute("#prediction", "data-value")
    assert pred in [str(d) for d in range(10)]
    # and a real test image through the same path as the pad is classified correctly
    probs = app.page.evaluate("""async () => {
        const py = await window.numrReady;
        const [pix, label] = py.runPython(`
from numr_web.data import load_digits
_p, _l = load_digits()
[list(_p[0:64]), int(_l[0])]`).toJs();
        const probs = await window.numrClassify(pix);
        return {label, probs: Array.from(probs)}; }""")
    best = max(range(10), key=lambda i: probs["probs"][i])
    print(f"pad stroke classified as {pred}; digits[0] (label {probs['label']}) classified as {best}")
    assert abs(sum(probs["probs"]) - 1.0) < 1e-4
    assert best == probs["label"]
    app.screenshot("pad")
    app.assert_clean()


def test_parity_page(app):
    """Every op and the fused layer (fwd + bwd, every activation) on WebGPU match the cpu golden values."""
    app.goto("parity.html?autorun=1")
    app.page.wait_for_function("() => window.parityResult !== null", timeout=LONG_MS, polling=1000)
    res = app.page.evaluate("() => window.parityResult")
    rows = res.get("rows", [])
    print(f"\nparity: {res.get('status')} — {len(rows)} cases, worst error/tolerance "
          f"{res.get('max_worst')}, {res.get('seconds', 0):.1f} s")
    for r in rows:
        if r["status"] != "PASS":
            print(f"  FAIL {r['name']}: worst {r['worst']} max_abs {r['max_abs']} {r['error']}")
    app.screenshot("parity")
    assert res.get("error") is None, res.get("error")
    assert len(rows) >= 60
    groups = {r["group"] for r in rows}
    assert {"unary", "binary", "compare", "reduce", "shape", "matmul", "activation", "softmax", "loss",
            "fused"} <= groups
    fused = {r["name"] for r in rows if r["group"] == "fused"}
    for act in ("none", "relu", "sigmoid", "tanh", "silu", "gelu", "gelu_tanh"):
        assert f"matmul_bias_activation {act}" in fused
    assert [r["name"] for r in rows if r["status"] != "PASS"] == []
    assert res["status"] == "PASS"
    assert app.page.get_attribute("#verdict", "data-status") == "PASS"
    app.assert_clean()


def test_bench_page(app):
    """numr_web vs TensorFlow.js (WebGPU) fused Linear fwd + bwd: both timings, the ratio, max diff."""
    app.goto(f"bench.html?{BENCH_QUERY}&autorun=1")
    app.page.wait_for_function(
        "() => ['done', 'error'].includes(document.getElementById('bench-status').dataset.state)",
        timeout=LONG_MS, polling=1000)
    res = app.page.evaluate("() => window.benchResult")
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
    assert [r["activation"] for r in res["rows"]] == ["relu", "gelu"]
    for r in res["rows"]:
        assert r["ours_ms"] > 0 and r["tfjs_ms"] > 0
        assert r["ratio"] == pytest.approx(r["ours_ms"] / r["tfjs_ms"])
        assert r["max_rel"] < 1e-3, r["diff"]       # same math on both sides
        row = app.page.locator(f"#results tr[data-activation={r['activation']}]")
        assert row.locator(".ratio").inner_text().endswith("×")
    app.assert_clean()


def test_no_external_requests_on_any_page(app):
    """Every page loads with everything from localhost and no console errors."""
    for name in ("index.html", "parity.html", "bench.html"):
        app.goto(name)
        app.page.wait_for_timeout(500)
    app.assert_clean()
