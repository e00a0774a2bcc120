# Training playground (web/index.html): the demo MLP on the shipped digits data, fused
# GEMM + bias + activation layers on WebGPU, driven from web/src/train.js.
import asyncio
import time

import numr_web as nr
from numr_web import nn
from numr_web.data import digits_split

_state = {"model": None}


def _js(d):
    try:
        import js
        from pyodide.ffi import to_js
        return to_js(d, dict_converter=js.Object.fromEntries)
    except ImportError:  # native Python (tests of this file)
        return d


async def _accuracy(model, x, labels):
    with nr.no_grad():
        pred = await model(x).argmax(axis=1).read()
    return sum(int(p) == int(t) for p, t in zip(pred, labels)) / len(labels)


async def train_run(cfg, on_progress, should_stop=None):
    """cfg: dict(hidden, epochs, batch, lr, activation, device, optimizer). on_progress(dict) is called
    after every step ({step, epoch, loss}) and every epoch ({epoch, test_acc, train_acc})."""
    cfg = cfg.to_py() if hasattr(cfg, "to_py") else dict(cfg)
    device = cfg.get("device", "webgpu")
    hidden = int(cfg.get("hidden", 64))
    epochs = int(cfg.get("epochs", 10))
    bs = int(cfg.get("batch", 64))
    lr = float(cfg.get("lr", 0.01))
    act = cfg.get("activation", "relu")
    t0 = time.perf_counter()
    x_train, y_train, x_test, y_test = digits_split(device=device)
    test_labels = await y_test.read()
    sizes = [64] + [hidden] * int(cfg.get("layers", 1)) + [10]
    model = nn.MLP(sizes, activation=act, device=device, seed=int(cfg.get("seed", 0)))
    opt = (nn.SGD(model.parameters(), lr=lr, momentum=0.9) if cfg.get("optimizer") == "sgd"
           else nn.Adam(model.parameters(), lr=lr))
    n = x_train.shape[0]
    step, acc = 0, 0.0
    on_progress(_js({"kind": "start", "n_train": n, "n_test": x_test.shape[0], "sizes": sizes,
                 "load_s": time.perf_counter() - t0}))
    for epoch in range(epochs):
        for i in range(0, n, bs):
            xb, yb = x_train[i:i + bs], y_train[i:i + bs]
            loss = nr.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            value = await loss.read()          # also paces the GPU queue, lets the page repaint
            on_progress(_js({"kind": "step", "step": step, "epoch": epoch + (i + bs) / n, "loss": float(value)}))
            if should_stop is not None and should_stop():
                break
        acc = await _accuracy(model, x_test, test_labels)
        on_progress(_js({"kind": "epoch", "epoch": epoch + 1, "step": step, "test_acc": acc,
                     "elapsed_s": time.perf_counter() - t0}))
        await asyncio.sleep(0)
        if should_stop is not None and should_stop():
            break
    _state["model"] = model
    _state["device"] = device
    return _js({"test_acc": acc, "steps": step, "seconds": time.perf_counter() - t0})


async def classify(pixels):
    """pixels: 64 values 0..16 (8x8, row-major, like the digits data) -> 10 probabilities."""
    model = _state["model"]
    if model is None:
        raise RuntimeError("train the model first")
    pixels = pixels.to_py() if hasattr(pixels, "to_py") else list(pixels)
    x = nr.tensor([[float(v) / 16.0 for v in pixels]], device=_state["device"])
    with nr.no_grad():
        probs = await nr.softmax(model(x), axis=-1).read()
    return _js(probs[0])
