"""The "your model" page's Python (web/py/model_runner.py), run natively on cpu under asyncio: the
function the page calls in Pyodide, with the page's JS replaced by a list of events. Covers the
loss-line parser on the formats common PyTorch programs print (nanoGPT's train.py, pytorch/examples'
mnist and word_language_model), report(), the streamed output, tracebacks and typed errors, Stop,
and the two examples the page ships (web/py/examples/).

`import torch` must give numr_web.torch inside a run: the fixture takes an imported PyTorch (other
tests of the suite import it) out of sys.modules for the test and puts it back afterwards."""
from __future__ import annotations

import asyncio
import importlib.util
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WEB_PY = ROOT / "web" / "py"


@pytest.fixture(scope="module")
def runner():
    spec = importlib.util.spec_from_file_location("web_py_model_runner", WEB_PY / "model_runner.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def run(runner, tmp_path, monkeypatch):
    """run(code, files=None, should_stop=None) -> (result, events), with `import torch` giving
    numr_web.torch and the examples' accelerator check answering "none" (so they run on cpu)."""
    import numr_web.torch.accelerator as accelerator
    monkeypatch.setattr(accelerator, "current_accelerator", lambda check_available=False: None)
    real = {k: sys.modules.pop(k) for k in list(sys.modules)
            if (k == "torch" or k.startswith("torch.")) and not k.startswith("numr_web")}
    meta_path = list(sys.meta_path)

    def go(code, files=None, should_stop=None):
        events = []
        cfg = {"code": code, "files": files or {}, "workdir": str(tmp_path / "work")}
        return asyncio.run(runner.model_run(cfg, events.append, should_stop)), events
    yield go
    sys.meta_path[:] = meta_path
    for k in [k for k in sys.modules if k == "torch" or k.startswith("torch.")]:
        del sys.modules[k]
    sys.modules.update(real)


def _points(events, series="train"):
    return [(e["step"], e["loss"]) for e in events if e["kind"] == "point" and e["series"] == series]


def _output(events, stream="stdout"):
    return "".join(e["text"] for e in events if e["kind"] == "output" and e["stream"] == stream)


@pytest.mark.parametrize("line, expected", [
    ("iter 30: loss 2.7153, time 156ms", [("train", 30, 2.7153)]),                  # nanoGPT
    ("step 250: train loss 1.9321, val loss 2.0047",
     [("train", 250, 1.9321), ("val", 250, 2.0047)]),
    ("Train Epoch: 1 [640/60000 (1%)]\tLoss: 0.523181", [("train", None, 0.523181)]),  # mnist
    ("Test set: Average loss: 0.0467, Accuracy: 9848/10000 (98%)", [("val", None, 0.0467)]),
    ("| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch 31.56 | loss  7.63 | ppl  2065.13",
     [("train", None, 7.63)]),                                                        # word LM
    ("| end of epoch   1 | time: 97.62s | valid loss  6.08 | valid ppl   437.85",
     [("val", None, 6.08)]),
    ("step 3 | loss=1.5e-03", [("train", 3, 0.0015)]),
    ("epoch 2, train_loss: .25, test_loss: .5", [("train", None, 0.25), ("val", None, 0.5)]),
    ("loss nan at it 7", [("train", 7, math.nan)]),
    ("number of parameters: 0.10M", []),
    ("the loss function is cross entropy", []),
])
def test_loss_lines(runner, line, expected):
    got = runner.parse_loss_line(line)
    assert len(got) == len(expected)
    for (k, s, v), (k2, s2, v2) in zip(got, expected):
        assert (k, s) == (k2, s2) and (v == v2 or (math.isnan(v) and math.isnan(v2))), (got, expected)


def test_printed_losses_are_charted(run):
    code = ("import torch\nw = torch.ones(3, requires_grad=True)\nfor step in range(3):\n"
            "    loss = (w * w).sum()\n    loss.backward()\n    with torch.no_grad():\n"
            "        w -= 0.25 * w.grad\n    w.grad = None\n"
            "    print(f'step {step}: loss {loss.item()}, val loss {loss.item() / 2}')\n"
            "print('Loss: 9')\nprint(type(torch).__name__, torch.__name__)\n")
    res, events = run(code)
    assert res["ok"] and not res["stopped"] and res["error"] is None and res["points"] == 7
    # (w*w).sum() with w = 1, 0.5, 0.25: the update w -= 0.25 * 2w halves w
    assert _points(events) == [(0, 3.0), (1, 0.75), (2, 0.1875), (4, 9.0)]   # no step: count + 1
    assert _points(events, "val") == [(0, 1.5), (1, 0.375), (2, 0.09375)]
    assert _output(events).endswith("Loss: 9\nmodule numr_web.torch\n")


def test_report_turns_off_parsing(run):
    code = ("import torch\nprint('step 1: loss 5.0')\n"
            "report(loss=torch.tensor(2.5), step=2, val_loss=3, accuracy=torch.tensor([0.5]))\n"
            "print('step 3: loss 1.0')\nreport(loss=1.25)\nreport(lr=0.1, step=4)\n")
    res, events = run(code)
    assert res["ok"], res["error"]
    assert _points(events) == [(1, 5.0), (2, 2.5), (3, 1.25)]     # report(loss=) without step: count
    assert _points(events, "val") == [(2, 3.0)]
    point = [e for e in events if e["kind"] == "point" and e["source"] == "report"][0]
    assert point["metrics"] == {"accuracy": 0.5}
    assert [e for e in events if e["kind"] == "metrics"] == [
        {"kind": "metrics", "step": 4, "metrics": {"lr": 0.1}}]
    res, _ = run("report(loss='low')\n")
    assert res["error"]["type"] == "TypeError" and "loss must be a number" in res["error"]["message"]


def test_numr_error_and_traceback(run):
    res, events = run("import torch\n\nx = torch.ones(2, 3)\ny = x @ torch.ones(4, 5)\n")
    e = res["error"]
    assert not res["ok"] and e["type"] == "ShapeError" and e["numr"]
    assert e["module"].startswith("numr_web") and "(2, 3)" in e["message"]
    tb = e["traceback"]
    assert tb.startswith("Traceback (most recent call last):\n")
    assert 'main.py", line 4, in <module>' in tb and "y = x @ torch.ones(4, 5)" in tb
    assert "model_runner" not in tb                         # the page's own frames are left out
    assert _output(events, "stderr") == tb


def test_python_errors_read_as_python_prints_them(run):
    res, _ = run("def f(n):\n    return n / 0\n\nf(1)\n")
    tb = res["error"]["traceback"]
    assert res["error"]["type"] == "ZeroDivisionError" and not res["error"]["numr"]
    assert "line 4, in <module>" in tb and "line 2, in f" in tb and tb.endswith("ZeroDivisionError: division by zero\n")
    res, _ = run("print('hi'\n")
    assert res["error"]["type"] == "SyntaxError" and 'main.py", line 1' in res["error"]["traceback"]
    res, events = run("import sys\nprint('bye')\nsys.exit(0)\nprint('not reached')\n")
    assert res["ok"] and _output(events) == "bye\n"
    res, _ = run("import sys\nsys.exit(3)\n")
    assert res["error"]["type"] == "SystemExit"
    res, _ = run("import torchvision\n")
    assert res["error"]["type"] == "ModuleNotFoundError"


@pytest.mark.parametrize("body, emitted", [
    ("print(i)", 3),                                             # the 3rd line is printed, then it stops
    ("report(loss=1.0 / (i + 1))", 2),                           # report() checks before its point
    ("x = torch.ones(2, requires_grad=True); (x * i).sum().backward()", 0),
])
def test_stop_at_the_next_print_report_or_backward(run, body, emitted):
    asked = []

    def should_stop():                       # the page's Stop flag, set when it is asked a 3rd time
        asked.append(1)
        return len(asked) >= 3
    res, events = run(f"import torch\nfor i in range(10**6):\n    {body}\n", should_stop=should_stop)
    assert res["stopped"] and not res["ok"] and res["error"] is None, res
    assert len(asked) == 3 and len([e for e in events if e["kind"] in ("output", "point")]) == emitted


def test_files_next_to_the_script_are_imported_fresh_each_run(run):
    code = "import helper\nprint(helper.VALUE, open('data.txt').read())\n"
    res, events = run(code, {"helper.py": "VALUE = 1\n", "data.txt": "a"})
    assert res["ok"] and _output(events) == "1 a\n"
    res, events = run(code, {"helper.py": "VALUE = 2\n", "data.txt": "b"})   # edited: seen
    assert res["ok"] and _output(events) == "2 b\n"
    with pytest.raises(ValueError, match="inside the working folder"):
        run("", {"../escape.py": ""})


def test_added_files_stay_for_later_runs(run, runner, tmp_path):
    work = str(tmp_path / "work")
    out = asyncio.run(runner.model_put_file({"name": "data/w.bin", "data": b"\x00\x01\xff", "workdir": work}))
    assert out["size"] == 3 and out["path"] == str(tmp_path / "work" / "data" / "w.bin")
    for bad in ("../w.bin", "/etc/w.bin", "", "a//b"):
        with pytest.raises(ValueError, match="inside the working folder"):
            asyncio.run(runner.model_put_file({"name": bad, "data": b"", "workdir": work}))
    for _ in range(2):
        res, events = run("print(list(open('data/w.bin', 'rb').read()))\n")
        assert res["ok"] and _output(events) == "[0, 1, 255]\n"


def test_top_level_await_and_main_module(run):
    code = ("import asyncio, dataclasses, pickle, torch\n@dataclasses.dataclass\nclass C:\n    a: int = 1\n"
            "print(await torch.ones(2).read(), await asyncio.sleep(0, 'ok'), __name__,\n"
            "      pickle.loads(pickle.dumps(C())))\n")
    res, events = run(code)
    assert res["ok"], res["error"]
    assert _output(events) == "[1.0, 1.0] ok __main__ C(a=1)\n"


def test_spirals_example_learns(run):
    code = (WEB_PY / "examples" / "spirals.py").read_text().replace("steps = 300", "steps = 60")
    res, events = run(code)
    assert res["ok"], res["error"]
    pts = _points(events)
    assert [s for s, _ in pts] == list(range(10, 61, 10))
    assert pts[0][1] < math.log(2) + 0.05 and pts[-1][1] < pts[0][1] / 2, pts
    assert "training on cpu" in _output(events)


def test_nanogpt_example_trains(run):
    """nanoGPT's vendored model.py next to the example script, as the page sends it."""
    code = (WEB_PY / "examples" / "nanogpt_train.py").read_text()
    for old, new in {"max_iters = 200": "max_iters = 20", "log_interval = 10": "log_interval = 1",
                     "eval_interval = 50": "eval_interval = 10", "sample_chars = 120": "sample_chars = 12"}.items():
        assert old in code
        code = code.replace(old, new)
    model = (ROOT / "tests" / "programs" / "nanogpt" / "model.py").read_text()
    res, events = run(code, {"model.py": model})
    assert res["ok"], res["error"] and res["error"]["traceback"]
    pts = _points(events)
    assert [s for s, _ in pts] == list(range(20))
    assert abs(pts[0][1] - math.log(44)) < 0.3             # 44 characters: near-uniform at the start
    assert sum(v for _, v in pts[-3:]) / 3 < pts[0][1] - 0.5
    assert [s for s, _ in _points(events, "val")] == [0, 10, 20]
    out = _output(events)
    assert "number of parameters: 0.10M" in out and "using fused AdamW: False" in out
    assert len(out.rstrip("\n").split("\n")[-1]) > 0       # the sample
