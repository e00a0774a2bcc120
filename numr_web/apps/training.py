"""One training loop for every demo: `numr-web demo` (blocking readback) and the browser pages
(`await t.read()`, so no JSPI is needed), for the MLP today and the CNN / GPT demos later.

    result = fit(model, optimizer, batches, loss_fn, epochs=10, evaluate=..., on_step=..., on_epoch=...)
    result = await fit_async(...)              # same arguments; the browser's variant

The loop itself is written once, as a generator that never reads a tensor: whenever it needs numbers
on the host it yields the tensors and gets their values back. `fit` reads them with `t.tolist()`,
`fit_async` with `await t.read()` (which also hands the event loop a turn, so a Stop button or a
message from the page gets through between steps). Nothing in here awaits inside `no_grad()`.

Arguments shared by both:
  model        callable x -> logits (a numr_web.nn module); `.train()` / `.eval()` are called around
               evaluation when the model has them
  optimizer    .zero_grad() and .step()
  batches      a callable epoch -> iterable of (x, y), or an iterable re-iterated every epoch
               (see `shuffled_batches`)
  loss_fn      (model output, y) -> scalar tensor, e.g. numr_web.cross_entropy
  epochs       number of passes over `batches`
  evaluate     optional model -> {name: scalar tensor}, run under no_grad after every epoch
               (see `accuracy`); the values arrive in EpochInfo.metrics
  on_step      optional callback(StepInfo) after every step
  on_epoch     optional callback(EpochInfo) after every epoch
  should_stop  optional callable -> bool, asked after every step: a stop request ends the run within
               one step (FitResult.stopped is then True; the interrupted epoch is still evaluated)
  read_loss_every  read the step's loss back every N steps (0: never; StepInfo.loss is None then).
               The epoch's mean loss is summed on the device and read once per epoch either way.
  scheduler    optional object with .step(), called after every optimizer step
"""
from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field

from ..gradmode import no_grad


@dataclass
class StepInfo:
    step: int            # 1-based count over the whole run
    epoch: int           # 0-based
    batch: int           # 0-based index within the epoch
    batches: int | None  # batches per epoch when known (len(batches)), else None
    loss: float | None   # this step's loss when it was read back (read_loss_every), else None


@dataclass
class EpochInfo:
    epoch: int           # 0-based
    step: int            # steps done so far
    loss: float          # mean training loss over the epoch's steps
    metrics: dict = field(default_factory=dict)
    seconds: float = 0.0  # since the run started
    stopped: bool = False


@dataclass
class FitResult:
    history: list = field(default_factory=list)   # mean training loss per epoch
    metrics: dict = field(default_factory=dict)   # the last evaluation's values
    steps: int = 0
    epochs: int = 0                               # epochs started (the last one may be partial)
    stopped: bool = False
    seconds: float = 0.0


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    return value


def shuffled_batches(x, y, batch_size, seed=0, shuffle=True):
    """A `batches` callable: epoch -> (x[s:s+batch_size], y[s:s+batch_size]) over contiguous slices,
    visited in an order reshuffled every epoch (a seeded permutation of the slice starts)."""
    _positive_int("batch_size", batch_size)
    n = x.shape[0]
    if n < 1:
        raise ValueError("no training examples")
    starts = list(range(0, n, batch_size))
    rng = random.Random(seed)

    class _Batches:
        def __len__(self):
            return len(starts)

        def __call__(self, epoch):
            order = list(starts)
            if shuffle:
                rng.shuffle(order)
            for s in order:
                yield x[s:s + batch_size], y[s:s + batch_size]
    return _Batches()


def accuracy(x, y):
    """An `evaluate` callable: {'accuracy': fraction of argmax(model(x)) == y} as a device scalar."""
    def evaluate(model):
        pred = model(x).argmax(axis=1)
        return {"accuracy": (pred == y).astype("float32").mean()}
    return evaluate


def _set_training(model, training):
    fn = getattr(model, "train" if training else "eval", None)
    if callable(fn):
        fn()


def _loop(model, optimizer, batches, loss_fn, epochs, evaluate=None, on_step=None, on_epoch=None,
          should_stop=None, read_loss_every=0, scheduler=None):
    """The loop, as a generator: yields a tuple of tensors whenever it needs their values (an empty
    tuple is a point where an async driver may hand the event loop a turn) and is sent back a list of
    their values. Returns the FitResult."""
    _positive_int("epochs", epochs)
    if isinstance(read_loss_every, bool) or not isinstance(read_loss_every, int) or read_loss_every < 0:
        raise ValueError(f"read_loss_every must be a whole number >= 0, got {read_loss_every!r}")
    per_epoch = batches if callable(batches) else (lambda epoch: batches)
    try:
        n_batches = len(batches)
    except TypeError:
        n_batches = None
    res = FitResult()
    t0 = time.perf_counter()
    stop = should_stop or (lambda: False)
    for epoch in range(epochs):
        if stop():
            res.stopped = True
            break
        res.epochs = epoch + 1
        _set_training(model, True)
        total, count = None, 0
        for b, (xb, yb) in enumerate(per_epoch(epoch)):
            loss = loss_fn(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            res.steps += 1
            count += 1
            with no_grad():
                d = loss.detach()
                total = d if total is None else total + d
            value = None
            if read_loss_every and res.steps % read_loss_every == 0:
                (value,) = yield (loss,)
                value = float(value)
            else:
                yield ()
            if on_step is not None:
                on_step(StepInfo(res.steps, epoch, b, n_batches, value))
            if stop():
                res.stopped = True
                break
        if count == 0:
            raise ValueError("`batches` produced no batch in epoch "
                             f"{epoch}: nothing to train on")
        with no_grad():
            mean = total / count
            metrics = {}
            if evaluate is not None:
                _set_training(model, False)
                metrics = dict(evaluate(model))
                _set_training(model, True)
        names = list(metrics)
        values = yield (mean, *[metrics[k] for k in names])
        res.history.append(float(values[0]))
        res.metrics = {k: float(v) for k, v in zip(names, values[1:])}
        res.seconds = time.perf_counter() - t0
        if on_epoch is not None:
            on_epoch(EpochInfo(epoch, res.steps, res.history[-1], dict(res.metrics), res.seconds,
                               res.stopped))
        if res.stopped:
            break
    res.seconds = time.perf_counter() - t0
    return res


def _scalar(v):
    while isinstance(v, list):
        v = v[0]
    return v


def fit(model, optimizer, batches, loss_fn, epochs=1, **kw):
    """Train with blocking readbacks (native Python, or a browser with JSPI). -> FitResult"""
    gen = _loop(model, optimizer, batches, loss_fn, epochs, **kw)
    try:
        req = next(gen)
        while True:
            req = gen.send([_scalar(t.tolist()) for t in req])
    except StopIteration as e:
        return e.value


async def fit_async(model, optimizer, batches, loss_fn, epochs=1, **kw):
    """Train with `await t.read()` readbacks: the browser's variant (no JSPI needed), also usable
    natively under asyncio. Hands the event loop a turn after every step. -> FitResult"""
    gen = _loop(model, optimizer, batches, loss_fn, epochs, **kw)
    try:
        req = next(gen)
        while True:
            if req:
                values = [_scalar(await t.read()) for t in req]
            else:
                await asyncio.sleep(0)
                values = []
            req = gen.send(values)
    except StopIteration as e:
        return e.value
