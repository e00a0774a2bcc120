"""Pins every row of README's table "Deliberate differences from PyTorch"."""
import math

import numpy as np
import pytest
import torch

import numr_web as nr


def test_max_min_with_a_positional_dim_return_values_only(device):
    x = nr.tensor([[1.0, 3.0], [4.0, 2.0]], device=device)
    assert x.max(1).tolist() == [3.0, 4.0] and x.min(0, keepdim=True).tolist() == [[1.0, 2.0]]
    assert x.max(axis=1).tolist() == [3.0, 4.0] and nr.min(x, 0).tolist() == [1.0, 2.0]
    assert torch.tensor([[1.0, 3.0]]).max(1).indices.tolist() == [1]     # torch: (values, indices)
    values, indices = x.min(dim=0)                   # dim= by keyword: torch's pair
    assert values.tolist() == [1.0, 2.0] and indices.tolist() == [0, 1]


def test_mean_of_integer_tensor_raises_as_in_torch(device):
    with pytest.raises(nr.DTypeError):
        nr.tensor([1, 2], device=device).mean()
    with pytest.raises(RuntimeError):
        torch.tensor([1, 2]).mean()


def test_int32_is_the_widest_integer(device):
    x = nr.tensor([True, False], device=device) + 1
    assert x.dtype is nr.int32 and (torch.tensor([True]) + 1).dtype == torch.int64
    assert nr.tensor(np.array([1, 2], np.int64), device=device).dtype is nr.int32
    with pytest.raises(nr.DTypeError):
        nr.tensor([2 ** 40], device=device)
    assert nr.tensor([1.7], device=device).long().dtype is nr.int32
    assert torch.tensor([1.7]).long().dtype == torch.int64


def test_int32_sum_wraps(device):
    s = nr.tensor([2 ** 31 - 1, 1], dtype="int32", device=device).sum()
    assert s.dtype is nr.int32 and s.item() == -2 ** 31


def test_integer_division_by_zero_gives_zero(device):
    x = nr.tensor([7, -7], device=device)
    assert (x // 0).tolist() == [0, 0] and (x % 0).tolist() == [0, 0]
    assert nr.fmod(x, 0).tolist() == [0, 0]
    with pytest.raises(RuntimeError):
        torch.tensor([7]) // 0
    with pytest.raises(RuntimeError):
        torch.fmod(torch.tensor([7]), 0)


def test_nan_to_int_refused_as_in_torch(device):
    with pytest.raises(nr.DTypeError):
        nr.tensor([math.nan], dtype="int32", device=device)
    with pytest.raises(nr.DTypeError):
        nr.full((2,), math.inf, dtype="int32", device=device)
    for make in (lambda: torch.tensor([math.nan], dtype=torch.int32),
                 lambda: torch.full((2,), math.inf, dtype=torch.int32)):
        with pytest.raises(RuntimeError):
            make()


def test_out_of_range_float_to_int32(device):
    got = nr.tensor([1e10, -1e10], device=device).astype("int32").tolist()
    if device == "webgpu":
        assert got == [2147483520, -2147483648]
    elif device == "cuda":                      # the GPU's cvt.rzi.s32 saturates (torch CUDA too)
        assert got == [2147483647, -2147483648]
    else:
        assert got == torch.tensor([1e10, -1e10]).to(torch.int32).tolist()


def test_float64_refused_on_webgpu():
    if "webgpu" not in nr.available_devices():
        pytest.skip("webgpu unavailable")
    with pytest.raises(nr.DTypeError):
        nr.zeros(2, dtype="float64", device="webgpu")


def test_webgpu_may_flush_subnormals():
    """WGSL lets implementations flush subnormal results to zero; lavapipe's exp does."""
    if "webgpu" not in nr.available_devices():
        pytest.skip("webgpu unavailable")
    got = nr.exp(nr.tensor([-100.0], device="webgpu")).item()
    assert got == 0.0 or abs(got - math.exp(-100)) <= 2 ** -149


def test_integer_softmax_and_mixed_matmul_promote(device):
    assert nr.softmax(nr.tensor([1, 2], device=device), 0).dtype is nr.float32
    x = nr.tensor([[1]], device=device) @ nr.tensor([[1.5]], device=device)
    assert x.dtype is nr.float32 and x.item() == 1.5
    with pytest.raises(RuntimeError):
        torch.softmax(torch.tensor([1, 2]), 0)
    with pytest.raises(RuntimeError):
        torch.tensor([[1]]) @ torch.tensor([[1.5]])


def test_one_hot_needs_num_classes(device):
    with pytest.raises(nr.ShapeError, match="num_classes"):
        nr.one_hot(nr.tensor([0, 2], device=device))
    assert torch.nn.functional.one_hot(torch.tensor([0, 2])).shape == (2, 3)


def test_in_place_writes_rebind_the_object_not_earlier_views(device):
    x = nr.zeros((2, 3), device=device)
    alias, view = x, x[0]
    x[0, 1] = 1.0
    x += 1
    assert alias.tolist() == [[1.0, 2.0, 1.0], [1.0, 1.0, 1.0]]     # the same object: changed
    assert view.tolist() == [0.0, 0.0, 0.0]                           # an earlier view: not
    t = torch.zeros((2, 3))
    tv = t[0]
    t[0, 1] = 1.0
    t += 1
    assert tv.tolist() == [1.0, 2.0, 1.0]                             # torch writes through


def test_size_attribute_is_the_element_count(device):
    x = nr.ones((2, 3), device=device)
    assert x.size == 6 and x.size() == (2, 3) and x.size(1) == 3
    assert torch.ones(2, 3).size() == (2, 3) and torch.ones(2, 3).size != 6


def test_manual_seed_repeats_numr_not_torch(device):
    nr.manual_seed(0)
    a = nr.rand(4, device=device).numpy()
    nr.manual_seed(0)
    assert np.array_equal(nr.rand(4, device=device).numpy(), a)
    torch.manual_seed(0)
    assert not np.allclose(torch.rand(4).numpy(), a)


def test_inplace_activations_return_new_tensors(device):
    from numr_web import nn
    x = nr.tensor([-1.0, 2.0], device=device)
    y = nn.LeakyReLU(0.5, inplace=True)(x)
    assert x.tolist() == [-1.0, 2.0] and y.tolist() == [-0.5, 2.0]
    t = torch.tensor([-1.0, 2.0])
    torch.nn.LeakyReLU(0.5, inplace=True)(t)
    assert t.tolist() == [-0.5, 2.0]                                     # torch: overwritten


def test_max_pool_indices_are_int32(device):
    x = nr.tensor(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4), device=device)
    _, idx = nr.max_pool2d(x, 2, return_indices=True)
    _, tidx = torch.nn.functional.max_pool2d(torch.arange(16.0).reshape(1, 1, 4, 4), 2,
                                             return_indices=True)
    assert idx.dtype is nr.int32 and tidx.dtype == torch.int64
    assert idx.tolist() == tidx.tolist()
