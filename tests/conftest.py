import os

import numpy as np
import pytest

import numr_web as nr

from pathlib import Path

# a device whose backend is part of this checkout is tested for real (webgpu on lavapipe in CI)
ALL_DEVICES = tuple(d for d in ("cpu", "webgpu", "cuda")
                    if d != "webgpu" or (Path(nr.__file__).parent / "backends/webgpu/backend.py").exists())


def _device_params():
    out = []
    for d in ALL_DEVICES:
        ok, why = nr.backends.probe(d)
        # CUDA is the only hardware this CI machine lacks: skip it with the reason. webgpu runs for
        # real (lavapipe); if it cannot start here that is a failure, not a skip.
        marks = [pytest.mark.skip(reason=f"{d}: {why}")] if (not ok and d == "cuda") else []
        out.append(pytest.param(d, marks=marks, id=d))
    return out


@pytest.fixture(params=_device_params())
def device(request):
    ok, why = nr.backends.probe(request.param)
    if not ok:
        pytest.fail(f"device {request.param} unavailable: {why}")
    return request.param


def fdtype(device):
    """Highest float precision the device supports (float64 on cpu/cuda, float32 on webgpu)."""
    return nr.float64 if device in ("cpu", "cuda") else nr.float32


def tol(device):
    return dict(rtol=1e-9, atol=1e-10) if device in ("cpu", "cuda") else dict(rtol=2e-4, atol=2e-5)
