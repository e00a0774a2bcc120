"""ns per value of the cpu's float32 erf (numr_web/vocab/_erf.py) against scipy.special.erf and
torch.erf on the same arrays, one thread each (the cpu backend spreads blocks over the cores
itself): 2^20 values uniform over [-6, 6], normal(0, 1) and normal(0, 30) (a GEMM's output over
unscaled random weights), the fastest of --reps runs.

    python bench/erf_cpu.py --reps 9
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)      # numr_web from this checkout


def best_ns(fn, x, reps):
    fn(x)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(x)
        best = min(best, time.perf_counter() - t0)
    return best / x.size * 1e9


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=9)
    args = p.parse_args(argv)
    import numpy as np

    from numr_web.vocab._erf import erf
    rng = np.random.default_rng(0)
    n = 1 << 20
    cases = {"uniform [-6, 6]": rng.uniform(-6, 6, n), "normal(0, 1)": rng.standard_normal(n),
             "normal(0, 30)": rng.standard_normal(n) * 30}
    libs = {"numr": lambda x: erf(np, x)}
    try:
        from scipy.special import erf as scipy_erf
        libs["scipy"] = scipy_erf
    except ImportError:
        pass
    try:
        import torch
        torch.set_num_threads(1)
        libs["torch"] = lambda x: torch.erf(torch.from_numpy(x))
    except ImportError:
        pass
    print("| float32 values | " + " | ".join(f"{k} ns/value" for k in libs) + " |")
    print("|---|" + "---:|" * len(libs))
    for name, x in cases.items():
        x = x.astype(np.float32)
        print(f"| {name} | " + " | ".join(f"{best_ns(f, x, args.reps):.2f}" for f in libs.values())
              + " |")


if __name__ == "__main__":
    main()
