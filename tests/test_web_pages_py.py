"""The browser pages' Python (web/py/gpt.py, web/py/train.py's CNN option), run natively on cpu under
asyncio: the same functions the pages call in Pyodide, with the page's JS replaced by lists. The loss
references are closed forms (ln V at initialisation) and the fact that training lowers it."""
from __future__ import annotations

import asyncio
import importlib.util
import math
from pathlib import Path

import pytest

WEB_PY = Path(__file__).resolve().parent.parent / "web" / "py"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"web_py_{name}", WEB_PY / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def gpt():
    return _load("gpt")


@pytest.fixture(scope="module")
def train():
    return _load("train")


TINY = {"layers": 1, "dim": 16, "heads": 2, "context": 8, "batch": 8, "steps": 6, "eval_every": 3,
        "lr": 1e-2, "device": "cpu"}


def test_gpt_page_trains_then_writes(gpt):
    events = []
    res = asyncio.run(gpt.gpt_train(TINY, events.append))
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "start" and kinds.count("step") == 6 and kinds.count("eval") == 2
    start = events[0]
    assert start["vocab"] == 96 and start["total_steps"] == 6 and start["train_chars"] > 100_000
    losses = [e["loss"] for e in events if e["kind"] == "step"]
    assert abs(losses[0] - math.log(96)) < 0.1           # near-uniform output at initialisation
    assert losses[-1] < losses[0]
    assert res["steps"] == 6 and not res["stopped"] and res["steps_per_s"] > 0
    assert res["val_loss"] == pytest.approx([e for e in events if e["kind"] == "eval"][-1]["val_loss"])
    tokens = []
    out = asyncio.run(gpt.gpt_generate({"prompt": "def ", "max_new": 10}, tokens.append))
    assert out["prompt"] == "def " and len(out["text"]) == 10 and not out["superseded"]
    assert "".join(t["text"] for t in tokens) == out["text"]
    assert set(out["text"]) <= set("\n" + "".join(map(chr, range(32, 127))))


def test_gpt_page_stop_and_supersede(gpt):
    n = {"steps": 0}

    def should_stop():
        return n["steps"] >= 2

    def emit(e):
        n["steps"] += e["kind"] == "step"
    res = asyncio.run(gpt.gpt_train({**TINY, "steps": 50}, emit, should_stop))
    assert res["stopped"] and res["steps"] == 2

    async def two_prompts():              # the second prompt supersedes the first after a character
        first = asyncio.ensure_future(gpt.gpt_generate({"prompt": "a", "max_new": 50}))
        await asyncio.sleep(0)
        second = await gpt.gpt_generate({"prompt": "b", "max_new": 3})
        return await first, second
    first, second = asyncio.run(two_prompts())
    assert first["superseded"] and len(first["text"]) < 50
    assert not second["superseded"] and len(second["text"]) == 3


@pytest.mark.parametrize("bad, words", [
    ({"heads": 3}, "multiple of heads"), ({"steps": 0}, "steps must be a whole number"),
    ({"lr": 0}, "lr must be a number in"), ({"dim": 2.5}, "dim must be a whole number")])
def test_gpt_page_settings_checked(gpt, bad, words):
    with pytest.raises(ValueError, match=words):
        asyncio.run(gpt.gpt_train({**TINY, **bad}))


def test_cnn_option_trains(train):
    events = []
    cfg = {"model": "cnn", "channels": 4, "hidden": 16, "epochs": 1, "batch": 128, "lr": 0.01,
           "device": "cpu"}
    res = asyncio.run(train.train_run(cfg, events.append))
    assert events[0]["model"] == "cnn" and events[0]["sizes"][1] == "conv 4"
    losses = [e["loss"] for e in events if e["kind"] == "step"]
    assert abs(losses[0] - math.log(10)) < 0.2 and min(losses[-3:]) < losses[0]
    assert type(train._state["model"]).__name__ == "DigitsCNN"
    probs = asyncio.run(train.classify([8] * 64))
    assert len(probs) == 10 and sum(probs) == pytest.approx(1.0, abs=1e-5)
    assert 0 < res["test_acc"] <= 1


def test_classify_before_the_first_step_says_not_trained(train):
    """Between a run's start (the model exists, its kernels compile) and its first step the pad's
    classify says "model not trained yet" instead of answering with the untrained model."""
    from concurrent.futures import ThreadPoolExecutor
    answers = []

    def emit(event):
        if event["kind"] in ("start", "step") and len(answers) < 2:
            with ThreadPoolExecutor(1) as pool:      # the page's other task, while this one trains
                try:
                    answers.append(pool.submit(asyncio.run, train.classify([8] * 64)).result())
                except ValueError as e:
                    answers.append(str(e))
    cfg = {"hidden": 8, "epochs": 1, "batch": 512, "lr": 0.01, "device": "cpu"}
    asyncio.run(train.train_run(cfg, emit))
    assert answers[0].startswith("model not trained yet"), answers[0]
    assert len(answers[1]) == 10 and sum(answers[1]) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("bad, words", [({"model": "rnn"}, "model must be one of mlp, cnn"),
                                        ({"model": "cnn", "channels": 0}, "channels must be")])
def test_cnn_option_settings_checked(train, bad, words):
    with pytest.raises(ValueError, match=words):
        asyncio.run(train.train_run(bad))


def test_playground_offers_every_activation_of_the_table():
    """The playground's activation menu (web/index.html) and the parity cases follow the ACT table."""
    import re

    import numr_web as nr
    html = (WEB_PY.parent / "index.html").read_text()
    menu = re.search(r'<select id="activation"[^>]*>(.*?)</select>', html, re.S).group(1)
    assert sorted(re.findall(r"<option>(\w+)</option>", menu)) == sorted(n for n in nr.ACT if n != "none")
    pc = _load("parity_cases")
    names = {c.name for c in pc.CASES}
    for n in nr.ACT:
        assert f"matmul_bias_activation {n}" in names
        assert n == "none" or {n, f"{n} extreme", f"matmul_bias_activation {n} 2nd order"} <= names


def test_parity_page_checks_every_public_elementwise_row():
    """Each public row of the elementwise table is a parity case of its own name, its inputs drawn
    (kind r<lo>:<hi>) from the row's domain, and natively it computes torch's function of them."""
    import numpy as np
    import torch

    import numr_web as nr
    from numr_web.vocab.elementwise import rows
    pc = _load("parity_cases")
    by_name = {c.name: c for c in pc.CASES}
    assert len(by_name) == len(pc.CASES)                  # the page looks cases up by name
    torch_fn = {"cbrt": lambda t: t.sign() * t.abs() ** (1 / 3)}
    for r in rows(public=True):
        c = by_name[r.name]
        assert [k for _, k, _ in c.inputs] == [f"r{lo}:{hi}" for lo, hi in r.domain], r.name
        data = {v: pc.make_data(k, s, f"{r.name}/{v}") for v, k, s in c.inputs}
        for (v, _, s), (lo, hi) in zip(c.inputs, r.domain):
            xs = np.array(data[v])
            assert xs.size == pc.numel(s) and lo <= xs.min() < xs.max() <= hi, r.name
            assert xs.max() - xs.min() > (hi - lo) / 2          # spread over the domain
        outs, _, _ = asyncio.run(pc.run_case(nr, c, data, "cpu"))
        ref = (torch_fn[r.name] if r.name in torch_fn else getattr(torch, r.name))(
            *[torch.tensor(data[v], dtype=torch.float64) for v, _, _ in c.inputs])
        np.testing.assert_allclose(outs["y"], ref.numpy(), rtol=2e-6, atol=1e-6, err_msg=r.name)
