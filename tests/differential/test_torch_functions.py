"""torch's broadcasting helpers, take_along_dim, scatter_add/index_add, meshgrid, cross,
tensordot, kron, cosine_similarity, logaddexp, hypot, fmax/fmin, randperm and the method forms,
against torch on every device: values, gradients, special values, typed errors."""
import math

import numpy as np
import pytest
import torch

import numr_web as nr

rng = np.random.default_rng(11)
A = rng.standard_normal((3, 4))
B = rng.standard_normal((3, 4))
V3 = rng.standard_normal((2, 3))
W3 = rng.standard_normal((2, 3))
I = np.array([[2, 0, 1, 2], [0, 0, 2, 1]])

CASES = {
    "take_along_dim": (lambda a: nr.take_along_dim(a, nr.tensor(I[:, :3], dtype="int32",
                                                                device=a.device), 1),
                       lambda a: torch.take_along_dim(a, torch.tensor(I[:, :3]), 1), [A[:2]]),
    "take_along_dim_flat": (lambda a: nr.take_along_dim(a, nr.tensor([5, -1, 0], device=a.device)),
                            lambda a: torch.take_along_dim(a, torch.tensor([5, 11, 0])), [A]),
    "scatter_add": (lambda a, s: nr.scatter_add(a, 0, nr.tensor(I, device=a.device), s[:2]),
                    lambda a, s: torch.scatter_add(a, 0, torch.tensor(I), s[:2]), [A, B]),
    "index_add": (lambda a, s: a.index_add(1, nr.tensor([3, 0, 3], device=a.device), s[:, :3],
                                           alpha=2.0),
                  lambda a, s: a.index_add(1, torch.tensor([3, 0, 3]), s[:, :3], alpha=2.0),
                  [A, B]),
    "tensordot": (lambda a, b: nr.tensordot(a, b, dims=([0], [0])),
                  lambda a, b: torch.tensordot(a, b, dims=([0], [0])), [A, B]),
    "tensordot_2": (lambda a, b: nr.tensordot(a.reshape(3, 2, 2), b.reshape(2, 2, 3), 2),
                    lambda a, b: torch.tensordot(a.reshape(3, 2, 2), b.reshape(2, 2, 3), 2), [A, B]),
    "kron": (nr.kron, torch.kron, [V3, W3[:, :2]]),
    "cross": (lambda a, b: nr.cross(a, b, dim=1), lambda a, b: torch.cross(a, b, dim=1), [V3, W3]),
    "cosine_similarity": (lambda a, b: nr.cosine_similarity(a, b, dim=1),
                          lambda a, b: torch.nn.functional.cosine_similarity(a, b, dim=1), [A, B]),
    "logaddexp": (nr.logaddexp, torch.logaddexp, [A * 30, B * 30]),
    "hypot": (nr.hypot, torch.hypot, [A, B]),
    "fmax": (nr.fmax, torch.fmax, [A, B]),
    "fmin": (nr.fmin, torch.fmin, [A, B]),
    "meshgrid_xy": (lambda a, b: nr.stack(nr.meshgrid(a[0], b[1, :3], indexing="xy"), 0),
                    lambda a, b: torch.stack(torch.meshgrid(a[0], b[1, :3], indexing="xy"), 0),
                    [A, B]),
    "broadcast_tensors": (lambda a, b: nr.stack(nr.broadcast_tensors(a[:, :1], b[0]), 0),
                          lambda a, b: torch.stack(torch.broadcast_tensors(a[:, :1], b[0]), 0),
                          [A, B]),
    "methods": (lambda a, b: a.add(b, alpha=0.5).sub(b, alpha=2).mul(b).div(b.abs() + 1)
                .where(a > 0, b).addcmul(a, b, value=0.25).addcdiv(a, b.abs() + 1, value=3),
                lambda a, b: a.add(b, alpha=0.5).sub(b, alpha=2).mul(b).div(b.abs() + 1)
                .where(a > 0, b).addcmul(a, b, value=0.25).addcdiv(a, b.abs() + 1, value=3),
                [A, B]),
    "unflatten": (lambda a: a.unflatten(1, (2, -1)), lambda a: a.unflatten(1, (2, -1)), [A]),
}
EINSUM = {
    "bij,bjk->bik": [(2, 3, 4), (2, 4, 5)], "ij,jk": [(3, 4), (4, 5)], "ii->i": [(4, 4)],
    "ii": [(4, 4)], "i,j->ij": [(3,), (4,)], "...ij,...jk->...ik": [(2, 3, 4), (2, 4, 5)],
    "bhqd,bhkd->bhqk": [(2, 3, 5, 4), (2, 3, 6, 4)], "ij->ji": [(3, 4)], "ij->": [(3, 4)],
    "i,i->": [(5,), (5,)], "abc,cd,de->abe": [(2, 3, 4), (4, 5), (5, 6)],
    "iij->j": [(3, 3, 4)], "ijk,ik->j": [(2, 3, 4), (2, 4)], "bij,j->bi": [(2, 3, 4), (4,)],
}
for _eq, _shapes in EINSUM.items():
    CASES["einsum " + _eq] = (lambda *ts, e=_eq: nr.einsum(e, *ts),
                              lambda *ts, e=_eq: torch.einsum(e, *ts),
                              [rng.standard_normal(s) for s in _shapes])


@pytest.mark.parametrize("name", sorted(CASES))
def test_value_and_gradient_as_torch(device, name):
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
        np.testing.assert_allclose(t.grad.numpy(), w.grad.numpy(), **tol)


def test_special_values_as_torch(device):
    inf, nan = math.inf, math.nan
    a = [inf, -inf, -inf, nan, 1e30, -1e30, 0.0, 3.0, nan]
    b = [inf, -inf, 1.0, 1.0, 1e30, 2.0, -0.0, nan, nan]
    x, y = nr.tensor(a, device=device), nr.tensor(b, device=device)
    ta, tb = torch.tensor(a), torch.tensor(b)
    for f in ("logaddexp", "hypot", "fmax", "fmin"):
        np.testing.assert_array_equal(getattr(nr, f)(x, y).numpy(), getattr(torch, f)(ta, tb).numpy(),
                                      err_msg=f)
    big = nr.tensor([3e38, 1e-30], device=device)
    np.testing.assert_allclose(nr.hypot(big, big).numpy(), torch.hypot(torch.tensor([3e38, 1e-30]),
                               torch.tensor([3e38, 1e-30])).numpy(), rtol=2.4e-7)


def test_randperm_is_a_seeded_permutation(device):
    nr.manual_seed(3)
    p = nr.randperm(50, device=device)
    nr.manual_seed(3)
    q = nr.randperm(50, device=device)
    assert p.dtype is nr.int32 and sorted(p.tolist()) == list(range(50)) and p.tolist() == q.tolist()
    assert nr.randperm(0, device=device).shape == (0,)


BAD = {
    "scatter_add out of range": (lambda d: nr.scatter_add(nr.zeros(3, device=d), 0,
                                                          nr.tensor([3], device=d),
                                                          nr.ones(1, device=d)).tolist(),
                                 nr.IndexOutOfRangeError),
    "scatter_add dims": (lambda d: nr.scatter_add(nr.zeros((2, 2), device=d), 0,
                                                  nr.tensor([0], device=d), nr.ones(1, device=d)),
                         nr.ShapeError),
    "index_add source": (lambda d: nr.index_add(nr.zeros((2, 3), device=d), 1,
                                                nr.tensor([0], device=d), nr.ones((2, 2), device=d)),
                         nr.ShapeError),
    "cross size": (lambda d: nr.cross(nr.ones(4, device=d), nr.ones(4, device=d)), nr.ShapeError),
    "tensordot sizes": (lambda d: nr.tensordot(nr.ones((2, 3), device=d), nr.ones((2, 3), device=d),
                                               1), nr.ShapeError),
    "meshgrid 2-D": (lambda d: nr.meshgrid(nr.ones((2, 2), device=d)), nr.ShapeError),
    "meshgrid indexing": (lambda d: nr.meshgrid(nr.ones(2, device=d), indexing="yx"), nr.ShapeError),
    "unflatten sizes": (lambda d: nr.ones((2, 6), device=d).unflatten(1, (4, -1)), nr.ShapeError),
    "div rounding": (lambda d: nr.ones(2, device=d).div(2, rounding_mode="up"), nr.DTypeError),
    "randperm negative": (lambda d: nr.randperm(-1, device=d), nr.ShapeError),
    "einsum operands": (lambda d: nr.einsum("ij,jk", nr.ones((2, 2), device=d)), nr.ShapeError),
    "einsum letters": (lambda d: nr.einsum("ijk", nr.ones((2, 2), device=d)), nr.ShapeError),
    "einsum sizes": (lambda d: nr.einsum("ij,jk", nr.ones((2, 3), device=d),
                                         nr.ones((2, 2), device=d)), nr.ShapeError),
    "einsum output": (lambda d: nr.einsum("ij->k", nr.ones((2, 2), device=d)), nr.ShapeError),
    "take_along_dim list": (lambda d: nr.take_along_dim([1, 2], nr.tensor([0], device=d)),
                            nr.DTypeError),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_arguments_raise_typed_errors(device, case):
    make, err = BAD[case]
    with pytest.raises(err):
        make(device)


def test_data_dependent_shapes_as_torch(device):
    nan = math.nan
    a = [[0.0, 1.5, 0.0], [2.0, 0.0, nan]]
    x, t = nr.tensor(a, device=device), torch.tensor(a)
    assert nr.nonzero(x).tolist() == torch.nonzero(t).tolist()
    assert nr.nonzero(x).dtype is nr.int32
    assert [u.tolist() for u in nr.nonzero(x, as_tuple=True)] == \
        [u.tolist() for u in torch.nonzero(t, as_tuple=True)]
    assert nr.nonzero(nr.zeros((2, 3), device=device)).shape == (0, 2)
    xm = nr.tensor(a, device=device, requires_grad=True)
    nr.masked_select(xm, xm > 0).sum().backward()
    assert xm.grad.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    v = [3, 1, 2, 3, 1, 1]
    got = nr.unique(nr.tensor(v, device=device), return_inverse=True, return_counts=True)
    want = torch.unique(torch.tensor(v), return_inverse=True, return_counts=True)
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
    assert nr.bincount(nr.tensor(v, device=device), minlength=6).tolist() == \
        torch.bincount(torch.tensor(v), minlength=6).tolist()
    w = [0.5, 1.0, 2.0, 0.25, 4.0, 8.0]
    assert nr.bincount(nr.tensor(v, device=device), nr.tensor(w, device=device)).tolist() == \
        torch.bincount(torch.tensor(v), torch.tensor(w)).tolist()
    with pytest.raises(nr.ShapeError):
        nr.bincount(nr.tensor([1, -1], device=device))
    with pytest.raises(nr.DTypeError):
        nr.bincount(nr.tensor([1.0], device=device))
