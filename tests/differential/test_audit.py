"""Regressions found by a differential audit against torch: each test compares numr_web with torch
(or exact integer truth) through the public API, on every device."""
import numpy as np
import pytest
import torch

import numr_web as nr
from numr_web.errors import DTypeError

NAN, INF = float("nan"), float("inf")


def _t(values, dtype, device):
    return nr.tensor(np.asarray(values, dtype=dtype), dtype=dtype, device=device)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_hypot_infinity_beats_nan(device, dtype):
    a = [INF, NAN, -INF, NAN, 3.0, 0.0, NAN]
    b = [NAN, -INF, NAN, NAN, 4.0, -0.0, 1.0]
    got = nr.hypot(_t(a, dtype, device), _t(b, dtype, device)).numpy()
    want = torch.hypot(torch.tensor(a, dtype=getattr(torch, dtype)),
                       torch.tensor(b, dtype=getattr(torch, dtype))).numpy()
    np.testing.assert_array_equal(got, want)
    # mixed dtypes (the infinity in the float16 operand, the NaN in the float32 one)
    got = nr.hypot(_t([INF, 1.0], "float16", device), _t([NAN, NAN], "float32", device)).numpy()
    np.testing.assert_array_equal(got, np.array([INF, NAN], np.float32))


def test_hypot_and_fmod_take_bool_operands_as_torch(device):
    b = _t([True, False, True], "bool", device)
    f = _t([1.5, 2.0, -2.5], "float32", device)
    tb, tf = torch.tensor([True, False, True]), torch.tensor([1.5, 2.0, -2.5])
    for fn, tfn in [(nr.hypot, torch.hypot), (nr.fmod, torch.fmod)]:
        got, want = fn(b, f), tfn(tb, tf)
        assert got.dtype == nr.float32
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    got = nr.fmod(_t([7, -7, 3], "int32", device), True)
    assert got.dtype == nr.int32 and got.tolist() == [0, 0, 0]
    with pytest.raises(DTypeError, match="bool"):
        nr.fmod(b, b)


def test_square_of_bool_is_an_integer(device):
    got = nr.square(_t([True, False], "bool", device))
    assert got.dtype == nr.int32 and got.tolist() == [1, 0]


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_rsqrt_keeps_the_sign_of_zero(device, dtype):
    x = [-0.0, 0.0, -1.0, INF, -INF, 4.0]
    got = nr.rsqrt(_t(x, dtype, device)).numpy()
    want = torch.rsqrt(torch.tensor(x, dtype=getattr(torch, dtype))).numpy()
    np.testing.assert_array_equal(got, want)


def test_integer_trunc_division_is_exact(device):
    a = [16777217, -16777217, 2147483647, -2147483647, -7, 7, 7, -7, 0, 6, -6]
    b = [1, 2, 3, 2, 2, -2, 2, -2, 5, -3, -3]
    ta, tb = torch.tensor(a, dtype=torch.int32), torch.tensor(b, dtype=torch.int32)
    want = torch.div(ta, tb, rounding_mode="trunc").tolist()
    x, y = _t(a, "int32", device), _t(b, "int32", device)
    got = x.div(y, rounding_mode="trunc")
    assert got.dtype == nr.int32 and got.tolist() == want
    assert nr.div(x, y, rounding_mode="trunc").tolist() == want
    assert x.div(3, rounding_mode="trunc").tolist() == torch.div(ta, 3, rounding_mode="trunc").tolist()
    x.div_(y, rounding_mode="trunc")
    assert x.tolist() == want
    with pytest.raises(DTypeError):
        _t([True], "bool", device).div(True, rounding_mode="trunc")


def test_torch_arithmetic_functions(device):
    a, b = _t([1, -2, 3], "int32", device), _t([0.5, 2.0, -4.0], "float32", device)
    ta, tb = torch.tensor([1, -2, 3], dtype=torch.int32), torch.tensor([0.5, 2.0, -4.0])
    cases = [(nr.add(a, b, alpha=3), torch.add(ta, tb, alpha=3)),
             (nr.add(2, a), torch.add(2, ta)),
             (nr.sub(a, b, alpha=2), torch.sub(ta, tb, alpha=2)),
             (nr.subtract(b, a), torch.subtract(tb, ta)),
             (nr.mul(a, 1.5), torch.mul(ta, 1.5)), (nr.multiply(a, b), torch.multiply(ta, tb)),
             (nr.div(a, b), torch.div(ta, tb)), (nr.divide(a, 2, rounding_mode="floor"),
                                                 torch.divide(ta, 2, rounding_mode="floor")),
             (nr.true_divide(a, a), torch.true_divide(ta, ta))]
    for got, want in cases:
        assert str(want.dtype).replace("torch.", "").replace("int64", "int32") == got.dtype.name
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    with pytest.raises(DTypeError):
        nr.add(1, 2)


def test_roll_of_a_0d_tensor_and_var_mean_of_a_non_tensor_raise_typed_errors(device):
    x = nr.tensor(3.0, device=device)
    assert nr.roll(x, 1).item() == torch.roll(torch.tensor(3.0), 1).item()
    with pytest.raises(nr.IndexOutOfRangeError, match="0-d"):
        nr.roll(x, 1, 0)
    for fn in (nr.var_mean, nr.std_mean):
        with pytest.raises(DTypeError, match="expects a Tensor"):
            fn(np.float32(2.0))


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_relu_gradient_passes_through_nan_as_torch(device, dtype):
    vals = [NAN, -1.0, 0.0, -0.0, 2.0, INF, -INF]
    tx = torch.tensor(vals, dtype=getattr(torch, dtype), requires_grad=True)
    torch.relu(tx).backward(torch.full_like(tx, 3.0))
    x = _t(vals, dtype, device).requires_grad_()
    nr.relu(x).backward(nr.full(x.shape, 3.0, dtype=dtype, device=device))
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    # the fused layer's backward (activation-gradient kernel) agrees
    b = _t([vals], dtype, device).requires_grad_()
    y = nr.matmul_bias_activation(nr.ones((1, 1), dtype=dtype, device=device), b, None, "relu")
    y.backward(nr.full(y.shape, 3.0, dtype=dtype, device=device))
    np.testing.assert_array_equal(b.grad.numpy()[0], tx.grad.numpy())


def test_bad_module_sizes_and_activation_parameters_raise_typed_errors(device):
    x = nr.ones((2, 3), device=device)
    for bad in (lambda: nr.nn.Linear(-1, 2), lambda: nr.nn.Linear(2.0, 2),
                lambda: nr.nn.Conv2d(1, -2, 3), lambda: nr.nn.Conv2d(-1, 2, 3)):
        with pytest.raises(nr.ShapeError, match="non-negative int"):
            bad()
    assert nr.nn.Linear(np.int64(3), 2, device=device)(x).shape == (2, 2)
    F = nr.nn.functional
    for bad in (lambda: F.leaky_relu(x, "x"), lambda: F.elu(x, alpha="x"),
                lambda: F.softplus(x, beta="x"), lambda: F.hardtanh(x, "x"),
                lambda: nr.nn.LeakyReLU("x")(x)):
        with pytest.raises(DTypeError, match="real number"):
            bad()
    tx = torch.tensor([[-2.0, 0.5, 3.0]])
    v = nr.tensor(tx.numpy(), device=device)
    np.testing.assert_allclose(F.leaky_relu(v, np.float32(0.2)).numpy(),
                               torch.nn.functional.leaky_relu(tx, 0.2).numpy())
    np.testing.assert_allclose(F.hardtanh(v, -1, 2).numpy(),
                               torch.nn.functional.hardtanh(tx, -1, 2).numpy())


def test_integer_tensor_to_negative_integer_tensor_powers_as_torch(device):
    av = [0, 1, -1, 2, -2, 3, -1, 0, 5, 7, -3]
    bv = [-1, -3, -3, -1, -2, 2, -2, 0, -1, 3, 3]
    ta, tb = torch.tensor(av, dtype=torch.int32), torch.tensor(bv, dtype=torch.int32)
    a, b = _t(av, "int32", device), _t(bv, "int32", device)
    got = a ** b
    assert got.dtype == nr.int32 and got.tolist() == (ta ** tb).tolist()
    assert nr.pow(a, b).tolist() == torch.pow(ta, tb).tolist()
    assert (2 ** _t([-1, 3], "int32", device)).tolist() == (2 ** torch.tensor([-1, 3])).tolist()
    tbool = torch.tensor([True, False])
    got = _t([True, False], "bool", device) ** _t([-1, -1], "int32", device)
    assert got.tolist() == (tbool ** torch.tensor([-1, -1], dtype=torch.int32)).tolist()
    with pytest.raises(DTypeError, match="negative integer powers"):
        a ** -1                                        # a scalar exponent: torch raises too


@pytest.mark.parametrize("dtype", ["int32", "bool", "float16"])
def test_masked_write_casts_the_value_to_the_tensors_dtype(device, dtype):
    vals = [1, 0, 3, 0] if dtype != "float16" else [1.5, -2.0, 3.0, 0.0]
    for v in [2.5, -0.0, True, 7, "t"]:
        t = torch.tensor(vals, dtype=getattr(torch, dtype))
        x = _t(vals, dtype, device)
        tv = torch.tensor(3.75) if v == "t" else v
        nv = nr.tensor(3.75, device=device) if v == "t" else v
        t[t != 0] = tv
        x[x != 0] = nv
        assert x.dtype.name == dtype
        np.testing.assert_array_equal(x.numpy(), t.numpy())
    w = nr.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    v = nr.tensor(0.5, device=device, requires_grad=True)
    y = w * 1
    y[y > 1.5] = v
    (y * nr.tensor([1.0, 2.0, 3.0], device=device)).sum().backward()
    assert w.grad.tolist() == [1.0, 0.0, 0.0] and v.grad.item() == 5.0


def test_float16_var_and_std_accumulate_in_float32_as_torch(device):
    for vals in ([300.0, -300.0, 250.0, 0.0, 100.0], [60000.0, 60000.0, -30000.0, 50000.0]):
        t = torch.tensor(vals, dtype=torch.float16)
        x = _t(vals, "float16", device)
        for got, want in [(x.var(), t.var()), (x.std(), t.std()), (nr.std_mean(x)[0], t.std()),
                          (x.var(0, keepdim=True, correction=0), t.var(0, keepdim=True,
                                                                       correction=0))]:
            assert got.dtype == nr.float16 and got.shape == tuple(want.shape)
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    x = _t([300.0, -300.0, 250.0, 0.0, 100.0], "float16", device).requires_grad_()
    t = torch.tensor([300.0, -300.0, 250.0, 0.0, 100.0], dtype=torch.float16, requires_grad=True)
    x.std().backward()
    t.std().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=2e-3, atol=1e-4)


def test_round_with_negative_decimals_divides_as_torch(device):
    vals = [1250.0, 1350.0, -149.0, 3.3e38, 0.125, -2.5e37, 123456.0]
    t = torch.tensor(vals)
    x = _t(vals, "float32", device)
    for d in (-1, -2, -3, 1, 2):
        np.testing.assert_array_equal(nr.round(x, decimals=d).numpy(),
                                      torch.round(t, decimals=d).numpy())


def test_logit_eps_clamps_and_its_gradient_is_zero_outside(device):
    vals = [0.0, 1e-4, 0.3, 0.9999, 1.0, 0.5, 0.02]
    for eps in (None, 1e-3, 0.05):
        x = _t(vals, "float32", device).requires_grad_()
        t = torch.tensor(vals, requires_grad=True)
        y = nr.logit(x, eps) if eps is None else x.logit(eps=eps)
        ty = torch.logit(t, eps)
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=2e-6)
        y.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=2e-6)
    with pytest.raises(TypeError):
        nr.logit(x, 0.1, 2)


@pytest.mark.parametrize("shape, dim", [((1_000_003,), None), ((7, 300_000), 1),
                                        ((5000, 400), 0), ((300, 20_000), 1)])
def test_long_float32_sums_are_as_accurate_as_torchs(device, shape, dim):
    """Long float32 sums within a few times torch's own error of the float64 truth (webgpu's
    lanes added ~4000 elements each in a plain loop: a sum of 10^6 values near 10^4 was off by
    3e-5, and the variance built on that mean by a factor of 2)."""
    x = (np.random.default_rng(7).random(shape) + 1e4).astype(np.float32)
    want = x.astype(np.float64).sum(dim)
    t = torch.tensor(x)
    torch_err = np.max(np.abs(t.sum(dim).numpy().astype(np.float64) - want) / want)
    xn = nr.tensor(x, device=device)
    for got, truth in [(xn.sum(dim), want), (xn.mean(dim), want / (x.size / np.size(want)))]:
        err = np.max(np.abs(got.numpy().astype(np.float64) - truth) / truth)
        assert err <= max(4 * torch_err, 4e-7), (err, torch_err)
    var = xn.var(dim).numpy().astype(np.float64)
    np.testing.assert_allclose(var, x.astype(np.float64).var(dim, ddof=1), rtol=1e-3)


@pytest.mark.parametrize("offset, scale", [(100.0, 0.01), (1e4, 0.1), (1000.0, 1.0)])
def test_layer_norm_of_rows_far_from_zero(device, offset, scale):
    """Within torch's own float32 error of the float64 truth (webgpu summed the raw values: the
    mean of a row near 1e4 lost digits, 4x-10x torch's error in the normalised values)."""
    x = (np.random.default_rng(3).standard_normal((4, 512)) * scale + offset).astype(np.float32)
    xx = x.astype(np.float64)
    want = (xx - xx.mean(1, keepdims=True)) / np.sqrt(xx.var(1, keepdims=True) + 1e-5)
    torch_err = np.max(np.abs(torch.nn.functional.layer_norm(torch.tensor(x), (512,)).numpy()
                              - want))
    got = nr.nn.functional.layer_norm(nr.tensor(x, device=device), (512,)).numpy()
    assert np.max(np.abs(got - want)) <= 1.5 * torch_err + 1e-6


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_tanh_keeps_negative_zero(device, dtype):
    vals = [-0.0, 0.0, -1e-3, 0.3, -2.0]
    got = nr.tanh(_t(vals, dtype, device)).numpy()
    want = torch.tanh(torch.tensor(vals, dtype=getattr(torch, dtype))).numpy()
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_allclose(got, want, rtol=2e-3 if dtype == "float16" else 2e-7)


def test_python_scalars_meet_float16_tensors_as_in_torch(device):
    """torch rounds the scalar to float16 first in +, -, %, **, comparisons, s // x (x == 0.1
    holds for x = float16(0.1); x + 1e10 is x + inf), and keeps its precision in *, / and
    x // s."""
    import operator as op
    rng = np.random.default_rng(5)
    v = np.concatenate([[0.1, 0.2, 1 / 3, np.inf, -np.inf, 65504, 6e-8, -0.0, 2049, 0.3],
                        rng.standard_normal(100) * 10]).astype(np.float16)
    t, x = torch.tensor(v), nr.tensor(v, device=device)
    fns = [op.eq, op.ne, op.lt, op.le, op.gt, op.ge, op.add, op.sub, op.mul, op.truediv, op.mod,
           op.pow]
    for s in [0.1, 0.3, 1e10, -2.0 ** 31, 3.3, 1 / 3, 65519.0, 2049.0, 1e-9, 7]:
        for f in fns:
            for args in [(x, s), (s, x)] if f is not op.truediv else [(x, s)]:
                try:
                    want = f(*[t if a is x else a for a in args])
                except RuntimeError:               # torch: 1e10 ** x overflows float16
                    continue
                np.testing.assert_array_equal(f(*args).numpy(), want.numpy(),
                                              err_msg=f"{f} {s}")
        np.testing.assert_array_equal((x // s).numpy(), (t // s).numpy())


def test_softmax_dtype_argument_and_randperm_range(device):
    t = torch.tensor([[1, 2, 3], [0, -1, 5]])
    x = nr.tensor(t.numpy(), device=device)
    for fn, tfn in [(nr.softmax, torch.softmax), (nr.log_softmax, torch.log_softmax)]:
        for d in ["float16", "float32"]:
            got = fn(x, 1, dtype=d)
            want = tfn(t, 1, dtype=getattr(torch, d))
            assert got.dtype.name == d
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-3, atol=2e-3)
    with pytest.raises(DTypeError, match="int32"):
        nr.randperm(10 ** 12, device=device)


@pytest.mark.parametrize("fn", ["exp", "sigmoid", "tanh", "sqrt"])
def test_writing_a_saved_output_in_place_raises_at_backward_as_torch(device, fn):
    t = torch.tensor([1.0, 2.0], requires_grad=True)
    ty = getattr(t, fn)()
    ty.add_(1)
    with pytest.raises(RuntimeError, match="inplace"):
        ty.sum().backward()
    x = nr.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = getattr(x, fn)()
    y.add_(1)
    with pytest.raises(nr.GradientError, match="in-place"):
        y.sum().backward()
    x = nr.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = getattr(x, fn)()
    z = y.clone()
    z.add_(1)                                 # a copy written: the graph is intact
    z.sum().backward()
    t = torch.tensor([1.0, 2.0], requires_grad=True)
    getattr(t, fn)().clone().add_(1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "int32", "float16", "bool"])
def test_0d_element_with_a_scalar_and_empty_list_index(device, dtype):
    v = np.arange(12).reshape(3, 4).astype(dtype)
    t, x = torch.tensor(v), nr.tensor(v, dtype=dtype, device=device)
    for f in (lambda a: a[0, 1] != 0, lambda a: a[1, 2] == 1, lambda a: a[2, 3] < 7,
              lambda a: 2 * a[1, 1] if dtype != "bool" else a[1, 1] | True):
        got, want = f(x), f(t)
        assert got.shape == () and got.tolist() == want.tolist()
    assert bool(x[0, 1] != 0) == bool(t[0, 1] != 0)
    assert x[[]].shape == tuple(t[[]].shape) and x[:, []].shape == tuple(t[:, []].shape)


@pytest.mark.parametrize("padding_idx", [1, -1])
def test_embedding_padding_idx_as_torch(device, padding_idx):
    torch.manual_seed(0)
    te = torch.nn.Embedding(5, 3, padding_idx=padding_idx)
    ne = nr.nn.Embedding(5, 3, padding_idx=padding_idx, device=device)
    assert not ne.weight.numpy()[padding_idx].any() and ne.padding_idx == te.padding_idx
    ne.load_state_dict({"weight": nr.tensor(te.weight.detach().numpy(), device=device)})
    ids = np.array([[1, 2], [4, 1], [0, 4]])
    w = np.random.default_rng(0).standard_normal((3, 2, 3)).astype(np.float32)
    yt, yn = te(torch.tensor(ids)), ne(nr.tensor(ids, device=device))
    np.testing.assert_array_equal(yn.numpy(), yt.detach().numpy())
    (yt * torch.tensor(w)).sum().backward()
    (yn * nr.tensor(w, device=device)).sum().backward()
    np.testing.assert_allclose(ne.weight.grad.numpy(), te.weight.grad.numpy(), rtol=1e-6)
    wt = torch.randn(5, 3, requires_grad=True)
    wn = nr.tensor(wt.detach().numpy(), device=device, requires_grad=True)
    torch.nn.functional.embedding(torch.tensor(ids), wt, padding_idx=padding_idx).sum().backward()
    nr.nn.functional.embedding(nr.tensor(ids, device=device), wn,
                               padding_idx=padding_idx).sum().backward()
    np.testing.assert_array_equal(wn.grad.numpy(), wt.grad.numpy())
    with pytest.raises(nr.IndexOutOfRangeError, match="padding_idx"):
        nr.nn.Embedding(5, 3, padding_idx=5)


@pytest.mark.parametrize("p", [2, 3, 0.5, 1, float("inf")])
def test_float16_norm_accumulates_in_float32_as_torch(device, p):
    v = np.ones((2, 70000), np.float16)
    v[1, ::3] = 0.25
    t = torch.tensor(v, requires_grad=True)
    x = nr.tensor(v, device=device, requires_grad=True)
    yt, yn = torch.norm(t, p, dim=1), nr.norm(x, p, dim=1)
    assert yn.dtype == nr.float16
    np.testing.assert_array_equal(yn.numpy(), yt.detach().numpy())
    if p == 2:
        yt.sum().backward()
        yn.sum().backward()
        np.testing.assert_allclose(x.grad.numpy().astype(np.float32),
                                   t.grad.numpy().astype(np.float32), rtol=2e-3, atol=1e-6)


def test_var_std_take_torchs_positional_unbiased_overloads(device):
    a = np.arange(12.0).reshape(3, 4).astype(np.float32) ** 1.5
    t, x = torch.tensor(a), nr.tensor(a, device=device)
    calls = [((False,), {}), ((True,), {}), ((1, False), {}), ((1, True, True), {}),
             ((0,), {}), ((), {"dim": 1, "correction": 0, "keepdim": True}),
             ((), {"unbiased": False}), ((1,), {"unbiased": True, "keepdim": True})]
    for f in ("var", "std"):
        for args, kw in calls:
            want = getattr(t, f)(*args, **kw)
            for got in (getattr(x, f)(*args, **kw), getattr(nr, f)(x, *args, **kw)):
                assert got.shape == tuple(want.shape), (f, args, kw)
                np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
        with pytest.raises(DTypeError, match="unbiased or correction"):
            getattr(x, f)(1, True, correction=0)


def test_torch_keyword_names(device):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7
    t, x = torch.tensor(a), nr.tensor(a, device=device)
    F, TF = nr.nn.functional, torch.nn.functional
    pairs = [
        (x.permute(dims=(2, 0, 1)), t.permute(dims=(2, 0, 1))),
        (x.reshape(shape=(4, 6)), t.reshape(shape=(4, 6))),
        (nr.where(condition=x > 1, input=x, other=0.0), torch.where(condition=t > 1, input=t,
                                                                   other=0.0)),
        (nr.fmod(x, other=0.3), torch.fmod(t, other=0.3)),
        (nr.atan2(x, other=x + 1), torch.atan2(t, other=t + 1)),
        (nr.mm(x[0], mat2=x[1].T), torch.mm(t[0], mat2=t[1].T)),
        (nr.bmm(x, mat2=x.transpose(1, 2)), torch.bmm(t, mat2=t.transpose(1, 2))),
        (nr.var_mean(x, 1, unbiased=False)[0], torch.var_mean(t, 1, unbiased=False)[0]),
        (nr.std_mean(x, True)[0], torch.std_mean(t, True)[0]),
        (F.cosine_similarity(x, x + 1, dim=2), TF.cosine_similarity(t, t + 1, dim=2)),
    ]
    for got, want in pairs:
        assert got.shape == tuple(want.shape)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)
    with pytest.raises(nr.ShapeError, match="dims"):
        x.permute(order=(0, 1, 2))


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_elu_gradient_at_nan_as_torch(device, dtype):
    vals = [NAN, -1.0, 0.0, -0.0, 2.0, -INF, INF, -10.0]
    t = torch.tensor(vals, dtype=getattr(torch, dtype), requires_grad=True)
    torch.nn.functional.elu(t).sum().backward()
    x = _t(vals, dtype, device).requires_grad_()
    nr.nn.functional.elu(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=2e-3 if dtype == "float16"
                               else 1e-6)
    b = _t([vals], dtype, device).requires_grad_()
    nr.matmul_bias_activation(nr.ones((1, 1), dtype=dtype, device=device), b, None,
                              "elu").sum().backward()
    np.testing.assert_allclose(b.grad.numpy()[0], t.grad.numpy(), rtol=2e-3 if dtype ==
                               "float16" else 1e-6)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("approximate", [None, "tanh"])
def test_silu_and_gelu_tanh_underflow_to_negative_zero(device, dtype, approximate):
    vals = [-1e4, -88.0, -89.0, -100.0, -300.0, -20.0, 3.0]
    t = torch.tensor(vals, dtype=getattr(torch, dtype))
    x = _t(vals, dtype, device)
    F, TF = nr.nn.functional, torch.nn.functional
    got, want = ((F.silu(x), TF.silu(t)) if approximate is None else
                 (F.gelu(x, approximate="tanh"), TF.gelu(t, approximate="tanh")))
    np.testing.assert_array_equal(np.signbit(got.numpy()), np.signbit(want.numpy()))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-3 if dtype == "float16"
                               else 1e-5, atol=1e-30)     # (torch underflows -2e-37 to -0)
