"""The demos: an MLP of fused layers and a small CNN on the shipped digits data, and a
character-level GPT on CPython's standard-library sources (numr_web.apps.demo_gpt).

Each `prepare_*` function builds everything a run needs and returns `(kwargs, info)`: `kwargs` are
the keyword arguments of the one training loop in `numr_web.apps.training` (model, optimizer, batches,
loss_fn, epochs, evaluate, and scheduler where there is one), `info` a dict describing the run.
Both front ends hand `kwargs` to that loop: `numr-web demo` through `training.fit` (blocking
readback) and the browser pages through `training.fit_async`:

    kwargs, info = prepare_cnn(device="webgpu")
    result = await training.fit_async(**kwargs, on_epoch=...)

    prepare_digits(...)  the MLP (info: sizes, n_train, n_test, device, batches_per_epoch)
    prepare_cnn(...)     DigitsCNN, AdamW + cosine schedule, label smoothing, shifted images
    prepare_gpt(...)     the GPT (see numr_web.apps.demo_gpt; info also holds the model, corpus, config)

No numpy is used, so the same code runs in Pyodide.
"""
from __future__ import annotations

import random

from .. import nn
from . import training
from ..creation import tensor, zeros
from ..ops.shape_ops import concat
from ..gradmode import no_grad
from ..data import digits_split
from .demo_gpt import prepare_gpt
from ..models import DigitsCNN
from ..nn.optim.lr_scheduler import CosineWithWarmup
from ..ops.activations import ACT
from ..ops.nn_functional import cross_entropy
from .training import fit, shuffled_batches

ACTIVATIONS = tuple(n for n in ACT if n != "none")     # every row of the activation table
OPTIMIZERS = ("adam", "sgd")
# name -> (lowest, highest) allowed; shared by the CLI and the browser page's checks
LIMITS = {"hidden": (1, 4096), "layers": (1, 8), "epochs": (1, 1000), "batch_size": (1, 100_000)}


def check_config(hidden, layers, epochs, batch_size, lr, activation, optimizer):
    """Raise ValueError naming the first bad setting (before any device work)."""
    for name, v in (("hidden", hidden), ("layers", layers), ("epochs", epochs),
                    ("batch_size", batch_size)):
        lo, hi = LIMITS[name]
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise ValueError(f"{name} must be a whole number from {lo} to {hi}, got {v!r}")
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr <= 10:
        raise ValueError(f"lr (learning rate) must be a number in (0, 10], got {lr!r}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")


def prepare_digits(device=None, hidden=128, layers=2, epochs=20, batch_size=64, lr=3e-3,
                   activation="gelu", optimizer="adam", seed=0):
    """-> (fit keyword arguments, info dict) for training 64 -> hidden x layers -> 10 on the digits."""
    check_config(hidden, layers, epochs, batch_size, lr, activation, optimizer)
    x_train, y_train, x_test, y_test = digits_split(device=device, seed=seed)
    sizes = [64] + [hidden] * layers + [10]
    model = nn.MLP(sizes, activation=activation, device=device, seed=seed)
    if optimizer == "sgd":
        opt = nn.SGD(model.parameters(), lr=lr, momentum=0.9)
    else:
        opt = nn.Adam(model.parameters(), lr=lr)
    kwargs = dict(model=model, optimizer=opt,
                  batches=shuffled_batches(x_train, y_train, batch_size, seed=seed),
                  loss_fn=cross_entropy, epochs=epochs, evaluate=training.accuracy(x_test, y_test))
    info = {"sizes": sizes, "n_train": x_train.shape[0], "n_test": x_test.shape[0],
            "device": device or "cpu", "batches_per_epoch": len(kwargs["batches"])}
    return kwargs, info


def accuracy(model, x, y):
    """Fraction of argmax(model(x)) == y, read back at once (blocking; native Python or JSPI)."""
    with no_grad():
        acc = training.accuracy(x, y)(model)["accuracy"]
    return acc.item()


def shifted_digits(x):
    """(5n, 64): the images x (n, 64), then the same images moved by one pixel right, left, down
    and up (the row or column moved in is 0). Built with tensor ops on x's device."""
    n = x.shape[0]
    img = x.reshape(n, 8, 8)
    col = zeros((n, 8, 1), dtype=x.dtype, device=x.device)
    row = zeros((n, 1, 8), dtype=x.dtype, device=x.device)
    views = [img,
             concat([col, img[:, :, :7]], 2), concat([img[:, :, 1:], col], 2),
             concat([row, img[:, :7, :]], 1), concat([img[:, 1:, :], row], 1)]
    return concat([v.reshape(n, 64) for v in views], 0)


def shifted_batches(x_all, y_all, n, batch_size, seed=0):
    """A `batches` callable for `training.fit` over augmented data: x_all/y_all hold k versions
    of n examples, version j of example i at row j*n + i (as shifted_digits makes them). Every
    epoch visits each example once, in a fresh random order and in a randomly chosen version;
    the rows of a batch are gathered by an int32 index tensor."""
    k = x_all.shape[0] // n
    rng = random.Random(seed)

    class _Batches:
        def __len__(self):
            return (n + batch_size - 1) // batch_size

        def __call__(self, epoch):
            order = list(range(n))
            rng.shuffle(order)
            rows = [rng.randrange(k) * n + i for i in order]
            for s in range(0, n, batch_size):
                idx = tensor(rows[s:s + batch_size], dtype="int32", device=x_all.device)
                yield x_all[idx], y_all[idx]
    return _Batches()


CNN_LIMITS = {"epochs": (1, 1000), "batch_size": (1, 100_000)}


def prepare_cnn(device=None, epochs=15, batch_size=32, lr=2e-3, weight_decay=0.01,
                label_smoothing=0.1, warmup_fraction=0.05, channels=(32, 64), hidden=128,
                augment=True, seed=0):
    """-> (fit keyword arguments, info) for training numr_web.models.DigitsCNN on the digits:
    AdamW with a cosine schedule after a linear warm-up (warmup_fraction of the steps; pass
    kwargs["scheduler"] to fit), cross-entropy with label smoothing, and (augment=True) each
    training image shown, per epoch, as itself or moved by one pixel in one of 4 directions.
    info: n_train, n_test, device, batches_per_epoch, steps, channels, hidden, parameters."""
    for name, v in (("epochs", epochs), ("batch_size", batch_size)):
        lo, hi = CNN_LIMITS[name]
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise ValueError(f"{name} must be a whole number from {lo} to {hi}, got {v!r}")
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr <= 10:
        raise ValueError(f"lr (learning rate) must be a number in (0, 10], got {lr!r}")
    if not 0 <= label_smoothing < 1:
        raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing!r}")
    x_train, y_train, x_test, y_test = digits_split(device=device, seed=seed)
    n = x_train.shape[0]
    if augment:
        batches = shifted_batches(shifted_digits(x_train), concat([y_train] * 5, 0), n,
                                  batch_size, seed=seed)
    else:
        batches = shuffled_batches(x_train, y_train, batch_size, seed=seed)
    model = DigitsCNN(channels=channels, hidden=hidden, device=device, seed=seed)
    opt = nn.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    steps = epochs * len(batches)
    sched = CosineWithWarmup(opt, warmup_steps=max(1, int(steps * warmup_fraction)),
                             total_steps=steps)

    def loss_fn(logits, y):
        return cross_entropy(logits, y, label_smoothing=label_smoothing)
    kwargs = dict(model=model, optimizer=opt, batches=batches, loss_fn=loss_fn, epochs=epochs,
                  evaluate=training.accuracy(x_test, y_test), scheduler=sched)
    info = {"n_train": n, "n_test": x_test.shape[0], "device": device or "cpu",
            "batches_per_epoch": len(batches), "steps": steps, "channels": tuple(channels),
            "hidden": hidden, "parameters": sum(p.numel() for p in model.parameters())}
    return kwargs, info


# the demos `numr-web demo --model NAME` runs: name -> preparer
DEMOS = {"mlp": prepare_digits, "cnn": prepare_cnn, "gpt": prepare_gpt}


def train_digits(device=None, epochs=20, hidden=128, batch_size=64, lr=3e-3, activation="gelu",
                 seed=0, on_epoch=None, on_step=None, layers=2, optimizer="adam", should_stop=None):
    """Train 64 -> hidden -> hidden -> 10 with Adam (blocking readback). Calls on_step(StepInfo)
    after each step and on_epoch(epoch, mean_loss, test_acc) after each epoch.
    Returns (model, history, test accuracy)."""
    kwargs, _ = prepare_digits(device, hidden, layers, epochs, batch_size, lr, activation,
                               optimizer, seed)
    def epoch_cb(e):
        on_epoch(e.epoch, e.loss, e.metrics["accuracy"])
    res = fit(**kwargs, on_epoch=epoch_cb if on_epoch else None, on_step=on_step,
              should_stop=should_stop)
    return kwargs["model"], res.history, res.metrics["accuracy"]
