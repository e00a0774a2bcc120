"""End-to-end: the GPT page (web/gpt.html) in headless Chromium with WebGPU (SwiftShader on CPU
machines). numr_web.models.gpt trains in the page's worker on the standard-library text corpus
(nothing is downloaded), the loss falls, steps/s is shown, and text appears after a typed prompt.
Sizes are small so that this stays fast on a 2-core machine (about 1 step/s on SwiftShader).

    pytest e2e/test_gpt.py -s      # -s prints the losses and steps/s

Ends with `app.assert_clean()`: no console errors, no request that left localhost.
"""
from __future__ import annotations

import os

from e2e_support import FUSION_STATS, LONG_MS

# the page's default model (2 layers x 64 dims, context 32) on batches of 8, a few steps
GPT_QUERY = os.environ.get("NUMR_E2E_GPT", "layers=2&dim=64&heads=4&context=32&batch=8&steps=12&lr=0.003")
PRINTABLE = set("\n" + "".join(chr(c) for c in range(32, 127)))


def _wait_gen(app, prompt):
    """Wait until the page finished writing after `prompt`; -> window.numrGPT.gen."""
    app.page.wait_for_function(
        "(p) => window.numrGPT.gen.prompt === p && ['done', 'error'].includes(window.numrGPT.gen.state)",
        arg=prompt, timeout=LONG_MS, polling=250)
    return app.page.evaluate("() => window.numrGPT.gen")


def test_gpt_page_trains_and_writes(app):
    """Bad settings get a message next to their field; then the GPT trains in the worker (loss falls,
    validation loss and steps/s shown), writes after the prompt when training ends and again as a new
    prompt is typed; a second run writes while it trains and stops within a step on Stop."""
    app.goto(f"gpt.html?{GPT_QUERY}&max_new=24")
    page = app.page
    page.wait_for_selector("#train:not([disabled])")
    assert page.is_disabled("#generate")                     # nothing to write with yet
    # settings: the heads must divide the embedding dim; steps must be whole
    page.fill("#heads", "3")
    page.click("#train")
    assert "must divide the embedding dim" in page.inner_text("#heads-error")
    assert page.get_attribute("#heads", "aria-invalid") == "true"
    page.fill("#heads", "4")
    page.fill("#steps", "2.5")
    page.click("#train")
    assert "whole number" in page.inner_text("#steps-error")
    assert page.evaluate("() => window.numrGPT.state") == "idle"        # nothing started
    steps = int(dict(kv.split("=") for kv in GPT_QUERY.split("&"))["steps"])
    page.fill("#steps", str(steps))

    page.click("#train")
    state = app.wait_state("window.numrGPT.state", ["done", "error", "stopped"], LONG_MS)
    ui = page.evaluate("() => window.numrGPT")
    assert state == "done", ui.get("error")
    r, losses = ui["result"], [p["loss"] for p in ui["losses"]]
    print(f"\nGPT ({GPT_QUERY}): {r['params']} parameters, {r['steps']} steps in {r['seconds']:.1f} s, "
          f"{r['steps_per_s']:.2f} steps/s after step 1; loss {losses[0]:.3f} -> {losses[-1]:.3f}, "
          f"validation {[round(v['loss'], 3) for v in ui['vals']]}")
    assert r["steps"] == steps == len(losses) and not r["stopped"]
    # ln(96) = 4.56 at the start (uniform over the vocabulary); the unigram statistics come within steps
    assert 4.2 < losses[0] < 4.8, losses[0]
    assert sum(losses[-3:]) / 3 < losses[0] - 0.5, losses
    assert len(ui["vals"]) >= 2 and ui["vals"][-1]["loss"] < ui["vals"][0]["loss"] + 0.05, ui["vals"]
    assert ui["vals"][-1]["loss"] < 4.0
    assert r["steps_per_s"] > 0
    assert float(page.get_attribute("#steps-per-s", "data-value")) == r["steps_per_s"]
    assert float(page.get_attribute("#val-loss", "data-value")) == ui["vals"][-1]["loss"]
    assert "latest loss" in page.get_attribute("#chart", "aria-label")
    assert "steps/s" in page.inner_text("#train-status")
    fusion = app.py(FUSION_STATS)                            # the worker that trained
    print(f"fusion: {fusion}")
    assert fusion["fuse"] == 1 and fusion["chains"] > 0 and fusion["fused_dispatches"] > 0, fusion

    # the page writes after the prompt once training is done ...
    gen = _wait_gen(app, "def ")
    assert gen["state"] == "done", gen["error"]
    assert len(gen["text"]) == 24 and set(gen["text"]) <= PRINTABLE, gen
    assert page.inner_text("#sample") == "def " + gen["text"]
    # ... and again as a new prompt is typed (each keystroke supersedes the text being written)
    page.fill("#prompt", "")
    page.type("#prompt", "import ", delay=30)
    gen = _wait_gen(app, "import ")
    assert gen["state"] == "done" and len(gen["text"]) == 24, gen
    assert page.inner_text("#sample").startswith("import ")
    app.screenshot("written")

    # a second, longer run: writing while it trains (the live model), then Stop within one step
    page.fill("#steps", "400")
    page.click("#train")
    app.wait_state("window.numrGPT.losses.length >= 2 ? 'stepping' : window.numrGPT.state",
                   ["stepping", "error", "done"])
    page.fill("#prompt", "class ")
    page.click("#generate")
    gen = _wait_gen(app, "class ")
    assert gen["state"] == "done" and len(gen["text"]) == 24, gen
    assert page.evaluate("() => window.numrGPT.state") == "training"
    seen = page.evaluate("() => { const n = window.numrGPT.losses.length; "
                         "document.getElementById('stop').click(); return n; }")
    assert app.wait_state("window.numrGPT.state", ["stopped", "done", "error"]) == "stopped"
    r = page.evaluate("() => window.numrGPT.result")
    assert r["stopped"] and seen <= r["steps"] <= seen + 2, (seen, r)
    assert "stopped after step" in page.inner_text("#train-status")
    assert page.is_hidden("#numr-error")
    app.assert_clean()
