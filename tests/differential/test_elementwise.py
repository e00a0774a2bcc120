"""Elementwise binary ops against torch: broadcasting (0-size, 0-d), every dtype pair, every
scalar kind, views as operands, torch's promotion rules."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import numr_web as nr

from _diff import HYPOTHESIS, TORCH_DTYPE, dtypes_on, flushed, flushes_subnormals, ulps

OPS = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
       "maximum": torch.maximum, "minimum": torch.minimum, "pow": torch.pow,
       "eq": torch.eq, "lt": torch.lt, "ge": torch.ge,
       "floor_divide": torch.floor_divide, "remainder": torch.remainder}
NR = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
      "div": lambda a, b: a / b, "maximum": nr.maximum, "minimum": nr.minimum,
      "pow": lambda a, b: a ** b, "eq": lambda a, b: a == b, "lt": lambda a, b: a < b,
      "ge": lambda a, b: a >= b, "floor_divide": lambda a, b: a // b,
      "remainder": lambda a, b: a % b}
EXACT = {"add", "sub", "mul", "maximum", "minimum", "eq", "lt", "ge"}


def values(np_dtype, shape, draw):
    if np_dtype == np.bool_:
        return draw(hnp.arrays(np.bool_, shape))
    if np_dtype == np.int32:
        return draw(hnp.arrays(np.int32, shape, elements=st.integers(-50, 50)))
    el = st.floats(-1e3, 1e3, width=16 if np_dtype == np.float16 else 32, allow_subnormal=False)
    return draw(hnp.arrays(np_dtype, shape, elements=el | st.sampled_from([0.0, -0.0, 1.0, 2.0])))


def reference_ok(name, ta, tb):
    """torch refuses some combinations (bool - bool); numr must refuse them too."""
    try:
        return OPS[name](ta, tb), None
    except RuntimeError as e:
        return None, e


def compare(name, got, want):
    g = np.asarray(got.numpy() if isinstance(got, nr.Tensor) else got)
    w = want.numpy() if want.dtype != torch.bfloat16 else want.float().numpy()
    # torch's int64 is numr's int32 (the widest integer: a deliberate difference, README)
    want_name = str(want.dtype).replace("torch.", "").replace("int64", "int32")
    assert got.dtype.name == want_name, (name, got.dtype, want.dtype)
    assert g.shape == w.shape, (name, g.shape, w.shape)
    if w.dtype.kind != "f" or name in EXACT:
        np.testing.assert_array_equal(g, w, err_msg=name)
        return
    # true division and pow: WGSL's division is within 2.5 ulp, pow a few ulp
    err = ulps(g, w, w.dtype)
    assert (err <= 8).all(), (name, g[err > 8], w[err > 8])


@st.composite
def broadcast_case(draw, device):
    names = dtypes_on(device)
    da, db = draw(st.sampled_from(names)), draw(st.sampled_from(names))
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                    min_side=0, max_side=3))
    a = values(np.dtype(da).type if da != "bool" else np.bool_, shapes.input_shapes[0], draw)
    b = values(np.dtype(db).type if db != "bool" else np.bool_, shapes.input_shapes[1], draw)
    return draw(st.sampled_from(sorted(OPS))), a, b


def _case_filter(name, a, b):
    if name in ("floor_divide", "remainder") and b.dtype.kind in "ib" and (b == 0).any():
        return False        # integer division by zero: a deliberate difference (README)
    return True       # (integer tensors to negative integer tensor powers: torch's values)


def test_binary_broadcast_dtypes(device):
    @HYPOTHESIS
    @given(broadcast_case(device))
    def run(case):
        name, a, b = case
        if not _case_filter(name, a, b):
            return
        ta, tb = torch.from_numpy(a.copy()), torch.from_numpy(b.copy())
        want, err = reference_ok(name, ta, tb)
        xa, xb = nr.tensor(a, device=device), nr.tensor(b, device=device)
        if err is not None:
            with pytest.raises(nr.NumrError):
                NR[name](xa, xb)
            return
        compare(name, NR[name](xa, xb), want)
    run()


SCALARS = [2, -3, 0, 1.5, -0.25, True, False, np.float64(1.5), np.float32(2.5), np.int64(3),
           np.int32(-2), np.bool_(True)]


@pytest.mark.parametrize("tdtype", list(TORCH_DTYPE))
@pytest.mark.parametrize("name", ["add", "mul", "sub", "div", "maximum", "pow", "lt"])
def test_scalar_kinds_and_weak_0d(device, tdtype, name):
    """Python and numpy scalars and 0-d tensors are weak operands: the result dtype is torch's."""
    if tdtype not in dtypes_on(device):
        return
    a = np.array([1, 2, 0], dtype=np.dtype(tdtype) if tdtype != "bool" else np.bool_)
    x = nr.tensor(a, device=device)
    for s in SCALARS + ["0d-f64", "0d-i32", "0d-bool"]:
        if isinstance(s, str):
            kind = s[3:]
            tv = {"f64": torch.tensor(1.5, dtype=torch.float64),
                  "i32": torch.tensor(2, dtype=torch.int32), "bool": torch.tensor(True)}[kind]
            if device == "webgpu" and kind == "f64":
                continue
            sv = nr.tensor(tv.numpy(), device=device)
        else:
            tv, sv = (s.item() if isinstance(s, np.generic) else s), s
        if name in ("maximum",) and not isinstance(tv, torch.Tensor):
            continue  # torch.maximum takes tensors only
        try:
            want = OPS[name](torch.from_numpy(a.copy()), tv)
        except RuntimeError:
            with pytest.raises(nr.NumrError):
                NR[name](x, sv)
            continue
        if name == "pow" and want.dtype == torch.int32 and (isinstance(tv, int) and tv < 0):
            continue
        got = NR[name](x, sv)
        compare(name, got, want)
        # the scalar on the left
        if name in ("add", "mul", "sub", "div"):
            try:
                want_r = OPS[name](tv if isinstance(tv, torch.Tensor) else torch.tensor(tv),
                                   torch.from_numpy(a.copy())) if isinstance(tv, torch.Tensor) \
                    else {"add": lambda: tv + torch.from_numpy(a.copy()),
                          "mul": lambda: tv * torch.from_numpy(a.copy()),
                          "sub": lambda: tv - torch.from_numpy(a.copy()),
                          "div": lambda: tv / torch.from_numpy(a.copy())}[name]()
            except RuntimeError:
                continue
            compare(name, NR[name](sv, x), want_r)


def _views(t, kind):
    if kind == "T":
        return t.transpose(0, 1)
    if kind == "slice":
        return t[::2, 1:]
    if kind == "expand":
        return t[:1].expand(3, t.shape[1])
    return t


@pytest.mark.parametrize("kind", ["T", "slice", "expand"])
@pytest.mark.parametrize("name", ["add", "mul", "div", "pow", "maximum"])
def test_views_as_operands(device, kind, name):
    rng = np.random.default_rng(1)
    a = rng.uniform(0.5, 2, (3, 3)).astype(np.float32)
    b = rng.uniform(-2, 2, (3, 3)).astype(np.float32)
    va, vb = _views(nr.tensor(a, device=device), kind), _views(nr.tensor(b, device=device), kind)
    ta, tb = _views(torch.from_numpy(a), kind), _views(torch.from_numpy(b), kind)
    compare(name, NR[name](va, vb), OPS[name](ta, tb))
    compare(name, NR[name](va, 3.0), OPS[name](ta, torch.tensor(3.0)))


def test_scalar_beyond_float32_range_is_inf(device):
    x = nr.tensor([1.0, -2.0], device=device)
    assert (x * 1e39).tolist() == [math.inf, -math.inf]
    assert (x + -1e300).tolist() == [-math.inf, -math.inf]
    assert (x * 1e-50).tolist() == [0.0, -0.0]


POW_SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -8.0, math.inf, -math.inf, math.nan, 3.0, -3.0,
               1e-3, 1e3]


def test_pow_special_values(device):
    """C99/torch pow special cases: 0**0 = 1, 1**nan = 1, (-1)**inf = 1, x**0 = 1 for NaN x,
    negative bases with integer exponents, signed zeros and infinities."""
    pairs = [(x, y) for x in POW_SPECIAL for y in POW_SPECIAL]
    a = np.array([p[0] for p in pairs], np.float32)
    b = np.array([p[1] for p in pairs], np.float32)
    want = torch.pow(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    got = (nr.tensor(a, device=device) ** nr.tensor(b, device=device)).numpy()
    err = ulps(got, want, np.float32)
    bad = err > 4
    assert not bad.any(), list(zip(a[bad], b[bad], got[bad], want[bad]))
    assert np.array_equal(np.signbit(got[got == 0]), np.signbit(want[got == 0]))


def test_integer_pow_and_overflowing_int_scalar(device):
    x = nr.tensor([2, -3, 0], device=device)
    assert (x ** 3).tolist() == [8, -27, 0]
    with pytest.raises(nr.DTypeError, match="does not fit"):
        x + 2 ** 40


def test_pow_accuracy_over_the_float32_range(device):
    """x**y for bases over the whole exponent range and |y| <= 4: within 4 ulp of float64 truth.
    (On webgpu the error grows as ~|y log2 m| ulp, m the base's mantissa: see the shader's note.)"""
    rng = np.random.default_rng(1)
    a = np.exp(rng.uniform(-20, 20, 3000)).astype(np.float32)
    b = rng.uniform(-4, 4, 3000).astype(np.float32)
    want = np.power(a.astype(np.float64), b.astype(np.float64))
    got = (nr.tensor(a, device=device) ** nr.tensor(b, device=device)).numpy()
    ok = np.abs(want) > np.finfo(np.float32).tiny
    err = ulps(got[ok], want[ok], np.float32)
    assert err.max() <= 4, (a[ok][err > 4], b[ok][err > 4])


def test_unary_signed_zero_and_nan(device):
    z = np.array([-0.0, 0.0, np.nan, -2.5, 3.0], np.float32)
    for name in ("sign", "abs", "neg"):
        want = getattr(torch, name)(torch.from_numpy(z)).numpy()
        got = getattr(nr, name)(nr.tensor(z, device=device)).numpy()
        np.testing.assert_array_equal(got, want)
        assert np.array_equal(np.signbit(got), np.signbit(want)), name


@pytest.mark.parametrize("value", [np.float64(1.5), np.float32(1.5), np.int64(3), np.int32(3),
                                   np.bool_(True), np.float16(0.5)])
def test_creation_from_numpy_scalars_keeps_their_dtype(device, value):
    want = torch.tensor(value).dtype
    name = str(want).replace("torch.", "").replace("int64", "int32")
    if device == "webgpu" and name == "float64":
        with pytest.raises(nr.DTypeError):
            nr.tensor(value, device=device)
        return
    got = nr.tensor(value, device=device)
    assert got.dtype.name == name and got.shape == () and got.item() == value.item()


def test_float32_division_is_correctly_rounded(device):
    """x / y as IEEE's division (numpy's), bit for bit, over the whole exponent range: specials,
    subnormal operands and results, overflow (WGSL's `/` may be 2.5 ulp off)."""
    rng = np.random.default_rng(11)
    n = 20000
    bits = rng.integers(0, 2 ** 32, (2, n), dtype=np.uint64).astype(np.uint32)
    x, y = bits.view(np.float32)
    near = (rng.standard_normal((2, n)) * 10.0 ** rng.integers(-3, 4, (2, n))).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -3e-39, 3.4e38, 1.0, -7.0],
                       np.float32)
    sx, sy = (a.ravel() for a in np.meshgrid(special, special))
    x, y = np.concatenate([x, near[0], sx]), np.concatenate([y, near[1], sy])
    with np.errstate(all="ignore"):
        want = x / y
    got = (nr.tensor(x, device=device) / nr.tensor(y, device=device)).numpy()
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    if flushes_subnormals(device):          # a subnormal operand or result may be flushed (README)
        with np.errstate(all="ignore"):
            wf = flushed(flushed(x) / flushed(y))
        same |= (got.view(np.uint32) == wf.view(np.uint32)) | (np.isnan(got) & np.isnan(wf))
        same |= (np.abs(want) < np.finfo(np.float32).tiny) & (got == 0)
    bad = np.flatnonzero(~same)
    assert bad.size == 0, (x[bad[:5]], y[bad[:5]], got[bad[:5]], want[bad[:5]])


def test_float_floor_divide_and_remainder_are_exact(device):
    """torch's fmod-based semantics: exact remainders (no rounding of x / y), quotients from them."""
    rng = np.random.default_rng(3)
    a = np.concatenate([rng.standard_normal(300) * 10.0 ** rng.integers(-3, 10, 300),
                        [-2, 7, -7, 1e10, 5.5, -0.0, 3.0, 1e-30, 1e38, -5, 5]]).astype(np.float32)
    b = np.concatenate([rng.standard_normal(300) * 10.0 ** rng.integers(-3, 3, 300),
                        [0.044715, 0.1, 0.1, 0.7, np.inf, 1.0, -np.inf, 3.0, 1e-38, 0, 0]]
                       ).astype(np.float32)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    x, y = nr.tensor(a, device=device), nr.tensor(b, device=device)
    fa, fb = torch.from_numpy(flushed(a)), torch.from_numpy(flushed(b))
    for got, want, want_f in (((x % y).numpy(), torch.remainder(ta, tb).numpy(),
                               torch.remainder(fa, fb).numpy()),
                              ((x // y).numpy(), torch.floor_divide(ta, tb).numpy(),
                               torch.floor_divide(fa, fb).numpy())):
        if flushes_subnormals(device):      # 1e-38 is subnormal: it may be read as 0 (README)
            got = np.where((got == want_f) | np.isnan(got) & np.isnan(want_f), want, got)
        np.testing.assert_array_equal(got, want)


UNARY_OPS = ["neg", "abs", "exp", "log", "sqrt", "sin", "cos", "sign", "tanh", "sigmoid", "erf",
             "log1p", "expm1", "rsqrt", "relu"]


@st.composite
def unary_case(draw, device):
    dtype = draw(st.sampled_from(dtypes_on(device)))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3))
    a = values(np.dtype(dtype).type if dtype != "bool" else np.bool_, shape, draw)
    return draw(st.sampled_from(UNARY_OPS)), a, draw(st.sampled_from(["plain", "T", "slice"]))


def test_unary_dtypes_against_torch(device):
    @HYPOTHESIS
    @given(unary_case(device))
    def run(c):
        name, a, view = c
        t = torch.from_numpy(a.copy())
        x = nr.tensor(a, device=device)
        if view == "T" and a.ndim >= 2:
            t, x = t.transpose(0, 1), x.transpose(0, 1)
        elif view == "slice" and a.ndim >= 1:
            t, x = t[::2], x[::2]
        fn = getattr(torch, name, None) or getattr(torch.nn.functional, name)
        try:
            want = fn(t)
        except RuntimeError:
            with pytest.raises(nr.NumrError):
                getattr(nr, name)(x)
            return
        got = getattr(nr, name)(x)
        want_name = str(want.dtype).replace("torch.", "").replace("int64", "int32")
        assert got.dtype.name == want_name, (name, a.dtype, got.dtype, want.dtype)
        assert got.shape == tuple(want.shape)
        g, w = got.numpy().astype(np.float64), want.numpy().astype(np.float64)
        if want.dtype.is_floating_point:
            err = ulps(g, w, want.numpy().dtype)
            tiny = np.finfo(want.numpy().dtype).tiny
            ok = (err <= 4) | ((np.abs(w) < tiny) & (np.abs(g) <= tiny))
            assert ok.all(), (name, a, g, w)
        else:
            np.testing.assert_array_equal(g, w)
    run()
