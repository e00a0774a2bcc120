"""torch's rounding, reciprocal, exp2/log2/log10, tan, hyperbolic and inverse trigonometric
functions, fmod, atan2 and the predicate functions, against float64 truth and torch: values within
a few ulp (or torch's own float32 error where larger), special values and signed zeros exactly,
gradients against torch's float64 autograd, dtype rules and bad inputs."""
import math

import numpy as np
import pytest
import torch

import numr_web as nr

from _diff import assert_close_ulps, flushed, flushes_subnormals

NAN, INF = float("nan"), float("inf")
SPECIAL = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 1.5, 3e38, -3e38]

# name -> (float64 truth, domain of the random inputs, ulp bound)
UNARY = {
    "floor": (np.floor, (-1e6, 1e6), 0), "ceil": (np.ceil, (-1e6, 1e6), 0),
    "round": (np.rint, (-1e6, 1e6), 0), "trunc": (np.trunc, (-1e6, 1e6), 0),
    "reciprocal": (lambda x: 1 / x, (-1e3, 1e3), 1),
    "exp2": (np.exp2, (-140, 128), 3),
    "log2": (np.log2, (1e-30, 1e30), 3), "log10": (np.log10, (1e-30, 1e30), 3),
    "tan": (np.tan, (-100, 100), 4),
    "sinh": (np.sinh, (-89, 89), 4), "cosh": (np.cosh, (-89, 89), 4),
    "asin": (np.arcsin, (-1, 1), 3), "acos": (np.arccos, (-1, 1), 3),
    "atan": (np.arctan, (-1e4, 1e4), 3),
}


def _inputs(name, n=4000):
    lo, hi = UNARY[name][1]
    rng = np.random.default_rng(sorted(UNARY).index(name))
    if lo > 0:                                         # log-uniform over a positive range
        x = np.exp(rng.uniform(math.log(lo), math.log(hi), n))
    else:
        x = np.concatenate([rng.uniform(lo, hi, n // 2), rng.uniform(-3, 3, n // 2)])
        x = np.clip(x, lo, hi)
    return x.astype(np.float32)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_within_ulps_of_float64_truth(device, name):
    truth, _, bound = UNARY[name]
    x = _inputs(name)
    got = getattr(nr, name)(nr.tensor(x, device=device)).numpy()
    assert got.dtype == np.float32
    want = truth(x.astype(np.float64))
    t = getattr(torch, name)(torch.tensor(x)).numpy().astype(np.float64)
    from _diff import ulps
    assert_close_ulps(got, want, "float32", bound, device, torch_err=ulps(t, want, "float32"),
                      what=name)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_values_as_torch(device, name):
    x = np.array(SPECIAL + [88.0, -88.0, 1e-3, -1e-3, 0.99999994, -0.99999994], np.float32)
    got = getattr(nr, name)(nr.tensor(x, device=device)).numpy().astype(np.float64)
    want = getattr(torch, name)(torch.tensor(x)).numpy().astype(np.float64)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), (x, got, want)
    exact = ~nan & (~np.isfinite(want) | (want == 0) | (np.abs(want) == 1) | (name in (
        "floor", "ceil", "round", "trunc")))
    assert np.array_equal(got[exact], want[exact]), (x[exact], got[exact], want[exact])
    assert np.array_equal(np.signbit(got[exact]), np.signbit(want[exact])), (x[exact], got[exact])


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float16_computed_in_float32_rounded_once(device, name):
    truth = UNARY[name][0]
    with np.errstate(over="ignore"):
        x = _inputs(name, 512).astype(np.float16)
    x = x[np.isfinite(x)]
    got = getattr(nr, name)(nr.tensor(x, device=device)).numpy()
    assert got.dtype == np.float16
    with np.errstate(all="ignore"):
        want = truth(x.astype(np.float64))
        want = np.where(np.isinf(want.astype(np.float16)), want.astype(np.float16), want)
    assert_close_ulps(got, want, "float16", 1, device, what=name)


GRAD_X = {"reciprocal": [0.3, -1.7, 4.0], "exp2": [-3.0, 0.2, 5.5], "log2": [0.1, 1.0, 7.0],
          "log10": [0.1, 1.0, 7.0], "tan": [-1.2, 0.3, 1.0], "sinh": [-3.0, 0.2, 5.5],
          "cosh": [-3.0, 0.2, 5.5], "asin": [-0.9, 0.1, 0.6], "acos": [-0.9, 0.1, 0.6],
          "atan": [-30.0, 0.1, 2.0], "floor": [-1.5, 0.2, 3.7], "ceil": [-1.5, 0.2, 3.7],
          "round": [-1.2, 0.2, 3.7], "trunc": [-1.5, 0.2, 3.7]}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_first_and_second_derivative_as_torch(device, name):
    dtype = "float32" if device == "webgpu" else "float64"
    x = nr.tensor(GRAD_X[name], dtype=dtype, device=device, requires_grad=True)
    g, = nr.grad(getattr(nr, name)(x).sum(), [x], create_graph=True)
    xt = torch.tensor(GRAD_X[name], dtype=torch.float64, requires_grad=True)
    gt, = torch.autograd.grad(getattr(torch, name)(xt).sum(), [xt], create_graph=True)
    tol = dict(rtol=1e-13, atol=0) if dtype == "float64" else dict(rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(g.numpy(), gt.detach().numpy(), **tol)
    if gt.requires_grad:                 # the rounding ops: a zero gradient, constant in x
        h, = nr.grad(g.sum(), [x])
        ht, = torch.autograd.grad(gt.sum(), [xt])
        np.testing.assert_allclose(h.numpy(), ht.numpy(), **tol)


def _pairs():
    sp = [0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 2.5, -7.0, 3e38]
    a, b = np.repeat(sp, len(sp)), np.tile(sp, len(sp))
    rng = np.random.default_rng(7)
    ra, rb = rng.uniform(-50, 50, 2000), rng.uniform(-50, 50, 2000)
    return (np.concatenate([a, ra]).astype(np.float32), np.concatenate([b, rb]).astype(np.float32))


@pytest.mark.parametrize("name", ["fmod", "atan2"])
def test_binary_against_torch_and_truth(device, name):
    a, b = _pairs()
    got = getattr(nr, name)(nr.tensor(a, device=device), nr.tensor(b, device=device)).numpy()
    with np.errstate(invalid="ignore"):
        want = getattr(np, "fmod" if name == "fmod" else "arctan2")(a.astype(np.float64),
                                                                   b.astype(np.float64))
    t = getattr(torch, name)(torch.tensor(a), torch.tensor(b)).numpy()
    assert np.array_equal(np.isnan(got), np.isnan(t))
    fin = ~np.isnan(want)
    zero = fin & (want == 0)
    if not flushes_subnormals(device):
        assert np.array_equal(np.signbit(got[zero]), np.signbit(t[zero]))
    want_ftz = None
    if flushes_subnormals(device):          # subnormal operands may be read as zeros (README)
        with np.errstate(invalid="ignore"):
            want_ftz = getattr(np, "fmod" if name == "fmod" else "arctan2")(
                flushed(a).astype(np.float64), flushed(b).astype(np.float64))[fin]
    assert_close_ulps(got[fin], want[fin], "float32", 0 if name == "fmod" else 3, device, what=name,
                      want_ftz=want_ftz)


def test_binary_gradients_as_torch(device):
    dtype = "float32" if device == "webgpu" else "float64"
    av, bv = [-5.5, 0.7, 3.2], [2.0, -0.3, 1.5]
    a = nr.tensor(av, dtype=dtype, device=device, requires_grad=True)
    b = nr.tensor(bv, dtype=dtype, device=device, requires_grad=True)
    at = torch.tensor(av, dtype=torch.float64, requires_grad=True)
    bt = torch.tensor(bv, dtype=torch.float64, requires_grad=True)
    tol = dict(rtol=1e-13, atol=0) if dtype == "float64" else dict(rtol=1e-6, atol=1e-7)
    for f in ("fmod", "atan2"):
        got = nr.grad(getattr(nr, f)(a, b).sum(), [a, b])
        want = torch.autograd.grad(getattr(torch, f)(at, bt).sum(), [at, bt])
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), **tol, err_msg=f)


def test_integer_fmod_and_dtype_rules(device):
    a, b = [7, -7, 7, -7, 0], [3, 3, -3, -3, 5]
    got = nr.fmod(nr.tensor(a, dtype="int32", device=device), nr.tensor(b, dtype="int32", device=device))
    assert got.dtype is nr.int32
    assert got.tolist() == torch.fmod(torch.tensor(a), torch.tensor(b)).tolist()
    i = nr.tensor([1, -2, 3], dtype="int32", device=device)
    for name in ("floor", "ceil", "round", "trunc"):
        r = getattr(nr, name)(i)
        assert r.dtype is nr.int32 and r.tolist() == [1, -2, 3]
    for name in ("asin", "exp2", "log2", "reciprocal"):
        assert getattr(nr, name)(i).dtype is nr.float32
    assert nr.atan2(i, i).dtype is nr.float32
    with pytest.raises(nr.DTypeError):
        nr.floor(nr.tensor([True], device=device))
    with pytest.raises(nr.DTypeError):
        nr.fmod(nr.tensor([True], device=device), True)
    with pytest.raises(nr.DTypeError):
        nr.floor([1.5])
    with pytest.raises(nr.DTypeError):
        nr.round(nr.tensor([1.5], device=device), decimals=1.0)


def test_round_decimals_as_torch(device):
    x = [1.23456, -2.71828, 1234.5678, 0.125]
    for d in (-2, 0, 1, 3):
        got = nr.round(nr.tensor(x, device=device), decimals=d).numpy()
        want = torch.round(torch.tensor(x), decimals=d).numpy()
        np.testing.assert_array_equal(got, want)


def test_predicates_and_comparison_functions_as_torch(device):
    x = nr.tensor(SPECIAL, device=device)
    t = torch.tensor(SPECIAL)
    for name in ("isnan", "isinf", "isfinite", "isposinf", "isneginf"):
        assert getattr(nr, name)(x).tolist() == getattr(torch, name)(t).tolist(), name
        assert getattr(x, name)().dtype is nr.bool_
    i = nr.tensor([0, 3], dtype="int32", device=device)
    assert nr.isnan(i).tolist() == [False, False] and nr.isfinite(i).tolist() == [True, True]
    y = nr.tensor(SPECIAL[::-1], device=device)
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        assert getattr(nr, name)(x, y).tolist() == getattr(torch, name)(t, t.flip(0)).tolist()
        assert getattr(x, name)(1.0).tolist() == getattr(t, name)(1.0).tolist()
    a = nr.tensor([0.0, 1.0, -2.0, NAN], device=device)
    ta = torch.tensor([0.0, 1.0, -2.0, NAN])
    b = nr.tensor([1, 0, 3, 0], dtype="int32", device=device)
    tb = torch.tensor([1, 0, 3, 0])
    for name in ("logical_and", "logical_or", "logical_xor"):
        assert getattr(nr, name)(a, b).tolist() == getattr(torch, name)(ta, tb).tolist(), name
    assert nr.logical_not(b).tolist() == torch.logical_not(tb).tolist()
    assert nr.logical_not(a).tolist() == torch.logical_not(ta).tolist()


def test_nan_to_num_square_lerp_frac_as_torch(device):
    x = nr.tensor(SPECIAL, device=device)
    t = torch.tensor(SPECIAL)
    np.testing.assert_array_equal(nr.nan_to_num(x).numpy(), torch.nan_to_num(t).numpy())
    np.testing.assert_array_equal(nr.nan_to_num(x, 1.0, 2.0, -3.0).numpy(),
                                  torch.nan_to_num(t, 1.0, 2.0, -3.0).numpy())
    h = nr.tensor([NAN, INF, -INF], dtype="float16", device=device)
    assert nr.nan_to_num(h).tolist() == [0.0, 65504.0, -65504.0]
    np.testing.assert_array_equal(nr.square(x).numpy(), torch.square(t).numpy())
    np.testing.assert_array_equal(nr.frac(x).numpy(), torch.frac(t).numpy())
    s, e = [1.0, -2.0, 0.5], [3.0, 4.0, -1.0]
    np.testing.assert_allclose(nr.lerp(nr.tensor(s, device=device), nr.tensor(e, device=device), 0.25)
                               .numpy(), torch.lerp(torch.tensor(s), torch.tensor(e), 0.25).numpy(),
                               rtol=1.2e-7)


def test_isclose_allclose_equal_as_torch(device):
    a = [1.0, 1.0 + 1e-6, NAN, INF, -INF, 0.0, 1e-9]
    b = [1.0, 1.0, NAN, INF, INF, 1e-9, 0.0]
    x, y = nr.tensor(a, device=device), nr.tensor(b, device=device)
    ta, tb = torch.tensor(a), torch.tensor(b)
    assert nr.isclose(x, y).tolist() == torch.isclose(ta, tb).tolist()
    assert nr.isclose(x, y, equal_nan=True).tolist() == torch.isclose(ta, tb, equal_nan=True).tolist()
    assert nr.isclose(x, y, rtol=0, atol=0).tolist() == torch.isclose(ta, tb, rtol=0, atol=0).tolist()
    assert nr.allclose(x[:2], y[:2]) is True and nr.allclose(x, y) is False
    assert nr.equal(x[:2], x[:2]) is True and nr.equal(x[:2], y[:2]) is False
    assert nr.equal(x[:2], x[:1]) is False
    with pytest.raises(nr.DTypeError):
        nr.isclose(x, y, rtol=-1)
