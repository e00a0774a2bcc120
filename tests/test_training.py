"""numr_web.apps.training: the one loop behind `numr-web demo` and the browser page."""
import asyncio

import pytest

import numr_web as nr
from numr_web.apps import training
from numr_web.apps.demo import check_config, prepare_digits


def _run(driver, **kw):
    kwargs, _ = prepare_digits("cpu", hidden=16, layers=1, epochs=kw.pop("epochs", 2),
                               batch_size=128, lr=0.01, activation="relu")
    kwargs.update(kw)
    if driver == "sync":
        return training.fit(**kwargs), kwargs["model"]
    return asyncio.run(training.fit_async(**kwargs)), kwargs["model"]


def test_sync_and_async_drivers_train_identically():
    a, _ = _run("sync")
    b, _ = _run("async")
    assert a.history == pytest.approx(b.history, rel=1e-6)
    assert a.metrics == pytest.approx(b.metrics, rel=1e-6)
    assert a.steps == b.steps == 2 * 12 and not a.stopped
    assert a.history[1] < a.history[0]
    assert 0.5 < a.metrics["accuracy"] <= 1.0


def test_async_driver_needs_no_blocking_readback(monkeypatch):
    """What a browser without JSPI allows: only `await t.read()`."""
    def refuse(self, *a):
        raise AssertionError("blocking readback in fit_async")
    monkeypatch.setattr(nr.Tensor, "tolist", refuse)
    monkeypatch.setattr(nr.Tensor, "item", refuse)
    steps = []
    res, _ = _run("async", epochs=1, read_loss_every=1, on_step=steps.append)
    assert res.steps == len(steps) == 12
    assert all(isinstance(s.loss, float) for s in steps)
    assert [s.batch for s in steps] == list(range(12)) and steps[0].batches == 12


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_stop_request_ends_the_run_within_one_step(driver):
    seen, epochs = [], []
    res, _ = _run(driver, epochs=5, on_step=seen.append, on_epoch=epochs.append,
                  should_stop=lambda: len(seen) >= 3)
    assert res.stopped and res.steps == 3 == len(seen)
    assert len(epochs) == 1 and epochs[0].stopped and "accuracy" in epochs[0].metrics


def test_read_loss_every():
    seen = []
    _run("sync", epochs=1, read_loss_every=5, on_step=seen.append)
    assert [s.step for s in seen if s.loss is not None] == [5, 10]


def test_evaluation_runs_in_eval_mode_and_returns_to_train_mode():
    modes = []

    class Model:
        def __init__(self, inner):
            self.inner = inner

        def __call__(self, x):
            return self.inner(x)

        def train(self):
            modes.append("train")

        def eval(self):
            modes.append("eval")

    kwargs, _ = prepare_digits("cpu", hidden=8, layers=1, epochs=1, batch_size=512)
    kwargs["model"] = Model(kwargs["model"])
    training.fit(**kwargs)
    assert modes == ["train", "eval", "train"]


@pytest.mark.parametrize("bad", [dict(batch_size=0), dict(hidden=0), dict(epochs=0), dict(lr=0.0),
                                 dict(layers=1.5), dict(activation="nope"), dict(optimizer="x")])
def test_bad_settings_are_refused_by_name(bad):
    cfg = dict(hidden=8, layers=1, epochs=1, batch_size=8, lr=0.1, activation="relu", optimizer="adam")
    cfg.update(bad)
    with pytest.raises(ValueError, match=next(iter(bad)).split("_")[0]):
        check_config(**cfg)


def test_epochs_and_batches_are_checked_by_the_loop():
    x, y = nr.zeros((4, 2)), nr.zeros(4, dtype="int32")
    with pytest.raises(ValueError, match="batch_size"):
        training.shuffled_batches(x, y, 0)
    with pytest.raises(ValueError, match="epochs"):
        training.fit(None, None, [], None, epochs=0)


def test_apps_sit_above_the_engine_and_keep_their_earlier_paths():
    """Nothing in the engine imports numr_web.apps (only the package's entry points and the aliases
    of the earlier paths do); numr_web.training / numr_web.demo are the apps' modules themselves."""
    import ast
    import importlib
    from pathlib import Path
    pkg = Path(training.__file__).resolve().parents[1]
    entry = {pkg / "__main__.py", pkg / "training.py", pkg / "demo.py"}
    for path in pkg.rglob("*.py"):
        if pkg / "apps" in path.parents or path in entry:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom) else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            level = getattr(node, "level", 0)
            for n in names:
                assert not (n.startswith("numr_web.apps") or (level and n.split(".")[0] == "apps")), \
                    f"{path.relative_to(pkg)} imports the apps package"
    assert importlib.import_module("numr_web.training") is training
    assert importlib.import_module("numr_web.demo") is importlib.import_module("numr_web.apps.demo")
