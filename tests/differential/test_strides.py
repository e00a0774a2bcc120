"""Tensor.stride() and is_contiguous() report the layout a backend holds; on cpu (numpy views, as
torch's) they equal torch's for the same views; on every device contiguous() gives a dense tensor."""
import numpy as np
import pytest
import torch

import numr_web as nr

VIEWS = [
    ("dense", lambda t: t),
    ("T", lambda t: t.permute(2, 1, 0)),
    ("transpose", lambda t: t.transpose(0, 1)),
    ("row", lambda t: t[1]),
    ("step", lambda t: t[:, ::2]),
    ("narrow", lambda t: t[:, 1:, :3]),
    ("expand", lambda t: t[:, :1].expand(2, 5, 4)),
    ("unsqueeze", lambda t: t.unsqueeze(1)),
    ("size-1 dims", lambda t: t[:1, :, :1]),
    ("empty", lambda t: t[:, :0]),
]


@pytest.mark.parametrize("name,view", VIEWS, ids=[v[0] for v in VIEWS])
def test_strides_and_contiguity_as_torch_on_cpu(name, view):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t, x = view(torch.tensor(a)), view(nr.tensor(a))
    assert x.stride() == t.stride() and x.is_contiguous() == t.is_contiguous()
    assert all(x.stride(d) == t.stride(d) for d in range(-x.ndim, x.ndim))


@pytest.mark.parametrize("name,view", VIEWS, ids=[v[0] for v in VIEWS])
def test_contiguous_gives_dense_strides(device, name, view):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = view(nr.tensor(a, device=device))
    dense = x.contiguous()
    assert dense.is_contiguous()
    np.testing.assert_array_equal(dense.numpy(), view(torch.tensor(a)).numpy())
    st = x.stride()
    assert len(st) == x.ndim and x.is_contiguous() == (
        all(s == d for n, s, d in zip(x.shape, st, torch.empty(x.shape).stride()) if n != 1)
        or 0 in x.shape)
    with pytest.raises(nr.ShapeError):
        x.is_contiguous(memory_format="channels_last")
