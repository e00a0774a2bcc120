"""numr and torch training steps alternating in one process on the cpu, so both meet the same
load on a machine shared with other work. On one thread (the default) the figure is CPU time
(time.process_time) per step: the work each library does, which does not grow with other
processes' load (wall time does, and a multi-threaded torch step's more than numr's). numr runs
as NUMR_CPU_THREADS=1 (cpu_threads.configure(threads=1)) with BLAS held at one thread
(threadpoolctl), torch with torch.set_num_threads(1). --threads N > 1: wall time per step, both
libraries on N threads (numr's BLAS keeps its own threads outside its blocks, as in
bench/models.py). Models: bench/models.py's conv nets (the same shapes, initialisation and SGD
with momentum in both); each step ends by reading the loss.

    python bench/cpu_alternating.py --models cifar_cnn --steps 5
    python bench/cpu_alternating.py --models cifar_cnn --threads 2 --steps 8
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)   # numr_web from this checkout
sys.path.insert(1, str(Path(__file__).resolve().parent))    # bench/models.py


def steps(name):
    """(numr step, torch step) of model `name`, each ending by reading the loss."""
    import torch
    import torch.nn.functional as F
    import models as M
    import numr_web as nr
    from numr_web import nn
    model, batch, cfg = M.numr_model(name, "cpu")
    data = M.batch_data(name, batch, cfg)
    x = nr.tensor(data[0], dtype="float32").reshape(batch, *data[2])
    y = nr.tensor(data[1], dtype="int32")
    opt = nn.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def numr_step():
        loss = nr.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
    tm, _, _ = M.torch_model(name, "cpu")
    tx, ty = torch.tensor(data[0]).reshape(batch, *data[2]), torch.tensor(data[1])
    topt = torch.optim.SGD(tm.parameters(), lr=0.01, momentum=0.9)

    def torch_step():
        loss = F.cross_entropy(tm(tx), ty)
        topt.zero_grad(set_to_none=True)
        loss.backward()
        topt.step()
        loss.item()
    return numr_step, torch_step


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="cifar_cnn", help="comma-separated: cifar_cnn,digits_cnn")
    p.add_argument("--steps", type=int, default=5, help="timed steps of each (median, min)")
    p.add_argument("--threads", type=int, default=1, help="1: CPU time; more: wall time")
    a = p.parse_args(argv)
    import contextlib
    import torch
    from threadpoolctl import threadpool_limits
    from numr_web.backends import cpu_threads
    torch.set_num_threads(a.threads)
    cpu_threads.configure(threads=a.threads)
    clock = time.process_time if a.threads == 1 else time.perf_counter
    what = "CPU" if a.threads == 1 else "wall"
    print(f"{a.threads} thread(s); {what} ms per step, numr and torch alternating")
    print(f"| model | numr {what} ms (median / min) | torch {what} ms (median / min) | "
          f"numr / torch (medians / mins) |")
    print("|---|---:|---:|---:|")
    with threadpool_limits(1) if a.threads == 1 else contextlib.nullcontext():
        for name in a.models.split(","):
            fns = steps(name)
            for _ in range(2):                  # warm-up
                for fn in fns:
                    fn()
            ms = ([], [])
            for _ in range(a.steps):
                for fn, out in zip(fns, ms):
                    t0 = clock()
                    fn()
                    out.append((clock() - t0) * 1e3)
            n, t = (statistics.median(m) for m in ms)
            print(f"| {name} | {n:.1f} / {min(ms[0]):.1f} | {t:.1f} / {min(ms[1]):.1f} | "
                  f"{n / t:.2f}x / {min(ms[0]) / min(ms[1]):.2f}x |")


if __name__ == "__main__":
    main()
