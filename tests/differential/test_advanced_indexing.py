"""Indexing with several index tensors against torch on every device: where the broadcast index
dims go (adjacent or not, with ints, slices, None and ... among them), negative indices, values
and gradients (a scatter-add, exact here: every value is a small integer), and typed errors."""
import numpy as np
import pytest
import torch

import numr_web as nr

I, J = [1, 0, 1], [2, -1, 0]
CASES = [
    (I, J),                                         # leading, adjacent
    (slice(None), I, J),                            # adjacent after a slice
    (I, slice(None), J),                            # separated by a slice: B leads
    (I, 0, J),                                      # an int between: consumed first, adjacent
    (0, slice(None), I),                            # one tensor after an int (torch: in place)
    (Ellipsis, I, J),
    (None, I, J),
    (I, None, J),                                   # separated by None: B leads
    ([[1], [0]], slice(1, 3), [[0, 1, 2]]),          # broadcasting (2, 1) with (1, 3)
    (I, J, [0, 3, 1], [4, -5, 2]),                   # every dim
    ([], []),                                       # empty
]


def _torch_index(idx):
    return tuple(torch.tensor(t, dtype=torch.long) if isinstance(t, list) else t for t in idx)


@pytest.mark.parametrize("idx", CASES, ids=[str(i) for i in range(len(CASES))])
def test_several_index_tensors_as_torch(device, idx):
    a = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
    t = torch.tensor(a, requires_grad=True)
    x = nr.tensor(a, device=device, requires_grad=True)
    want = t[_torch_index(idx)]
    got = x[tuple(nr.tensor(i, dtype="int32", device=device) if isinstance(i, list) and i
                  else i for i in idx)]
    assert got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.detach().numpy())
    r = np.random.default_rng(0).integers(-3, 4, tuple(want.shape)).astype(np.float32)
    (want * torch.tensor(r)).sum().backward()
    (got * nr.tensor(r, device=device)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


def test_python_lists_index_as_tensors(device):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = nr.tensor(a, device=device)
    np.testing.assert_array_equal(x[[0, 2], [1, 3]].numpy(), a[[0, 2], [1, 3]])


def test_bad_index_tensors_raise_typed_errors(device):
    x = nr.tensor(np.zeros((3, 4), np.float32), device=device)
    with pytest.raises(nr.IndexOutOfRangeError):
        x[nr.tensor([0, 3], device=device), nr.tensor([0, 1], device=device)].numpy()
    with pytest.raises(nr.ShapeError):
        x[nr.tensor([0, 1], device=device), nr.tensor([0, 1, 2], device=device)]   # no broadcast
    with pytest.raises(nr.DTypeError):
        x[nr.tensor([0, 1], device=device), nr.tensor([0.0, 1.0], device=device)]
