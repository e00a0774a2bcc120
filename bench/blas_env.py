"""OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, set on some machines for old OpenBLAS builds, put a
current numpy's OpenBLAS on other kernels than it would pick (an AVX-512 Xeon on Haswell's:
docs/benchmarks.md has the figures). A benchmark that calls `unset()` before importing numpy
re-executes itself once without them, unless run with --keep-blas-env; `note()` says what was
unset, for the report's header. torch's GEMMs (MKL / oneDNN) read neither."""
from __future__ import annotations

import os
import sys

VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
MARK = "NUMR_BENCH_UNSET_OPENBLAS"        # what the re-executed process was started without
KEEP = "--keep-blas-env"


def unset():
    if KEEP in sys.argv or not any(os.environ.get(v) for v in VARS):
        return
    env = {k: v for k, v in os.environ.items() if k not in VARS}
    env[MARK] = " ".join(f"{v}={os.environ[v]}" for v in VARS if os.environ.get(v))
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def note():
    was = os.environ.get(MARK)
    if was:
        return f"{was} unset for this run (bench/blas_env.py)"
    kept = " ".join(f"{v}={os.environ[v]}" for v in VARS if os.environ.get(v))
    return f"{kept} kept ({KEEP})" if kept else "no OPENBLAS_CORETYPE set"
