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
