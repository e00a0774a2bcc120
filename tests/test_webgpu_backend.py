"""What is specific to the webgpu device: WGSL kernels on strided / broadcast views, the vec4 and
chunked paths, the reduction schedules and GEMM kernels, batching, the buffer pool, typed errors.

Tests go through the public API (`nr.tensor(..., device="webgpu")` and its ops) or through declared
knobs: a `WebGPUBackend(max_binding_size=, loop_budget=, gemm_tile=, max_workgroups=)` (documented
in numr_web/backends/webgpu/backend.py) driven through the Backend interface of
numr_web/backends/base.py, and `info()`'s counters. References are float64 and independent of the
engine: numpy closed forms, mpmath (30 digits) for the activations. Tolerances are a few float32 ulp
(`close`) of the result and of the magnitude of the terms it is computed from. Runs on lavapipe in
CI: sizes are small.
"""
import array
import asyncio
import math
import subprocess
import sys

import mpmath as mp
import numpy as np
import pytest

import numr_web as nr
from numr_web import dtypes
from numr_web.errors import BackendLimitError, BackendUnavailableError, DTypeError, KernelError

from helpers import KINKS, MP_ACT, kernels_run

import numr_web.backends.webgpu.backend as wb
from numr_web.backends.webgpu import launch_gemm
ok, why = wb.WebGPUBackend.probe()
if not ok:
    pytest.fail(f"webgpu unavailable here: {why}", pytrace=False)

F32, I32, B, F16 = dtypes.float32, dtypes.int32, dtypes.bool_, dtypes.float16
EPS = float(np.finfo(np.float32).eps)
NP_DTYPE = {np.float32: F32, np.int32: I32, np.bool_: B, np.float16: F16}


def close(got, want, ulps=4, scale=None, eps=EPS, floor=0.0):
    """|got - want| <= ulps float32 ulp (eps) of |want| + ulps ulp of `scale` (default max |want|:
    the absolute error of functions that cross zero; else the magnitude of the terms the result
    is computed from) + floor. NaN and infinities must match exactly."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    if scale is None:
        finite = np.abs(want[np.isfinite(want)])
        scale = finite.max() if finite.size else 0.0
    bound = ulps * eps * (np.abs(want) + scale) + floor
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(invalid="ignore"):
        err = np.where(same, 0.0, np.abs(got - want))
    bad = ~same & ~(err <= bound)
    if bad.any():
        k = np.flatnonzero(bad)[:4]
        ratio = np.where(bad, err / np.where(bound > 0, bound, np.inf), 0).max()
        raise AssertionError(f"{bad.sum()} of {bad.size} values beyond {ulps} ulp (worst "
                             f"{ratio * ulps:.1f} ulp): got {got.flat[k]}, want {want.flat[k]}")


def T(x, dtype=None, **kw):
    return nr.tensor(np.asarray(x), dtype=dtype, device="webgpu", **kw)


def rand(*shape, seed=0, lo=-2.0, hi=2.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


@pytest.fixture(scope="module")
def be():
    """The public webgpu backend (nr.get_backend)."""
    return nr.get_backend("webgpu")


def backend(**knobs):
    """A backend with declared knobs, sharing the device and its pipelines."""
    return wb.WebGPUBackend(**knobs)


def up(be, x):
    x = np.ascontiguousarray(x)
    return be.from_host(x, NP_DTYPE[x.dtype.type])


def down(be, h):
    return be.to_numpy(h)


# -- device, knobs, dtypes ---------------------------------------------------------------------------
def test_probe_and_info(be):
    assert "webgpu" in nr.available_devices()
    info = be.info()
    assert info["adapter"] and info["backend"] and isinstance(info["features"], list)
    assert info["limits"]["maxStorageBufferBindingSize"] >= 128 << 20
    assert set(info["knobs"]) == {"max_binding_size", "loop_budget", "gemm_tile", "max_workgroups",
                                  "fuse", "submit_bytes", "attn_tile"}
    assert info["pipelines"] >= 0 and info["submits"] >= 0 and "created" in info["pool"]


def test_knobs_from_arguments_and_environment(monkeypatch):
    monkeypatch.setenv("NUMR_WEBGPU_MAX_BINDING", "4096")
    monkeypatch.setenv("NUMR_WEBGPU_LOOP_BUDGET", "1000")
    monkeypatch.setenv("NUMR_WEBGPU_GEMM_TILE", "128")
    monkeypatch.setenv("NUMR_WEBGPU_MAX_WORKGROUPS", "7")
    monkeypatch.setenv("NUMR_WEBGPU_FUSE", "0")
    monkeypatch.setenv("NUMR_WEBGPU_SUBMIT_BYTES", "0")
    monkeypatch.setenv("NUMR_WEBGPU_ATTN_TILE", "8x4x8")
    assert backend().info()["knobs"] == {"max_binding_size": 4096, "loop_budget": 1000,
                                         "gemm_tile": "128", "max_workgroups": 7, "fuse": 0,
                                         "submit_bytes": 0, "attn_tile": "8x4x8"}
    knobs = backend(max_binding_size=8192, loop_budget=0, gemm_tile="v4w",
                    max_workgroups=65535, fuse=1, submit_bytes=4096,
                    attn_tile="dq=16x8x4").info()["knobs"]                     # arguments win
    assert knobs == {"max_binding_size": 8192, "loop_budget": 0, "gemm_tile": "v4w",
                     "max_workgroups": 65535, "fuse": 1, "submit_bytes": 4096,
                     "attn_tile": "dq=16x8x4"}
    with pytest.raises(BackendUnavailableError, match="submit_bytes"):
        backend(submit_bytes=-1)
    monkeypatch.setenv("NUMR_WEBGPU_GEMM_TILE", "96")
    with pytest.raises(BackendUnavailableError, match="NUMR_WEBGPU_GEMM_TILE"):
        backend()
    monkeypatch.setenv("NUMR_WEBGPU_GEMM_TILE", "auto")
    monkeypatch.setenv("NUMR_WEBGPU_LOOP_BUDGET", "lots")
    with pytest.raises(BackendUnavailableError, match="NUMR_WEBGPU_LOOP_BUDGET='lots'"):
        backend()


def test_large_work_is_submitted_before_a_readback(be):
    """submit_bytes: once the recorded dispatches bind that many bytes they are submitted (the
    GPU starts while Python records more); 0 submits only at the readback. Same results."""
    x = rand(256, 256)
    results = {}
    was = be.submit_bytes, be.fuse
    try:
        be.fuse = False
        for limit in (0, 64 << 10):
            be.submit_bytes = limit
            t = T(x)
            be.flush()
            s0 = be.info()["submits"]
            y = T(x)
            for _ in range(4):
                y = y * 1.5 - t
            early = be.info()["submits"] - s0
            results[limit] = (early, y.numpy())
    finally:
        be.submit_bytes, be.fuse = was
    assert results[0][0] == 0 and results[64 << 10][0] >= 3, results
    assert np.array_equal(results[0][1], results[64 << 10][1])
    with pytest.raises(BackendUnavailableError, match="submit_bytes"):
        be.submit_bytes = -1


def test_recorded_dispatches_go_out_in_growing_runs_after_a_readback(be):
    """After a readback the recorded dispatches are submitted in runs of 16, 32, 64, ... (at most
    256): the GPU starts on a short run while Python records the next. Same results as one submit
    at the readback would give (test_large_work_is_submitted_before_a_readback's 0 row)."""
    x = rand(64, 64)
    was = be.submit_bytes, be.fuse
    try:
        be.submit_bytes, be.fuse = 0, False                    # one dispatch an op, runs only
        t = T(x)
        y = T(x)
        y.numpy()                                              # a readback: the runs start over
        s0 = be.info()["submits"]
        for i in range(16 + 32 + 64):
            y = y - t                                          # one dispatch each
            if i + 1 in (15, 16, 47, 48, 111):
                assert be.info()["submits"] - s0 == {15: 0, 16: 1, 47: 1, 48: 2, 111: 2}[i + 1]
        assert be.info()["submits"] - s0 == 3
        r = x.copy()
        for _ in range(112):
            r = r - x                                          # float32, as the GPU rounds
    finally:
        be.submit_bytes, be.fuse = was
    assert np.array_equal(y.numpy(), r)


def test_dtype_roundtrips():
    x = rand(3, 5)
    assert np.array_equal(T(x).numpy(), x)
    i = np.arange(-7, 8, dtype=np.int32).reshape(3, 5)
    ti = T(i)
    assert ti.dtype == nr.int32 and np.array_equal(ti.numpy(), i)
    bo = i % 3 == 0
    tb = T(bo)
    assert tb.dtype == nr.bool and np.array_equal(tb.numpy(), bo)
    assert tb.tolist() == bo.tolist()
    assert T(np.array([[1.5, 2.0]], np.float32)).tolist() == [[1.5, 2.0]]
    # host data without numpy (the browser's path)
    assert nr.tensor(array.array("f", [1, 2, 3, 4, 5, 6]), device="webgpu").reshape(2, 3).tolist() \
        == [[1, 2, 3], [4, 5, 6]]
    assert nr.tensor([True, False, True], device="webgpu").tolist() == [True, False, True]
    assert nr.tensor(memoryview(array.array("i", [3, -4])), device="webgpu").tolist() == [3, -4]
    assert T(np.zeros((0, 3), np.float32)).numpy().shape == (0, 3)
    assert T(np.float32(4.5)).item() == 4.5


def test_float64_refused():
    with pytest.raises(DTypeError, match="float64.*float32"):
        T(np.zeros(3))
    with pytest.raises(DTypeError, match="float64"):
        nr.full((2,), 1.0, dtype="float64", device="webgpu")


def test_float16(be):
    if not be.f16:
        with pytest.raises(DTypeError, match="shader-f16"):
            nr.full((2,), 1.0, dtype="float16", device="webgpu")
        return
    eps16 = float(np.finfo(np.float16).eps)
    x = rand(4, 6).astype(np.float16)
    tx = T(x)
    assert tx.dtype == nr.float16 and np.array_equal(tx.numpy(), x)
    x64 = x.astype(np.float64)
    close((tx * tx).numpy(), x64 * x64, ulps=1, scale=0, eps=eps16)       # one rounding
    close(tx.sum(1).numpy(), x64.sum(1), ulps=1, scale=np.abs(x64).sum(1), eps=eps16)
    assert np.array_equal(tx.astype("float32").numpy(), x.astype(np.float32))
    a, b = rand(5, 7).astype(np.float16), rand(7, 3, seed=1).astype(np.float16)
    z, mag = gemm_ref(a, b)
    close((T(a) @ T(b)).numpy(), z, ulps=1, scale=mag, eps=eps16)
    assert np.array_equal(tx[1:2, 1:6:2].numpy(), x[1:2, 1:6:2])   # odd element offset: 2-byte aligned
    u = nr.rand((4096,), seed=3, dtype="float16", device="webgpu").numpy()
    assert u.min() >= 0 and u.max() < 1


# -- elementwise on views -----------------------------------------------------------------------------
def views(x):
    """(numpy view, webgpu view) pairs: dense, transposed, stepped slice, int index, broadcast."""
    t = T(x)
    yield x, t
    yield x.T, t.T
    yield x[1:, ::2], t[1:, ::2]
    yield x[2], t[2]
    yield np.broadcast_to(x[:1], x.shape), t[:1].expand(*x.shape)


UNARY = {"neg": (np.negative, -4, 4), "abs": (np.abs, -4, 4), "exp": (np.exp, -4, 4),
         "log": (np.log, 0.01, 30), "sqrt": (np.sqrt, 0.01, 30), "sin": (np.sin, -4, 4),
         "cos": (np.cos, -4, 4), "sign": (np.sign, -4, 4)}


@pytest.mark.parametrize("op", list(UNARY))
def test_unary_on_views(op):
    ref, lo, hi = UNARY[op]
    x = rand(5, 6, lo=lo, hi=hi)
    fn = getattr(nr, op)
    for xv, tv in views(x):
        close(fn(tv).numpy(), ref(xv.astype(np.float64)), ulps=6)
    big = rand(1003, seed=1, lo=lo, hi=hi)              # vec4 path with a scalar tail, and offset 1
    close(fn(T(big)).numpy(), ref(big.astype(np.float64)), ulps=6)
    close(fn(T(big)[1:]).numpy(), ref(big[1:].astype(np.float64)), ulps=6)


def test_unary_special_values():
    x = np.array([-1.0, 0.0, 1e4, -1e4, 100.0, -0.0], np.float32)
    t = T(x)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(nr.log(t).numpy()[:2], [np.nan, -np.inf])
        np.testing.assert_array_equal(nr.sqrt(t).numpy()[[0, 1, 5]], [np.nan, 0.0, -0.0])
        np.testing.assert_array_equal(nr.exp(t).numpy()[[2, 3]], [np.inf, 0.0])
        for fn, ref in ((nr.sin, np.sin), (nr.cos, np.cos)):         # argument reduction
            close(fn(t).numpy(), ref(x.astype(np.float64)), ulps=8, scale=1.0)
    i = np.array([-3, 0, 5, -(2 ** 31) + 1], np.int32)
    ti = T(i)
    assert abs(ti).tolist() == np.abs(i).tolist()
    assert (-ti).tolist() == (-i).tolist()
    assert nr.sign(ti).tolist() == np.sign(i).tolist()


BINARY = {"add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract),
          "mul": (lambda a, b: a * b, np.multiply), "div": (lambda a, b: a / b, np.divide),
          "pow": (lambda a, b: a ** b, np.power), "maximum": (nr.maximum, np.maximum),
          "minimum": (nr.minimum, np.minimum)}


@pytest.mark.parametrize("op", list(BINARY))
def test_binary_broadcast_scalars_and_strides(op):
    fn, ref = BINARY[op]
    a, b = rand(4, 1, 5, lo=0.5, hi=2.0), rand(3, 1, seed=1, lo=0.5, hi=2.0)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    close(fn(T(a), T(b)).numpy(), ref(a64, b64), ulps=8)
    close(fn(T(a), 1.5).numpy(), ref(a64, 1.5), ulps=8)
    close(fn(1.5, T(b)).numpy(), ref(1.5, b64), ulps=8)
    at = T(a.transpose(2, 1, 0).copy()).permute(2, 1, 0)          # strided operand
    close(fn(at, T(b)).numpy(), ref(a64, b64), ulps=8)
    d, e = rand(1001, seed=2, lo=0.5, hi=2.0), rand(1001, seed=3, lo=0.5, hi=2.0)
    close(fn(T(d), T(e)).numpy(), ref(d.astype(np.float64), e.astype(np.float64)), ulps=8)
    close(fn(T(d), 0.75).numpy(), ref(d.astype(np.float64), 0.75), ulps=8)       # vec4, scalar b


def test_integer_ops_and_float_edge_cases():
    a = np.array([[-3, 0, 7, 2]], np.int32)
    b = np.array([[2], [3]], np.int32)
    ta, tb = T(a), T(b)
    for fn, ref in ((lambda x, y: x + y, np.add), (lambda x, y: x - y, np.subtract),
                    (lambda x, y: x * y, np.multiply), (nr.maximum, np.maximum),
                    (nr.minimum, np.minimum), (lambda x, y: x ** y, np.power),
                    (lambda x, y: x // y, np.floor_divide), (lambda x, y: x % y, np.remainder)):
        got = fn(ta, tb)
        assert got.dtype == nr.int32 and got.tolist() == ref(a, b).tolist()
    assert (ta + 5).tolist() == (a + 5).tolist()
    x = np.array([-2.0, -2.0, 0.0, 0.0, 3.0, -8.0, -0.0], np.float32)
    y = np.array([3.0, 2.0, 2.0, -1.0, 0.5, 1 / 3, -1.0], np.float32)
    with np.errstate(all="ignore"):
        ref = np.power(x.astype(np.float64), y.astype(np.float64))
    close((T(x) ** T(y)).numpy(), ref, ulps=8)
    n = np.array([np.nan, 1.0, 2.0], np.float32)
    m = np.array([0.0, np.nan, 1.0], np.float32)
    np.testing.assert_array_equal(nr.maximum(T(n), T(m)).numpy(), np.maximum(n, m))   # NaN wins
    np.testing.assert_array_equal(nr.minimum(T(n), T(m)).numpy(), np.minimum(n, m))


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_compare(op):
    fn = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
          "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y}[op]
    a = np.array([[-1.0, 0.0, 1.0], [2.0, 2.0, -3.0]], np.float32)
    b = np.array([0.0, 0.0, 2.0], np.float32)
    out = fn(T(a), T(b))
    assert out.dtype == nr.bool and out.tolist() == fn(a, b).tolist()
    assert fn(T(a), 2.0).tolist() == fn(a, np.float32(2)).tolist()
    assert fn(T(a).T, T(b)[:, None]).tolist() == fn(a.T, b[:, None]).tolist()
    ia = np.array([1, 5, -2], np.int32)
    assert fn(T(ia), 1).tolist() == fn(ia, 1).tolist()


def test_where():
    c = np.random.default_rng(0).random((3, 4)) > 0.5
    a, b = rand(3, 4), rand(1, 4, seed=2)
    tc, ta, tb = T(c), T(a), T(b)
    np.testing.assert_array_equal(nr.where(tc, ta, tb).numpy(), np.where(c, a, b))
    np.testing.assert_array_equal(nr.where(tc, ta, 0.0).numpy(), np.where(c, a, 0))
    np.testing.assert_array_equal(nr.where(tc, -1.0, tb).numpy(), np.where(c, -1, b))
    np.testing.assert_array_equal(nr.where(tc.T, ta.T, 0.5).numpy(), np.where(c.T, a.T, 0.5))
    i = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert nr.where(tc, T(i), 7).tolist() == np.where(c, i, 7).tolist()


def test_astype(be):
    x = np.array([[-2.7, -0.0, 0.5, 3.9, 1e6]], np.float32)
    i = np.array([[-3, 0, 1, 7, 1 << 20]], np.int32)
    bo = np.array([[True, False, True, True, False]])
    pairs = [("float32", np.float32), ("int32", np.int32), ("bool", np.bool_)]
    if be.f16:
        pairs.append(("float16", np.float16))
    for src in (x, i, bo):
        for name, npd in pairs:
            for t, s in ((T(src), src), (T(src).T, src.T)):
                got = t.astype(name).numpy()
                assert got.dtype == npd
                with np.errstate(over="ignore"):                  # 1e6 -> float16: inf
                    np.testing.assert_array_equal(got, s.astype(npd))


def test_bool_results_are_0_or_1(be):
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    for op, ref in (("add", a | b), ("mul", a & b), ("maximum", a | b), ("minimum", a & b)):
        got = be.binary(op, up(be, a), up(be, b))
        assert be.to_bytes(got) == ref.tobytes(), op          # one 0/1 byte per bool, as numpy
    s = be.reduce("sum", up(be, np.ones((3, 5), bool)), (1,), False)
    assert be.to_bytes(s) == np.ones(3, bool).tobytes()


# -- activations: the generated WGSL of every ACT row -------------------------------------------------
# Results below FLOOR are not compared: kernels build the tails from exp(-|z|), which flushes
# to zero below float32's normal range (1.2e-38), times polynomial factors of z.
FLOOR = 1e-30
GRID = np.linspace(-12, 12, 481).astype(np.float32)
EXTREME = np.array([-1e4, -3e3, -100, -89, -88.5, -30, 30, 88.5, 89, 100, 3e3, 1e4, 0.0, 1e-7,
                    -1e-7], np.float32)
_mp_cache = {}


def mp_diff(name, order, z):
    """act^(order) at the float32 points z, in float64 from 30-digit arithmetic."""
    assert name in MP_ACT, f"add a reference for activation {name}"
    f = MP_ACT[name]
    z = np.asarray(z, np.float64)
    out = np.empty(z.shape)
    with mp.workdps(30):
        for i, v in enumerate(z.ravel()):
            key = (name, order, float(v))
            if key not in _mp_cache:
                _mp_cache[key] = float(mp.diff(f, mp.mpf(float(v)), order))
            out.flat[i] = _mp_cache[key]
    return out


def window_max(name, order, z):
    """max |act^(order)| over [z - 1, z + 1] (sampled): the magnitude an evaluation of act^(order)
    at z is built from; relative in the tails, absolute where act^(order) crosses zero."""
    z = np.asarray(z, np.float64)
    return np.max([np.abs(mp_diff(name, order, z + d)) for d in (-1, -0.5, -0.25, 0, 0.25, 0.5, 1)],
                  axis=0)


def away_from_kinks(name, z):
    z = np.asarray(z, np.float64)
    return np.all([np.abs(z - k) > 0.02 for k in KINKS.get(name, ())] + [np.ones(z.shape, bool)],
                  axis=0)


@pytest.mark.parametrize("name", list(nr.ACT))
def test_activation_kernels(name):
    """act, act' and act'' (rows saving y: also d/dy of act' written in y) on a grid and at extreme
    inputs: finite, and within 4 ulp of the largest |act^(n)| within 1 of z (a relative error in
    the tails, an absolute one where act^(n) crosses zero)."""
    z = np.concatenate([GRID, EXTREME])
    near = np.abs(z.astype(np.float64)[:, None] - np.array(KINKS.get(name, (1e9,)))).min(1) < 1
    for order, fn in enumerate(("fwd", "dz", "d2")):
        got = nr.activation(T(z), name, fn).numpy()
        assert np.isfinite(got).all(), (fn, z[~np.isfinite(got)])
        m = away_from_kinks(name, z) if order else np.ones(z.shape, bool)
        scale = window_max(name, order, z[m])
        if order:            # a window across a kink: the side of z only
            scale = np.where(near[m], np.abs(mp_diff(name, order, z[m])), scale)
        close(got[m], mp_diff(name, order, z[m]), ulps=4, scale=scale, floor=FLOOR)
    if nr.ACT[name].saves == "y":
        zz = GRID[(np.abs(GRID) < 6) & away_from_kinks(name, GRID)]
        zz = zz[np.abs(mp_diff(name, 1, zz)) > 1e-3]       # ds = act''(z) / act'(z), y = act(z)
        d1, d2, d3 = (mp_diff(name, k, zz) for k in (1, 2, 3))
        y = nr.activation(T(zz), name)
        dg = (d3 * d1 - d2 * d2) / (d1 * d1)               # d/dz of act''/act'
        scale = np.abs(y.numpy() * dg / d1)                # moved by the rounding of y
        close(nr.activation(y, name, "ds").numpy(), d2 / d1, ulps=4, scale=scale, floor=FLOOR)


@pytest.mark.parametrize("name", list(nr.ACT))
def test_fused_activation_backward(name):
    """dz = dy * act'(z) in one pass from the saved tensor (z, or y = act(z)), and the bias
    gradient; the dense (vec4 + tail), transposed and 3-D cases."""
    z = rand(11, 7, seed=5, lo=-6, hi=6)
    z[0] = [-1e4, -90, -1e-7, 0.5, 1e-7, 90, 1e4]
    z = np.where(away_from_kinks(name, z), z, z + 0.05).astype(np.float32)
    dy = rand(11, 7, seed=3).astype(np.float64)
    y, d1, d2 = (mp_diff(name, k, z) for k in (0, 1, 2))
    ref = dy * d1
    with np.errstate(divide="ignore", invalid="ignore"):    # act' near z, or from a rounded y
        scale = np.abs(dy) * (window_max(name, 1, z) + np.where(d1 != 0, np.abs(y * d2 / d1), 0))
    tz = T(z)
    saved = nr.activation(tz, name) if nr.ACT[name].saves == "y" else tz
    tdy = T(dy, dtype="float32")
    dz, db = nr.act_backward(tdy, saved, name, bias_grad=True)
    close(dz.numpy(), ref, ulps=4, scale=scale, floor=FLOOR)
    close(db.numpy(), ref.sum(0), ulps=8, scale=(np.abs(ref) + scale).sum(0), floor=FLOOR)
    dzt = nr.act_backward(T(dy.T.copy(), dtype="float32").T, saved, name)     # strided dy
    close(dzt.numpy(), ref, ulps=4, scale=scale, floor=FLOOR)
    dz3, db3 = nr.act_backward(tdy.reshape(1, 11, 7), saved.reshape(1, 11, 7), name,
                               bias_grad=True)
    close(db3.numpy(), ref.sum(0), ulps=8, scale=(np.abs(ref) + scale).sum(0), floor=FLOOR)


# -- reductions ---------------------------------------------------------------------------------------
REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}


def check_reduce(op, got, x, axis, keepdims=False):
    ref = REDUCE[op](x.astype(np.float64), axis=axis, keepdims=keepdims)
    if op in ("max", "min"):
        np.testing.assert_array_equal(got, ref)
    else:
        n = x.size // ref.size
        mag = np.abs(x.astype(np.float64)).sum(axis=axis, keepdims=keepdims) / (n if op == "mean" else 1)
        close(got, ref, ulps=8, scale=mag)


@pytest.mark.parametrize("op", list(REDUCE))
def test_reduce_schedules(be, op):
    x = rand(3, 4, 5, seed=4)
    t = T(x)
    for axis in [0, 1, 2, (0, 2), (1, 2), (0, 1, 2)]:
        for keep in (False, True):
            check_reduce(op, getattr(t, op)(axis=axis, keepdims=keep).numpy(), x, axis, keep)
    check_reduce(op, getattr(t.permute(2, 0, 1), op)(axis=1).numpy(), x.transpose(2, 0, 1), 1)
    # long rows: a workgroup per output; column sums of a tall matrix (a bias gradient): the
    # reduction split into chunks, one invocation per (chunk, output), then a second pass over
    # each output's partials, one workgroup per output
    long_rows, tall = rand(3, 5000, seed=5), rand(5000, 3, seed=27)
    got, ran = kernels_run(be, lambda: getattr(T(long_rows), op)(axis=1).numpy())
    check_reduce(op, got, long_rows, 1)
    assert "reduce.reduce_wg" in ran
    got, ran = kernels_run(be, lambda: getattr(T(tall), op)(axis=0).numpy())
    check_reduce(op, got, tall, 0)
    # the two passes; the second a workgroup per output on GPUs, an invocation on CPU adapters
    assert ran == ({"reduce.reduce_thread": 2} if be.cpu_adapter else
                   {"reduce.reduce_thread": 1, "reduce.reduce_wg": 1}), ran
    # float32 sums of vec4-aligned columns: pass 1 reads four columns as one vec4; an offset view
    # (column 1 on) cannot, and takes the scalar pass
    wide = rand(5000, 12, seed=28)
    got, ran = kernels_run(be, lambda: getattr(T(wide), op)(axis=0).numpy())
    check_reduce(op, got, wide, 0)
    assert ran.get("reduce.colsum_v4", 0) == (op in ("sum", "mean")), ran
    got, ran = kernels_run(be, lambda: getattr(T(wide)[:, 1:9], op)(axis=0).numpy())
    check_reduce(op, got, wide[:, 1:9], 0)
    assert "reduce.colsum_v4" not in ran
    check_reduce(op, getattr(T(long_rows), op)().numpy(), long_rows, None)
    check_reduce(op, getattr(T(tall).reshape(50, 100, 3), op)(axis=(0, 1), keepdims=True).numpy(),
                 tall.reshape(50, 100, 3), (0, 1), True)
    if op != "mean":
        i = np.arange(24, dtype=np.int32).reshape(4, 6) - 10
        assert getattr(T(i), op)(axis=0).tolist() == REDUCE[op](i, axis=0).tolist()


@pytest.mark.parametrize("op", list(REDUCE))
def test_reduce_within_a_small_loop_budget(op):
    """Under a loop budget (lavapipe's limit, here made small): the tree schedule (partials reduced
    again) and the dense-first copy of several reduced dims; argmax and softmax refuse."""
    be = backend(loop_budget=600)
    x = rand(20000, 3, seed=6)
    got, ran = kernels_run(be, lambda: down(be, be.reduce(op, up(be, x), (0,), False)))
    check_reduce(op, got, x, 0)
    assert ran.get("reduce.reduce_thread", 0) + ran.get("reduce.reduce_wg", 0) >= 3  # pass 1, its partials
    y = rand(50, 10, 40, seed=7)
    got, ran = kernels_run(be, lambda: down(be, be.reduce(op, up(be, y), (0, 2), False)))
    check_reduce(op, got, y, (0, 2))
    assert "elementwise.unary" in ran                                   # the dense-first copy
    with pytest.raises(BackendLimitError, match="loop limit"):
        be.argmax(up(be, rand(2, 5000)), 1, False)
    with pytest.raises(BackendLimitError, match="loop limit"):
        be.softmax(up(be, rand(2, 5000)), 1, False)


def test_argmax():
    x = np.array([[1.0, 3.0, 3.0, -1.0], [7.0, 2.0, 7.0, 0.0], [0.0, 0.0, 0.0, 0.0]], np.float32)
    t = T(x)
    for axis in (None, 0, 1):
        for keep in (False, True):
            got = nr.argmax(t, axis=axis, keepdims=keep)
            ref = np.argmax(x, axis=axis, keepdims=keep)
            assert got.dtype == nr.int32 and got.shape == ref.shape
            assert np.array_equal(got.numpy(), ref)                     # first of the ties
    big = rand(2, 3000, seed=6)
    big[1, 2500] = 10.0
    assert nr.argmax(T(big), axis=1).tolist() == np.argmax(big, 1).tolist()
    assert nr.argmax(T(big)).item() == np.argmax(big)
    assert nr.argmax(T(big).T, axis=1).tolist() == np.argmax(big.T, 1).tolist()
    n = np.array([[1.0, np.nan, 5.0, np.nan]], np.float32)
    assert nr.argmax(T(n), axis=1).tolist() == [1]                      # NaN is the maximum
    i = np.array([[3, -1, 7, 7], [0, 0, -5, 2]], np.int32)
    assert nr.argmax(T(i), axis=1).tolist() == np.argmax(i, 1).tolist()


def check_softmax(got, x, axis, log):
    """Against float64, with s = x - max: exp(s) is good to (3 + 2|s|) ulp (WGSL's bound for
    exp), log_softmax = s - log(sum exp(s)) to a few ulp of |s| + the log-sum + 1 (log is
    good to an absolute 2^-21 near 1)."""
    x = x.astype(np.float64)
    s = x - x.max(axis, keepdims=True)
    lse = np.log(np.exp(s).sum(axis, keepdims=True))
    if log:
        close(got, s - lse, ulps=4, scale=np.abs(s) + lse + 1)
    else:
        ref = np.exp(s - lse)
        close(got, ref, ulps=4, scale=ref * (1 + np.abs(s) / 2))


@pytest.mark.parametrize("log", [False, True])
def test_softmax(log):
    fn = nr.log_softmax if log else nr.softmax
    x = rand(3, 4, 5, seed=7, lo=-5, hi=5)
    x[0, 0, :] = [1000.0, -1000.0, 0.0, 999.0, 3.0]                     # stability
    for axis in (0, 1, 2):
        check_softmax(fn(T(x), axis=axis).numpy(), x, axis, log)
    long = rand(2, 3000, seed=8, lo=-30, hi=30)
    check_softmax(fn(T(long), axis=1).numpy(), long, 1, log)


def test_one_hot():
    lab = np.array([[0, 3], [2, 1], [3, 3]], np.int32)
    for dt in ("float32", "int32"):
        got = nr.one_hot(T(lab), 4, dtype=dt)
        assert got.dtype.name == dt and np.array_equal(got.numpy(), np.eye(4)[lab])
    assert np.array_equal(nr.one_hot(T(lab).T, 4).numpy(), np.eye(4)[lab.T])


# -- GEMM ---------------------------------------------------------------------------------------------
TILES = ("64", "128", "v4", "v4w")


@pytest.fixture(scope="module")
def tiled():
    """One backend per GEMM kernel choice (NUMR_WEBGPU_GEMM_TILE), whatever this adapter prefers."""
    return {t: backend(gemm_tile=t) for t in TILES}


def gemm_ref(a, b, bias=None):
    """(a @ b + bias in float64, the magnitude |a| @ |b| + |bias| its rounding errors scale with)."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    z, mag = a @ b, np.abs(a) @ np.abs(b)
    if bias is not None:
        z, mag = z + bias, mag + np.abs(bias)
    return z, mag


def close_gemm(got, a, b, ulps=4):
    z, mag = gemm_ref(a, b)
    close(got, z, ulps=ulps, scale=mag)


@pytest.mark.parametrize("shapes", [((1, 1), (1, 1)), ((5, 7), (7, 3)), ((65, 33), (33, 70)),
                                    ((2, 3, 17, 9), (9, 20)), ((4, 1, 6, 5), (3, 5, 2)),
                                    ((2, 128, 64), (2, 64, 130)), ((130, 40), (40, 257)),
                                    ((128, 32), (32, 256)), ((2, 64, 16), (16, 64)),   # no bounds checks
                                    ((3, 70), (70, 5))])
def test_matmul_every_kernel(tiled, shapes):
    a, b = rand(*shapes[0], seed=9), rand(*shapes[1], seed=10)
    z, mag = gemm_ref(a, b)
    for be in tiled.values():
        close(down(be, be.matmul(up(be, a), up(be, b))), z, ulps=4, scale=mag)
    close((T(a) @ T(b)).numpy(), z, ulps=4, scale=mag)                  # the default choice


def test_gemm_kernel_selection(tiled):
    """gemm_v4 (tiles v4 and v4w) on row- or column-major operands with vec4-aligned strides
    (batched, offset views, transposed views over several K-slices, with and without bounds
    checks), gemm for the others; gemm_big (tile 128) from 128 x 128 up."""
    def entries(be, x, y):
        out, ran = kernels_run(be, lambda: be.matmul(x, y))
        return out, set(k for k in ran if k.startswith("matmul."))

    for tile in ("v4", "v4w"):
        be = tiled[tile]
        for sa, sb in (((2, 256, 32), (32, 128)), ((3, 130, 36), (3, 36, 72)), ((5, 4), (4, 8))):
            a, b = rand(*sa, seed=40), rand(*sb, seed=41)
            out, ran = entries(be, up(be, a), up(be, b))
            assert ran == {"matmul.gemm_v4"}
            close_gemm(down(be, out), a, b)
        big, rb = rand(9, 68, seed=42), rand(64, 20, seed=43)
        hb, b = up(be, big), up(be, rb)
        for (r0, c0), want in (((1, 4), "matmul.gemm_v4"),    # element offset 72: vec4-aligned
                               ((0, 1), "matmul.gemm")):      # offset 1: not
            a = be.slice(hb, ((r0, 9, 1), (c0, c0 + 64, 1)))
            out, ran = entries(be, a, b)
            assert ran == {want}
            close_gemm(down(be, out), big[r0:, c0:c0 + 64], rb)
        # transposed views (batched; K = 36: three K-slices, the last partial): read as they lie
        # where their columns are vec4-aligned (a transposed a of 130 rows is not: gemm), b's
        # always are here (K = 36)
        for m, want in ((132, "matmul.gemm_v4"), (130, "matmul.gemm")):
            at, bt = rand(2, 36, m, seed=44), rand(2, 12, 36, seed=45)
            tr = [be.permute(up(be, x), (0, 2, 1)) for x in (at, bt)]
            dense = [up(be, np.ascontiguousarray(x.transpose(0, 2, 1))) for x in (at, bt)]
            for x, y, w in ((tr[0], dense[1], want),                 # a
                            (dense[0], tr[1], "matmul.gemm_v4"),     # b
                            (tr[0], tr[1], want)):                   # both
                out, ran = entries(be, x, y)
                assert ran == {w}, (m, ran)
                close_gemm(down(be, out), at.transpose(0, 2, 1), bt.transpose(0, 2, 1))
    be = tiled["128"]
    assert entries(be, up(be, rand(128, 8)), up(be, rand(8, 128)))[1] == {"matmul.gemm_big"}
    assert entries(be, up(be, rand(64, 8)), up(be, rand(8, 128)))[1] == {"matmul.gemm"}


def test_large_gemm_reads_transposed_operands_in_place():
    """A large GEMM with a transposed operand (x @ w.T, x.T @ dz of a Linear's backward) runs gemm_v4
    on the view where the adapter runs it at 128 x 128 (v4w), with no copy; an operand whose
    columns or offset are not vec4-aligned is copied densely for it; gemm elsewhere. Same values."""
    be = backend(gemm_tile="auto")
    v4w = "v4w" in launch_gemm.caps(be.adapter)
    a, b, wide = rand(512, 512, seed=70), rand(512, 512, seed=71), rand(512, 514, seed=73)
    hw = be.slice(up(be, wide), ((0, 512, 1), (0, 512, 1)))          # row stride 514
    wide4 = rand(512, 516, seed=74)
    ho = be.slice(up(be, wide4), ((0, 512, 1), (2, 514, 1)))         # element offset 2
    for x, y, ra, rb, copied in (
            (up(be, a), be.permute(up(be, b), (1, 0)), a, b.T, False),
            (be.permute(up(be, a), (1, 0)), up(be, b), a.T, b, False),
            (up(be, a), be.permute(hw, (1, 0)), a, wide[:, :512].T, True),
            (be.permute(ho, (1, 0)), up(be, b), wide4[:, 2:514].T, b, True)):
        out, ran = kernels_run(be, lambda: be.matmul(x, y))
        close_gemm(down(be, out), ra, rb)
        gemms = {k for k in ran if k.startswith("matmul.")}
        assert gemms == ({"matmul.gemm_v4"} if v4w else {"matmul.gemm"}), ran
        assert (len(ran) > 1) is (v4w and copied), ran        # the copy is a kernel of its own
    small = rand(64, 64, seed=72)                  # small: gemm on the view
    out, ran = kernels_run(be, lambda: be.matmul(up(be, small), be.permute(up(be, small), (1, 0))))
    close_gemm(down(be, out), small, small.T)
    assert {k for k in ran if k.startswith("matmul.")} == {"matmul.gemm"}


def test_large_float32_gemm_runs_the_activation_as_a_pass_after_it(be):
    """From launch_gemm.ACT_AFTER_MIN output elements a float32 GEMM + GELU (or tanh, which saves y)
    runs the activation as its own elementwise pass after the GEMM (bias in the GEMM's epilogue);
    relu stays in the epilogue, and so does everything below the threshold. Either way z is the
    float64 product within the GEMM's rounding and y = act(z) within the activation's bound
    (float64 truth of the returned z; 8 ulp as the activation's own tests)."""
    erfc = pytest.importorskip("scipy.special").erfc
    truth = {"gelu": (lambda z: z * 0.5 * erfc(-z / math.sqrt(2)), 8), "tanh": (np.tanh, 8),
             "relu": (lambda z: np.maximum(z, 0), 10)}           # (function, ulps)
    for m, n, act, split in ((2048, 2048, "gelu", True), (2048, 2048, "tanh", True),
                             (2048, 2048, "relu", False), (96, 64, "gelu", False)):
        a, b, bias = rand(m, 8, seed=81), rand(8, n, seed=82), rand(n, seed=83)

        def run():
            out = be.gemm_bias_act(up(be, a), up(be, b), up(be, bias), act)
            be.settle()                              # a pending fused chain records its kernel
            return out
        (y, z), ran = kernels_run(be, run)
        assert any(not k.startswith("matmul.") for k in ran) is split, (act, ran)
        assert sum(v for k, v in ran.items() if k.startswith("matmul.")) == 1, ran
        want, mag = gemm_ref(a, b, bias)
        fn, ulps = truth[act]
        assert (z is None) is (act != "gelu")         # tanh and relu save y: no z to return
        if z is None:
            close(down(be, y), fn(want), ulps=ulps, scale=mag)
            continue
        Z = down(be, z)
        close(Z, want, ulps=10, scale=mag)
        # floor: GPUs may flush a subnormal result to zero (WGSL allows it; NVIDIA does)
        close(down(be, y), fn(Z.astype(np.float64)), ulps=ulps, scale=0.0,
              floor=float(np.finfo(np.float32).tiny))


def test_large_float32_linear_gradients_through_the_split_activation():
    """The public Linear + GELU above ACT_AFTER_MIN outputs (activation after the GEMM): its
    gradients against float64 numpy (dz = dy gelu'(z), dx = dz w^T, dw = x^T dz, db = sum dz)."""
    erfc = pytest.importorskip("scipy.special").erfc
    m, k, n = 2048, 8, 2048
    x, w, b, dy = rand(m, k, seed=91), rand(k, n, seed=92), rand(n, seed=93), rand(m, n, seed=94)
    tx, tw, tb = (nr.tensor(v, device="webgpu", requires_grad=True) for v in (x, w, b))
    nr.matmul_bias_activation(tx, tw, tb, "gelu").backward(nr.tensor(dy, device="webgpu"))
    z, mag = gemm_ref(x, w, b)
    dz = dy * (0.5 * erfc(-z / math.sqrt(2)) + z * np.exp(-z * z / 2) / math.sqrt(2 * math.pi))
    adz = np.abs(dy) * 1.2                        # |gelu'| <= 1.13: the scale of dz's rounding
    close(tw.grad.numpy(), x.T.astype(np.float64) @ dz, ulps=64, scale=np.abs(x.T) @ adz)
    close(tx.grad.numpy(), dz @ w.T.astype(np.float64), ulps=64, scale=adz @ np.abs(w.T))
    close(tb.grad.numpy(), dz.sum(0), ulps=64, scale=adz.sum(0))


def test_activation_after_counts_broadcast_batches():
    """launch_gemm.activation_after (pure): the output size includes broadcast batch dims; float32
    only; piecewise-linear activations stay in the epilogue."""
    from numr_web.dtypes import float16, float32
    big = launch_gemm.ACT_AFTER_MIN
    m = n = int(math.isqrt(big // 64)) + 1           # 8 x 8 batches of m x n pass the threshold
    assert launch_gemm.activation_after("gelu", float32, (8, 1, m, 4), (1, 8, 4, n))
    assert not launch_gemm.activation_after("gelu", float32, (8, 1, m, 4), (1, 1, 4, n))
    assert not launch_gemm.activation_after("gelu", float16, (8, 1, m, 4), (1, 8, 4, n))
    for act in ("none", "relu", "leaky_relu", "hardswish"):
        assert not launch_gemm.activation_after(act, float32, (8, 1, m, 4), (1, 8, 4, n))


def test_gemm_sg_subgroup_kernel():
    """gemm_sg (subgroup shuffles; tile "sg") where the adapter has subgroups: row- and
    column-major operands (the transposed views of a Linear's backward), with and without bounds
    checks, batched with an element offset, the fused bias + GELU epilogue; float32 within 4 ulp
    of the float64 product's magnitude; float16 (f32 accumulation, one rounding to f16 of each
    output, so 1 f16 ulp plus the f32 accumulation error) against float64 of the f16 inputs.
    Elsewhere the tile falls back to gemm_v4."""
    be = backend(gemm_tile="sg")
    sg = "sg" in launch_gemm.caps(be.adapter)      # the adapter's optional GEMM tiles
    want = {"matmul_sg.gemm_sg"} if sg else {"matmul.gemm_v4"}

    def run(x, y, ta, tb, fn=None):
        hx = be.permute(up(be, np.ascontiguousarray(x.T)), (1, 0)) if ta else up(be, x)
        hy = be.permute(up(be, np.ascontiguousarray(y.T)), (1, 0)) if tb else up(be, y)
        out, ran = kernels_run(be, lambda: (fn or be.matmul)(hx, hy))
        assert {k for k in ran if k.startswith("matmul")} == (want if sg or not (ta or tb)
                                                               else {"matmul.gemm"})
        return out

    for (m, k, n), ta, tb in [((300, 36, 260), False, False), ((256, 32, 256), True, True),
                              ((260, 20, 132), True, False)]:
        a, b = rand(m, k, seed=60), rand(k, n, seed=61)
        close_gemm(down(be, run(a, b, ta, tb)), a, b)
    a, b = rand(3, 132, 24, seed=62), rand(24, 136, seed=63)             # batch folded into M
    close_gemm(down(be, be.matmul(be.slice(up(be, a), ((1, 3, 1), (0, 132, 1), (0, 24, 1))),
                                  up(be, b))), a[1:], b)
    a, b, bias = rand(256, 16, seed=64), rand(16, 128, seed=65), rand(128, seed=66)
    y, z, scale = epilogue_ref("gelu", a, b, bias)
    hy, hz = run(a, b, False, False,
                 lambda x, w: be.gemm_bias_act(x, w, up(be, bias), "gelu"))
    close(down(be, hy), y, ulps=4, scale=scale)
    if not be.f16:
        return
    eps16 = float(np.finfo(np.float16).eps)
    for (m, k, n), ta, tb in [((260, 40, 132), False, False), ((128, 64, 256), True, True)]:
        a = rand(m, k, seed=67).astype(np.float16)
        b = rand(k, n, seed=68).astype(np.float16)
        z, mag = gemm_ref(a, b)
        close(down(be, run(a, b, ta, tb)), z, ulps=0.5, eps=eps16, scale=0,
              floor=5 * EPS * mag + 2.0 ** -25)
    a, b = rand(256, 16, seed=69).astype(np.float16), rand(16, 128, seed=70).astype(np.float16)
    bias = rand(128, seed=71).astype(np.float16)
    y, z, scale = epilogue_ref("gelu", a, b, bias)
    hy, hz = run(a, b, False, False, lambda x, w: be.gemm_bias_act(x, w, up(be, bias), "gelu"))
    close(down(be, hy), y, ulps=0.5, eps=eps16, scale=0, floor=5 * EPS * scale + 2.0 ** -25)
    if hz is not None:
        close(down(be, hz), z, ulps=0.5, eps=eps16, scale=0, floor=5 * EPS * scale + 2.0 ** -25)


def test_matmul_strided_and_int():
    a, b = rand(9, 13, seed=11), rand(7, 9, seed=12)
    close_gemm((T(a).T @ T(b).T).numpy(), a.T, b.T)
    ia = np.arange(12, dtype=np.int32).reshape(3, 4) - 5
    ib = np.arange(8, dtype=np.int32).reshape(4, 2)
    assert (T(ia) @ T(ib)).tolist() == (ia @ ib).tolist()
    be = nr.get_backend("webgpu")
    with pytest.raises(DTypeError, match="bool"):
        be.matmul(up(be, ia > 0), up(be, ib > 0))


def _sigmoid64(z):
    return np.exp(-np.logaddexp(0.0, -z))


_ERFC = np.vectorize(math.erfc)
# float64 closed forms of the activations for the GEMM epilogue, PyTorch's definitions
NP_ACT = {
    "none": lambda z: z,
    "relu": lambda z: np.maximum(z, 0.0),
    "sigmoid": _sigmoid64,
    "tanh": np.tanh,
    "silu": lambda z: z * _sigmoid64(z),
    "gelu": lambda z: z / 2 * _ERFC(-z / math.sqrt(2)),
    "gelu_tanh": lambda z: z * _sigmoid64(2 * math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)),
    "leaky_relu": lambda z: np.where(z > 0, z, z / 100),
    "elu": lambda z: np.where(z > 0, z, np.expm1(np.minimum(z, 0.0))),
    "softplus": lambda z: np.where(z > 20, z, np.log1p(np.exp(np.minimum(z, 20.0)))),
    "mish": lambda z: z * np.tanh(np.logaddexp(0.0, z)),
    "hardswish": lambda z: z * np.clip(z + 3, 0, 6) / 6,
    "selu": lambda z: 1.0507009873554805 * np.where(z > 0, z, 1.6732632423543772 * np.expm1(
        np.minimum(z, 0.0))),
    "celu": lambda z: np.where(z > 0, z, np.expm1(np.minimum(z, 0.0))),
    "softsign": lambda z: z / (1 + np.abs(z)),
    "tanhshrink": lambda z: z - np.tanh(z),
}


def epilogue_ref(name, a, b, bias):
    """(act(z), z, a tolerance scale) in float64: z's rounding error times the largest |act'|."""
    assert name in NP_ACT, f"add a reference for activation {name}"
    z, mag = gemm_ref(a, b, bias)
    slope = np.abs(mp_diff(name, 1, GRID)).max()
    return NP_ACT[name](z), z, mag * max(slope, 1.0)


@pytest.mark.parametrize("name", list(nr.ACT))
def test_gemm_bias_activation_every_kernel(tiled, name):
    a, b, bias = rand(2, 37, 19, seed=13), rand(19, 23, seed=14), rand(23, seed=15)
    y, z, scale = epilogue_ref(name, a, b, bias)
    out = nr.matmul_bias_activation(T(a), T(b), T(bias), name)
    close(out.numpy(), y, ulps=4, scale=scale)
    for (m, k, n), tile in [((150, 9, 140), "128"), ((150, 12, 140), "v4"), ((256, 32, 128), "v4"),
                            ((150, 12, 140), "v4w"), ((256, 32, 256), "v4w"), ((70, 20, 30), "64")]:
        be = tiled[tile]
        a2, b2, bias2 = rand(m, k, seed=30), rand(k, n, seed=31), rand(n, seed=32)
        y2, z2, scale2 = epilogue_ref(name, a2, b2, bias2)
        hy, hz = be.gemm_bias_act(up(be, a2), up(be, b2), up(be, bias2), name)
        close(down(be, hy), y2, ulps=4, scale=scale2)
        assert (hz is None) == (nr.ACT[name].saves == "y")
        if hz is not None:
            close(down(be, hz), z2, ulps=4, scale=scale2)
        hy, _ = be.gemm_bias_act(up(be, a2), up(be, b2), None, name)
        y3, _, scale3 = epilogue_ref(name, a2, b2, None)
        close(down(be, hy), y3, ulps=4, scale=scale3)


def test_split_k_within_a_small_loop_budget():
    """Under a loop budget a GEMM runs in blocks along K (here 128) summed; then bias + activation."""
    be = backend(loop_budget=2000)
    a, b, bias = rand(5, 300, seed=50), rand(300, 6, seed=51), rand(6, seed=52)
    out, ran = kernels_run(be, lambda: be.matmul(up(be, a), up(be, b)))
    assert ran["matmul.gemm"] == 3
    close_gemm(down(be, out), a, b, ulps=8)
    y, z, scale = epilogue_ref("gelu", a, b, bias)
    hy, hz = be.gemm_bias_act(up(be, a), up(be, b), up(be, bias), "gelu")
    close(down(be, hy), y, ulps=8, scale=scale)
    close(down(be, hz), z, ulps=8, scale=scale)


def test_fused_layer_with_empty_k():
    z = nr.matmul_bias_activation(nr.zeros((2, 0), device="webgpu"), nr.zeros((0, 3), device="webgpu"),
                                  nr.ones(3, device="webgpu"), "relu")
    assert z.tolist() == [[1.0] * 3] * 2


def test_long_loops_stay_correct_under_lavapipe_loop_limit():
    """Mesa llvmpipe ends an invocation's loops after 65535 iterations and carries on silently:
    long reductions and large-K GEMMs must be scheduled around it (and stay right on any GPU)."""
    x = nr.ones((8_388_607,), device="webgpu")
    assert x.sum().item() == 8_388_607 and x.mean().item() == 1.0
    assert nr.ones((2, 9_000_000), device="webgpu").sum(1).tolist() == [9e6, 9e6]
    assert nr.ones((2 ** 21, 4), device="webgpu").sum(0).tolist() == [2.0 ** 21] * 4
    y = nr.ones((3, 70000, 2), device="webgpu")
    assert y.sum((0, 2))[:2].tolist() == [6.0, 6.0] and y.max((0, 2)).shape == (70000,)
    w = nr.ones((8_388_608,), device="webgpu", requires_grad=True)
    (w * w).mean().backward()
    assert abs(w.grad.sum().item() - 2.0) < 1e-6
    for K in (65536, 70001):
        a, b = nr.ones((8, K), device="webgpu"), nr.ones((K, 8), device="webgpu")
        assert (a @ b)[0, 0].item() == K
        out = nr.matmul_bias_activation(a, b, nr.ones(8, device="webgpu"), "gelu")
        assert out[1, 1].item() == K + 1


# -- creation -------------------------------------------------------------------------------------------
def test_full_arange():
    for dt, v in (("float32", 1.0), ("int32", 1), ("bool", True)):
        assert nr.full((2, 3), v, dtype=dt, device="webgpu").tolist() == [[v] * 3] * 2
    assert nr.full((2,), -2.5, device="webgpu").tolist() == [-2.5, -2.5]
    assert nr.arange(-3, 7, 2, dtype="int32", device="webgpu").tolist() == list(range(-3, 7, 2))
    close(nr.arange(0.5, 3.0, 0.25, device="webgpu").numpy(), 0.5 + 0.25 * np.arange(10), ulps=2)
    be = nr.get_backend("webgpu")
    assert down(be, be.arange(5, 2, 1, I32)).shape == (0,)


def test_random():
    u = nr.rand((200, 500), seed=1, device="webgpu").numpy()
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.003
    n = nr.randn((200, 500), seed=1, device="webgpu").numpy()
    assert np.isfinite(n).all()
    assert abs(n.mean()) < 0.01 and abs(n.std() - 1) < 0.01
    assert abs(np.mean(np.abs(n) < 1) - 0.6827) < 0.01
    assert np.array_equal(n, nr.randn((200, 500), seed=1, device="webgpu").numpy())     # seeded
    assert not np.array_equal(n, nr.randn((200, 500), seed=2, device="webgpu").numpy())
    assert not np.array_equal(nr.rand((50,), device="webgpu").numpy(),
                              nr.rand((50,), device="webgpu").numpy())
    assert abs(np.corrcoef(u.ravel()[:-1], u.ravel()[1:])[0, 1]) < 0.01


# -- views and copies -----------------------------------------------------------------------------------
def test_views_launch_no_kernels(be):
    x = rand(4, 6, 5, seed=16)
    t = T(x)
    (p, r, e, s), ran = kernels_run(be, lambda: (t.permute(2, 0, 1), t.reshape(24, 5),
                                                 t[:, 1:2].expand(3, 4, 6, 5), t[1:4:2, 3, 4:0]))
    assert ran == {}
    np.testing.assert_array_equal(p.numpy(), x.transpose(2, 0, 1))
    np.testing.assert_array_equal(r.numpy(), x.reshape(24, 5))
    np.testing.assert_array_equal(e.numpy(), np.broadcast_to(x[:, 1:2], (3, 4, 6, 5)))
    assert s.numpy().shape == (2, 0)
    np.testing.assert_array_equal(p.reshape(5, 24).numpy(), x.transpose(2, 0, 1).reshape(5, 24))
    h = be.permute(up(be, x), (2, 0, 1))
    c = be.contiguous(h)
    assert be.contiguous(c) is c and not be.is_view(c)
    np.testing.assert_array_equal(down(be, c), x.transpose(2, 0, 1))


def test_reshape_of_views(be):
    x = rand(4, 6, 5, seed=29)
    t = T(x)
    for perm, shape in [((2, 0, 1), (5, 24)), ((1, 2, 0), (6, 5, 2, 2)), ((0, 2, 1), (4, 30)),
                        ((2, 1, 0), (120,)), ((0, 1, 2), (1, 4, 1, 30, 1))]:
        np.testing.assert_array_equal(t.permute(*perm).reshape(*shape).numpy(),
                                      x.transpose(perm).reshape(shape))
    _, ran = kernels_run(be, lambda: t.permute(2, 0, 1).reshape(5, 24))   # a view: no copy
    assert ran == {}
    sl = t[::2]                                                            # (2, 6, 5) with a gap
    np.testing.assert_array_equal(sl.reshape(2, 30).numpy(), x[::2].reshape(2, 30))
    np.testing.assert_array_equal(sl.reshape(60).numpy(), x[::2].reshape(60))


def test_slice_gradient_and_concat():
    g = rand(5, 3, seed=17)
    x = T(g, requires_grad=True)
    (x[1:5:2] * 2.0).sum().backward()
    want = np.zeros((5, 3))
    want[1:5:2] = 2
    np.testing.assert_array_equal(x.grad.numpy(), want)                    # unslice
    x.grad = None
    x[2, 1:3].sum().backward()
    want = np.zeros((5, 3))
    want[2, 1:3] = 1
    np.testing.assert_array_equal(x.grad.numpy(), want)
    xs = [rand(2, k, 3, seed=k) for k in (1, 4, 2)]
    np.testing.assert_array_equal(nr.concat([T(v) for v in xs], 1).numpy(), np.concatenate(xs, 1))
    tt = T(xs[1]).permute(1, 0, 2)
    np.testing.assert_array_equal(nr.concat([tt, tt], 2).numpy(),
                                  np.concatenate([xs[1].transpose(1, 0, 2)] * 2, 2))


def test_async_readback():
    x = rand(3, 4)
    t = T(x)
    assert asyncio.run(t.read()) == x.tolist()
    assert asyncio.run(t.T.read()) == x.T.tolist()


# -- limits, chunks, grids, batching, pool, errors --------------------------------------------------------
@pytest.fixture(scope="module")
def small():
    """A backend treating 4 KiB as maxStorageBufferBindingSize."""
    return backend(max_binding_size=4096)


def test_chunked_elementwise(small):
    be = small
    x, y = rand(50, 97, seed=19), rand(97, seed=20)            # 19.4 KB: five+ chunks of 4 KiB
    hx, hy = up(be, x), up(be, y)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    close(down(be, be.binary("mul", hx, hy)), x64 * y64)
    close(down(be, be.binary("add", hx, 2.0)), x64 + 2)
    close(down(be, be.unary("exp", hx)), np.exp(x64), ulps=6)
    close(down(be, be.activation("tanh", hx, "dz")), 1 - np.tanh(x64) ** 2, ulps=4, scale=1.0)
    np.testing.assert_array_equal(down(be, be.binary("gt", hx, hy)), x > y)
    np.testing.assert_array_equal(down(be, be.where(be.binary("gt", hx, 0.0), hx, 0.0)),
                                  np.where(x > 0, x, 0))
    np.testing.assert_array_equal(down(be, be.astype(hx, I32)), x.astype(np.int32))
    dz, db = be.act_backward("tanh", hx, hx, None, True)       # dy = s = x: dz = x (1 - x^2)
    ref = x64 * (1 - x64 * x64)
    close(down(be, dz), ref, ulps=4, scale=4.0)
    close(down(be, db), ref.sum(0), ulps=8, scale=np.abs(ref).sum(0) + 4.0)
    sl = be.slice(hx, ((0, 50, 2), (0, 97, 1)))                # a strided view whose rows fit
    np.testing.assert_array_equal(down(be, be.unary("neg", sl)), -x[::2])
    big = rand(3000, seed=21)                                  # 1-D, > the limit
    np.testing.assert_array_equal(down(be, be.unary("abs", up(be, big))), np.abs(big))
    row = rand(1, 97, seed=33)                                 # broadcast: > the limit once expanded
    e = be.expand(up(be, row), (60, 97))
    np.testing.assert_array_equal(down(be, be.unary("neg", e)), -np.broadcast_to(row, (60, 97)))
    close(down(be, be.reduce("sum", e, (0,), False)), 60 * row[0].astype(np.float64), ulps=8)


def test_chunked_reductions(small):
    be = small
    x = rand(60, 70, seed=22)
    hx = up(be, x)
    for op in REDUCE:
        for axis in ((0, 1), (0,), (1,)):
            check_reduce(op, down(be, be.reduce(op, hx, axis, False)), x, axis)
    check_reduce("sum", down(be, be.reduce("sum", hx, (1,), True)), x, 1, True)


def test_limit_refusals(small):
    be = small
    x = up(be, rand(60, 70, seed=23))
    with pytest.raises(BackendLimitError, match="maxStorageBufferBindingSize"):
        be.matmul(x, up(be, rand(70, 3, seed=24)))
    with pytest.raises(BackendLimitError, match="maxStorageBufferBindingSize"):
        be.contiguous(be.permute(x, (1, 0)))       # each output row spans the whole input
    with pytest.raises(BackendLimitError, match="maxStorageBufferBindingSize"):
        be.softmax(x, 1, False)


def test_grid_stride_loops():
    """Fewer workgroups than elements / 256 (max_workgroups=3): the grid-stride loops cover the
    rest; and more outputs than 65,535 workgroups in one dimension."""
    be = backend(max_workgroups=3)
    x = rand(5000, seed=28)
    close(down(be, be.unary("exp", up(be, x))), np.exp(x.astype(np.float64)), ulps=6)
    close(down(be, be.unary("exp", be.slice(up(be, x), ((1, 5000, 1),)))),
          np.exp(x[1:].astype(np.float64)), ulps=6)
    check_reduce("sum", down(be, be.reduce("sum", up(be, x.reshape(50, 100)), (1,), False)),
                 x.reshape(50, 100), 1)
    y = rand(70000, 3, seed=25)
    check_reduce("sum", T(y).sum(1).numpy(), y, 1)


def test_recorded_work_is_submitted_once(be):
    t = T(rand(64))
    t.numpy()
    s0 = be.info()["submits"]
    for _ in range(10):
        t = -t
    assert be.info()["submits"] == s0              # recorded, not submitted yet
    t.numpy()
    assert be.info()["submits"] == s0 + 1          # one submit for the whole batch


def test_pipelines_and_buffers_are_reused(be):
    """A training-like loop: no pipeline compiled and no GPU buffer created after warm-up."""
    rs = np.random.default_rng(26)
    w = T(rs.standard_normal((16, 8)).astype(np.float32), requires_grad=True)
    bias = nr.zeros(8, device="webgpu", requires_grad=True)
    xb = T(rs.standard_normal((32, 16)).astype(np.float32))

    def step():
        nonlocal w
        y = nr.matmul_bias_activation(xb, w, bias, "gelu")
        (y * y).mean().backward()
        with nr.no_grad():
            w = (w - w.grad * 0.1).detach().requires_grad_()
        bias.grad = None
        return y.sum().item()

    for _ in range(10):
        step()
    info = be.info()
    for _ in range(200):
        step()
    after = be.info()
    assert after["pool"]["created"] == info["pool"]["created"]
    assert after["pipelines"] == info["pipelines"]
    assert after["pool"]["live"] < info["pool"]["live"] + 50
    assert backend(max_binding_size=1 << 20).info()["pipelines"] == after["pipelines"]   # shared


def test_kernel_errors_are_typed(be):
    with pytest.raises(KernelError, match="my_broken_kernel"):
        wb.shared_adapter().create_pipeline("my_broken_kernel", "fn main( {", "main", {})
    from numr_web.backends.webgpu import codegen, kernels
    with pytest.raises(KernelError, match="no_such_file"):
        kernels.load("no_such_file.wgsl")
    with pytest.raises(KernelError, match="no_such_file"):
        codegen.dump("no_such_file.wgsl")
    assert nr.full((2,), 3, dtype="int32", device="webgpu").tolist() == [3, 3]   # still works


def test_probe_without_wgpu_fails_cleanly():
    code = ("import sys; sys.modules['wgpu'] = None\n"       # "import wgpu" raises ImportError
            "import numr_web as nr\n"
            "ok, why = nr.backends.probe('webgpu')\n"
            "assert ok is False and 'wgpu' in why, why\n"
            "assert nr.available_devices() == ['cpu'] or 'webgpu' not in nr.available_devices()\n"
            "try:\n    nr.zeros(2, device='webgpu')\nexcept nr.BackendUnavailableError as e:\n"
            "    print('OK', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "OK" in out.stdout, out.stdout + out.stderr


def test_pool_gives_each_allocation_of_a_step_its_buffer_of_the_step_before():
    """A training loop's k-th allocation of a size class after a readback takes the buffer the
    k-th took a step before (when free), so the step's dispatches bind the same buffers every
    step and their bind groups are reused; the values stay right."""
    if "webgpu" not in nr.available_devices():
        pytest.skip("no webgpu adapter")
    be = nr.get_backend("webgpu")
    be.empty_cache()                     # no places left by earlier work in this process
    pool = be.pool
    v = np.arange(1000) % 7                       # sums exact in float32
    x = nr.tensor(v.astype(np.float32), device="webgpu")
    seen = []
    for step in range(4):
        a = x * 2                         # three allocations of one size class per step
        b = a + 1
        c = (b * a).sum()
        assert c.item() == float(np.sum((v * 2 + 1) * v * 2))
        seen.append((a._data.storage.raw, b._data.storage.raw))
        del a, b, c
    assert seen[2] == seen[3] and seen[1] == seen[2]
    assert pool.stats()["created"] >= 2


def test_pool_keeps_an_optimizers_two_buffers_a_parameter_from_step_to_step():
    """Parameters an optimizer replaces each step alternate between two buffers, while the
    forward's and backward's values of the same size class come and go around them: after a few
    steps every parameter binds the buffer it had two steps before and the pool makes no new
    buffers (before, a place whose buffers were both held took another place's spare, which then
    did the same, and every step bound new buffer sets, each bind group made anew)."""
    if "webgpu" not in nr.available_devices():
        pytest.skip("no webgpu adapter")
    be = nr.get_backend("webgpu")
    be.empty_cache()       # the places earlier work in this process left would delay the settling
    pool = be.pool
    rng = np.random.default_rng(0)
    model = nr.nn.MLP([64, 64, 64, 64], activation="relu", device="webgpu", seed=1)
    opt = nr.nn.optim.AdamW(model.parameters(), lr=1e-3)
    x = nr.tensor(rng.standard_normal((64, 64)).astype(np.float32), device="webgpu")
    y = nr.tensor(rng.integers(0, 64, 64).astype(np.int32), device="webgpu")
    seen, created = [], []
    for step in range(12):
        loss = nr.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        assert np.isfinite(loss.item())
        seen.append([p._data.storage.raw for p in model.parameters()])
        created.append(pool.stats()["created"])
    for s in range(7, 12):
        assert seen[s] == seen[s - 2], s
    assert created[6] == created[11]


def test_empty_cache_gives_free_buffers_back_and_keeps_live_tensors():
    if "webgpu" not in nr.available_devices():
        pytest.skip("no webgpu adapter")
    be = nr.get_backend("webgpu")
    v = np.arange(4096, dtype=np.float32)
    kept = nr.tensor(v, device="webgpu")
    for _ in range(3):
        (kept * 3 + 1).sum().item()       # temporaries: free buffers once read back
    pending = kept * 2                     # recorded, not yet submitted
    before = be.pool.stats()
    assert before["free"] > 0
    be.empty_cache()
    after = be.pool.stats()
    assert after["free"] == 0 and after["live"] == before["live"]
    assert after["bytes"] < before["bytes"]
    np.testing.assert_array_equal(pending.numpy(), v * 2)
    np.testing.assert_array_equal((kept + 1).numpy(), v + 1)
