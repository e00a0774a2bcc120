"""The main job: train an MLP of fused layers on the shipped digits data.

`prepare_digits(...)` builds everything a run needs (data, model, optimizer, batches, evaluation) and
both front ends hand it to the one training loop in `numr_web.training`: `numr-web demo` through
`train_digits` (blocking readback) and the browser's training page (web/py/train.py) through
`training.fit_async`. No numpy is used, so the same code runs in Pyodide.
"""
from __future__ import annotations

from . import nn, training
from .gradmode import no_grad
from .data import digits_split
from .ops.nn_functional import cross_entropy
from .training import fit, shuffled_batches

ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid")
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


# the demos `numr-web demo` can run: name -> preparer (the CNN and GPT demos register here)
DEMOS = {"mlp": prepare_digits}


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
