"""Edges against torch on every device: NaN in comparisons, casts, clamp and softmax; signed
zeros of remainder and elu; silent numpy (no RuntimeWarning reaches the user); IndexError for
out-of-range dims and indices; all/any, dim=(), linspace/eye; sizes refused before allocation."""
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import numr_web as nr

from _diff import HYPOTHESIS, flushed, flushes_subnormals

NAN, INF = float("nan"), float("inf")
TORCH_OLD_CLAMP = not torch.clamp(torch.tensor([1.0]), NAN).isnan().all()
SPECIAL = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 2.5, -3.0, 1e-45, 3e38]


def same(got, want):
    """Equal values, NaN where torch has NaN, and the same sign on zeros."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    ok = (got == want) & (np.signbit(got) == np.signbit(want)) | np.isnan(got) & np.isnan(want)
    assert ok.all(), f"got {got[~ok]}, want {want[~ok]}"


def same_either(got, want, want_flushed):
    """`same` against torch on the input or, element by element, on the flushed input."""
    got, want, wf = (np.asarray(a, np.float64) for a in (got, want, want_flushed))
    ok_a = (got == want) & (np.signbit(got) == np.signbit(want)) | np.isnan(got) & np.isnan(want)
    ok_b = (got == wf) & (np.signbit(got) == np.signbit(wf)) | np.isnan(got) & np.isnan(wf)
    assert (ok_a | ok_b).all(), f"got {got[~(ok_a | ok_b)]}, want {want[~(ok_a | ok_b)]}"


def test_nan_compares_and_casts(device):
    x = nr.tensor(SPECIAL, device=device)
    t = torch.tensor(SPECIAL)
    for op in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"):
        assert getattr(x, op)(x.flip(0)).tolist() == getattr(t, op)(t.flip(0)).tolist(), op
        assert getattr(x, op)(NAN).tolist() == getattr(t, op)(NAN).tolist(), op
    # a device that flushes subnormals reads the subnormal input 1e-45 as 0 (README): either
    # torch's answer on the input or on the flushed input
    tf = torch.tensor(flushed(np.float32(SPECIAL))) if flushes_subnormals(device) else t
    assert x.astype("bool").tolist() in (t.bool().tolist(), tf.bool().tolist())
    want, want_f = torch.erf(t).numpy(), torch.erf(tf).numpy()
    special = ~np.isfinite(want) | (want == 0) | (np.abs(want) == 1)
    same_either(nr.erf(x).numpy()[special], want[special], want_f[special])
    for name in ("silu", "gelu_tanh", "elu", "relu", "sigmoid", "softplus"):
        fn = getattr(torch.nn.functional, name if name != "gelu_tanh" else "gelu")
        kw = {"approximate": "tanh"} if name == "gelu_tanh" else {}
        want, want_f = fn(t, **kw).numpy(), fn(tf, **kw).numpy()
        got = getattr(nr, name)(x).numpy()
        # NaN/inf and signed zeros exactly; finite values are the ulp suites' business
        special = ~np.isfinite(want) | (want == 0)
        same_either(got[special], want[special], want_f[special])


def test_clamp_and_softmax_propagate_nan(device):
    x = nr.tensor([1.0, NAN, 5.0], device=device)
    t = torch.tensor([1.0, NAN, 5.0])
    # a NaN bound gives NaN everywhere (torch >= 2.12; torch 2.11 returned x where x was not NaN)
    nan3 = torch.full((3,), NAN).numpy()
    same(nr.clamp(x, NAN).numpy(), nan3 if TORCH_OLD_CLAMP else torch.clamp(t, NAN).numpy())
    same(nr.clamp(x, None, NAN).numpy(), nan3 if TORCH_OLD_CLAMP else torch.clamp(t, None, NAN).numpy())
    same(nr.clamp(x, 2.0, 3.0).numpy(), torch.clamp(t, 2.0, 3.0).numpy())
    lo = [NAN, 0.0, 6.0]
    same(nr.clamp(x, nr.tensor(lo, device=device)).numpy(), torch.clamp(t, torch.tensor(lo)).numpy())
    rows = [[-INF, -INF], [INF, 1.0], [INF, -INF], [-INF, 1.0], [NAN, 1.0], [1e4, -1e4]]
    for f in ("softmax", "log_softmax"):
        same(getattr(nr, f)(nr.tensor(rows, device=device), 1).numpy(),
             getattr(torch, f)(torch.tensor(rows), 1).numpy())


@HYPOTHESIS
@given(st.data())
def test_remainder_signs_like_torch(device, data):
    el = st.floats(-100, 100, width=32) | st.sampled_from([0.0, -0.0, INF, -INF, 2.0, -2.0])
    a = data.draw(hnp.arrays(np.float32, 8, elements=el))
    b = data.draw(hnp.arrays(np.float32, 8, elements=el.filter(lambda v: v != 0)))
    same((nr.tensor(a, device=device) % nr.tensor(b, device=device)).numpy(),
         (torch.tensor(a) % torch.tensor(b)).numpy())


CASES = {
    "log(0)": lambda d: nr.log(nr.zeros(3, device=d)),
    "0/0": lambda d: nr.zeros(2, device=d) / nr.zeros(2, device=d),
    "exp overflow": lambda d: nr.exp(nr.full((2,), 1e3, device=d)),
    "sqrt(-1)": lambda d: nr.sqrt(nr.full((2,), -1.0, device=d)),
    "inf - inf": lambda d: nr.full((2,), INF, device=d) - INF,
    "nan to int32": lambda d: (nr.zeros(2, device=d) / 0).astype("int32"),
    "70000 to float16": lambda d: nr.full((2,), 7e4, device=d).astype("float16"),
    "tensor 70000 float16": lambda d: nr.tensor([7e4], dtype="float16", device=d),
    "mean of nothing": lambda d: nr.zeros((0, 3), device=d).mean(0),
    "var of nothing": lambda d: nr.zeros((0,), device=d).var(),
    "var of one": lambda d: nr.ones(1, device=d).var(),
    "int // 0": lambda d: nr.ones(2, dtype="int32", device=d) // 0,
    "int % 0": lambda d: nr.ones(2, dtype="int32", device=d) % 0,
    "log_softmax -inf": lambda d: nr.log_softmax(nr.full((2,), -INF, device=d)),
    "log2(0)": lambda d: nr.log2(nr.zeros(2, device=d)),
    "log10(-1)": lambda d: nr.log10(nr.full((2,), -1.0, device=d)),
    "reciprocal(0)": lambda d: nr.reciprocal(nr.zeros(2, device=d)),
    "asin(2)": lambda d: nr.asin(nr.full((2,), 2.0, device=d)),
    "fmod by 0": lambda d: nr.fmod(nr.ones(2, device=d), 0.0),
    "int fmod by 0": lambda d: nr.fmod(nr.ones(2, dtype="int32", device=d), 0),
    "exp2 overflow": lambda d: nr.exp2(nr.full((2,), 1e3, device=d)),
    "cosh overflow": lambda d: nr.cosh(nr.full((2,), 1e3, device=d)),
    "isclose inf": lambda d: nr.isclose(nr.full((2,), INF, device=d), nr.full((2,), -INF, device=d)),
    "logsumexp -inf": lambda d: nr.full((2,), -INF, device=d).logsumexp(0),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_runtime_warning_reaches_the_user(device, case):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # whatever the user's filters: nothing warns
        CASES[case](device).numpy()


def test_empty_mean_and_var_are_nan_like_torch(device):
    e = torch.zeros((0, 3))
    same(nr.zeros((0, 3), device=device).mean(0).numpy(), e.mean(0).numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # torch warns about the degrees of freedom
        same(nr.zeros((0, 3), device=device).var(0).numpy(), e.var(0).numpy())


BAD_INDEX = {
    "sum(dim=2)": lambda x: x.sum(2),
    "sum(dim=-3)": lambda x: x.sum(-3),
    "transpose(0, 7)": lambda x: x.transpose(0, 7),
    "permute(0, 2)": lambda x: x.permute(0, 2),
    "squeeze(5)": lambda x: x.squeeze(5),
    "unsqueeze(4)": lambda x: x.unsqueeze(4),
    "flatten(0, 5)": lambda x: x.flatten(0, 5),
    "softmax(dim=3)": lambda x: x.softmax(3),
    "x[5]": lambda x: x[5],
    "x[-3]": lambda x: x[-3],
    "x[0, 0, 0]": lambda x: x[0, 0, 0],
    "x[1.5]": lambda x: x[1.5],
    "max of empty dim": lambda x: x[:0].max(0),
    "argmax of empty": lambda x: x[:0].argmax(),
    "argmin over empty dim": lambda x: x[:, :0].argmin(1),
}


@pytest.mark.parametrize("case", sorted(BAD_INDEX))
def test_out_of_range_is_an_index_error(device, case):
    x = nr.ones((2, 3), device=device)
    with pytest.raises(IndexError):             # torch's class ...
        BAD_INDEX[case](torch.ones(2, 3))
    with pytest.raises(nr.IndexOutOfRangeError) as err:
        BAD_INDEX[case](x)
    assert isinstance(err.value, (IndexError, nr.ShapeError))   # ... and numr's


def test_index_tensor_out_of_range_is_an_index_error(device):
    x = nr.ones((2, 3), device=device)
    with pytest.raises(IndexError):
        nr.index_select(x, 0, nr.tensor([0, 5], device=device)).numpy()


@HYPOTHESIS
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3),
                  elements=st.sampled_from([0.0, -0.0, 1.0, NAN, -2.0])), st.data())
def test_all_any_like_torch(device, a, data):
    x, t = nr.tensor(a, device=device), torch.tensor(a)
    for f in ("all", "any"):
        assert getattr(x, f)().tolist() == getattr(t, f)().tolist()
        if a.ndim:
            dim = data.draw(st.integers(-a.ndim, a.ndim - 1))
            keep = data.draw(st.booleans())
            got = getattr(nr, f)(x, dim, keepdim=keep)
            assert got.dtype is nr.bool_
            assert got.tolist() == getattr(t, f)(dim, keepdim=keep).tolist()


def test_reductions_read_dim_empty_tuple_as_all(device):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    for f in ("sum", "mean"):
        got = getattr(nr.tensor(a, device=device), f)(dim=())
        assert got.shape == () and got.item() == getattr(torch.tensor(a), f)(dim=()).item()


def test_tril_triu_keep_the_dtype(device):
    a = np.array([[True, False, True], [True, True, False]])
    for f in ("tril", "triu"):
        for d, t in (("bool", torch.bool), ("int32", torch.int32), ("float32", torch.float32)):
            got = getattr(nr, f)(nr.tensor(a, dtype=d, device=device), 1)
            assert got.dtype.name == d
            assert got.tolist() == getattr(torch, f)(torch.tensor(a, dtype=t), 1).tolist()


@pytest.mark.parametrize("args", [(0, 1, 5), (-3.25, 7.5, 11), (2, 2, 1), (0, 1, 0), (5, -5, 6),
                                  (0.0, 1.0, 2)])
def test_linspace_like_torch(device, args):
    got = nr.linspace(*args, device=device).numpy()
    want = torch.linspace(*args).numpy()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    if args[2]:
        assert got[0] == want[0] and got[-1] == want[-1]          # both ends exact


def test_eye_like_torch(device):
    assert nr.eye(3, device=device).tolist() == torch.eye(3).tolist()
    assert nr.eye(2, 4, dtype="int32", device=device).tolist() == \
        torch.eye(2, 4, dtype=torch.int32).tolist()


BAD_ARGS = {
    "linspace(0, 1, -1)": (lambda d: nr.linspace(0, 1, -1, device=d), nr.ShapeError),
    "linspace(0, 1, 2.5)": (lambda d: nr.linspace(0, 1, 2.5, device=d), nr.ShapeError),
    "linspace('a', 1, 2)": (lambda d: nr.linspace("a", 1, 2, device=d), nr.DTypeError),
    "eye(-1)": (lambda d: nr.eye(-1, device=d), nr.ShapeError),
    "eye(2**40)": (lambda d: nr.eye(2 ** 40, device=d), nr.BackendLimitError),
    "zeros((2**62, 0))": (lambda d: nr.zeros((2 ** 62, 0), device=d), nr.BackendLimitError),
    "arange(nan)": (lambda d: nr.arange(NAN, device=d), nr.ShapeError),
    "arange(0, 5, 0)": (lambda d: nr.arange(0, 5, 0, device=d), nr.ShapeError),
    "arange(3, dtype=bool)": (lambda d: nr.arange(3, dtype="bool", device=d), nr.DTypeError),
    "flip((0, 0))": (lambda d: nr.ones((2, 2), device=d).flip((0, 0)), nr.ShapeError),
    "outer product of 2**21": (lambda d: nr.ones(2 ** 21, device=d).reshape(-1, 1)
                               * nr.ones(2 ** 21, device=d), nr.BackendLimitError),
    "matmul to 2**42": (lambda d: nr.matmul(nr.ones((1, 1), device=d).expand(2 ** 21, 1),
                                            nr.ones((1, 2 ** 21), device=d)),
                        nr.BackendLimitError),
}


@pytest.mark.parametrize("case", sorted(BAD_ARGS))
def test_bad_arguments_are_refused_before_work(device, case):
    fn, error = BAD_ARGS[case]
    with pytest.raises(error):
        fn(device)


def test_equality_with_other_objects_is_false(device):
    x = nr.ones(2, device=device)
    for other in (None, "a", object()):
        assert (x == other) is False and (x != other) is True


@pytest.mark.parametrize("v", [[0, -2 ** 31, 5], [-2 ** 31, 0, -2 ** 31 + 1],
                               [2 ** 31 - 1, 3, 2 ** 31 - 1], [True, False, False]])
def test_argmin_at_the_int32_extremes(device, v):
    dtype = torch.int32                # (torch refuses bool; numr counts False < True)
    assert nr.tensor(v, device=device).argmin().item() == torch.tensor(v, dtype=dtype).argmin()
    assert nr.tensor([v, v], device=device).argmin(1).tolist() == \
        torch.tensor([v, v], dtype=dtype).argmin(1).tolist()


def test_where_needs_a_bool_condition_as_torch(device):
    x = nr.tensor([1.0, 0.0, 2.0], device=device)
    for cond in (x, x.astype("int32")):
        with pytest.raises(RuntimeError):
            torch.where(torch.tensor(cond.numpy()), torch.tensor(1.0), torch.tensor(0.0))
        with pytest.raises(nr.DTypeError, match="bool tensor.*!= 0"):
            nr.where(cond, 1.0, 0.0)
    same(nr.where(x != 0, x, -1.0).numpy(), torch.where(torch.tensor([True, False, True]),
                                                         torch.tensor([1.0, 0.0, 2.0]), -1.0).numpy())


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "bool"])
def test_number_divided_by_a_tensor_as_torch(device, dtype):
    """s / x is torch's x.reciprocal() * s (torch/_tensor.py's __rtruediv__), bit for bit."""
    r = np.random.default_rng(1)
    a = {"bool": r.random(64) > 0.5, "int32": r.integers(-9, 9, 64).astype(np.int32)}.get(
        dtype, (r.standard_normal(64) * 10).astype(dtype))
    x, t = nr.tensor(a, device=device), torch.from_numpy(a)
    for s in (0.3, 7, -2.5, True, 1 / 3):
        got, want = (s / x), (s / t)
        assert got.dtype.name == str(want.dtype).replace("torch.", "")
        same(got.numpy(), want.numpy())
