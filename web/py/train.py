# Training playground (web/index.html): the digits MLP of fused GEMM + bias + activation layers on
# WebGPU. The run itself is numr_web.apps.demo.prepare_digits + numr_web.apps.training.fit_async, the same loop
# `numr-web demo` uses (there with blocking readback); this file only adapts it to the page:
# settings from JS, progress events out through `emit`, Stop through `should_stop`.
# model "cnn": numr_web.models.cnn.DigitsCNN (two 3x3 convolutions with bias + ReLU fused into each,
# a max-pool, a fused Linear + ReLU) on the same data, batches and loop, in place of the MLP.
import numr_web as nr
from numr_web import nn
from numr_web.apps.demo import prepare_digits
from numr_web.models.cnn import DigitsCNN
from numr_web.apps.js_values import js_object, py_value, sender, whole_number
from numr_web.apps.training import fit_async

MODELS = ("mlp", "cnn")
CHANNELS = (1, 128)          # the CNN's first convolution's channels (the second has twice as many)

_state = {"model": None, "device": "webgpu", "trained": False}


async def train_run(cfg, emit=None, should_stop=None):
    """cfg: {model: mlp | cnn, hidden, layers, channels, epochs, batch, lr, activation, optimizer,
    device, seed}. emit(event) gets {kind: 'start' | 'step' | 'epoch', ...}; should_stop() is asked
    after every step. The CNN uses `hidden` for its fused Linear + ReLU layer and `channels` for its
    convolutions (channels, 2 x channels); `layers` and `activation` are the MLP's only."""
    cfg = dict(py_value(cfg))
    send = sender(emit)
    device = cfg.get("device", "webgpu")
    arch = cfg.get("model", "mlp")
    if arch not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}, got {arch!r}")
    channels = whole_number(cfg.get("channels", 16))
    if arch == "cnn" and (isinstance(channels, bool) or not isinstance(channels, int)
                          or not CHANNELS[0] <= channels <= CHANNELS[1]):
        raise ValueError(f"channels must be a whole number from {CHANNELS[0]} to {CHANNELS[1]}, "
                         f"got {channels!r}")
    seed = whole_number(cfg.get("seed", 0))
    kwargs, info = prepare_digits(
        device=device, hidden=whole_number(cfg.get("hidden", 64)),
        layers=whole_number(cfg.get("layers", 1)) if arch == "mlp" else 1,
        epochs=whole_number(cfg.get("epochs", 8)), batch_size=whole_number(cfg.get("batch", 64)),
        lr=cfg.get("lr", 0.01), activation=cfg.get("activation", "relu") if arch == "mlp" else "relu",
        optimizer=cfg.get("optimizer", "adam"), seed=seed)
    if arch == "cnn":        # same data, batches, loss and evaluation; the model and its optimizer swapped
        hidden, lr = info["sizes"][1], cfg.get("lr", 0.01)
        model = DigitsCNN(channels=(channels, 2 * channels), hidden=hidden, device=device, seed=seed)
        kwargs["model"] = model
        kwargs["optimizer"] = (nn.SGD(model.parameters(), lr=lr, momentum=0.9)
                               if cfg.get("optimizer", "adam") == "sgd"
                               else nn.Adam(model.parameters(), lr=lr))
        info["sizes"] = ["1×8×8", f"conv {channels}", f"conv {2 * channels}", "pool",
                         hidden, 10]
    info["model"] = arch
    # the pad classifies with the live model, once it has taken a step
    _state.update(model=kwargs["model"], device=device, trained=False)
    epochs, per_epoch = kwargs["epochs"], info["batches_per_epoch"]
    send({"kind": "start", **info, "epochs": epochs, "total_steps": epochs * per_epoch})

    def on_step(s):
        _state["trained"] = True
        send({"kind": "step", "step": s.step, "epoch": s.epoch + (s.batch + 1) / per_epoch,
              "loss": s.loss})

    def on_epoch(e):
        send({"kind": "epoch", "epoch": e.epoch + 1, "step": e.step, "loss": e.loss,
              "test_acc": e.metrics["accuracy"], "elapsed_s": e.seconds})

    res = await fit_async(**kwargs, on_step=on_step, on_epoch=on_epoch,
                          should_stop=should_stop or None, read_loss_every=1)
    return js_object({"test_acc": res.metrics.get("accuracy", 0.0), "steps": res.steps,
                      "epochs": res.epochs, "seconds": res.seconds, "stopped": res.stopped,
                      "history": res.history})


async def classify(pixels, emit=None, should_stop=None):
    """pixels: 64 values 0..16 (8x8, row-major, like the digits data) -> 10 probabilities.
    Uses the model as it is now (also while it trains)."""
    model = _state["model"]
    if model is None:
        raise ValueError("train the model first: there is nothing to classify with yet")
    if not _state["trained"]:
        raise ValueError("model not trained yet: its first training step is still being prepared")
    pixels = list(py_value(pixels))
    if len(pixels) != 64:
        raise ValueError(f"expected 64 pixel values, got {len(pixels)}")
    x = nr.tensor([[float(v) / 16.0 for v in pixels]], device=_state["device"])
    with nr.no_grad():                       # no await inside: another task may be training
        probs = nr.softmax(model(x), axis=-1)
    return js_object((await probs.read())[0])
