"""Shared helpers of the differential suite."""
import os

import numpy as np
import torch
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=12, derandomize=True, deadline=None,
                          suppress_health_check=list(HealthCheck), print_blob=True)
settings.register_profile("full", max_examples=400, derandomize=True, deadline=None,
                          suppress_health_check=list(HealthCheck), print_blob=True)

# the hypothesis settings of this suite's @given tests: NUMR_HYPOTHESIS_PROFILE=ci (default) | full
HYPOTHESIS = settings.get_profile(os.environ.get("NUMR_HYPOTHESIS_PROFILE", "ci"))

# numr dtype name -> torch dtype (int32 is numr's widest integer; torch's reference uses int32 too)
TORCH_DTYPE = {"bool": torch.bool, "int32": torch.int32, "float16": torch.float16,
               "float32": torch.float32, "float64": torch.float64}


def dtypes_on(device):
    """The dtypes a device stores (webgpu has no float64: a deliberate difference, README)."""
    return [d for d in TORCH_DTYPE if not (device == "webgpu" and d == "float64")]


def ulps(got, want, dtype):
    """|got - want| in units of the spacing of `dtype` at want (NaN matching NaN and equal infs
    count 0; subnormal spacing is the dtype's smallest subnormal)."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    np_dt = np.dtype(dtype)
    with np.errstate(all="ignore"):
        sp = np.spacing(np.minimum(np.abs(want), np.finfo(np_dt).max).astype(np_dt))
        sp = np.maximum(sp.astype(np.float64), float(np.finfo(np_dt).smallest_subnormal))
        same = (np.isnan(got) & np.isnan(want)) | (got == want)
        err = np.where(same, 0.0, np.abs(got - want) / sp)
    return np.where(np.isnan(err), np.inf, err)


def flushes_subnormals(device):
    """WGSL lets implementations flush subnormal float32 values to zero (lavapipe does); CuPy
    compiles every kernel with -ftz=true and offers no switch to turn that off."""
    return device in ("webgpu", "cuda")


def flushed(z):
    """z with subnormals replaced by zeros of the same sign (what a flushing device computes on)."""
    z = np.asarray(z)
    tiny = np.finfo(z.dtype).tiny
    return np.where(np.abs(z) < tiny, np.copysign(0, z), z).astype(z.dtype)


def assert_close_ulps(got, want, dtype, max_ulps, device, torch_err=None, what="", want_ftz=None):
    """got within max(max_ulps, torch's own error on the same input) ulps of the truth `want`.
    On a device that flushes subnormals, a subnormal truth may come back as 0 (or any value
    between 0 and the smallest normal of the same sign)."""
    got = np.asarray(got, np.float64).reshape(-1)
    want = np.asarray(want, np.float64).reshape(-1)
    err = ulps(got, want, dtype)
    if want_ftz is not None and flushes_subnormals(device):   # subnormal inputs read as zeros
        err = np.minimum(err, ulps(got, np.asarray(want_ftz, np.float64).reshape(-1), dtype))
    bound = np.full(err.shape, float(max_ulps))
    if torch_err is not None:
        bound = np.maximum(bound, np.asarray(torch_err).reshape(-1))
    if flushes_subnormals(device):
        tiny = float(np.finfo(np.dtype(dtype)).tiny)
        ftz = (np.abs(want) < tiny) & (np.abs(got) <= tiny) & ~(np.sign(got) * np.sign(want) < 0)
        err = np.where(ftz, 0.0, err)
    bad = err > bound
    if bad.any():
        i = np.flatnonzero(bad)[:8]
        raise AssertionError(f"{what}: {bad.sum()} of {bad.size} values beyond the ulp bound; "
                             f"got {got[i]}, want {want[i]}, err {err[i]} ulp, bound {bound[i]}")
