"""nr.capture: a training step recorded once (a CUDA graph on cuda) and replayed, with the eager
step's results; on devices without graphs it calls the step. The reference is always the same
model trained eagerly from the same initial values."""
import warnings

import numpy as np
import pytest

import numr_web as nr
from numr_web import nn

OK, WHY = nr.backends.probe("cuda")
needs_cuda = pytest.mark.skipif(not OK, reason=f"cuda: {WHY}")


def _batches(n, sizes=None, dtype="float64", device="cpu"):
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        b = sizes[i] if sizes else 32
        x = rng.standard_normal((b, 64))
        y = rng.integers(0, 10, b).astype(np.int32)
        out.append((nr.tensor(x, dtype=dtype, device=device), nr.tensor(y, device=device)))
    return out


def _make(device, dtype="float64", opt="sgd", lr=0.05):
    model = nn.MLP([64, 32, 10], activation="gelu", device=device, dtype=dtype, seed=3)
    if opt == "sgd":
        o = nn.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
    else:
        o = nn.optim.Adam(model.parameters(), lr=lr)

    def step(x, y):
        o.zero_grad()
        loss = nr.cross_entropy(model(x), y)
        loss.backward()
        o.step()
        return loss
    return model, o, step


def _train(device, batches, captured, dtype="float64", opt="sgd", lr_at=None):
    model, o, step = _make(device, dtype, opt)
    run = nr.capture(step) if captured else step
    losses = []
    for i, (x, y) in enumerate(batches):
        if lr_at is not None and i == lr_at:
            for g in o.param_groups:
                g["lr"] = 0.01
        losses.append(run(x, y))
    return [l.numpy() for l in losses], [p.numpy() for p in model.parameters()], run, model


def _same(a, b, rtol):
    for u, v in zip(a, b):
        np.testing.assert_allclose(u, v, rtol=rtol, atol=rtol)


def test_capture_on_cpu_calls_the_step():
    calls = []

    def f(x):
        calls.append(1)
        return x * 2
    g = nr.capture(f)
    x = nr.tensor([1.0, 2.0])
    for _ in range(3):
        np.testing.assert_array_equal(g(x).numpy(), [2.0, 4.0])
    assert len(calls) == 3 and not g.graphs


def test_capture_on_cpu_trains_like_eager():
    b = _batches(4)
    le, pe, _, _ = _train("cpu", b, False)
    lc, pc, _, _ = _train("cpu", b, True)
    _same(le, lc, 0)
    _same(pe, pc, 0)


def test_capture_rejects_a_non_function():
    with pytest.raises(nr.NumrError):
        nr.capture(3)


# -- on the GPU -----------------------------------------------------------------------------------------
@needs_cuda
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_captured_training_matches_eager(dtype):
    b = _batches(6, dtype=dtype, device="cuda")
    le, pe, _, _ = _train("cuda", b, False, dtype)
    lc, pc, run, _ = _train("cuda", b, True, dtype)
    assert len(run.graphs) == 1 and not run.eager
    rtol = 1e-12 if dtype == "float64" else 1e-5
    _same(le, lc, rtol)
    _same(pe, pc, rtol)


@needs_cuda
def test_a_new_shape_is_recorded_again():
    b = _batches(7, sizes=[32, 32, 32, 16, 16, 16, 32], device="cuda")
    le, pe, _, _ = _train("cuda", b, False)
    lc, pc, run, _ = _train("cuda", b, True)
    assert len(run.graphs) == 2
    _same(le, lc, 1e-12)
    _same(pe, pc, 1e-12)


@needs_cuda
def test_returned_tensors_are_not_overwritten_by_later_replays():
    b = _batches(5, device="cuda")
    _, o, step = _make("cuda")
    run = nr.capture(step)
    outs = [run(x, y) for x, y in b]
    vals = [l.numpy().copy() for l in outs]
    run(*b[0])
    for l, v in zip(outs, vals):
        np.testing.assert_array_equal(l.numpy(), v)
    assert len({float(v) for v in vals}) == len(vals)


@needs_cuda
def test_learning_rate_changed_between_calls_is_seen():
    b = _batches(6, device="cuda")
    le, pe, _, _ = _train("cuda", b, False, lr_at=4)
    lc, pc, run, _ = _train("cuda", b, True, lr_at=4)
    _same(le, lc, 1e-12)
    _same(pe, pc, 1e-12)


@needs_cuda
def test_steps_that_cannot_be_recorded_run_eagerly():
    b = _batches(5, device="cuda")
    le, pe, _, _ = _train("cuda", b, False, opt="adam")   # Adam's step count is a Python int
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        lc, pc, run, _ = _train("cuda", b, True, opt="adam")
    assert run.eager and not run.graphs
    assert any("eagerly" in str(x.message) for x in w)
    _same(le, lc, 1e-12)
    _same(pe, pc, 1e-12)

    model, o, step = _make("cuda")
    seen = []

    def reads_back(x, y):
        loss = step(x, y)
        seen.append(float(loss.numpy()))                  # a readback: not recordable
        return loss
    model2, o2, step2 = _make("cuda")
    run = nr.capture(reads_back)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = [run(x, y).numpy() for x, y in b]
    want = [step2(x, y).numpy() for x, y in b]
    _same(got, want, 1e-12)
    assert len(seen) == len(b)


@needs_cuda
def test_tensor_arguments_must_not_require_grad():
    run = nr.capture(lambda x: (x * 2).sum())
    x = nr.ones((3,), device="cuda", requires_grad=True)
    with pytest.raises(nr.GradientError):
        run(x)
