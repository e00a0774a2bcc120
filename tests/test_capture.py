"""nr.capture: a training step recorded once (a CUDA graph on cuda, its dispatch list on webgpu) and
replayed, with the eager step's results; on cpu it calls the step. The reference is always the same
model trained eagerly from the same initial values, on the same device: a replay runs the same
kernels in the same order, so results are identical."""
import warnings

import numpy as np
import pytest

import numr_web as nr
from numr_web import nn


def _gpu(name):
    ok, why = nr.backends.probe(name)
    return pytest.param(name, marks=pytest.mark.skipif(not ok, reason=f"{name}: {why}"))


GPUS = [_gpu("cuda"), _gpu("webgpu")]
on_gpus = pytest.mark.parametrize("device", GPUS)
F64 = {"cuda": "float64", "webgpu": "float32"}      # the widest float of each device


def _batches(n, sizes=None, dtype="float64", device="cpu"):
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        b = sizes[i] if sizes else 32
        x = rng.standard_normal((b, 64))
        y = rng.integers(0, 10, b).astype(np.int32)
        out.append((nr.tensor(x, dtype=dtype, device=device), nr.tensor(y, device=device)))
    return out


def _make(device, dtype="float64", opt="sgd", lr=0.05, widths=(64, 32, 10)):
    model = nn.MLP(list(widths), activation="gelu", device=device, dtype=dtype, seed=3)
    if opt == "sgd":
        o = nn.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
    else:
        o = nn.optim.Adam(model.parameters(), lr=lr, capturable=opt == "adam_capturable")

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


# -- on the GPUs ----------------------------------------------------------------------------------------
@on_gpus
@pytest.mark.parametrize("wide", [True, False])
def test_captured_training_matches_eager(device, wide):
    dtype = F64[device] if wide else "float32"
    b = _batches(6, dtype=dtype, device=device)
    le, pe, _, _ = _train(device, b, False, dtype)
    lc, pc, run, _ = _train(device, b, True, dtype)
    assert len(run.graphs) == 1 and not run.eager
    _same(le, lc, 0)
    _same(pe, pc, 0)


class _WarnsOnAnyAttribute:
    """Like torch.distributed.reduce_op: reading any attribute (even __class__) warns."""

    def __getattribute__(self, name):
        warnings.warn("attribute read", FutureWarning, stacklevel=2)
        return object.__getattribute__(self, name)


@on_gpus
def test_recording_reads_no_attribute_of_unrelated_objects(device):
    """Recording looks at every live object for the state a step carries; it must not touch
    other libraries' objects (torch.distributed.reduce_op warns when its class is read)."""
    other = _WarnsOnAnyAttribute()
    held = {"reduce_op": _WarnsOnAnyAttribute()}     # as in torch.distributed's module dict
    dtype = F64[device]
    b = _batches(3, dtype=dtype, device=device)
    with warnings.catch_warnings(record=True) as seen:     # (recorded: an error raised there
        warnings.simplefilter("always")                    # could be swallowed on the way)
        _, _, run, _ = _train(device, b, True, dtype)
    assert not [str(w.message) for w in seen if "attribute read" in str(w.message)]
    assert len(run.graphs) == 1 and not run.eager
    del other, held


@on_gpus
def test_adam_with_the_step_count_on_the_device_is_recorded(device):
    dt = F64[device]
    b = _batches(5, dtype=dt, device=device)
    le, pe, _, _ = _train(device, b, False, dt, opt="adam_capturable")
    lc, pc, run, _ = _train(device, b, True, dt, opt="adam_capturable")
    assert len(run.graphs) == 1 and not run.eager
    _same(le, lc, 0)
    _same(pe, pc, 0)


@on_gpus
def test_a_new_shape_is_recorded_again(device):
    dt = F64[device]
    b = _batches(7, sizes=[32, 32, 32, 16, 16, 16, 32], dtype=dt, device=device)
    le, pe, _, _ = _train(device, b, False, dt)
    lc, pc, run, _ = _train(device, b, True, dt)
    assert len(run.graphs) == 2
    _same(le, lc, 0)
    _same(pe, pc, 0)


@on_gpus
def test_returned_tensors_are_not_overwritten_by_later_replays(device):
    dt = F64[device]
    b = _batches(5, dtype=dt, device=device)
    _, o, step = _make(device, dt)
    run = nr.capture(step)
    outs = [run(x, y) for x, y in b]
    vals = [l.numpy().copy() for l in outs]
    run(*b[0])
    for l, v in zip(outs, vals):
        np.testing.assert_array_equal(l.numpy(), v)
    assert len({float(v) for v in vals}) == len(vals)


@on_gpus
def test_learning_rate_changed_between_calls_is_seen(device):
    dt = F64[device]
    b = _batches(6, dtype=dt, device=device)
    le, pe, _, _ = _train(device, b, False, dt, lr_at=4)
    lc, pc, run, _ = _train(device, b, True, dt, lr_at=4)
    _same(le, lc, 0)
    _same(pe, pc, 0)


@on_gpus
def test_steps_that_cannot_be_recorded_run_eagerly(device):
    dt = F64[device]
    b = _batches(5, dtype=dt, device=device)
    le, pe, _, _ = _train(device, b, False, dt, opt="adam")   # Adam's step count is a Python int
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        lc, pc, run, _ = _train(device, b, True, dt, opt="adam")
    assert run.eager and not run.graphs
    assert any("eagerly" in str(x.message) for x in w)
    _same(le, lc, 0)
    _same(pe, pc, 0)

    model, o, step = _make(device, dt)
    seen = []

    def reads_back(x, y):
        loss = step(x, y)
        seen.append(float(loss.numpy()))                  # a readback: not recordable
        return loss
    model2, o2, step2 = _make(device, dt)
    run = nr.capture(reads_back)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = [run(x, y).numpy() for x, y in b]
    assert any("reads a value back" in str(x.message) for x in w)
    want = [step2(x, y).numpy() for x, y in b]
    _same(got, want, 0)
    assert len(seen) == len(b)


@on_gpus
def test_tensor_arguments_must_not_require_grad(device):
    run = nr.capture(lambda x: (x * 2).sum())
    x = nr.ones((3,), device=device, requires_grad=True)
    with pytest.raises(nr.GradientError):
        run(x)


@on_gpus
def test_host_data_uploaded_inside_the_step_is_replayed(device):
    """A constant made from host data inside the step, dropped early while the step goes on to
    make temporaries of the same size: every replay reads the uploaded values, as eager calls do."""
    state = {"acc": nr.zeros((3,), device=device)}

    def step(x):
        y = x + nr.tensor([1.0, 2.0, 3.0], device=device)
        for _ in range(3):
            y = y * 1.0 + 0.0                       # same-sized temporaries after the upload died
        state["acc"] = state["acc"] + y
        return y
    run = nr.capture(step)
    x = nr.ones((3,), device=device)
    for _ in range(5):
        np.testing.assert_array_equal(run(x).numpy(), [2.0, 3.0, 4.0])
    np.testing.assert_array_equal(state["acc"].numpy(), 5 * np.array([2.0, 3.0, 4.0]))
    assert len(run.graphs) == 1


@on_gpus
def test_a_recorded_step_called_inside_a_captured_step(device):
    inner = nr.capture(lambda x: x * 2 + 1)
    outer = nr.capture(lambda x: inner(x) * 3)
    x = nr.tensor([1.0, -2.0], device=device)
    for _ in range(3):
        np.testing.assert_array_equal(inner(x).numpy(), [3.0, -3.0])
    for _ in range(4):
        np.testing.assert_array_equal(outer(x).numpy(), [9.0, -9.0])
    assert len(inner.graphs) == 1 and len(outer.graphs) == 1 and not inner.eager


@on_gpus
def test_batched_matmuls_with_transposed_operands_are_recorded(device):
    """Batched products (attention's q @ k^T and p @ v, dense and transposed operands) record
    and replay; values as float64 numpy computes them, within float32 rounding."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 3, 5, 4)).astype(np.float32) for _ in range(3))

    def step(q, k, v):
        s = q @ k.transpose(-1, -2)                       # (2, 3, 5, 5): b transposed
        r = q.transpose(1, 2) @ k.transpose(1, 2).transpose(-1, -2)  # batch dims that do not
        return s @ v + s.transpose(-1, -2) @ v, r          # fold into one stride; a transposed
    run = nr.capture(step)
    args = [nr.tensor(a, device=device) for a in (q, k, v)]
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    s64 = q64 @ np.swapaxes(k64, -1, -2)
    r64 = np.swapaxes(q64, 1, 2) @ np.swapaxes(np.swapaxes(k64, 1, 2), -1, -2)
    want = s64 @ v64 + np.swapaxes(s64, -1, -2) @ v64
    for _ in range(3):
        got, r = run(*args)
        np.testing.assert_allclose(got.numpy(), want, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(r.numpy(), r64, rtol=2e-5, atol=2e-5)
    assert len(run.graphs) == 1 and not run.eager


def test_a_webgpu_replay_submits_its_dispatches_in_growing_runs():
    """A replay goes out in runs of 16, 32, 64, 128 and then 256 dispatches (the GPU starts on the
    first while the host encodes the rest), every dispatch once, with the eager step's results
    (test_captured_training_matches_eager)."""
    ok, why = nr.backends.probe("webgpu")
    if not ok:
        pytest.skip(f"webgpu: {why}")
    be = nr.get_backend("webgpu")
    _, _, step = _make("webgpu", "float32", widths=[64] + [32] * 12 + [10])
    run = nr.capture(step)
    b = _batches(3, dtype="float32", device="webgpu")
    run(*b[0]).item()
    run(*b[1]).item()                                      # recorded, then replayed
    before = be.info()
    loss = run(*b[2])
    after = be.info()
    loss.item()
    # around the graph: a copy into each of the 2 input slots (one submit before the graph's
    # runs) and a copy of the loss out of its slot (submitted at the readback)
    n = sum(after["dispatches"].values()) - sum(before["dispatches"].values()) - 3
    runs, left, size = 0, n, 16
    while left > 0:
        runs, left, size = runs + 1, left - size, min(2 * size, 256)
    assert n > 16 + 32 + 64 and len(run.graphs) == 1 and not run.eager
    assert after["submits"] - before["submits"] == 1 + runs
