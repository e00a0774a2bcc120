"""Checks on values (class labels in range, indices in bounds): the cpu raises at the call; cuda
and webgpu at the next sync (a readback) in the same thread or asyncio task, once, and the error
names the op and the user's line that called it (numr_web/backends/checks.py)."""
import asyncio
import contextvars
import os
import re
import sys
import threading

import numpy as np
import pytest

import numr_web as nr

HERE = os.path.abspath(__file__)


def _gpu_params():
    out = []
    for d in ("webgpu", "cuda"):
        ok, why = nr.backends.probe(d)
        # cuda is the hardware this machine may lack; webgpu runs here (lavapipe) or fails
        marks = [pytest.mark.skip(reason=f"{d}: {why}")] if not ok and d == "cuda" else []
        out.append(pytest.param(d, marks=marks, id=d))
    return out


@pytest.fixture(params=_gpu_params())
def gpu(request):
    ok, why = nr.backends.probe(request.param)
    if not ok:
        pytest.fail(f"device {request.param} unavailable: {why}")
    return request.param


def T(v, d, dtype=None):
    return nr.tensor(v, device=d, dtype=dtype)


# one bad call per op, each on one line (its line is the call site the error must name):
# (op, error class, the call)
BAD = [
    ("cross_entropy", nr.ShapeError, lambda d: nr.cross_entropy(nr.zeros((2, 3), device=d), T([0, 3], d))),
    ("nll_loss", nr.ShapeError, lambda d: nr.nll_loss(nr.zeros((2, 3), device=d), T([-1, 2], d))),
    ("one_hot", nr.ShapeError, lambda d: nr.one_hot(T([0, 5], d), 3)),
    ("embedding", nr.IndexOutOfRangeError, lambda d: nr.embedding(T([1, 4], d), nr.ones((4, 2), device=d))),
    ("gather", nr.IndexOutOfRangeError, lambda d: nr.gather(nr.ones((2, 3), device=d), 1, T([[0, 3], [1, 2]], d))),
    ("index_select", nr.IndexOutOfRangeError, lambda d: nr.index_select(nr.ones((2, 3), device=d), 1, T([-1], d))),
    ("take_along_dim", nr.IndexOutOfRangeError, lambda d: nr.take_along_dim(nr.ones((2, 3), device=d), T([[0], [-4]], d), 1)),
    ("scatter_add", nr.IndexOutOfRangeError, lambda d: nr.scatter_add(nr.zeros((2, 3), device=d), 1, T([[0], [3]], d), nr.ones((2, 1), device=d))),
    ("index_add", nr.IndexOutOfRangeError, lambda d: nr.index_add(nr.zeros((2, 3), device=d), 0, T([2], d), nr.ones((1, 3), device=d))),
    ("x[index]", nr.IndexOutOfRangeError, lambda d: nr.ones((2, 3), device=d)[:, T([1, -4], d)]),
    ("binary_cross_entropy", nr.ShapeError, lambda d: nr.binary_cross_entropy(T([0.5, 1.5], d), T([0.0, 1.0], d))),
]
IDS = [b[0] for b in BAD]


def _line(fn):
    return fn.__code__.co_firstlineno


def _sync_unrelated(d):
    """A later op that has nothing to do with the bad call, read back: the sync."""
    a = nr.ones((2, 2), device=d)
    return (a @ a).tolist()


@pytest.mark.parametrize("case", BAD, ids=IDS)
def test_cpu_raises_at_the_call_naming_the_op(case):
    op, err, call = case
    with pytest.raises(err) as e:
        call("cpu")
    assert str(e.value).startswith(f"{op}: ")
    assert "next sync" not in str(e.value)
    assert e.value.op == op and e.value.call_site == (HERE, _line(call))


@pytest.mark.parametrize("case", BAD, ids=IDS)
def test_gpu_raises_at_the_next_sync_naming_the_op_and_the_call(gpu, case):
    op, err, call = case
    call(gpu)                                    # no readback here: nothing is raised yet
    with pytest.raises(err) as e:
        _sync_unrelated(gpu)
    msg = str(e.value)
    assert msg.startswith(f"{op} (") and msg.endswith("; found at the next sync"), msg
    assert f"{os.path.basename(HERE)}:{_line(call)}): " in msg, msg
    assert e.value.op == op and e.value.call_site == (HERE, _line(call))
    assert _sync_unrelated(gpu) == [[2.0, 2.0], [2.0, 2.0]]      # raised once


def test_the_error_text_says_what_was_wrong_and_what_is_right(gpu):
    nr.cross_entropy(nr.zeros((2, 3), device=gpu), T([0, 3], gpu))
    with pytest.raises(nr.ShapeError, match=r"targets must be in \[0, 3\) or equal "
                                            r"ignore_index=-100 for 3 classes"):
        nr.ones(1, device=gpu).item()
    nr.embedding(T([7], gpu), nr.ones((4, 2), device=gpu))
    with pytest.raises(nr.IndexOutOfRangeError, match=r"out of range for a dimension of size 4 "
                                                      r"\(valid: 0\.\.3\)"):
        nr.ones(1, device=gpu).numpy()


def test_every_readback_is_a_sync(gpu):
    reads = [lambda t: t.tolist(), lambda t: t.numpy(), lambda t: t.item(), lambda t: t.to("cpu")]
    for read in reads:
        nr.one_hot(T([3], gpu), 3)
        with pytest.raises(nr.ShapeError, match="one_hot"):
            read(nr.zeros((), device=gpu))

    async def task():                                    # the browser's readback
        nr.one_hot(T([3], gpu), 3)
        await nr.zeros((), device=gpu).read()

    with pytest.raises(nr.ShapeError, match="one_hot"):
        asyncio.run(task())


def test_good_values_raise_nothing_and_give_the_right_result(gpu):
    w = nr.tensor(np.arange(8.0).reshape(4, 2), device=gpu, dtype="float32")
    assert nr.embedding(T([3, 0], gpu), w).tolist() == [[6.0, 7.0], [0.0, 1.0]]
    loss = nr.cross_entropy(nr.zeros((2, 4), device=gpu), T([0, 3], gpu))
    assert abs(loss.item() - np.log(4.0)) < 1e-6


def test_the_device_is_intact_after_an_out_of_range_index(gpu):
    """The kernels keep an out-of-range index inside the tensor (no read or write beyond it):
    after the error, the weights and the next results are exact."""
    w0 = np.arange(12.0).reshape(6, 2)
    w = nr.tensor(w0, device=gpu, dtype="float32", requires_grad=True)
    big = nr.zeros((64, 64), device=gpu) + 1.0          # neighbours in the allocator
    out = nr.embedding(T([5, 1000, -9, 2], gpu), w)      # forward reads, backward scatters
    out.sum().backward()
    nr.scatter_add(nr.zeros(3, device=gpu), 0, T([2 ** 30, -2 ** 30], gpu), nr.ones(2, device=gpu))
    nr.scatter_add(T([0, 0, 0], gpu), 0, T([7, -1], gpu), T([1, 1], gpu))   # int32: another path
    with pytest.raises(nr.IndexOutOfRangeError, match="embedding"):
        w.grad.tolist()
    np.testing.assert_array_equal(w.detach().numpy(), w0)
    np.testing.assert_array_equal(big.numpy(), np.ones((64, 64)))
    w.grad = None
    nr.embedding(T([5, 5, 0], gpu), w).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [[1, 1], [0, 0], [0, 0], [0, 0], [0, 0], [2, 2]])


@pytest.mark.parametrize("op", ["gather", "scatter_add"])
def test_an_index_into_an_empty_dim(device, op):
    """Every index into a dim of size 0 is out of range; there is nothing to read or write."""
    x = nr.zeros((2, 0), device=device)
    call = {"gather": lambda: nr.gather(x, 1, T([[0], [1]], device)),
            "scatter_add": lambda: nr.scatter_add(x, 1, T([[0], [0]], device),
                                                  nr.ones((2, 1), device=device))}[op]
    with pytest.raises(nr.IndexOutOfRangeError, match=rf"{op}.*dimension of size 0"):
        call().tolist()
    assert _sync_unrelated(device) == [[2.0, 2.0], [2.0, 2.0]]


def test_several_failed_checks_are_raised_together_naming_each(gpu):
    nr.embedding(T([9], gpu), nr.ones((4, 2), device=gpu)); first = sys._getframe().f_lineno
    nr.cross_entropy(nr.zeros((1, 3), device=gpu), T([5], gpu)); second = sys._getframe().f_lineno
    nr.one_hot(T([1], gpu), 3)                           # a good one between them
    with pytest.raises(nr.IndexOutOfRangeError) as e:   # the first one's class
        _sync_unrelated(gpu)
    msg = str(e.value)
    name = os.path.basename(HERE)
    assert re.match(rf"embedding \(\S*{name}:{first}\): ", msg), msg
    assert re.search(rf"also failed since the last sync: cross_entropy \(\S*{name}:{second}\): "
                     "targets", msg), msg
    assert "one_hot" not in msg
    assert _sync_unrelated(gpu) == [[2.0, 2.0], [2.0, 2.0]]


def test_one_call_site_in_a_loop_is_one_error(gpu):
    x = nr.zeros((2, 3), device=gpu)
    for labels in ([0, 1], [0, 7], [2, 1], [9, 9]):
        nr.cross_entropy(x, T(labels, gpu)); line = sys._getframe().f_lineno
    with pytest.raises(nr.ShapeError) as e:
        _sync_unrelated(gpu)
    assert "also failed" not in str(e.value) and e.value.call_site == (HERE, line)
    for labels in ([0, 1], [2, 1]):                      # only good ones since: nothing to raise
        nr.cross_entropy(x, T(labels, gpu))
    assert _sync_unrelated(gpu) == [[2.0, 2.0], [2.0, 2.0]]


def test_the_call_site_is_the_users_line_through_modules(gpu):
    emb = nr.nn.Embedding(4, 2, device=gpu)
    loss_fn = nr.nn.CrossEntropyLoss()
    h = emb(T([[1, 8]], gpu)); line = sys._getframe().f_lineno
    with pytest.raises(nr.IndexOutOfRangeError) as e:
        loss_fn(h.sum(-1), T([0], gpu)).item()
    assert e.value.op == "embedding" and e.value.call_site == (HERE, line)
    loss_fn(nr.zeros((1, 2), device=gpu), T([2], gpu)); line = sys._getframe().f_lineno
    with pytest.raises(nr.ShapeError) as e:
        _sync_unrelated(gpu)
    assert e.value.op == "cross_entropy" and e.value.call_site == (HERE, line)


def _two_tasks(device):
    """Two coroutines of one event loop, each with one bad label (3 classes in one, 4 in the
    other); each reads back after both have queued their checks."""
    line = {}

    async def task(classes, labels):
        line[classes] = sys._getframe().f_lineno + 2
        try:
            loss = nr.cross_entropy(nr.zeros((2, classes), device=device), T(labels, device))
        except nr.ShapeError as e:                       # the cpu: at the call
            return e
        for _ in range(3):                               # let the other task queue its check
            await asyncio.sleep(0)
        try:
            await loss.read()
        except nr.ShapeError as e:
            return e
        return None

    async def good():
        await asyncio.sleep(0)
        return await nr.cross_entropy(nr.zeros((2, 3), device=device), T([2, 1], device)).read()

    async def main():
        return await asyncio.gather(task(3, [0, 3]), task(4, [-2, 1]), good())

    return asyncio.run(main()), line


def test_two_asyncio_tasks_each_get_their_own_bad_label(device):
    (e3, e4, ok), line = _two_tasks(device)
    assert abs(ok - np.log(3.0)) < 1e-6                  # a third task is not disturbed
    for e, mine, other in ((e3, "[0, 3)", "[0, 4)"), (e4, "[0, 4)", "[0, 3)")):
        assert isinstance(e, nr.ShapeError) and e.op == "cross_entropy"
        assert mine in str(e) and other not in str(e), str(e)
        assert str(e).count("cross_entropy") == 1        # its own check only
        assert e.call_site == (HERE, line[3])
    assert _sync_unrelated(device) == [[2.0, 2.0], [2.0, 2.0]]


def test_a_new_task_does_not_inherit_pending_checks(gpu):
    nr.one_hot(T([4], gpu), 3); line = sys._getframe().f_lineno

    async def child():                                   # created with a copy of this context
        return await nr.ones((2,), device=gpu).read()

    assert asyncio.run(child()) == [1.0, 1.0]
    with pytest.raises(nr.ShapeError) as e:              # still this thread's, raised here
        _sync_unrelated(gpu)
    assert e.value.call_site == (HERE, line)


def test_tasks_sharing_one_context_share_their_checks(gpu):
    """A notebook kernel runs each cell as a task in one shared context: a bad label in one cell
    is raised by the readback in the next."""
    ctx = contextvars.copy_context()
    lines = {}

    async def cell_1():
        nr.cross_entropy(nr.zeros((1, 3), device=gpu), T([3], gpu)); lines["bad"] = sys._getframe().f_lineno

    async def cell_2():
        return _sync_unrelated(gpu)

    async def kernel():
        loop = asyncio.get_running_loop()
        await loop.create_task(cell_1(), context=ctx)
        with pytest.raises(nr.ShapeError) as e:
            await loop.create_task(cell_2(), context=ctx)
        assert e.value.call_site == (HERE, lines["bad"])
        return await loop.create_task(cell_2(), context=ctx)        # raised once

    assert asyncio.run(kernel()) == [[2.0, 2.0], [2.0, 2.0]]


def test_a_thread_does_not_see_another_threads_checks(gpu):
    nr.one_hot(T([4], gpu), 3); line = sys._getframe().f_lineno
    seen = {}

    def other():
        try:
            seen["value"] = nr.ones((2,), device=gpu).tolist()
            nr.one_hot(T([-1], gpu), 3)                  # its own, never read in this thread
        except Exception as e:                           # noqa: BLE001 (reported below)
            seen["error"] = e

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == {"value": [1.0, 1.0]}
    with pytest.raises(nr.ShapeError) as e:
        _sync_unrelated(gpu)
    assert e.value.call_site == (HERE, line)
    assert _sync_unrelated(gpu) == [[2.0, 2.0], [2.0, 2.0]]


def test_a_captured_step_names_the_call_recorded_in_it(gpu):
    w = nr.tensor(np.eye(3), dtype="float32", device=gpu, requires_grad=True)

    def step(x, y):
        w.grad = None
        loss = nr.cross_entropy(x @ w, y); step.line = sys._getframe().f_lineno
        loss.backward()
        return loss

    run = nr.capture(step)
    x = nr.zeros((2, 3), device=gpu)
    for _ in range(3):                                   # warm-up, record, replay
        run(x, T([0, 2], gpu)).item()
    assert run.graphs, run.eager
    loss = run(x, T([0, 3], gpu))                       # a replay with a bad label
    with pytest.raises(nr.ShapeError) as e:
        loss.item()
    assert e.value.op == "cross_entropy" and e.value.call_site == (HERE, step.line)
    assert abs(run(x, T([1, 2], gpu)).item() - np.log(3.0)) < 1e-6
