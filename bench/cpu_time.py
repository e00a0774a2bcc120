"""numr and torch on one cpu thread each, measured in CPU time (time.process_time) per training
step, their steps alternating: the work each library does for a step, a figure that stays put
on a machine shared with other work (wall time there grows with everyone's load, and a
multi-threaded torch step's more than numr's). numr runs with NUMR_CPU_THREADS=1 semantics
(cpu_threads.configure(threads=1)), BLAS held at one thread (threadpoolctl), torch with
torch.set_num_threads(1). Models: bench/models.py's conv nets (the same shapes, initialisation
and SGD with momentum in both).

    python bench/cpu_time.py --models cifar_cnn --steps 5
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
    a = p.parse_args(argv)
    import torch
    from threadpoolctl import threadpool_limits
    from numr_web.backends import cpu_threads
    torch.set_num_threads(1)
    cpu_threads.configure(threads=1)
    print("| model | numr CPU ms (median / min) | torch CPU ms (median / min) | numr / torch |")
    print("|---|---:|---:|---:|")
    with threadpool_limits(1):
        for name in a.models.split(","):
            fns = steps(name)
            for _ in range(2):                  # warm-up
                for fn in fns:
                    fn()
            ms = ([], [])
            for _ in range(a.steps):
                for fn, out in zip(fns, ms):
                    t0 = time.process_time()
                    fn()
                    out.append((time.process_time() - t0) * 1e3)
            n, t = (statistics.median(m) for m in ms)
            print(f"| {name} | {n:.1f} / {min(ms[0]):.1f} | {t:.1f} / {min(ms[1]):.1f} | "
                  f"{n / t:.2f}x |")


if __name__ == "__main__":
    main()
