"""Whether the cpu backend runs its compiled loops (cpu_jit_kernels.py, numba; its ACT_ROWS
names the activation rows that have them).

A multi-pass numpy formula on many threads is bound by the GIL: each of its numpy calls hands
the GIL to another thread (docs/benchmarks.md). Where numba is installed (`pip install
"numr-web[jit]"`), the cpu backend runs those formulas (the compiled activations' forward and
fused backward, the fused layer's bias + activation, layer / RMS norm forward and backward,
Adam's update, a convolution block's passes around its GEMMs, batch norm's and max pooling's
passes) as one compiled loop per block, which holds no GIL: the blocks, planned as before, then
run on all cores.

Knob: NUMR_CPU_JIT=0 turns the compiled loops off (numpy's formulas everywhere, as without
numba); `configure(enabled)` sets it in a running process. Results with and without: the same
bits for the bias add, Adam and the conv net's loops but batch norm's sums (float64, in
another order), within an ulp or two elsewhere (tests/test_cpu_jit.py).
"""
from __future__ import annotations

import os
import sys

from ..errors import BackendUnavailableError

ENV = "NUMR_CPU_JIT"
_STATE = [None]          # the kernels module when enabled and importable, else False; None: unread


def _load():
    flag = os.environ.get(ENV, "1")
    if flag not in ("0", "1"):
        raise BackendUnavailableError(f"cpu knob {ENV}={flag!r}: expected 1 (compiled loops where "
                                      "numba is installed) or 0 (numpy's formulas only)")
    if flag == "0" or sys.platform == "emscripten":
        return False
    # numba colours its messages through colorama, whose exit hook then writes terminal codes
    # into the program's output (a pipe too): plain messages
    os.environ.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")
    try:
        from . import cpu_jit_kernels
    except ImportError:              # no numba (or one that cannot load this numpy)
        return False
    return cpu_jit_kernels


def configure(enabled=None):
    """Turn the compiled loops on (where numba is installed) or off for the whole process;
    None: from NUMR_CPU_JIT again. Returns whether they were on before."""
    before = bool(kernels())
    if enabled is not None and not isinstance(enabled, bool):
        raise BackendUnavailableError(f"cpu_jit.configure: enabled must be True, False or None, "
                                      f"got {enabled!r}")
    _STATE[0] = None if enabled is None else (enabled and _load())
    if enabled is None:
        kernels()
    return before


def kernels():
    """The compiled loops' module, or None (off, or numba not installed)."""
    k = _STATE[0]
    if k is None:
        k = _STATE[0] = _load()
    return k or None


def status():
    """A line for `numr-web info`."""
    k = kernels()
    if k:
        return f"on (numba {k.numba.__version__}; {ENV}=0 turns them off)"
    if os.environ.get(ENV) == "0":
        return f"off ({ENV}=0)"
    return 'off (numba is not installed: pip install "numr-web[jit]")'

