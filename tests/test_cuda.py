"""cuda-specific tests: the generated CUDA activation kernels against the table's numpy formulas in
float64 (|x| up to 1e4; the CUDA formulas themselves are checked against mpmath closed forms in
tests/test_cuda_codegen.py), the fused GEMM epilogue and activation backward (with the bias
gradient), the raw binary kernels (bit-exact against numpy), float16 computed in float32 and rounded
once, the deterministic scatter-add, typed errors for sizes and deferred checks (the CUDA context
stays usable), DLPack zero-copy with torch and cupy, the TF32 opt-in (off by default), and the error
when CUDA is missing.

The first group runs everywhere (no GPU needed); the rest is skipped with the probe's reason where
there is no usable CUDA device."""
import builtins
import sys
import types

import numpy as np
import pytest

import numr_web as nr
from numr_web.backends.cuda.backend import CudaBackend
from numr_web.vocab.activations import ACT

OK, WHY = nr.backends.probe("cuda")
needs_cuda = pytest.mark.skipif(not OK, reason=f"cuda: {WHY}")
ACTS = list(ACT)


# ------------------------------------------------------------------------------------------------
# everywhere: probing and the error when CUDA is absent
def test_cuda_probe_without_cupy(monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *a, **k):
        if name == "cupy" or name.startswith("cupy."):
            raise ImportError("No module named 'cupy'")
        return real_import(name, *a, **k)

    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.setattr(builtins, "__import__", fake_import)
    ok, why = CudaBackend.probe()
    assert not ok and "cupy is not installed" in why and "numr-web[cuda]" in why


def test_cuda_probe_without_gpu(monkeypatch):
    fake = types.ModuleType("cupy")
    fake.__version__ = "0.0-fake"
    fake.cuda = types.SimpleNamespace(is_available=lambda: False)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    ok, why = CudaBackend.probe()
    assert not ok and "no CUDA driver or GPU" in why


def test_cuda_probe_runtime_error_does_not_raise(monkeypatch):
    def boom():
        raise RuntimeError("cudaErrorInsufficientDriver")
    fake = types.ModuleType("cupy")
    fake.__version__ = "0.0-fake"
    fake.cuda = types.SimpleNamespace(is_available=lambda: True,
                                      runtime=types.SimpleNamespace(getDeviceCount=boom))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    ok, why = CudaBackend.probe()
    assert not ok and "cudaErrorInsufficientDriver" in why


@pytest.mark.skipif(OK, reason="CUDA is available here")
def test_cuda_unavailable_raises_with_reason():
    assert "cuda" not in nr.available_devices()
    with pytest.raises(nr.BackendUnavailableError) as e:
        nr.zeros((2,), device="cuda")
    assert WHY in str(e.value) and "cuda" in str(e.value)


# ------------------------------------------------------------------------------------------------
# on a GPU
@pytest.fixture(scope="module")
def be():
    if not OK:
        pytest.skip(f"cuda: {WHY}")
    return nr.backends.get_backend("cuda")


def _x(n, dtype, seed=0):
    """Inputs across the whole range: normal, uniform up to |x| = 1e4, and the edges."""
    rng = np.random.default_rng(seed)
    m = max(n, 64)
    edges = [0.0, -0.0, 1e-30, -1e-30, 88.0, -88.0, 1e4, -1e4, 5.0, -5.0]
    x = np.concatenate([edges, rng.standard_normal(m // 2) * 3, rng.uniform(-1e4, 1e4, m - m // 2 - 10)])
    return x[:n].astype(dtype)


TOL = {np.float64: dict(rtol=1e-9, atol=1e-12), np.float32: dict(rtol=1e-5, atol=1e-5),
       np.float16: dict(rtol=2e-3, atol=2e-3)}


def _close(got, want, dtype, scale=1.0):
    t = TOL[dtype]
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=t["rtol"], atol=t["atol"] * scale)


def _np_fn(act, fn):
    a = ACT[act]
    if fn == "ds" and a.saves == "z":
        fn = "d2"                                  # d/ds of act'(s) for rows that save z
    f = getattr(a.np, fn)
    return (lambda x: f(np, x.copy())) if fn == "fwd" else (lambda x: f(np, x))


@needs_cuda
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("fn", ["fwd", "dz", "d2", "ds"])
@pytest.mark.parametrize("n", [4099, 3])                     # vector body + scalar tail; tail only
def test_cuda_activation_kernel_vs_numpy(be, act, fn, dtype, n):
    cp = be.xp
    x = _x(n, dtype)
    if fn == "ds" and ACT[act].saves == "y":                 # ds reads the saved output y
        x = ACT[act].np.fwd(np, x.astype(np.float64)).astype(dtype)
    x64 = x.astype(np.float64)
    want = _np_fn(act, fn)(x64)
    got = be.activation(act, cp.asarray(x), fn)
    assert got.dtype == x.dtype and got.shape == x.shape
    _close(cp.asnumpy(got), want, dtype, scale=10 if fn in ("d2", "ds") else 1)
    assert not np.isnan(cp.asnumpy(got)).any()


@needs_cuda
def test_cuda_activation_misaligned_and_strided(be):
    cp = be.xp
    x = cp.asarray(_x(4096 + 1, np.float32))[1:]                # 4-byte offset: scalar path
    assert x.data.ptr % 16
    _close(cp.asnumpy(be.activation("gelu", x)),
           ACT["gelu"].np.fwd(np, cp.asnumpy(x).astype(np.float64)), np.float32)
    xt = cp.asarray(_x(64 * 33, np.float32).reshape(64, 33)).T  # non-contiguous
    _close(cp.asnumpy(be.activation("silu", xt)),
           ACT["silu"].np.fwd(np, cp.asnumpy(xt).astype(np.float64)), np.float32)


def _ref_backward(act, dy, s):
    """dz from float64 copies of the exact inputs the kernel saw (s = y or z per the table)."""
    return ACT[act].np.d1(np, dy, s, None)


@needs_cuda
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("shape", [(257, 4096 // 4), (33, 12), (5, 7), (2, 3, 40), (9,)])
@pytest.mark.parametrize("mode", ["fused", "sum"])
def test_cuda_act_backward_vs_numpy(be, act, dtype, shape, mode, monkeypatch):
    monkeypatch.setattr(be, "bias_grad", mode)
    cp = be.xp
    n = int(np.prod(shape))
    z = _x(n, dtype, seed=1).reshape(shape)
    y = ACT[act].np.fwd(np, z.astype(np.float64)).astype(dtype)
    dy = np.random.default_rng(2).standard_normal(shape).astype(dtype)
    s = z if ACT[act].saves == "z" else y
    want = _ref_backward(act, dy.astype(np.float64), s.astype(np.float64))
    dz, db = be.act_backward(act, cp.asarray(dy), cp.asarray(s), None, True)
    assert dz.dtype == dtype and dz.shape == shape and db.shape == shape[-1:] and db.dtype == dtype
    _close(cp.asnumpy(dz), want, dtype)
    wdb = want.reshape(-1, shape[-1]).sum(0)
    scale = np.abs(want).reshape(-1, shape[-1]).sum(0).max() + 1
    _close(cp.asnumpy(db), wdb, dtype, scale=scale)
    dz2, none = be.act_backward(act, cp.asarray(dy), cp.asarray(s), None, False)
    assert none is None
    np.testing.assert_array_equal(cp.asnumpy(dz2), cp.asnumpy(dz))


@needs_cuda
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("with_bias", [True, False])
def test_cuda_gemm_bias_act_vs_numpy(be, act, dtype, with_bias):
    cp = be.xp
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 37, 24)).astype(dtype)
    b = rng.standard_normal((24, 40)).astype(dtype)
    bias = (rng.standard_normal(40) * 3).astype(dtype) if with_bias else None
    y, z = be.gemm_bias_act(cp.asarray(a), cp.asarray(b), cp.asarray(bias) if with_bias else None, act)
    z64 = cp.asnumpy(cp.matmul(cp.asarray(a), cp.asarray(b))).astype(np.float64)
    if with_bias:
        z64 = z64 + bias.astype(np.float64)
    want = ACT[act].np.fwd(np, z64.copy())
    scale = 30 if dtype == np.float16 else 1
    _close(cp.asnumpy(y), want, dtype, scale=scale)
    if ACT[act].saves == "z":
        assert z is not None and z.data.ptr != y.data.ptr
        _close(cp.asnumpy(z), z64, dtype, scale=scale)
    else:
        assert z is None


@needs_cuda
@pytest.mark.parametrize("act", ACTS)
def test_cuda_fused_layer_matches_cpu(act):
    rng = np.random.default_rng(4)
    a, b, bias = rng.standard_normal((2, 16, 8)), rng.standard_normal((8, 12)), rng.standard_normal(12)
    g = rng.standard_normal((2, 16, 12))
    outs = {}
    for dev in ("cpu", "cuda"):
        ts = [nr.tensor(v, dtype="float64", device=dev, requires_grad=True) for v in (a, b, bias)]
        y = nr.matmul_bias_activation(*ts, activation=act)
        assert y.grad_fn.name == "MatmulBiasActivationBackward"
        grads = nr.grad([y], ts, grad_outputs=[nr.tensor(g, dtype="float64", device=dev)])
        outs[dev] = [y.numpy()] + [t.numpy() for t in grads]
    for c, d in zip(outs["cpu"], outs["cuda"]):
        np.testing.assert_allclose(d, c, rtol=1e-9, atol=1e-10)


@needs_cuda
@pytest.mark.parametrize("knobs", [dict(unroll=4, db_blocks_per_sm=16, epilogue_unroll=1),
                                   dict(unroll=4, db_blocks_per_sm=0, epilogue_unroll=4),
                                   dict(unroll=8, db_blocks_per_sm=8, epilogue_unroll=2),
                                   dict(unroll=1, db_blocks_per_sm=1, epilogue_unroll=8, vec_bytes=32),
                                   dict(unroll=2, vec_bytes=16, bias_grad="sum")])
def test_cuda_kernel_variants_agree(be, knobs, monkeypatch):
    """Every tuning knob (bench/cuda_vs_torch.py sweeps them) computes the same function."""
    cp = be.xp
    rng = np.random.default_rng(6)
    a = cp.asarray(rng.standard_normal((301, 24)), dtype=cp.float32)
    b = cp.asarray(rng.standard_normal((24, 520)), dtype=cp.float32)
    bias = cp.asarray(rng.standard_normal(520), dtype=cp.float32)
    dy = cp.asarray(rng.standard_normal((301, 520)), dtype=cp.float32)
    y0, z0 = be.gemm_bias_act(a, b, bias, "gelu")
    dz0, db0 = be.act_backward("gelu", dy, z0, y0, True)
    g0 = be.activation("silu", dy.ravel()[3:], "dz")
    for k, v in knobs.items():
        monkeypatch.setattr(be, k, v)
    y, z = be.gemm_bias_act(a, b, bias, "gelu")
    dz, db = be.act_backward("gelu", dy, z, y, True)
    g = be.activation("silu", dy.ravel()[3:], "dz")
    for got, want in ((y, y0), (z, z0), (dz, dz0), (g, g0)):
        np.testing.assert_allclose(cp.asnumpy(got), cp.asnumpy(want), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(cp.asnumpy(db), cp.asnumpy(db0), rtol=1e-5, atol=1e-4)


@needs_cuda
def test_cuda_kernels_compiled_once(be):
    cp = be.xp
    x = cp.arange(1000, dtype=cp.float32)
    be.activation("gelu", x)
    n = be.kernels.compiled()
    for act in ACTS:
        be.activation(act, x)
    assert be.kernels.compiled() == n                     # every row came from one compile


# ------------------------------------------------------------------------------------------------
# DLPack zero-copy
@needs_cuda
def test_cuda_dlpack_cupy_zero_copy(be):
    cp = be.xp
    x = cp.arange(12, dtype=cp.float32).reshape(3, 4)
    t = nr.from_dlpack(x)
    assert t.device == "cuda" and t.shape == (3, 4) and t._data.data.ptr == x.data.ptr
    back = cp.from_dlpack(t)
    assert back.data.ptr == x.data.ptr
    x[0, 0] = 42
    assert t.numpy()[0, 0] == 42


@needs_cuda
def test_cuda_dlpack_torch_zero_copy():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    x = torch.randn(5, 6, device="cuda")
    t = nr.from_dlpack(x)
    assert t.device == "cuda" and t.dtype == nr.float32 and t._data.data.ptr == x.data_ptr()
    y = torch.from_dlpack(t)
    assert y.data_ptr() == x.data_ptr() and y.device.type == "cuda"
    u = nr.tensor(np.ones((2, 3)), dtype="float64", device="cuda")
    w = torch.from_dlpack(u)
    assert w.data_ptr() == u._data.data.ptr and w.dtype == torch.float64
    w.mul_(3)
    np.testing.assert_array_equal(u.numpy(), 3 * np.ones((2, 3)))


# ------------------------------------------------------------------------------------------------
# TF32 opt-in
@needs_cuda
def test_cuda_tf32_off_by_default_and_opt_in(be, monkeypatch):
    import os
    cp = be.xp
    if os.environ.get("NUMR_CUDA_TF32", "0") in ("0", ""):
        assert be.tf32 is False
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((1024, 1024)), rng.standard_normal((1024, 1024))
    ref = a @ b
    a32, b32 = cp.asarray(a, dtype=cp.float32), cp.asarray(b, dtype=cp.float32)

    def err():
        return np.linalg.norm(cp.asnumpy(be.matmul(a32, b32)) - ref) / np.linalg.norm(ref)
    old = be.tf32
    try:
        be.tf32 = False
        e_off = err()
        be.tf32 = True
        e_on = err()
    finally:
        be.tf32 = old
    assert e_off < 1e-5                  # full float32 products
    assert e_on > 3 * e_off              # tf32 keeps 10 mantissa bits: ~1e-4
    assert "tf32" in be.info()


# ------------------------------------------------------------------------------------------------
# raw binary kernels, float16, scatter-add, typed errors
@needs_cuda
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("op, f", [("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                                   ("div", np.true_divide)])
def test_cuda_binary_kernels_bit_exact(be, op, f, dtype):
    """IEEE results identical to numpy's (float16: computed in float32, rounded once)."""
    cp = be.xp
    rng = np.random.default_rng(7)
    for n in (1, 3, 1027):
        a = (rng.standard_normal(n) * 10).astype(dtype)
        b = (rng.standard_normal(n) * 10).astype(dtype)
        b[:1] = 0                                       # x / 0 -> inf / nan as in numpy
        w = np.float32 if dtype == np.float16 else dtype
        with np.errstate(all="ignore"):
            want = f(a.astype(w), b.astype(w)).astype(dtype)
            want_s = f(a.astype(w), w(2.5)).astype(dtype)
            want_r = f(w(2.5), a.astype(w)).astype(dtype)
        got = be.binary(op, cp.asarray(a), cp.asarray(b))
        assert got.dtype == dtype
        np.testing.assert_array_equal(cp.asnumpy(got), want)
        np.testing.assert_array_equal(cp.asnumpy(be.binary(op, cp.asarray(a), 2.5)), want_s)
        np.testing.assert_array_equal(cp.asnumpy(be.binary(op, 2.5, cp.asarray(a))), want_r)
    big = cp.asarray(rng.standard_normal(4099).astype(dtype))
    off = big[1:]                                       # misaligned: the scalar path
    np.testing.assert_array_equal(cp.asnumpy(be.binary(op, off, off)),
                                  f(cp.asnumpy(off).astype(np.float64),
                                    cp.asnumpy(off).astype(np.float64)).astype(dtype)
                                  if dtype == np.float64 else
                                  f(cp.asnumpy(off).astype(np.float32),
                                    cp.asnumpy(off).astype(np.float32)).astype(dtype))


@needs_cuda
def test_cuda_float16_rounds_once():
    rng = np.random.default_rng(8)
    a = rng.standard_normal((33, 20)).astype(np.float16)
    b = rng.standard_normal((20, 17)).astype(np.float16)
    bias = rng.standard_normal(17).astype(np.float16)
    y = nr.matmul_bias_activation(nr.tensor(a, device="cuda"), nr.tensor(b, device="cuda"),
                                  nr.tensor(bias, device="cuda"), activation="gelu")
    assert y.dtype == nr.float16
    z = a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64)
    want = (z * 0.5 * (1 + np.vectorize(__import__("math").erf)(z / np.sqrt(2))))
    got = y.numpy().astype(np.float64)
    ulp = np.abs(want) * 2.0 ** -10 + 2.0 ** -24
    assert (np.abs(got - want) <= 0.5 * ulp + np.abs(want) * 1e-6 + 1e-6).all()
    s = nr.tensor(a, device="cuda") * 3.0 + nr.tensor(a, device="cuda")
    np.testing.assert_array_equal(s.numpy(), (a.astype(np.float32) * 3.0).astype(np.float16)
                                  .astype(np.float32).__add__(a.astype(np.float32)).astype(np.float16))


@needs_cuda
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_cuda_scatter_add_deterministic(dtype):
    """Embedding backward with many repeated rows: the same bits every time, close to float64."""
    rng = np.random.default_rng(9)
    idx = rng.integers(0, 5, size=(400,)).astype(np.int32)
    g = rng.standard_normal((400, 8))
    outs = []
    for _ in range(3):
        w = nr.tensor(rng.standard_normal((5, 8)), dtype=dtype, device="cuda", requires_grad=True)
        w.grad = None
        y = nr.embedding(nr.tensor(idx, device="cuda"), w)
        y.backward(nr.tensor(g, dtype=dtype, device="cuda"))
        outs.append(w.grad.numpy())
    for o in outs[1:]:
        assert o.tobytes() == outs[0].tobytes()
    want = np.zeros((5, 8))
    np.add.at(want, idx, g.astype(dtype).astype(np.float64))
    tol = {"float64": 1e-12, "float32": 1e-5, "float16": 2e-3}[dtype]
    np.testing.assert_allclose(outs[0].astype(np.float64), want, rtol=tol, atol=tol * 20)


@needs_cuda
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("n", [1, 3, 256, 257, 4099, 16384, 16385, 70000])
def test_cuda_sum_and_mean_against_exact_sums(dtype, n):
    """Full sums and means (small ones run as one block accumulating in double, larger ones
    through CuPy): float32 and float16 small sums are the exact sum (math.fsum) rounded once, a
    float32 accumulation would be off by a few ulp at these sizes; float64 within an ulp; the same
    bits every time, keepdims shapes, NaN and inf propagated."""
    import math
    x = (np.random.default_rng(n).uniform(0.5, 2.0, n) * (1000 / n)).astype(dtype)
    exact = math.fsum(x.astype(np.float64).tolist())
    t = nr.tensor(x.reshape(1, n) if n % 2 else x.reshape(-1, 1), device="cuda")
    for op, want in (("sum", exact), ("mean", exact / n)):
        got = getattr(t, op)()
        assert got.shape == () and got.dtype.name == dtype
        v = got.numpy()
        assert getattr(t, op)().numpy().tobytes() == v.tobytes()
        if n <= 16384 and dtype != "float64":
            assert v == np.array(want, dtype), (op, float(v), want)
        else:
            ulps = 1 if n <= 16384 else 8
            assert abs(float(v) - want) <= ulps * float(np.spacing(np.array(want, dtype))), \
                (op, float(v), want)
        kept = getattr(t, op)(keepdims=True)
        assert kept.shape == (1, 1) and kept.numpy().reshape(()).tobytes() == v.tobytes()
    for bad in (np.nan, np.inf):
        y = x.copy()
        y[n // 2] = bad
        got = float(nr.tensor(y, device="cuda").sum().numpy())
        assert (math.isnan(got) if bad != bad else got == bad)


@needs_cuda
def test_cuda_huge_sizes_are_typed_errors_and_the_device_survives():
    for shape in [(2 ** 62,), (2 ** 40, 2 ** 20), (2 ** 31, 2 ** 31)]:
        with pytest.raises(nr.BackendLimitError) as e:
            nr.zeros(shape, device="cuda")
        assert "cuda" in str(e.value)
    with pytest.raises(nr.NumrError):
        nr.full((2 ** 62,), 1.0, device="cuda")
    x = nr.arange(6, device="cuda", dtype="float32").reshape(2, 3)
    np.testing.assert_array_equal((x * 2).numpy(), np.arange(6).reshape(2, 3) * 2.0)


@needs_cuda
def test_cuda_deferred_checks_raise_at_readback():
    logits = nr.zeros((3, 4), device="cuda")
    loss = nr.cross_entropy(logits, nr.tensor([0, 7, 1], device="cuda"))   # 7 is out of range
    with pytest.raises(nr.ShapeError):
        loss.numpy()
    ok = nr.cross_entropy(logits, nr.tensor([0, 3, 1], device="cuda"))
    np.testing.assert_allclose(ok.numpy(), np.log(4.0), rtol=1e-6)
