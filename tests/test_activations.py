"""erf (nr.erf, behind exact GELU) within its stated error bounds, against math.erf."""
import math

import numpy as np
import pytest

import numr_web as nr


def _ulps(got, want, dtype):
    want = want.astype(dtype)
    return np.abs(got.astype(np.float64) - want.astype(np.float64)) / np.spacing(
        np.maximum(np.abs(want), np.finfo(dtype).tiny)).astype(np.float64)


def test_erf_float64_within_1ulp():
    x = np.concatenate([np.linspace(-7, 7, 20001), [0.0, 1e-300, -1e-12, 3.0, 27.0, -30.0]])
    want = np.array([math.erf(v) for v in x])
    assert _ulps(nr.erf(nr.tensor(x)).numpy(), want, np.float64).max() <= 1


@pytest.mark.parametrize("device,ulps", [("cpu", 1), ("webgpu", 2)])
def test_erf_float32_within_stated_ulps(device, ulps):
    """cpu: <= 1 ulp (numr_web/ops/_erf.py); webgpu: <= 2 ulp (shaders/act.wgsl, erf_s)."""
    x = np.concatenate([np.linspace(-6, 6, 40001), [0.0, 1e-30, 0.5, 3.0, 3.0001, 10.0]]).astype(np.float32)
    want = np.array([math.erf(v) for v in x.astype(np.float64)])
    got = nr.erf(nr.tensor(x, device=device))
    assert got.dtype == nr.float32
    assert _ulps(got.numpy(), want, np.float32).max() <= ulps
