"""nr.capture against the eager step, on one device, in one run:

    python bench/capture.py [--device webgpu] [--steps 50] [--reps 5] [--hidden 128] [--batch 64]

The digits MLP's training step (64-H-H-10, GELU, cross-entropy, SGD with momentum 0.9): numr eager
and numr captured (`nr.capture`: one CUDA graph launch on cuda, the recorded dispatch list
submitted as one command buffer on webgpu), same model, same batches. Prints the time per step
(median of --reps rounds of --steps steps, each round closed by one synchronising readback) and
the part of it spent issuing the steps before that readback (the host's work: what a replay saves;
where the device is slow, as a software rasteriser is, the device time hides it), the ratios, the dispatches and queue submits per step (webgpu), and the largest difference of the
losses of the two runs over the first 10 steps (0: a replay runs the same kernels in the same
order).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path[0] = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

import numr_web as nr  # noqa: E402
from numr_web import nn  # noqa: E402
from numr_web.data import digits_split  # noqa: E402


def make_step(device, hidden):
    model = nn.MLP([64, hidden, hidden, 10], activation="gelu", device=device, seed=0)
    opt = nn.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = nr.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def per_step(step, xs, ys, steps, reps):
    nb = len(xs)
    for i in range(5):
        step(xs[i % nb], ys[i % nb])
    step(xs[0], ys[0]).numpy()
    ts, hs = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        for i in range(steps):
            loss = step(xs[i % nb], ys[i % nb])
        h = time.perf_counter() - t0
        loss.numpy()
        ts.append((time.perf_counter() - t0) / steps * 1e6)
        hs.append(h / steps * 1e6)
    return statistics.median(ts), statistics.median(hs)


def counters(device):
    info = nr.backends.get_backend(device).info()
    return info.get("submits"), sum((info.get("dispatches") or {}).values()) or None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="webgpu")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--batch", type=int, default=64)
    a = p.parse_args()
    dev, B = a.device, a.batch
    x_train, y_train, _, _ = digits_split(device=dev)
    nb = x_train.shape[0] // B
    xs = [x_train[i * B:(i + 1) * B].contiguous() for i in range(nb)]
    ys = [y_train[i * B:(i + 1) * B].contiguous() for i in range(nb)]

    ref_e, ref_c = make_step(dev, a.hidden), nr.capture(make_step(dev, a.hidden))
    le = [float(ref_e(xs[i], ys[i]).numpy()) for i in range(10)]
    lc = [float(ref_c(xs[i], ys[i]).numpy()) for i in range(10)]
    diff = max(abs(u - v) for u, v in zip(le, lc))

    rows = {}
    for name, step in (("eager", make_step(dev, a.hidden)),
                       ("captured", nr.capture(make_step(dev, a.hidden)))):
        s0, d0 = counters(dev)
        us, host = per_step(step, xs, ys, a.steps, a.reps)
        s1, d1 = counters(dev)
        calls = 6 + a.steps * a.reps
        per = (f"{(s1 - s0) / calls:.2f} submits, {(d1 - d0) / calls:.0f} dispatches per step"
               if s0 is not None else "")
        rows[name] = (us, host)
        print(f"{dev} digits MLP 64-{a.hidden}-{a.hidden}-10, batch {B}, {name:8s}: "
              f"{us:9.1f} us/step, of which {host:9.1f} us issuing it  {per}", flush=True)
    (ue, he), (uc, hc) = rows["eager"], rows["captured"]
    print(f"eager / captured: {ue / uc:.2f}x per step, {he / hc:.2f}x issuing; "
          f"largest loss difference eager vs captured over 10 steps: {diff:.1e}; "
          f"graphs: {len(ref_c.graphs)}, eager fallbacks: {dict(ref_c.eager) or 'none'}")


if __name__ == "__main__":
    main()
