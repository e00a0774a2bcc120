"""What a PyTorch user types on a tensor, and the global random generator, against torch 2.x:
size()/dim()/numel()/element_size(), copy.deepcopy and pickle, torch's constructor forms
(randn(2, 3) is a shape), nr.manual_seed seeding every random op, and the small Tensor methods
(new_*, type_as, to(other), .data, .long(), t(), mT, *_as). Each device."""
import copy
import pickle

import numpy as np
import pytest
import torch

import numr_web as nr


def _pair(device, data=((1.5, -2.0, 3.0), (0.25, 4.0, -1.0))):
    return nr.tensor(data, device=device), torch.tensor(data)


def test_size_dim_numel_element_size(device):
    x, tx = _pair(device)
    assert x.size() == tx.size() and isinstance(x.size(), tuple) and isinstance(x.size(), nr.Size)
    assert x.size().numel() == tx.size().numel() == 6
    for d in (0, 1, -1, -2):
        assert x.size(d) == tx.size(d) and x.size(dim=d) == tx.size(dim=d)
    assert x.dim() == tx.dim() == x.ndimension() == 2
    assert x.numel() == x.nelement() == tx.nelement() == 6
    assert x.size == 6                       # numr's attribute form (numpy's .size) is kept
    for name, tdt in (("float32", torch.float32), ("float16", torch.float16),
                      ("int32", torch.int32), ("bool", torch.bool)):
        assert x.astype(name).element_size() == torch.ones(1, dtype=tdt).element_size()
    with pytest.raises(IndexError):
        tx.size(2)
    with pytest.raises(nr.IndexOutOfRangeError):
        x.size(2)
    with pytest.raises(nr.IndexOutOfRangeError):
        nr.tensor(1.0, device=device).size(0)
    assert nr.tensor(1.0, device=device).size() == torch.tensor(1.0).size() == ()


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_copy_and_pickle_keep_values_dtype_device_requires_grad(device, how):
    rt = copy.deepcopy if how == "deepcopy" else (lambda t: pickle.loads(pickle.dumps(t)))
    for dtype in ("float32", "int32", "bool", "float16"):
        x = nr.tensor([[1, 0, 3], [4, 5, -6]], dtype=dtype, device=device)
        y = rt(x)
        assert (y.dtype, y.device, y.shape, y.requires_grad) == (x.dtype, x.device, x.shape, False)
        np.testing.assert_array_equal(y.numpy(), x.numpy())
    w = nr.tensor([1.0, 2.0], device=device, requires_grad=True)
    tw = torch.tensor([1.0, 2.0], requires_grad=True)
    (w * 3).sum().backward()
    (tw * 3).sum().backward()
    w2, tw2 = rt(w), rt(tw)
    assert w2.requires_grad and w2.is_leaf and w2 is not w
    assert (w2.grad is None) == (tw2.grad is None)      # deepcopy copies .grad, pickle does not
    if w2.grad is not None:
        np.testing.assert_array_equal(w2.grad.numpy(), tw2.grad.numpy())
        assert w2.grad is not w.grad
    w2_sum = (w2 * w2).sum()                            # the copy is a fresh leaf of its own
    w2_sum.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 3.0])


def test_deepcopy_of_non_leaf_is_refused_as_in_torch(device):
    x = nr.tensor([1.0], device=device, requires_grad=True)
    with pytest.raises(RuntimeError):
        copy.deepcopy(torch.tensor([1.0], requires_grad=True) * 2)
    with pytest.raises(nr.GradientError):
        copy.deepcopy(x * 2)
    y = pickle.loads(pickle.dumps(x * 2))             # pickle gives a leaf, as torch's
    ty = pickle.loads(pickle.dumps(torch.tensor([1.0], requires_grad=True) * 2))
    assert (y.is_leaf, y.requires_grad) == (ty.is_leaf, ty.requires_grad)
    assert y.tolist() == ty.tolist()


def test_module_deepcopy_and_pickle(device):
    model = nr.nn.Sequential(nr.nn.Linear(3, 4, activation="relu", device=device, seed=0),
                             nr.nn.Linear(4, 2, device=device, seed=2))
    x = nr.randn((5, 3), seed=1, device=device)
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        params = list(clone.parameters())
        assert len(params) == 4
        assert all(p.requires_grad and p.is_leaf and p.device == device for p in params)
        assert all(isinstance(p, nr.nn.Parameter) for p in params)
        np.testing.assert_array_equal(clone(x).numpy(), model(x).numpy())
        clone(x).sum().backward()
        assert all(p.grad is None for p in model.parameters())
        assert all(p.grad is not None for p in clone.parameters())


def test_randn_positional_sizes_are_a_shape(device):
    assert nr.randn(2, 3, device=device).shape == torch.randn(2, 3).shape == (2, 3)
    assert nr.rand(2, 3, device=device).shape == (2, 3)
    assert nr.randn((2, 3), device=device).shape == (2, 3)
    assert nr.rand(size=(4,), device=device).shape == (4,)
    assert nr.randn(nr.Size((2, 1)), device=device).shape == (2, 1)
    # numr's documented form, seed by keyword or as the second positional after a shape tuple
    a = nr.randn((2, 3), seed=5, device=device)
    np.testing.assert_array_equal(nr.randn((2, 3), 5, device=device).numpy(), a.numpy())
    np.testing.assert_array_equal(nr.randn(2, 3, seed=5, device=device).numpy(), a.numpy())
    with pytest.raises(nr.ShapeError):
        nr.randn(2, "float32")


def test_manual_seed_seeds_every_random_op(device):
    def draw():
        x = nr.ones((4, 8), device=device)
        return [nr.rand(3, 4, device=device).numpy(), nr.randn(5, device=device).numpy(),
                nr.rand_like(x).numpy(), nr.randn_like(x).numpy(),
                nr.dropout(x, 0.5).numpy(),
                nr.nn.Linear(4, 3, device=device).weight.numpy()]
    nr.manual_seed(123)
    first = draw()
    nr.manual_seed(123)
    again = draw()
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    nr.manual_seed(124)
    other = draw()
    assert not any(np.array_equal(a, b) for a, b in zip(first, other))
    assert nr.initial_seed() == 124
    state = nr.get_rng_state()
    a = nr.rand(6, device=device).numpy()
    nr.set_rng_state(state)
    np.testing.assert_array_equal(nr.rand(6, device=device).numpy(), a)


def test_generator_is_a_private_stream(device):
    g = nr.Generator().manual_seed(7)
    a = nr.randn(3, 3, generator=g, device=device).numpy()
    nr.manual_seed(0)
    nr.rand(4, device=device)                      # the default stream does not move g
    b = nr.randn(3, 3, generator=nr.Generator().manual_seed(7), device=device).numpy()
    np.testing.assert_array_equal(a, b)
    assert g.initial_seed() == 7
    with pytest.raises(nr.DTypeError):
        nr.rand(2, generator=7)


def test_rand_like_follows_the_tensor(device):
    x = nr.ones((2, 5), dtype="float16", device=device)
    for fn in (nr.rand_like, nr.randn_like, nr.empty_like):
        y = fn(x)
        assert (y.shape, y.dtype, y.device) == (x.shape, x.dtype, x.device)
    u = nr.rand_like(nr.ones(2000, device=device)).numpy()
    assert 0.0 <= u.min() and u.max() < 1.0


def test_new_constructors_type_as_to_other(device):
    x, tx = _pair(device)
    x = x.astype("float16")
    tx = tx.half()
    for args in (((2, 3),), (2, 3)):
        for name in ("new_zeros", "new_ones", "new_empty"):
            got, want = getattr(x, name)(*args), getattr(tx, name)(*args)
            assert (got.shape, got.dtype.name, got.device) == (tuple(want.shape), "float16", device)
            if name != "new_empty":
                np.testing.assert_array_equal(got.numpy(), want.numpy())
    f = x.new_full((2,), 7.5)
    assert f.dtype is nr.float16 and f.tolist() == tx.new_full((2,), 7.5).tolist()
    t = x.new_tensor([1, 2])
    assert t.dtype is nr.float16 and t.tolist() == [1.0, 2.0]
    assert x.new_zeros(2, dtype="int32").dtype is nr.int32
    i = nr.tensor([1, 2], device=device)
    assert i.type_as(x).dtype is nr.float16 and i.to(x).dtype is nr.float16
    assert i.to(x).device == device
    assert x.to(nr.float32).dtype is nr.float32 and x.to(dtype="float32").dtype is nr.float32
    assert i.long().dtype is nr.int32          # int32 is the widest integer (README)
    assert x.is_floating_point() and not i.is_floating_point()
    assert x.is_cuda == (device == "cuda")


def test_data_property(device):
    w = nr.tensor([1.0, 2.0], device=device, requires_grad=True)
    d = w.data
    assert not d.requires_grad and d.is_leaf and d.tolist() == [1.0, 2.0]
    w.data = nr.tensor([5.0, 6.0], device=device)
    assert w.tolist() == [5.0, 6.0] and w.requires_grad
    with pytest.raises(nr.DTypeError):
        w.data = nr.tensor([1, 2], device=device)


def test_transpose_and_as_methods(device):
    x, tx = _pair(device)
    np.testing.assert_array_equal(x.t().numpy(), tx.t().numpy())
    np.testing.assert_array_equal(x.mT.numpy(), tx.mT.numpy())
    np.testing.assert_array_equal(x.mH.numpy(), tx.mH.numpy())
    np.testing.assert_array_equal(x.H.numpy(), tx.H.numpy())
    v, tv = nr.tensor([1.0, 2.0], device=device), torch.tensor([1.0, 2.0])
    assert v.t().tolist() == tv.t().tolist()
    with pytest.raises(nr.ShapeError):
        nr.ones((2, 2, 2), device=device).t()
    y = nr.ones((3, 2), device=device)
    assert x.view_as(y).shape == x.reshape_as(y).shape == tx.view_as(torch.ones(3, 2)).shape
    assert nr.ones((1, 3), device=device).expand_as(x).shape == (2, 3)
    np.testing.assert_array_equal(x.mm(x.mT).numpy(), tx.mm(tx.mT).numpy())
    b = nr.ones((4, 2, 3), device=device)
    assert nr.bmm(b, b.mT).shape == torch.bmm(torch.ones(4, 2, 3), torch.ones(4, 3, 2)).shape
    with pytest.raises(nr.ShapeError):
        nr.bmm(x, x.mT)
    np.testing.assert_array_equal(x.clamp_min(0.5).numpy(), tx.clamp_min(0.5).numpy())
    np.testing.assert_array_equal(x.clamp_max(0.5).numpy(), tx.clamp_max(0.5).numpy())
    np.testing.assert_array_equal(x.square().numpy(), tx.square().numpy())


def test_module_level_helpers(device):
    x, tx = _pair(device)
    assert nr.is_tensor(x) and not nr.is_tensor(tx.numpy())
    assert nr.numel(x) == torch.numel(tx)
    assert nr.get_default_dtype() is nr.float32
    assert nr.float32.is_floating_point and not nr.int32.is_floating_point


@pytest.mark.parametrize("sizes", [(2, 1), (1, 3), (2, 2, 1), (3, 1, 2), ((2, 2),)])
def test_repeat_and_its_gradient(device, sizes):
    data = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    x = nr.tensor(data, device=device, requires_grad=True)
    tx = torch.tensor(data, requires_grad=True)
    y, ty = x.repeat(*sizes), tx.repeat(*sizes)
    np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())
    w = np.arange(ty.numel(), dtype=np.float32).reshape(tuple(ty.shape))
    (y * nr.tensor(w, device=device)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    with pytest.raises(nr.ShapeError):
        x.repeat(2)


def test_unbind_equal_allclose(device):
    x, tx = _pair(device)
    for d in (0, 1, -1):
        assert [u.tolist() for u in x.unbind(d)] == [u.tolist() for u in tx.unbind(d)]
    assert [u.tolist() for u in nr.unbind(x)] == [u.tolist() for u in torch.unbind(tx)]
    y, ty = x + 1e-6, tx + 1e-6
    assert nr.allclose(x, y) == torch.allclose(tx, ty)
    assert nr.allclose(x, y, atol=0, rtol=1e-9) == torch.allclose(tx, ty, atol=0, rtol=1e-9)
    nan = [float("nan"), float("inf"), 1.0]
    a, ta = nr.tensor(nan, device=device), torch.tensor(nan)
    assert nr.allclose(a, a) == torch.allclose(ta, ta)
    assert nr.allclose(a, a, equal_nan=True) == torch.allclose(ta, ta, equal_nan=True)
    assert nr.equal(x, x) and torch.equal(tx, tx)
    assert nr.equal(x, x[0]) == torch.equal(tx, tx[0])
    assert x.equal(x + 0) and not x.equal(x + 1)


def test_randint_forms_range_and_seed(device):
    assert nr.randint(10, (2, 3), device=device).shape == torch.randint(10, (2, 3)).shape
    assert nr.randint(3, 7, (4,), device=device).dtype is nr.int32
    assert nr.randint(0, 5, size=(3,), device=device, dtype="float32").dtype is nr.float32
    nr.manual_seed(3)
    a = nr.randint(-5, 5, (4000,), device=device).numpy()
    assert a.min() == -5 and a.max() == 4          # every value reached, none outside
    nr.manual_seed(3)
    np.testing.assert_array_equal(nr.randint(-5, 5, (4000,), device=device).numpy(), a)
    counts = np.bincount(a + 5, minlength=10)
    assert counts.min() > 300                      # about 400 each
    if device != "webgpu":
        w = nr.randint(-2 ** 31, 2 ** 31 - 1, (1000,), device=device).numpy()
        assert w.min() < -2 ** 30 and w.max() > 2 ** 30
    with pytest.raises(nr.ShapeError):
        nr.randint(5, 5, (2,), device=device)
    with pytest.raises(nr.DTypeError):
        nr.randint(0, 2 ** 40, (2,), device=device)


def test_torch_dtype_names():
    assert (nr.float, nr.double, nr.half, nr.int, nr.bool) == (
        nr.float32, nr.float64, nr.float16, nr.int32, nr.bool_)
    assert str(torch.float) == "torch.float32" and str(torch.int) == "torch.int32"
    assert pickle.loads(pickle.dumps(nr.ones(2).size)) == 2


def test_to_copy_gives_a_fresh_tensor_in_the_graph(device):
    x = nr.tensor([1.0, 2.0], device=device, requires_grad=True)
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    assert x.to(device) is x and tx.to("cpu") is tx
    y, ty = x.to(device, copy=True), tx.to("cpu", copy=True)
    assert y is not x and ty is not tx and y.requires_grad == ty.requires_grad
    (y * 3).sum().backward()
    (ty * 3).sum().backward()
    assert x.grad.tolist() == tx.grad.tolist()


def test_generator_start_seeds_as_torch():
    assert nr.Generator().initial_seed() == torch.Generator().initial_seed()
    a = nr.rand(4, generator=nr.Generator()).numpy()
    np.testing.assert_array_equal(nr.rand(4, generator=nr.Generator()).numpy(), a)
    s = nr.seed()                                # the default one: reseeded from the OS
    assert nr.initial_seed() == s


def test_like_constructors_match_torch(device):
    x, tx = nr.tensor([1, 2, 3], device=device), torch.tensor([1, 2, 3], dtype=torch.int32)
    for fn, tfn, args in ((nr.full_like, torch.full_like, (2.7,)), (nr.zeros_like, torch.zeros_like, ()),
                          (nr.ones_like, torch.ones_like, ()), (nr.full_like, torch.full_like, (True,))):
        got, want = fn(x, *args), tfn(tx, *args)
        assert got.tolist() == want.tolist() and got.dtype is nr.int32 and got.device == device
        got = fn(x, *args, dtype="float32")
        assert got.tolist() == tfn(tx, *args, dtype=torch.float32).tolist()
    with pytest.raises(NotImplementedError):
        torch.rand_like(tx)
    with pytest.raises(nr.DTypeError):
        nr.rand_like(x)
    assert nr.randn_like(x, dtype="float32").dtype is nr.float32
    y = nr.zeros_like(x.astype("float32"), requires_grad=True)
    assert y.requires_grad and y.is_leaf
