"""In-place methods, augmented assignment and item assignment against torch on every device:
values, gradients through in-place chains, torch's version-counter errors, leaf rules, dtype and
shape rules."""
import math

import numpy as np
import pytest
import torch

import numr_web as nr

A = np.array([[0.5, -1.5, 2.0], [3.0, -0.25, 1.0]], np.float32)
B = np.array([2.0, -1.0, 0.5], np.float32)

# name -> f(t, other) applied to both libraries (t a tensor of A, other one of B)
METHODS = {
    "add_": lambda t, o: t.add_(o, alpha=2), "sub_": lambda t, o: t.sub_(o, alpha=0.5),
    "mul_": lambda t, o: t.mul_(o), "div_": lambda t, o: t.div_(o),
    "div_floor": lambda t, o: t.div_(o, rounding_mode="floor"),
    "div_trunc": lambda t, o: t.div_(o, rounding_mode="trunc"),
    "pow_": lambda t, o: t.abs_().pow_(o), "clamp_": lambda t, o: t.clamp_(-1.0, 1.0),
    "clamp_min_": lambda t, o: t.clamp_min_(0.0), "exp_": lambda t, o: t.exp_(),
    "neg_": lambda t, o: t.neg_(), "sigmoid_": lambda t, o: t.sigmoid_(),
    "tanh_": lambda t, o: t.tanh_(), "relu_": lambda t, o: t.relu_(),
    "floor_": lambda t, o: t.floor_(), "round_": lambda t, o: t.round_(),
    "zero_": lambda t, o: t.zero_(), "fill_": lambda t, o: t.fill_(-2.5),
    "copy_": lambda t, o: t.copy_(o), "lerp_": lambda t, o: t.lerp_(o, 0.25),
    "masked_fill_": lambda t, o: t.masked_fill_(t > 1, 9.0),
    "iadd": lambda t, o: t.__iadd__(o), "isub": lambda t, o: t.__isub__(3),
    "imul": lambda t, o: t.__imul__(o), "itruediv": lambda t, o: t.__itruediv__(o),
    "ipow": lambda t, o: t.__ipow__(2),
}


@pytest.mark.parametrize("name", sorted(METHODS))
def test_in_place_method_as_torch(device, name):
    x, t = nr.tensor(A, device=device), torch.tensor(A)
    same = METHODS[name](x, nr.tensor(B, device=device))
    METHODS[name](t, torch.tensor(B))
    assert same is x                                  # returns the tensor itself, as torch
    np.testing.assert_allclose(x.numpy(), t.numpy(), rtol=2.4e-7, atol=0)
    assert x.dtype is nr.float32


def test_augmented_assignment_changes_every_reference(device):
    params = [nr.ones(3, device=device, requires_grad=True)]
    params[0].grad = nr.full((3,), 2.0, device=device)
    with nr.no_grad():
        for p in params:
            p -= 0.25 * p.grad                         # torch's hand-written SGD step
    assert params[0].tolist() == [0.5, 0.5, 0.5]
    assert params[0].requires_grad and params[0].grad_fn is None   # still a leaf


@pytest.mark.parametrize("index", [(0,), (slice(1, None), 0), (Ellipsis, -1),
                                   (slice(None), slice(0, 3, 2)), (None, 1, slice(1, None))], ids=str)
def test_item_assignment_as_torch(device, index):
    x, t = nr.tensor(A, device=device), torch.tensor(A)
    x[index] = 7.0
    t[index] = 7.0
    np.testing.assert_array_equal(x.numpy(), t.numpy())
    v = np.arange(1, 1 + t[index].numel(), dtype=np.float32).reshape(tuple(t[index].shape))
    x[index] = nr.tensor(v, device=device)
    t[index] = torch.tensor(v)
    np.testing.assert_array_equal(x.numpy(), t.numpy())


def test_mask_assignment_and_nan_values_as_torch(device):
    x, t = nr.tensor(A, device=device), torch.tensor(A)
    x[x < 0] = math.nan
    t[t < 0] = math.nan
    np.testing.assert_array_equal(x.numpy(), t.numpy())
    x[0] = math.inf
    t[0] = math.inf
    np.testing.assert_array_equal(x.numpy(), t.numpy())


def test_gradients_through_in_place_chains_as_torch(device):
    def run(lib, make):
        w = make(A)
        v = make(B)
        h = w * 2
        h.add_(v).mul_(3.0)
        h[0, 1:] = v[:2] * 3
        h.sub_(1).exp_()
        h.sum().backward()
        return w.grad, v.grad
    got = run(nr, lambda a: nr.tensor(a, dtype="float32", device=device, requires_grad=True))
    want = run(torch, lambda a: torch.tensor(a, dtype=torch.float32, requires_grad=True))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=2.4e-7)


def test_write_to_a_tensor_the_graph_needs_raises_as_torch(device):
    w = nr.tensor(B, device=device, requires_grad=True)
    h = w * 2
    y = h + 1                                           # add needs no values of h...
    z = h * h                                           # ...mul saves h: a later write to h
    h.add_(1)
    with pytest.raises(nr.GradientError, match="in-place"):
        z.sum().backward()
    tw = torch.tensor(B, requires_grad=True)
    th = tw * 2
    tz = th * th
    th.add_(1)
    with pytest.raises(RuntimeError, match="inplace"):
        tz.sum().backward()
    y.sum().backward()                                  # add does not need h: still fine
    assert w.grad.tolist() == [2.0, 2.0, 2.0]


def test_leaf_rules_as_torch(device):
    p = nr.ones(3, device=device, requires_grad=True)
    with pytest.raises(nr.GradientError, match="leaf"):
        p.add_(1)
    with pytest.raises(nr.GradientError, match="leaf"):
        p[0] = 2.0
    with nr.no_grad():
        p.mul_(3)
        p[1] = 0.0
    assert p.tolist() == [3.0, 0.0, 3.0] and p.requires_grad and p.is_leaf
    (p * 2).sum().backward()
    assert p.grad.tolist() == [2.0, 2.0, 2.0]


def test_dtype_and_shape_rules_as_torch(device):
    i = nr.tensor([1, 2, 3], dtype="int32", device=device)
    with pytest.raises(nr.DTypeError):
        i += 0.5                                        # float result into int32: torch refuses
    with pytest.raises(RuntimeError):
        ti = torch.tensor([1, 2, 3], dtype=torch.int32)
        ti += 0.5
    f = nr.ones(3, device=device)
    f += nr.tensor([1, 2, 3], dtype="int32", device=device)   # int into float: fine
    assert f.dtype is nr.float32 and f.tolist() == [2.0, 3.0, 4.0]
    with pytest.raises(nr.ShapeError):
        f.add_(nr.ones((2, 3), device=device))            # the tensor cannot grow
    with pytest.raises(nr.ShapeError):
        f[0:2] = nr.ones(3, device=device)
    f[nr.tensor([0, 1], dtype="int32", device=device)] = 1.0   # index_put, as torch
    assert f.tolist() == [1.0, 1.0, 4.0]
    with pytest.raises(nr.DTypeError):
        nr.zeros(2, dtype="int32", device=device).fill_(math.nan)
    with pytest.raises(nr.DTypeError):
        nr.zeros(2, dtype="int32", device=device).uniform_()


def test_random_fills_are_in_range_and_seeded(device):
    nr.manual_seed(5)
    a = nr.zeros(4000, device=device).uniform_(-2.0, 3.0)
    nr.manual_seed(5)
    b = nr.zeros(4000, device=device).uniform_(-2.0, 3.0)
    assert a.tolist() == b.tolist()
    v = a.numpy()
    assert v.min() >= -2.0 and v.max() < 3.0 and abs(v.mean() - 0.5) < 0.1
    n = nr.zeros(4000, device=device).normal_(1.0, 0.5).numpy()
    assert abs(n.mean() - 1.0) < 0.05 and abs(n.std() - 0.5) < 0.05
