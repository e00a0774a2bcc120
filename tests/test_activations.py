"""The erf behind exact GELU on numpy: stated error bounds, checked."""
import math

import numpy as np

from numr_web.ops.activations import _erf_series, erf


def _ulps(got, want, dtype):
    want = want.astype(dtype)
    return np.abs(got.astype(np.float64) - want.astype(np.float64)) / np.spacing(
        np.maximum(np.abs(want), np.finfo(dtype).tiny)).astype(np.float64)


def test_erf_float64_within_1ulp():
    x = np.concatenate([np.linspace(-7, 7, 20001), [0.0, 1e-300, -1e-12, 3.0, 27.0, -30.0]])
    want = np.array([math.erf(v) for v in x])
    assert _ulps(erf(np, x), want, np.float64).max() <= 1


def test_erf_float32_series_within_1ulp():
    x = np.concatenate([np.linspace(-6, 6, 40001), [0.0, 1e-30, 0.5, 3.0, 3.0001, 10.0]]).astype(np.float32)
    want = np.array([math.erf(v) for v in x.astype(np.float64)])
    assert _ulps(_erf_series(np, x), want, np.float32).max() <= 1
    assert _erf_series(np, x).dtype == np.float32


def test_erf_float32_default_path_within_1ulp():
    x = np.linspace(-6, 6, 4001).astype(np.float32)
    want = np.array([math.erf(v) for v in x.astype(np.float64)])
    assert _ulps(erf(np, x), want, np.float32).max() <= 1
