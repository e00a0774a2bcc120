"""Advanced indexing with several index tensors / lists against torch: reading (torch's placement
of the broadcast index dims), its gradient, writing x[i, j] = v, and typed errors."""
import numpy as np
import pytest
import torch

import numr_web as nr
from numr_web.errors import IndexOutOfRangeError, ShapeError

I, J = [1, -2], [[2], [0], [-1]]
CASES = {
    "pair": lambda a, i, j: a[i, j],
    "split_by_slice": lambda a, i, j: a[i, :, j],
    "after_slice": lambda a, i, j: a[:, i, j],
    "int_then_slice": lambda a, i, j: a[0, :, j],
    "split_by_int": lambda a, i, j: a[i, 1, j],
    "ellipsis_first": lambda a, i, j: a[..., i, j],
    "ellipsis_between": lambda a, i, j: a[i, ..., j],
    "none_first": lambda a, i, j: a[None, i, j],
    "split_by_none": lambda a, i, j: a[i, None, j],
    "split_by_two": lambda a, i, j: a[:, i, :, j],
    "one": lambda a, i, j: a[i],
    "one_late": lambda a, i, j: a[:, :, j],
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("as_list", [False, True])
def test_several_index_tensors_read_and_backward_as_torch(device, case, as_list):
    fn = CASES[case]
    x0 = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
    tx = torch.tensor(x0, requires_grad=True)
    ref = fn(tx, torch.tensor(I), torch.tensor(J))
    g = torch.arange(ref.numel(), dtype=torch.float32).reshape(ref.shape)
    ref.backward(g)
    x = nr.tensor(x0, device=device, requires_grad=True)
    i, j = (I, J) if as_list else (nr.tensor(I, device=device), nr.tensor(J, device=device))
    out = fn(x, i, j)
    assert out.shape == tuple(ref.shape)
    np.testing.assert_array_equal(out.numpy(), ref.detach().numpy())
    out.backward(nr.tensor(g.numpy(), device=device))
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_repeated_indices_accumulate_the_gradient(device):
    x0 = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    tx = torch.tensor(x0, requires_grad=True)
    tx[torch.tensor([0, 2, 0, 0]), torch.tensor([1, 3, 1, 1])].sum().backward()
    x = nr.tensor(x0, device=device, requires_grad=True)
    x[[0, 2, 0, 0], [1, 3, 1, 1]].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


@pytest.mark.parametrize("index", [
    ([0, 2], [1, -1]),
    ([[0], [2]], slice(None), [1, 3]),
    (1, [0, 2, 3]),
    (Ellipsis, [0, 3], [1, 4]),
])
def test_index_put_with_several_index_tensors_as_torch(device, index):
    x0 = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    shape = tuple(torch.zeros(3, 4, 5)[tuple(torch.tensor(i) if isinstance(i, list) else i
                                             for i in index)].shape)
    v0 = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    tv = torch.tensor(v0, requires_grad=True)
    tx = torch.tensor(x0, requires_grad=True) * 1
    tx[tuple(torch.tensor(i) if isinstance(i, list) else i for i in index)] = tv
    g = torch.arange(60.0).reshape(3, 4, 5)
    tx.backward(g)
    x0n = nr.tensor(x0, device=device, requires_grad=True)
    v = nr.tensor(v0, device=device, requires_grad=True)
    x = x0n * 1
    x[tuple(nr.tensor(i, device=device) if isinstance(i, list) else i for i in index)] = v
    np.testing.assert_array_equal(x.numpy(), tx.detach().numpy())
    x.backward(nr.tensor(g.numpy(), device=device))
    np.testing.assert_array_equal(v.grad.numpy(), tv.grad.numpy())
    np.testing.assert_array_equal(x0n.grad.numpy(), _kept(x0, index, g))


def _kept(x0, index, g):
    mask = torch.ones(x0.shape)
    mask[tuple(torch.tensor(i) if isinstance(i, list) else i for i in index)] = 0
    return (mask * g).numpy()


def test_index_put_integer_and_broadcast_value(device):
    t = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    t[torch.tensor([0, 2]), torch.tensor([[1], [3]])] = 7
    x = nr.arange(12, dtype="int32", device=device).reshape(3, 4)
    x[[0, 2], [[1], [3]]] = 7
    assert x.tolist() == t.tolist()
    t[[2, 0]] = torch.tensor([-1, -2, -3, -4], dtype=torch.int32)
    x[[2, 0]] = nr.tensor([-1, -2, -3, -4], dtype="int32", device=device)
    assert x.tolist() == t.tolist()


def test_index_put_repeated_position_takes_the_last_write(device):
    x = nr.zeros((4,), device=device)
    x[[1, 3, 1]] = nr.tensor([5.0, 6.0, 7.0], device=device)
    assert x.tolist() == [0.0, 7.0, 0.0, 6.0]


def test_index_errors_are_typed(device):
    x = nr.zeros((2, 3), device=device)
    with pytest.raises(IndexOutOfRangeError):
        x[[0, 1], [1, 3]]
    with pytest.raises(IndexOutOfRangeError):
        x[[-3], [0]]
    with pytest.raises(IndexError):
        x[[0, 1], [1, 3]] = 1.0
    with pytest.raises(ShapeError):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexOutOfRangeError):
        x[nr.tensor([0, 1], device=device), nr.tensor([1, 3], device=device)].tolist()


@pytest.mark.parametrize("case", ["zero_d_then_slice", "zero_d_pair", "zero_d_only", "empty"])
def test_0d_index_tensor_selects_as_an_int_in_torch(device, case):
    fn = {"zero_d_then_slice": lambda a, t: a[t(1), :, t([1, -2])],
          "zero_d_pair": lambda a, t: a[t(-1), t([[2], [0]])],
          "zero_d_only": lambda a, t: a[:, t(2), t(0)],
          "empty": lambda a, t: a[t([], ), :],
          }[case]
    x0 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    tx = torch.tensor(x0, requires_grad=True)
    ref = fn(tx, lambda v: torch.tensor(v, dtype=torch.int64))
    ref.sum().backward()
    x = nr.tensor(x0, device=device, requires_grad=True)
    out = fn(x, lambda v: nr.tensor(v, dtype="int32", device=device))
    assert out.shape == tuple(ref.shape)
    np.testing.assert_array_equal(out.numpy(), ref.detach().numpy())
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_mask_writes_with_tensor_values_and_leading_dim_masks(device):
    rows = [True, False, True]
    t = torch.zeros(3, 4)
    t[torch.tensor(rows)] = torch.tensor([1.0, 2.0, 3.0, 4.0])
    x = nr.zeros((3, 4), device=device)
    x[nr.tensor(rows, device=device)] = nr.tensor([1.0, 2.0, 3.0, 4.0], device=device)
    assert x.tolist() == t.tolist()
    t[rows] = 5.0
    x[rows] = 5.0
    assert x.tolist() == t.tolist()
    t[t == 5.0] = torch.arange(8.0)
    x[x == 5.0] = nr.arange(8.0, device=device)
    assert x.tolist() == t.tolist()


MASKED = {
    "slice_mask_list": lambda a, m, m2: a[:, m, [1, 3]],
    "int_mask": lambda a, m, m2: a[1, m],
    "ellipsis_mask_int": lambda a, m, m2: a[..., m, 0],
    "slice_mask_slice": lambda a, m, m2: a[:, m, :],
    "list_mask_list": lambda a, m, m2: a[[1], m, [2, 0]],
    "mask2d_list": lambda a, m, m2: a[m2, [3, 0, 1]],
}


@pytest.mark.parametrize("case", sorted(MASKED))
def test_boolean_masks_mixed_with_other_indices_as_torch(device, case):
    fn = MASKED[case]
    x0 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    m, m2 = [True, False, True], [[True, False, True], [False, False, True]]
    tx = torch.tensor(x0, requires_grad=True)
    ref = fn(tx, torch.tensor(m), torch.tensor(m2))
    ref.sum().backward()
    x = nr.tensor(x0, device=device, requires_grad=True)
    out = fn(x, nr.tensor(m, device=device), nr.tensor(m2, device=device))
    assert out.shape == tuple(ref.shape)
    np.testing.assert_array_equal(out.numpy(), ref.detach().numpy())
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    with pytest.raises(ShapeError):
        x[:, nr.tensor([True, False], device=device), 0]


def test_numpy_array_indices_as_torch(device):
    t = torch.arange(12.0).reshape(3, 4)
    x = nr.arange(12.0, device=device).reshape(3, 4)
    for idx in [(np.array([2, 0]), np.array([1, -1])), (np.int64(1), np.array([1])),
                (np.array([True, False, True]),), (slice(None), np.array([[3], [0]]))]:
        assert x[idx].tolist() == t[idx].tolist()
    t[np.array([0, 2]), np.array([1, 1])] = -1.0
    x[np.array([0, 2]), np.array([1, 1])] = -1.0
    assert x.tolist() == t.tolist()
