"""torch's shape helpers, linear-algebra shorthands, amax/amin, norm, var_mean/std_mean, diff and
count_nonzero against torch on every device: values and gradients (float64 truth where the device
has float64), and a typed error for each bad argument."""
import math

import numpy as np
import pytest
import torch

import numr_web as nr

rng = np.random.default_rng(3)
A = rng.standard_normal((2, 3, 4))
M = rng.standard_normal((4, 5))
V = rng.standard_normal(4)

# name -> (numr function, torch function, inputs)
CASES = {
    "movedim": (lambda a: nr.movedim(a, 0, -1), lambda a: torch.movedim(a, 0, -1), [A]),
    "movedim_many": (lambda a: nr.movedim(a, (0, 1), (2, 0)),
                     lambda a: torch.movedim(a, (0, 1), (2, 0)), [A]),
    "swapaxes": (lambda a: nr.swapaxes(a, 0, 2), lambda a: torch.swapaxes(a, 0, 2), [A]),
    "roll": (lambda a: nr.roll(a, 2, 1), lambda a: torch.roll(a, 2, 1), [A]),
    "roll_flat": (lambda a: nr.roll(a, -5), lambda a: torch.roll(a, -5), [A]),
    "roll_dims": (lambda a: nr.roll(a, (1, -3), (0, 2)), lambda a: torch.roll(a, (1, -3), (0, 2)), [A]),
    "tile": (lambda a: nr.tile(a, (2, 1, 1, 3)), lambda a: torch.tile(a, (2, 1, 1, 3)), [A]),
    "repeat": (lambda a: a.repeat(1, 2, 2), lambda a: a.repeat(1, 2, 2), [A]),
    "repeat_interleave": (lambda a: nr.repeat_interleave(a, 2, 1),
                          lambda a: torch.repeat_interleave(a, 2, 1), [A]),
    "unbind": (lambda a: nr.stack(nr.unbind(a, 1), 0), lambda a: torch.stack(torch.unbind(a, 1)), [A]),
    "view_as": (lambda a, b: a.reshape(-1)[:20].view_as(b), lambda a, b: a.reshape(-1)[:20].view_as(b),
                [A, M]),
    "expand_as": (lambda a, b: a[0, :, :1].expand_as(b[:3]),
                  lambda a, b: a[0, :, :1].expand_as(b[:3]), [A, M]),
    "mm": (nr.mm, torch.mm, [M.T, M]),
    "bmm": (nr.bmm, torch.bmm, [A, A.transpose(0, 2, 1)]),
    "mv": (nr.mv, torch.mv, [M.T, V]),
    "dot": (nr.dot, torch.dot, [V, V[::-1].copy()]),
    "outer": (nr.outer, torch.outer, [V, M[0]]),
    "addmm": (lambda c, a, b: nr.addmm(c, a, b, beta=0.5, alpha=2.0),
              lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0), [M[0], M.T, M]),
    "diagonal": (lambda m: nr.diagonal(m, 1), lambda m: torch.diagonal(m, 1), [M]),
    "diagonal_3d": (lambda a: nr.diagonal(a, -1, 1, 2), lambda a: torch.diagonal(a, -1, 1, 2), [A]),
    "trace": (nr.trace, torch.trace, [M]),
    "diag_1d": (lambda v: nr.diag(v, 2), lambda v: torch.diag(v, 2), [V]),
    "diag_1d_neg": (lambda v: nr.diag(v, -1), lambda v: torch.diag(v, -1), [V]),
    "diag_2d": (lambda m: nr.diag(m, -2), lambda m: torch.diag(m, -2), [M]),
    "amax": (lambda a: nr.amax(a, (0, 2)), lambda a: torch.amax(a, (0, 2)), [A]),
    "amin_keep": (lambda a: nr.amin(a, 1, keepdim=True), lambda a: torch.amin(a, 1, keepdim=True), [A]),
    "norm": (nr.norm, torch.norm, [M]),
    "norm_1_dim": (lambda m: nr.norm(m, 1, dim=1), lambda m: torch.norm(m, 1, dim=1), [M]),
    "norm_3": (lambda m: nr.norm(m, 3), lambda m: torch.norm(m, 3), [M]),
    "norm_inf": (lambda m: nr.norm(m, math.inf, dim=0, keepdim=True),
                 lambda m: torch.norm(m, math.inf, dim=0, keepdim=True), [M]),
    "var_mean": (lambda a: nr.stack(nr.var_mean(a, 1), 0), lambda a: torch.stack(torch.var_mean(a, 1)), [A]),
    "std_mean": (lambda a: nr.stack(nr.std_mean(a, (0, 2), correction=0), 0),
                 lambda a: torch.stack(torch.std_mean(a, (0, 2), correction=0)), [A]),
    "diff": (lambda a: nr.diff(a, 2, 2), lambda a: torch.diff(a, 2, 2), [A]),
    "cumsum": (lambda a: nr.cumsum(a, 2), lambda a: torch.cumsum(a, 2), [A]),
    "cumsum_dim0": (lambda a: a.cumsum(0), lambda a: a.cumsum(0), [A]),
    "cumprod": (lambda a: nr.cumprod(a, -1), lambda a: torch.cumprod(a, -1), [A]),
    "cumprod_zeros": (lambda m: nr.cumprod(m, 1), lambda m: torch.cumprod(m, 1),
                      [np.where(np.abs(M) < 0.5, 0.0, M)]),
    "logcumsumexp": (lambda a: nr.logcumsumexp(a * 50, 1), lambda a: torch.logcumsumexp(a * 50, 1),
                     [A]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_composite_value_and_gradient_as_torch(device, name):
    fn, ref, xs = CASES[name]
    dtype = "float32" if device == "webgpu" else "float64"
    ts = [nr.tensor(x, dtype=dtype, device=device, requires_grad=True) for x in xs]
    tt = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in xs]
    out, want = fn(*ts), ref(*tt)
    assert out.shape == tuple(want.shape)
    tol = dict(rtol=1e-13, atol=1e-14) if dtype == "float64" else dict(rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), **tol)
    g = rng.standard_normal(tuple(want.shape))
    out.backward(nr.tensor(g, dtype=dtype, device=device))
    want.backward(torch.tensor(g))
    for t, w in zip(ts, tt):
        if w.grad is None:                  # an input whose shape only is used (view_as)
            assert t.grad is None
        else:
            np.testing.assert_allclose(t.grad.numpy(), w.grad.numpy(), **tol)


def test_norm_at_zero_has_zero_gradient_not_nan(device):
    for p in (2, 3.0):
        z = nr.zeros(3, device=device, requires_grad=True)
        nr.norm(z, p).backward()
        assert z.grad.tolist() == [0.0, 0.0, 0.0]


def test_count_nonzero_and_bool_diff(device):
    x = nr.tensor([[0, 1, 2], [0, 0, 3]], dtype="int32", device=device)
    t = torch.tensor([[0, 1, 2], [0, 0, 3]])
    assert nr.count_nonzero(x).item() == torch.count_nonzero(t).item()
    assert nr.count_nonzero(x, 1).tolist() == torch.count_nonzero(t, 1).tolist()
    b = nr.tensor([True, True, False, True], device=device)
    assert nr.diff(b).tolist() == torch.diff(torch.tensor([True, True, False, True])).tolist()


def test_scans_of_integers_empty_and_0d_as_torch(device):
    b = [True, False, True, True]
    assert nr.cumsum(nr.tensor(b, device=device), 0).tolist() == torch.cumsum(torch.tensor(b), 0).tolist()
    i = [3, -1, 4, 1, -5]
    x = nr.tensor(i, dtype="int32", device=device)
    assert x.cumsum(0).dtype is nr.int32
    assert x.cumsum(0).tolist() == torch.cumsum(torch.tensor(i), 0).tolist()
    assert x.cumprod(0).tolist() == torch.cumprod(torch.tensor(i), 0).tolist()
    assert nr.cumsum(x, 0, dtype="float32").dtype is nr.float32
    assert nr.cumsum(nr.zeros((2, 0), device=device), 1).shape == (2, 0)
    assert nr.cumsum(nr.tensor(2.5, device=device), 0).item() == 2.5
    inf = math.inf
    v = [-inf, -inf, 0.0, 80.0, 1000.0]
    np.testing.assert_array_equal(nr.logcumsumexp(nr.tensor(v, device=device), 0).numpy(),
                                  torch.logcumsumexp(torch.tensor(v), 0).numpy())


def test_diag_keeps_nan_and_inf_off_the_rest(device):
    v = nr.tensor([math.nan, math.inf, 1.0], device=device)
    np.testing.assert_array_equal(nr.diag(v, 1).numpy(),
                                  torch.diag(torch.tensor([math.nan, math.inf, 1.0]), 1).numpy())


BAD = {
    "mm of 1-D": (lambda d: nr.mm(nr.ones(3, device=d), nr.ones((3, 2), device=d)), nr.ShapeError),
    "bmm batch": (lambda d: nr.bmm(nr.ones((2, 3, 4), device=d), nr.ones((3, 4, 2), device=d)),
                  nr.ShapeError),
    "dot lengths": (lambda d: nr.dot(nr.ones(3, device=d), nr.ones(4, device=d)), nr.ShapeError),
    "movedim repeated": (lambda d: nr.movedim(nr.ones((2, 3), device=d), (0, 0), (0, 1)),
                         nr.ShapeError),
    "movedim out of range": (lambda d: nr.movedim(nr.ones((2, 3), device=d), 2, 0),
                             nr.IndexOutOfRangeError),
    "roll lengths": (lambda d: nr.roll(nr.ones((2, 3), device=d), (1, 2), 0), nr.ShapeError),
    "repeat too few": (lambda d: nr.ones((2, 3), device=d).repeat(2), nr.ShapeError),
    "tile negative": (lambda d: nr.tile(nr.ones(2, device=d), (-1,)), nr.ShapeError),
    "tile float": (lambda d: nr.tile(nr.ones(2, device=d), (1.5,)), nr.NumrError),
    "norm of int": (lambda d: nr.norm(nr.ones(2, dtype="int32", device=d)), nr.DTypeError),
    "norm p": (lambda d: nr.norm(nr.ones(2, device=d), "nuc"), nr.DTypeError),
    "unbind 0-d": (lambda d: nr.unbind(nr.tensor(1.0, device=d)), nr.ShapeError),
    "trace 3-D": (lambda d: nr.trace(nr.ones((2, 2, 2), device=d)), nr.ShapeError),
    "diag 3-D": (lambda d: nr.diag(nr.ones((2, 2, 2), device=d)), nr.ShapeError),
    "repeat_interleave tensor": (lambda d: nr.repeat_interleave(nr.ones(2, device=d),
                                                                nr.ones(2, device=d)), nr.DTypeError),
    "diff n": (lambda d: nr.diff(nr.ones(3, device=d), -1), nr.ShapeError),
    "list argument": (lambda d: nr.roll([1, 2], 1), nr.DTypeError),
    "cumsum dim": (lambda d: nr.cumsum(nr.ones((2, 3), device=d), 2), nr.IndexOutOfRangeError),
    "logcumsumexp int": (lambda d: nr.logcumsumexp(nr.ones(2, dtype="int32", device=d), 0),
                         nr.DTypeError),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_arguments_raise_typed_errors(device, case):
    make, err = BAD[case]
    with pytest.raises(err):
        make(device)


def test_unbind_backward_is_one_concat_of_the_pieces_gradients():
    """A sequence taken apart step by step (an RNN's input projection) gets its gradient as one
    concat: no piece scatters a gradient of the whole tensor's size (n pieces, n^2 work)."""
    x = nr.tensor(rng.standard_normal((7, 3, 2)), requires_grad=True)
    pieces = nr.unbind(x, 0)
    loss = sum((p * float(i + 1)).sum() for i, p in enumerate(pieces[:5]))   # two pieces unused
    with nr.profile() as prof:
        loss.backward()
    calls = {r.name: r.calls for r in prof.rows()}
    assert calls.get("concat") == 1 and "unslice" not in calls, calls
    want = np.zeros((7, 3, 2))
    want[:5] = np.arange(1, 6)[:, None, None]
    np.testing.assert_array_equal(x.grad.numpy(), want)
