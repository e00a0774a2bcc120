"""The webgpu device's configuration: its knobs (constructor argument, else environment variable;
backend.py documents them) and the process's one GPU adapter."""
from __future__ import annotations

import os
import sys

from ...errors import BackendUnavailableError

_KNOB_ENV = {"max_binding_size": "NUMR_WEBGPU_MAX_BINDING", "loop_budget": "NUMR_WEBGPU_LOOP_BUDGET",
             "gemm_tile": "NUMR_WEBGPU_GEMM_TILE", "max_workgroups": "NUMR_WEBGPU_MAX_WORKGROUPS",
             "fuse": "NUMR_WEBGPU_FUSE", "submit_bytes": "NUMR_WEBGPU_SUBMIT_BYTES",
             "attn_tile": "NUMR_WEBGPU_ATTN_TILE"}
LLVMPIPE_LOOP_BUDGET = 60000


def knob(name, value, parse=int):
    """A knob's value: the argument, else its environment variable, else None."""
    source = name
    if value is None:
        value, source = os.environ.get(_KNOB_ENV[name]) or None, _KNOB_ENV[name]
        if value is None:
            return None
    try:
        return parse(value)
    except (TypeError, ValueError):
        raise BackendUnavailableError(f"webgpu knob {source}={value!r}: expected an integer") from None


def _default_adapter():
    if sys.platform == "emscripten":
        from .adapter_browser import BrowserAdapter
        return BrowserAdapter.get()
    from .adapter_native import NativeAdapter
    return NativeAdapter()


_shared = []


def shared_adapter():
    """The process's one GPU adapter (created on first use)."""
    if not _shared:
        _shared.append(_default_adapter())
    return _shared[0]
