"""End-to-end: the "your model" page (web/model.html) in headless Chromium with WebGPU (SwiftShader
on CPU machines). PyTorch code typed into the page runs in the worker on numr_web (`import torch`
is numr_web.torch): the output streams in, losses reach the chart through report() and through
printed lines, a numr_web error shows its type, message and traceback, Stop ends a loop (at its
next print, or by restarting the worker when the loop checks nothing).

The nanoGPT example (nanoGPT's model.py, vendored unmodified in tests/programs/nanogpt, and a
short train.py-style loop) is also run natively by PyTorch, from the same initial weights: the
losses the page charts must agree with PyTorch's (see LOSS_RTOL).

    pytest e2e/test_model_page.py -s      # -s prints both loss sequences
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from e2e_support import LONG_MS, ROOT

EXAMPLES = ROOT / "web" / "py" / "examples"
NANOGPT = ROOT / "tests" / "programs" / "nanogpt"
STEPS = 6
# Relative tolerance of the page's losses against PyTorch's (cpu, float32) from the same weights
# and batches, the losses printed with 9 decimals (1e-9: far below float32's spacing, 2.4e-7 at
# losses in [2, 4)). Both sides compute in float32 but not alike: the GPU sums the GEMMs' and the
# reductions' terms in another order than PyTorch's cpu kernels, its exp/log are a few ulp off the
# correctly rounded values, and AdamW's normalised update hands differences of near-zero gradients
# to the weights at full size, so differences can grow with each step. Measured on Chromium 156's
# SwiftShader (2026-12-04): at most 1 ulp (7.5e-8 relative) over the 6 steps. 1e-6 (4-8 ulp) leaves
# room for another reduction order in a later Chromium and still fails any real error of an op (a
# wrong scale, a dropped term, a stale weight: 1e-4 and more after one step).
LOSS_RTOL = 1e-6


def _nanogpt_code(init_from):
    code = (EXAMPLES / "nanogpt_train.py").read_text()
    subs = {'init_from = "scratch"': f'init_from = "{init_from}"', "max_iters = 200": f"max_iters = {STEPS}",
            "log_interval = 10": "log_interval = 1", "eval_iters = 4": "eval_iters = 1",
            "sample_chars = 120": "sample_chars = 4",
            "{loss.item():.6f}": "{loss.item():.9f}"}        # all of float32's digits
    for old, new in subs.items():
        assert old in code, old
        code = code.replace(old, new)
    return code


_TORCH_RUN = textwrap.dedent("""
    # the example under PyTorch; GPT's initial weights are saved for the page to start from
    import runpy, sys
    import numpy as np
    import torch
    sys.path.insert(0, ".")
    import model
    init = model.GPT.__init__
    def save_initial_weights(self, *args, **kwargs):
        init(self, *args, **kwargs)
        np.savez("init.npz", **{k: v.detach().numpy() for k, v in self.state_dict().items()})
    model.GPT.__init__ = save_initial_weights
    runpy.run_path("main.py", run_name="__main__")
""")


def _torch_reference(workdir):
    """-> (PyTorch's losses per step, its initial weights {name: array})."""
    pytest.importorskip("torch")
    shutil.copy(NANOGPT / "model.py", workdir / "model.py")
    (workdir / "main.py").write_text(_nanogpt_code("scratch"))
    r = subprocess.run([sys.executable, "-c", _TORCH_RUN], cwd=workdir, capture_output=True,
                       text=True, timeout=600, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert r.returncode == 0, r.stderr[-3000:]
    losses = [float(m.group(2)) for m in re.finditer(r"^iter (\d+): loss ([0-9.]+)", r.stdout, re.M)]
    assert len(losses) == STEPS, r.stdout
    return losses, dict(np.load(workdir / "init.npz"))


def _safetensors_bytes(weights, path):
    import numr_web as nr
    nr.save({k: nr.tensor(v, device="cpu") for k, v in weights.items()}, str(path))
    return path.read_bytes()


def _run(app, code, states=("done", "error", "stopped")):
    page = app.page
    page.fill("#code", code)
    page.click("#run")
    page.wait_for_function("() => window.numrModel.state === 'running' || window.numrModel.result",
                           timeout=30_000)
    app.wait_state("window.numrModel.state", list(states), LONG_MS)
    return page.evaluate("() => window.numrModel")


def test_model_page_runs_code_and_reports(app):
    """The spirals example (report()) at 30 steps; printed loss lines; a numr_web error; Stop."""
    app.goto("model.html")
    page = app.page
    page.wait_for_selector("#run:not([disabled])")
    assert page.input_value("#example") == "spirals"
    assert "report(loss=loss.item(), step=step" in page.input_value("#code")
    assert page.is_hidden("#files")                    # the spirals example needs no other file

    ui = _run(app, page.input_value("#code").replace("steps = 300", "steps = 30"))
    assert ui["state"] == "done", ui["error"]
    losses = [p["loss"] for p in ui["points"]]
    print(f"\nspirals: losses {[round(v, 4) for v in losses]} in {ui['result']['seconds']:.1f} s")
    assert [p["step"] for p in ui["points"]] == [10, 20, 30]
    assert 0 < losses[-1] < losses[0] < 0.75            # ln 2 = 0.693 at the start, falling
    assert "training on webgpu" in ui["output"] and "final loss" in ui["output"]
    assert "latest loss" in page.get_attribute("#chart", "aria-label")
    assert "done in" in page.inner_text("#run-status")

    # unmodified code that prints its losses: "step N: loss X" lines reach the chart
    ui = _run(app, "import torch\nw = torch.ones(3, requires_grad=True)\n"
                   "for step in range(4):\n    loss = (w * w).sum()\n    loss.backward()\n"
                   "    with torch.no_grad():\n        w -= 0.25 * w.grad\n    w.grad = None\n"
                   "    print(f'step {step}: loss {loss.item():.4f}, val loss {loss.item() / 2:.4f}')\n")
    assert ui["state"] == "done", ui["error"]
    assert [(p["step"], p["loss"]) for p in ui["points"]] == [(0, 3.0), (1, 0.75), (2, 0.1875), (3, 0.0469)]
    assert [p["loss"] for p in ui["vals"]] == [1.5, 0.375, 0.0938, 0.0234]

    # a numr_web error: its type, its message and the traceback to the line of the script
    ui = _run(app, "import torch\n\nx = torch.ones(2, 3)\ny = x @ torch.ones(4, 5)\n")
    assert ui["state"] == "error"
    err = ui["error"]
    assert err["type"] == "ShapeError" and err["numr"] and "numr_web" in err["module"], err
    assert 'main.py", line 4' in err["traceback"] and "y = x @ torch.ones(4, 5)" in err["traceback"]
    banner = page.inner_text("#run-error")
    assert banner.startswith("ShapeError") and err["message"] in banner
    assert ui["errorLine"] == 4 and "line 4 of the code" in banner        # selected in the editor
    assert page.evaluate("() => { const t = document.getElementById('code'); "
                         "return t.value.slice(t.selectionStart, t.selectionEnd); }") == "y = x @ torch.ones(4, 5)"
    assert "Traceback" in ui["output"]
    page.wait_for_selector("#output .stderr", timeout=10_000)   # the output renders on the next frame
    app.screenshot("error")

    # a Python error in the user's own code reads as Python prints it
    ui = _run(app, "def f(n):\n    return n / 0\n\nf(1)\n")
    assert ui["error"]["type"] == "ZeroDivisionError" and not ui["error"]["numr"]
    assert 'line 4, in <module>' in ui["error"]["traceback"] and "line 2, in f" in ui["error"]["traceback"]

    # Stop: a loop that prints stops at its next line
    page.fill("#code", "for i in range(10**9):\n    print(f'iter {i}: loss {1 / (i + 1):.5f}')\n")
    page.click("#run")
    app.wait_state("window.numrModel.points.length >= 3 ? 'going' : window.numrModel.state", ["going", "error", "done"])
    page.click("#stop")
    assert app.wait_state("window.numrModel.state", ["stopped", "error", "done"]) == "stopped"
    assert page.evaluate("() => window.numrModel.restarted") == 0
    assert "stopped after" in page.inner_text("#run-status")

    # ... and one that checks nothing is ended by restarting the worker; the page runs code again,
    # with the files added before
    page.set_input_files("#add-files", files=[{"name": "note.txt", "mimeType": "text/plain", "buffer": b"kept"}])
    page.wait_for_selector('#uploaded li[data-name="note.txt"]')
    page.fill("#code", "while True:\n    pass\n")
    page.click("#run")
    app.wait_state("window.numrModel.state", ["running"])
    page.click("#stop")
    assert app.wait_state("window.numrModel.state", ["stopped", "error", "done"], 300_000) == "stopped"
    assert page.evaluate("() => window.numrModel.restarted") == 1
    ui = _run(app, "import torch\nprint('again on', torch.ones(2).device, open('note.txt').read())\n")
    assert ui["state"] == "done" and "again on webgpu kept" in ui["output"], ui
    page.click("#numr-console summary")               # the page's Python console: the new worker
    page.fill("#py-input", "import numr_web as nr\nprint(await (nr.ones(2) * 3).read())")
    page.click("#py-run")
    page.wait_for_function("() => document.getElementById('py-output').dataset.state !== 'running'")
    assert page.inner_text("#py-output").strip() == "[3.0, 3.0]"
    assert page.is_hidden("#numr-error")
    app.assert_clean()


def test_nanogpt_example_matches_pytorch(app, tmp_path):
    """nanoGPT's model.py + the example's loop: PyTorch natively, then the page on WebGPU from
    PyTorch's initial weights (a file added through the page's file input); equal losses."""
    ref, weights = _torch_reference(tmp_path)
    blob = _safetensors_bytes(weights, tmp_path / "init.safetensors")

    app.goto("model.html?example=nanogpt")
    page = app.page
    page.wait_for_selector("#run:not([disabled])")
    assert "from model import GPT, GPTConfig" in page.input_value("#code")
    assert page.is_visible("#files")
    files = page.locator("#files-list summary").all_text_contents()
    assert files == ["model.py", "LICENSE-nanoGPT"]
    page.set_input_files("#add-files", files=[{"name": "init.safetensors", "mimeType": "application/octet-stream",
                                                "buffer": blob}])
    page.wait_for_selector('#uploaded li[data-name="init.safetensors"]')

    ui = _run(app, _nanogpt_code("init.safetensors"))
    assert ui["state"] == "done", (ui["error"], ui["output"][-3000:])
    ours = [p["loss"] for p in ui["points"]]
    worst = max(abs(a - b) / abs(b) for a, b in zip(ours, ref))
    print(f"\nnanoGPT, {STEPS} steps: PyTorch {ref}\n                  page    {ours}\n"
          f"worst relative difference {worst:.2e} (tolerance {LOSS_RTOL:.0e}); "
          f"{ui['result']['seconds']:.1f} s in the page")
    assert [p["step"] for p in ui["points"]] == list(range(STEPS))
    np.testing.assert_allclose(ours, ref, rtol=LOSS_RTOL)
    assert len(ui["vals"]) == 2                           # "step 0: val loss", "step 6: val loss"
    assert "using fused AdamW: False" in ui["output"] and "training on webgpu" in ui["output"]
    app.screenshot("nanogpt")
    app.assert_clean()


def test_model_page_without_jspi(make_app):
    """Without JSPI (Safari, older Chrome) a blocking read in the code is a typed error whose
    message says what to write instead; `await loss.read()` at the top level works. The code as
    edited is still there after a reload."""
    app = make_app(jspi=False)
    app.goto("model.html")
    page = app.page
    page.wait_for_selector("#run:not([disabled])")
    ui = _run(app, "import torch\nloss = (torch.ones(3) * 2).sum()\nprint(loss.item())\n")
    assert ui["state"] == "error" and ui["error"]["numr"], ui["error"]
    assert "await t.read()" in ui["error"]["message"] and ui["errorLine"] == 3
    ui = _run(app, "import torch\nloss = (torch.ones(3) * 2).sum()\nprint('loss', await loss.read())\n")
    assert ui["state"] == "done" and "loss 6.0" in ui["output"], ui
    assert [p["loss"] for p in ui["points"]] == [6.0]
    # the edited code outlives a reload; Reset puts the example back
    page.reload()
    app.wait_ready()
    assert "await loss.read()" in page.input_value("#code")
    page.click("#reset")
    assert page.input_value("#code") == (EXAMPLES / "spirals.py").read_text()
    assert page.is_hidden("#reset")
    app.assert_clean()
