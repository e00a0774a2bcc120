"""webgpu backend primitives vs the numpy reference (NumpyBackend), plus what is specific to the
GPU: strided views, chunking beyond maxStorageBufferBindingSize, the buffer pool, typed kernel
errors, overflow-safe activations, erf accuracy. Runs on lavapipe in CI: sizes are small."""
import asyncio
import math

import numpy as np
import pytest

import numr_web as nr
from numr_web import dtypes
from numr_web.backends.base import HostArray
from numr_web.backends.numpy_backend import NumpyBackend
from numr_web.errors import BackendLimitError, DTypeError, KernelError
from numr_web.ops.activations import ACT

wb = pytest.importorskip("numr_web.backends.webgpu.backend")
ok, why = wb.WebGPUBackend.probe()
if not ok:
    pytest.fail(f"webgpu unavailable here: {why}", pytrace=False)

F32, I32, B, F16 = dtypes.float32, dtypes.int32, dtypes.bool_, dtypes.float16
TOL = dict(rtol=2e-5, atol=2e-6)


@pytest.fixture(scope="module")
def be():
    return wb.WebGPUBackend()


@pytest.fixture(scope="module")
def nb():
    return NumpyBackend()


def up(be, x, dtype=None):
    x = np.asarray(x)
    if dtype is None:
        dtype = {np.float32: F32, np.int32: I32, np.bool_: B, np.float16: F16}[x.dtype.type]
    return be.from_host(np.ascontiguousarray(x), dtype)


def down(be, h):
    return be.to_numpy(h)


def rng(seed=0):
    return np.random.default_rng(seed)


def rand(*shape, seed=0, lo=-2.0, hi=2.0):
    return rng(seed).uniform(lo, hi, shape).astype(np.float32)


# -- probe / info / dtypes ---------------------------------------------------------------------------
def test_probe_and_info(be):
    ok, desc = wb.WebGPUBackend.probe()
    assert ok and isinstance(desc, str)
    info = be.info()
    assert info["adapter"] and info["backend"]
    assert info["limits"]["maxStorageBufferBindingSize"] >= 128 << 20
    assert isinstance(info["features"], list)


def test_roundtrip_dtypes(be):
    x = rand(3, 5)
    assert np.array_equal(down(be, up(be, x)), x)
    i = np.arange(-7, 8, dtype=np.int32).reshape(3, 5)
    assert np.array_equal(down(be, up(be, i)), i)
    bo = (i % 3 == 0)
    hb = up(be, bo)
    assert be.to_bytes(hb) == bo.tobytes()            # one byte per bool, as numpy
    assert np.array_equal(down(be, hb), bo)
    assert be.to_list(up(be, np.array([[1.5, 2.0]], np.float32))) == [[1.5, 2.0]]
    # HostArray (the browser path: no numpy)
    import array
    h = be.from_host(HostArray(array.array("f", [1, 2, 3, 4, 5, 6]), (2, 3), F32), F32)
    assert be.to_list(h) == [[1, 2, 3], [4, 5, 6]]
    hb = be.from_host(HostArray(bytes([1, 0, 1]), (3,), B), B)
    assert be.to_list(hb) == [True, False, True]
    assert be.dtype_of(h) is F32
    # empty and 0-d
    assert down(be, up(be, np.zeros((0, 3), np.float32))).shape == (0, 3)
    assert down(be, up(be, np.float32(4.5))) == 4.5


def test_float64_refused(be):
    with pytest.raises(DTypeError, match="float64.*float32"):
        be.from_host(np.zeros(3), dtypes.float64)
    with pytest.raises(DTypeError, match="float64"):
        be.full((2,), 1.0, dtypes.float64)


def test_float16(be, nb):
    if not be.f16:
        with pytest.raises(DTypeError, match="shader-f16"):
            be.full((2,), 1.0, F16)
        return
    x = rand(4, 6).astype(np.float16)
    hx = up(be, x)
    assert np.array_equal(down(be, hx), x)
    np.testing.assert_allclose(down(be, be.binary("mul", hx, hx)), x * x, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(down(be, be.reduce("sum", hx, (1,), False)),
                               x.astype(np.float32).sum(1), rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(down(be, be.astype(hx, F32)), x.astype(np.float32))
    a, b = rand(5, 7).astype(np.float16), rand(7, 3, seed=1).astype(np.float16)
    np.testing.assert_allclose(down(be, be.matmul(up(be, a), up(be, b))),
                               a.astype(np.float32) @ b.astype(np.float32), rtol=1e-2, atol=1e-2)
    odd = be.slice(hx, ((1, 2, 1), (1, 6, 2)))          # odd element offset: 2-byte aligned only
    assert np.array_equal(down(be, odd), x[1:2, 1:6:2])


# -- elementwise -------------------------------------------------------------------------------------
def views(be, x):
    """(numpy view, gpu view) pairs: dense, transposed, sliced with steps, broadcast."""
    h = up(be, x)
    yield x, h
    yield x.T, be.permute(h, (1, 0))
    yield x[1:, ::2], be.slice(h, ((1, x.shape[0], 1), (0, x.shape[1], 2)))
    yield x[2], be.slice(h, (2, (0, x.shape[1], 1)))
    yield np.broadcast_to(x[:1], x.shape), be.expand(be.slice(h, ((0, 1, 1), (0, x.shape[1], 1))), x.shape)


@pytest.mark.parametrize("op", ["neg", "abs", "exp", "log", "sqrt", "sin", "cos", "sign"])
def test_unary(be, nb, op):
    x = rand(5, 6, lo=0.1, hi=3.0) if op in ("log", "sqrt") else rand(5, 6, lo=-4, hi=4)
    for xv, hv in views(be, x):
        np.testing.assert_allclose(down(be, be.unary(op, hv)), nb.unary(op, xv), **TOL)


def test_unary_special_values(be):
    x = np.array([-1.0, 0.0, 1e4, -1e4, 100.0], np.float32)
    with np.errstate(all="ignore"):
        for op in ("log", "sqrt", "exp", "sin", "cos"):
            ref = getattr(np, op)(x)
            got = down(be, be.unary(op, up(be, x)))
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4, err_msg=op)
    i = np.array([-3, 0, 5], np.int32)
    assert np.array_equal(down(be, be.unary("abs", up(be, i))), np.abs(i))
    assert np.array_equal(down(be, be.unary("neg", up(be, i))), -i)
    assert np.array_equal(down(be, be.unary("sign", up(be, i))), np.sign(i))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow", "maximum", "minimum"])
def test_binary(be, nb, op):
    a = rand(4, 1, 5, lo=0.5, hi=2.0)
    b = rand(3, 1, seed=1, lo=0.5, hi=2.0)
    ha, hb = up(be, a), up(be, b)
    np.testing.assert_allclose(down(be, be.binary(op, ha, hb)), nb.binary(op, a, b), **TOL)
    np.testing.assert_allclose(down(be, be.binary(op, ha, 1.5)), nb.binary(op, a, np.float32(1.5)), **TOL)
    np.testing.assert_allclose(down(be, be.binary(op, 1.5, hb)), nb.binary(op, np.float32(1.5), b), **TOL)
    at = be.permute(up(be, a.transpose(2, 1, 0).copy()), (2, 1, 0))       # strided operand
    np.testing.assert_allclose(down(be, be.binary(op, at, hb)), nb.binary(op, a, b), **TOL)


def test_binary_int_and_pow_edge(be, nb):
    a = np.array([[-3, 0, 7, 2]], np.int32)
    b = np.array([[2], [3]], np.int32)
    for op in ("add", "sub", "mul", "maximum", "minimum", "pow"):
        assert np.array_equal(down(be, be.binary(op, up(be, a), up(be, b))), nb.binary(op, a, b)), op
    assert np.array_equal(down(be, be.binary("add", up(be, a), 5)), a + 5)
    x = np.array([-2.0, -2.0, 0.0, 0.0, 3.0, -8.0], np.float32)
    y = np.array([3.0, 2.0, 2.0, -1.0, 0.5, 1 / 3], np.float32)
    with np.errstate(all="ignore"):
        ref = np.power(x, y)
    got = down(be, be.binary("pow", up(be, x), up(be, y)))
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    # maximum/minimum propagate NaN like numpy
    n = np.array([np.nan, 1.0, 2.0], np.float32)
    m = np.array([0.0, np.nan, 1.0], np.float32)
    np.testing.assert_array_equal(down(be, be.binary("maximum", up(be, n), up(be, m))), np.maximum(n, m))


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_compare(be, nb, op):
    a = np.array([[-1.0, 0.0, 1.0], [2.0, 2.0, -3.0]], np.float32)
    b = np.array([0.0, 0.0, 2.0], np.float32)
    out = be.binary(op, up(be, a), up(be, b))
    assert out.dtype is B
    assert np.array_equal(down(be, out), nb.binary(op, a, b))
    assert np.array_equal(down(be, be.binary(op, up(be, a), 2.0)), nb.binary(op, a, np.float32(2)))
    ia = np.array([1, 5, -2], np.int32)
    assert np.array_equal(down(be, be.binary(op, up(be, ia), 1)), nb.binary(op, ia, 1))


def test_where(be, nb):
    c = rng().random((3, 4)) > 0.5
    a, b = rand(3, 4), rand(1, 4, seed=2)
    hc, ha, hb = up(be, c), up(be, a), up(be, b)
    np.testing.assert_array_equal(down(be, be.where(hc, ha, hb)), nb.where(c, a, b))
    np.testing.assert_array_equal(down(be, be.where(hc, ha, 0.0)), nb.where(c, a, np.float32(0)))
    np.testing.assert_array_equal(down(be, be.where(hc, -1.0, hb)), nb.where(c, np.float32(-1), b))
    i = np.arange(12, dtype=np.int32).reshape(3, 4)
    np.testing.assert_array_equal(down(be, be.where(hc, up(be, i), 7)), np.where(c, i, 7))


def test_astype(be, nb):
    x = np.array([[-2.7, -0.0, 0.5, 3.9, 1e6]], np.float32)
    i = np.array([[-3, 0, 1, 7, 1 << 20]], np.int32)
    bo = np.array([[True, False, True, True, False]])
    dts = [(F32, np.float32), (I32, np.int32), (B, np.bool_)]
    for src in (x, i, bo):
        hs = up(be, src)
        for dt, npd in dts:
            got = down(be, be.astype(hs, dt))
            assert got.dtype == npd
            np.testing.assert_array_equal(got, src.astype(npd))
        np.testing.assert_array_equal(down(be, be.astype(be.permute(hs, (1, 0)), F32)),
                                      src.T.astype(np.float32))


# -- activations ---------------------------------------------------------------------------------------
EXTREME = np.concatenate([np.linspace(-12, 12, 241), [-1e4, -3e3, -100, -89, -88.5, -30, 30, 88.5, 89,
                                                      100, 3e3, 1e4, 0.0, 1e-7, -1e-7]]).astype(np.float32)


def ref_act(name, order, x):
    """float64 reference of act^(order) (the numpy table in float64, exact on these inputs)."""
    x64 = x.astype(np.float64)
    row = ACT[name]
    with np.errstate(all="ignore"):
        if order == 0:
            return row.fwd(np, x64.copy())
        return (row.dz if order == 1 else row.d2)(np, x64)


@pytest.mark.parametrize("name", list(ACT))
@pytest.mark.parametrize("order", [0, 1, 2])
def test_activation_extremes(be, name, order):
    got = down(be, be.activation(name, up(be, EXTREME), order))
    assert np.isfinite(got).all(), (name, order, EXTREME[~np.isfinite(got)])
    ref = ref_act(name, order, EXTREME)
    np.testing.assert_allclose(got, ref, rtol=3e-6, atol=3e-7 * max(1.0, np.abs(ref).max() / 1e4))


@pytest.mark.parametrize("name", list(ACT))
def test_act_backward(be, nb, name):
    z = rand(6, 5, lo=-6, hi=6)
    z[0, :] = [-1e4, -90, 0.0, 90, 1e4]
    dy = rand(6, 5, seed=3)
    y, zz = nb.gemm_bias_act(np.eye(6, dtype=np.float32), z, None, name)
    ry, rz = nb.act_backward(name, dy, y, zz, True)
    hy, hz = up(be, y), (up(be, zz) if zz is not None else None)
    dz, db = be.act_backward(name, up(be, dy), hy, hz, True)
    gdz, gdb = down(be, dz), down(be, db)
    assert np.isfinite(gdz).all() and np.isfinite(gdb).all()
    np.testing.assert_allclose(gdz, ry, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gdb, rz, rtol=1e-5, atol=1e-5)
    dz2, none = be.act_backward(name, up(be, dy), hy, hz, False)
    assert none is None
    # 3-D input: bias grad sums over the two leading axes
    dz3, db3 = be.act_backward(name, up(be, dy.reshape(2, 3, 5)), be.reshape(hy, (2, 3, 5)),
                               be.reshape(hz, (2, 3, 5)) if hz is not None else None, True)
    np.testing.assert_allclose(down(be, db3), rz, rtol=1e-5, atol=1e-5)


def test_erf_accuracy(be):
    # erf is the core of exact GELU: check it against math.erf (correctly rounded double) in ulps
    x = np.concatenate([np.linspace(-6, 6, 20001), rng().uniform(-4, 4, 20000),
                        np.geomspace(1e-30, 1, 200)]).astype(np.float32)
    got = down(be, be.unary("erf", up(be, x))).astype(np.float64)
    ref = np.array([math.erf(v) for v in x.astype(np.float64)])
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    err = np.abs(got - ref) / ulp
    assert err.max() <= 2.0, (err.max(), x[err.argmax()])


# -- reductions ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
def test_reduce(be, nb, op):
    x = rand(3, 4, 5, seed=4)
    hx = up(be, x)
    for axes in [(0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2)]:
        for keep in (False, True):
            got = down(be, be.reduce(op, hx, axes, keep))
            np.testing.assert_allclose(got, nb.reduce(op, x, axes, keep), **TOL)
    ht = be.permute(hx, (2, 0, 1))
    np.testing.assert_allclose(down(be, be.reduce(op, ht, (1,), False)),
                               nb.reduce(op, x.transpose(2, 0, 1), (1,), False), **TOL)
    # long reductions take the workgroup schedule; many short ones the per-thread schedule
    big = rand(3, 5000, seed=5)
    np.testing.assert_allclose(down(be, be.reduce(op, up(be, big), (1,), False)),
                               nb.reduce(op, big, (1,), False), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(down(be, be.reduce(op, up(be, big), (0, 1), False)),
                               nb.reduce(op, big, (0, 1), False), rtol=1e-5, atol=1e-4)
    # column reductions (a bias gradient): coalesced per-thread schedule, split into chunks
    tall = rand(5000, 3, seed=27)
    np.testing.assert_allclose(down(be, be.reduce(op, up(be, tall), (0,), False)),
                               nb.reduce(op, tall, (0,), False), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(down(be, be.reduce(op, be.reshape(up(be, tall), (50, 100, 3)), (0, 1), True)),
                               nb.reduce(op, tall.reshape(50, 100, 3), (0, 1), True), rtol=1e-5, atol=1e-4)
    i = np.arange(24, dtype=np.int32).reshape(4, 6) - 10
    if op != "mean":
        np.testing.assert_array_equal(down(be, be.reduce(op, up(be, i), (0,), False)),
                                      nb.reduce(op, i, (0,), False))


def test_argmax(be, nb):
    x = np.array([[1.0, 3.0, 3.0, -1.0], [7.0, 2.0, 7.0, 0.0], [0.0, 0.0, 0.0, 0.0]], np.float32)
    hx = up(be, x)
    for axis in (None, 0, 1):
        for keep in (False, True):
            got = down(be, be.argmax(hx, axis, keep))
            ref = nb.argmax(x, axis, keep)
            assert got.dtype == np.int32 and got.shape == ref.shape
            np.testing.assert_array_equal(got, ref)
    big = rand(2, 3000, seed=6)
    big[1, 2500] = 10.0
    np.testing.assert_array_equal(down(be, be.argmax(up(be, big), 1, False)), np.argmax(big, 1))
    np.testing.assert_array_equal(down(be, be.argmax(up(be, big), None, False)), np.argmax(big))
    np.testing.assert_array_equal(down(be, be.argmax(be.permute(up(be, big), (1, 0)), 1, False)),
                                  np.argmax(big.T, 1))


@pytest.mark.parametrize("log", [False, True])
def test_softmax(be, nb, log):
    x = rand(3, 4, 5, seed=7, lo=-5, hi=5)
    x[0, 0, :] = [1000.0, -1000.0, 0.0, 999.0, 3.0]            # stability
    hx = up(be, x)
    for axis in (0, 1, 2):
        np.testing.assert_allclose(down(be, be.softmax(hx, axis, log)), nb.softmax(x, axis, log),
                                   rtol=1e-5, atol=1e-6)
    long = rand(2, 3000, seed=8, lo=-30, hi=30)
    np.testing.assert_allclose(down(be, be.softmax(up(be, long), 1, log)), nb.softmax(long, 1, log),
                               rtol=1e-5, atol=1e-6)


def test_one_hot(be, nb):
    lab = np.array([[0, 3], [2, 1], [3, 3]], np.int32)
    for dt in (F32, I32):
        got = down(be, be.one_hot(up(be, lab), 4, dt))
        np.testing.assert_array_equal(got, nb.one_hot(lab, 4, dt))
    np.testing.assert_array_equal(down(be, be.one_hot(be.permute(up(be, lab), (1, 0)), 4, F32)),
                                  nb.one_hot(lab.T.copy(), 4, F32))


# -- linear algebra ------------------------------------------------------------------------------------
@pytest.mark.parametrize("shapes", [((1, 1), (1, 1)), ((5, 7), (7, 3)), ((65, 33), (33, 70)),
                                    ((2, 3, 17, 9), (9, 20)), ((4, 1, 6, 5), (3, 5, 2)),
                                    ((2, 128, 64), (2, 64, 130)), ((130, 40), (40, 257)),
                                    ((128, 32), (32, 256)), ((2, 64, 16), (16, 64)),   # no bounds checks
                                    ((3, 70), (70, 5))])
def test_matmul(be, nb, shapes):
    a, b = rand(*shapes[0], seed=9), rand(*shapes[1], seed=10)
    tile = be.gemm_tile
    try:
        for be.gemm_tile in (64, 128, "v4", "v4w"):   # every GEMM kernel, whatever this adapter uses
            got = down(be, be.matmul(up(be, a), up(be, b)))
            np.testing.assert_allclose(got, nb.matmul(a, b), rtol=1e-5, atol=1e-5)
    finally:
        be.gemm_tile = tile


def test_matmul_v4_entry(be, nb):
    """gemm_v4 (NUMR_WEBGPU_GEMM_TILE v4 and v4w) runs on vec4-aligned row-major operands (batched,
    offset views, bounds-checked and not) and the launcher falls back to gemm for the others."""
    def entry(h):
        be.matmul(*h)
        return be._pending[-1].label

    tile = be.gemm_tile
    try:
        for be.gemm_tile in ("v4", "v4w"):
            for sa, sb in (((2, 256, 32), (32, 128)), ((3, 130, 36), (3, 36, 72)), ((5, 4), (4, 8))):
                a, b = rand(*sa, seed=40), rand(*sb, seed=41)
                assert entry((up(be, a), up(be, b))) == "matmul.gemm_v4"
                got = down(be, be.matmul(up(be, a), up(be, b)))
                np.testing.assert_allclose(got, nb.matmul(a, b), rtol=1e-5, atol=1e-5)
            big, rb = rand(9, 68, seed=42), rand(64, 20, seed=43)
            hb, b = up(be, big), up(be, rb)
            for (r0, c0), want in (((1, 4), "matmul.gemm_v4"),    # element offset 72: vec4-aligned
                                   ((0, 1), "matmul.gemm")):      # offset 1: not
                a = be.slice(hb, ((r0, 9, 1), (c0, c0 + 64, 1)))
                assert entry((a, b)) == want
                np.testing.assert_allclose(down(be, be.matmul(a, b)), big[r0:, c0:c0 + 64] @ rb,
                                           rtol=1e-5, atol=1e-5)
            at = rand(16, 132, seed=44)
            ht = be.permute(up(be, at), (1, 0))                   # transposed a: gemm
            rb2 = rand(16, 8, seed=45)
            assert entry((ht, up(be, rb2))) == "matmul.gemm"
            np.testing.assert_allclose(down(be, be.matmul(ht, up(be, rb2))), at.T @ rb2,
                                       rtol=1e-5, atol=1e-5)
    finally:
        be.gemm_tile = tile


def test_matmul_strided_and_int(be, nb):
    a, b = rand(9, 13, seed=11), rand(7, 9, seed=12)
    ht = be.permute(up(be, a), (1, 0))                        # (13, 9) transposed view
    hb = be.permute(up(be, b), (1, 0))                        # (9, 7)
    np.testing.assert_allclose(down(be, be.matmul(ht, hb)), a.T @ b.T, rtol=1e-5, atol=1e-5)
    ia = np.arange(12, dtype=np.int32).reshape(3, 4) - 5
    ib = np.arange(8, dtype=np.int32).reshape(4, 2)
    np.testing.assert_array_equal(down(be, be.matmul(up(be, ia), up(be, ib))), ia @ ib)


@pytest.mark.parametrize("name", list(ACT))
def test_gemm_bias_act(be, nb, name):
    a, b, bias = rand(2, 37, 19, seed=13), rand(19, 23, seed=14), rand(23, seed=15)
    ry, rz = nb.gemm_bias_act(a, b, bias, name)
    y, z = be.gemm_bias_act(up(be, a), up(be, b), up(be, bias), name)
    np.testing.assert_allclose(down(be, y), ry, rtol=1e-5, atol=1e-5)
    assert (z is None) == (rz is None) == (ACT[name].grad_from == "y")
    if z is not None:
        np.testing.assert_allclose(down(be, z), rz, rtol=1e-5, atol=1e-5)
    tile = be.gemm_tile
    try:
        for be.gemm_tile, (m2, k2, n2) in ((128, (150, 9, 140)), ("v4", (150, 12, 140)),
                                           ("v4", (256, 32, 128)), ("v4w", (150, 12, 140)),
                                           ("v4w", (256, 32, 256))):
            a2, b2 = rand(m2, k2, seed=30), rand(k2, n2, seed=31)
            bias2 = rand(n2, seed=32)
            y3, z3 = be.gemm_bias_act(up(be, a2), up(be, b2), up(be, bias2), name)
            ry3, rz3 = nb.gemm_bias_act(a2, b2, bias2, name)
            np.testing.assert_allclose(down(be, y3), ry3, rtol=1e-5, atol=1e-5)
            if z3 is not None:
                np.testing.assert_allclose(down(be, z3), rz3, rtol=1e-5, atol=1e-5)
    finally:
        be.gemm_tile = tile
    y2, _ = be.gemm_bias_act(up(be, a), up(be, b), None, name)
    np.testing.assert_allclose(down(be, y2), nb.gemm_bias_act(a, b, None, name)[0], rtol=1e-5, atol=1e-5)


# -- creation ----------------------------------------------------------------------------------------
def test_full_arange(be, nb):
    for dt in (F32, I32, B):
        np.testing.assert_array_equal(down(be, be.full((2, 3), 1, dt)), nb.full((2, 3), 1, dt))
    np.testing.assert_array_equal(down(be, be.full((2,), -2.5, F32)), [-2.5, -2.5])
    np.testing.assert_array_equal(down(be, be.arange(-3, 7, 2, I32)), nb.arange(-3, 7, 2, I32))
    np.testing.assert_allclose(down(be, be.arange(0.5, 3.0, 0.25, F32)), nb.arange(0.5, 3.0, 0.25, F32),
                               rtol=1e-6)
    assert down(be, be.arange(5, 2, 1, I32)).shape == (0,)


def test_random(be):
    u = down(be, be.random((200, 500), F32, 1, "uniform"))
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.003
    n = down(be, be.random((200, 500), F32, 1, "normal"))
    assert np.isfinite(n).all()
    assert abs(n.mean()) < 0.01 and abs(n.std() - 1) < 0.01
    assert abs(np.mean(np.abs(n) < 1) - 0.6827) < 0.01
    assert np.array_equal(n, down(be, be.random((200, 500), F32, 1, "normal")))   # seeded
    assert not np.array_equal(n, down(be, be.random((200, 500), F32, 2, "normal")))
    assert not np.array_equal(down(be, be.random((50,), F32, None, "uniform")),
                              down(be, be.random((50,), F32, None, "uniform")))
    c = np.corrcoef(u.ravel()[:-1], u.ravel()[1:])[0, 1]
    assert abs(c) < 0.01


# -- shapes and copies -------------------------------------------------------------------------------
def test_views_are_free_and_correct(be, nb):
    x = rand(4, 6, 5, seed=16)
    hx = up(be, x)
    n0 = be.dispatches
    p = be.permute(hx, (2, 0, 1))
    r = be.reshape(hx, (24, 5))
    e = be.expand(be.slice(hx, ((0, 4, 1), (1, 2, 1), (0, 5, 1))), (3, 4, 6, 5))
    s = be.slice(hx, ((1, 4, 2), 3, (4, 0, 1)))
    assert be.dispatches == n0                                          # no kernel ran
    assert e.strides[0] == 0 and e.strides[2] == 0
    np.testing.assert_array_equal(down(be, p), x.transpose(2, 0, 1))
    np.testing.assert_array_equal(down(be, r), x.reshape(24, 5))
    np.testing.assert_array_equal(down(be, e), np.broadcast_to(x[:, 1:2], (3, 4, 6, 5)))
    assert down(be, s).shape == (2, 0)
    np.testing.assert_array_equal(down(be, be.reshape(p, (5, 24))), x.transpose(2, 0, 1).reshape(5, 24))
    c = be.contiguous(p)
    assert c.is_contiguous and be.contiguous(c) is c
    np.testing.assert_array_equal(down(be, c), x.transpose(2, 0, 1))


def test_unslice_concat(be, nb):
    g = rand(2, 3, seed=17)
    idx = ((1, 5, 2), (0, 3, 1))
    np.testing.assert_array_equal(down(be, be.unslice(up(be, g), (5, 3), idx)),
                                  nb.unslice(g, (5, 3), idx))
    idx2 = (2, (1, 7, 2))
    g2 = rand(3, seed=18)
    np.testing.assert_array_equal(down(be, be.unslice(up(be, g2), (4, 7), idx2)),
                                  nb.unslice(g2, (4, 7), idx2))
    xs = [rand(2, k, 3, seed=k) for k in (1, 4, 2)]
    for axis, arrs in ((1, xs), (0, [x.transpose(1, 0, 2) for x in xs][:1] * 2)):
        hs = [up(be, a) for a in arrs]
        np.testing.assert_array_equal(down(be, be.concat(hs, axis)), nb.concat(arrs, axis))
    ht = be.permute(up(be, xs[1]), (1, 0, 2))
    np.testing.assert_array_equal(down(be, be.concat([ht, ht], 2)),
                                  np.concatenate([xs[1].transpose(1, 0, 2)] * 2, 2))


def test_async_readback(be):
    x = rand(3, 4)
    got = asyncio.run(be.read_bytes_async(up(be, x)))
    assert got == x.tobytes()


# -- limits, chunking, pool, errors ------------------------------------------------------------------
@pytest.fixture(scope="module")
def small(be):
    """A backend sharing the device but treating 4 KiB as maxStorageBufferBindingSize."""
    return wb.WebGPUBackend(adapter=be.adapter, max_binding_size=4096)


def test_chunked_elementwise(small, nb):
    be = small
    x = rand(50, 97, seed=19)                     # 19.4 KB: five+ chunks of 4 KiB
    y = rand(97, seed=20)
    hx, hy = up(be, x), up(be, y)
    np.testing.assert_allclose(down(be, be.binary("mul", hx, hy)), x * y, **TOL)
    np.testing.assert_allclose(down(be, be.binary("add", hx, 2.0)), x + 2, **TOL)
    np.testing.assert_allclose(down(be, be.unary("exp", hx)), np.exp(x), **TOL)
    np.testing.assert_allclose(down(be, be.activation("gelu", hx, 1)), ACT["gelu"].dz(np, x), **TOL)
    np.testing.assert_array_equal(down(be, be.binary("gt", hx, hy)), x > y)
    np.testing.assert_array_equal(down(be, be.where(be.binary("gt", hx, 0.0), hx, 0.0)),
                                  np.where(x > 0, x, 0))
    np.testing.assert_allclose(down(be, be.astype(hx, I32)), x.astype(np.int32))
    dz, db = be.act_backward("tanh", hx, hx, None, True)
    rdz, rdb = nb.act_backward("tanh", x, x, None, True)
    np.testing.assert_allclose(down(be, dz), rdz, **TOL)
    np.testing.assert_allclose(down(be, db), rdb, rtol=1e-5, atol=1e-5)
    # a strided view whose rows each fit is chunked too
    sl = be.slice(hx, ((0, 50, 2), (0, 97, 1)))
    np.testing.assert_allclose(down(be, be.unary("neg", sl)), -x[::2], **TOL)
    big = up(be, rand(3000, seed=21))            # 1-D, > limit
    np.testing.assert_allclose(down(be, be.unary("abs", big)), np.abs(down(be, big)))


def test_chunked_reductions(small, nb):
    be = small
    x = rand(60, 70, seed=22)
    hx = up(be, x)
    for op in ("sum", "mean", "max", "min"):
        for axes in ((0, 1), (0,), (1,)):
            np.testing.assert_allclose(down(be, be.reduce(op, hx, axes, False)),
                                       nb.reduce(op, x, axes, False), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(down(be, be.reduce("sum", hx, (1,), True)), x.sum(1, keepdims=True),
                               rtol=1e-5, atol=1e-4)


def test_limit_refusals(small):
    be = small
    x = up(be, rand(60, 70, seed=23))
    with pytest.raises(BackendLimitError, match="maxStorageBufferBindingSize"):
        be.matmul(x, up(be, rand(70, 3, seed=24)))
    with pytest.raises(BackendLimitError, match="maxStorageBufferBindingSize"):
        be.contiguous(be.permute(x, (1, 0)))      # each output row spans the whole input
    with pytest.raises(BackendLimitError, match="maxStorageBufferBindingSize"):
        be.softmax(x, 1, False)


def test_dispatch_grid_limits(be):
    g = be._grid(300_000_000)
    assert g[0] <= 65535 and g[1] <= 65535 and g[0] * g[1] * 256 >= 65535 * 256
    g = wb.WebGPUBackend._grid_wg(10_000_000)
    assert g[0] <= 65535 and g[1] <= 65535
    # fewer workgroups than elements / 256: the grid-stride loops cover the rest
    x = rand(5000, seed=28)
    be.grid_cap = 3
    try:
        np.testing.assert_allclose(down(be, be.unary("exp", up(be, x))), np.exp(x), **TOL)
        np.testing.assert_allclose(down(be, be.unary("exp", be.slice(up(be, x), ((1, 5000, 1),)))),
                                   np.exp(x[1:]), **TOL)
        np.testing.assert_allclose(down(be, be.reduce("sum", up(be, x.reshape(50, 100)), (1,), False)),
                                   x.reshape(50, 100).sum(1), rtol=1e-5, atol=1e-5)
    finally:
        del be.grid_cap


def test_many_workgroups(be):
    # more reductions than 65,535 workgroups in one dimension: 2-D grid + grid-stride loop
    x = rand(70000, 3, seed=25)
    np.testing.assert_allclose(down(be, be.reduce("sum", up(be, x), (1,), False)), x.sum(1),
                               rtol=1e-5, atol=1e-5)


def test_pool_reuse(be):
    """A training-like loop: the number of GPU buffers stops growing after warm-up (1,000 steps)."""
    rs = rng(26)
    w = up(be, rs.standard_normal((16, 8)).astype(np.float32))
    bias = up(be, np.zeros(8, np.float32))
    xb = up(be, rs.standard_normal((32, 16)).astype(np.float32))

    def step(w):
        y, z = be.gemm_bias_act(xb, w, bias, "gelu")
        dy = be.binary("mul", y, 0.01)
        dz, db = be.act_backward("gelu", dy, y, z, True)
        gw = be.matmul(be.permute(xb, (1, 0)), dz)
        w = be.binary("sub", w, be.binary("mul", gw, 0.1))
        be.to_bytes(be.reduce("sum", y, (0, 1), False))
        return w

    for _ in range(20):
        w = step(w)
    created = be.pool.stats()["created"]
    for _ in range(1000):
        w = step(w)
    assert be.pool.stats()["created"] == created
    assert be.pool.stats()["live"] < 50


def test_bad_wgsl_is_typed(be):
    with pytest.raises(KernelError, match="my_broken_kernel"):
        be.kernels.compile_source("my_broken_kernel", "fn main( {", "main")
    from numr_web.backends.webgpu import kernels
    with pytest.raises(KernelError, match="no_such_file"):
        kernels.load("no_such_file.wgsl")
    # the backend still works afterwards
    assert be.to_list(be.full((2,), 3, I32)) == [3, 3]


def test_bool_results_are_0_or_1(be):
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    for op, ref in (("add", a | b), ("mul", a & b), ("maximum", a | b), ("minimum", a & b)):
        got = be.binary(op, up(be, a), up(be, b))
        assert be.to_bytes(got) == ref.tobytes(), op
    s = be.reduce("sum", up(be, np.ones((3, 5), bool)), (1,), False)
    assert be.to_bytes(s) == np.ones(3, bool).tobytes()


def test_probe_without_wgpu_fails_cleanly(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "wgpu", None)           # "import wgpu" raises ImportError
    monkeypatch.setattr(wb, "_shared_adapter", None)
    ok, why = wb.WebGPUBackend.probe()
    assert ok is False and "wgpu" in why


def test_flush_batches_submits(be):
    x = up(be, rand(64))
    be.flush()
    s0 = be.submits
    for _ in range(10):
        x = be.unary("neg", x)
    assert be.submits == s0                                    # recorded, not submitted yet
    be.to_bytes(x)
    assert be.submits == s0 + 1                                # one submit for the whole batch


def test_reshape_of_views(be):
    x = rand(4, 6, 5, seed=29)
    hx = up(be, x)
    cases = [((2, 0, 1), (5, 24)), ((1, 2, 0), (6, 5, 2, 2)), ((0, 2, 1), (4, 30)), ((2, 1, 0), (120,)),
             ((0, 1, 2), (1, 4, 1, 30, 1))]
    for perm, shape in cases:
        v = be.permute(hx, perm)
        n0 = be.dispatches
        r = be.reshape(v, shape)
        np.testing.assert_array_equal(down(be, r), x.transpose(perm).reshape(shape))
    # (5, 4, 6) -> (5, 24) is a view of the permuted tensor: no copy
    n0 = be.dispatches
    r = be.reshape(be.permute(hx, (2, 0, 1)), (5, 24))
    assert be.dispatches == n0
    sl = be.slice(hx, ((0, 4, 2), (0, 6, 1), (0, 5, 1)))          # (2, 6, 5) with a gap
    np.testing.assert_array_equal(down(be, be.reshape(sl, (2, 30))), x[::2].reshape(2, 30))
    np.testing.assert_array_equal(down(be, be.reshape(sl, (60,))), x[::2].reshape(60))


def test_argmax_int_and_chunked_expand(be, small):
    i = np.array([[3, -1, 7, 7], [0, 0, -5, 2]], np.int32)
    np.testing.assert_array_equal(down(be, be.argmax(up(be, i), 1, False)), np.argmax(i, 1))
    # a broadcast (stride-0) operand larger than the binding limit once expanded
    row = rand(1, 97, seed=33)
    e = small.expand(up(small, row), (60, 97))
    np.testing.assert_allclose(down(small, small.unary("neg", e)), -np.broadcast_to(row, (60, 97)))
    np.testing.assert_allclose(down(small, small.reduce("sum", e, (0,), False)), 60 * row[0],
                               rtol=1e-5)


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


def test_fused_layer_with_empty_k():
    z = nr.matmul_bias_activation(nr.zeros((2, 0), device="webgpu"), nr.zeros((0, 3), device="webgpu"),
                                  nr.ones(3, device="webgpu"), "relu")
    assert z.tolist() == [[1.0] * 3] * 2
