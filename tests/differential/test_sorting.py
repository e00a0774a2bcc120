"""sort / argsort / topk / kthvalue / median / msort against torch on every device: torch's order
(NaN above +inf, ties in their original order: torch's stable sort), every dtype, values'
gradients, k and dim checked."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import numr_web as nr

from _diff import HYPOTHESIS

NAN, INF = math.nan, math.inf
SPECIAL = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 2.5, 2.5, -7.0]


def _array(draw, dtype):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=9))
    if dtype == "bool":
        return draw(hnp.arrays(np.bool_, shape))
    if dtype == "int32":
        return draw(hnp.arrays(np.int32, shape, elements=st.sampled_from(
            [0, 1, -1, 3, 3, -2 ** 31, 2 ** 31 - 1, 7])))
    big = 6e4 if dtype == "float16" else 1e30
    return draw(hnp.arrays(np.dtype(dtype), shape, elements=st.sampled_from(SPECIAL + [big])
                           | st.floats(-100, 100, width=16)))


@HYPOTHESIS
@given(data=st.data())
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "bool"])
def test_argsort_and_sort_as_torch_stable(device, dtype, data):
    a = _array(data.draw, dtype)
    dim = data.draw(st.integers(-a.ndim, a.ndim - 1))
    desc = data.draw(st.booleans())
    x = nr.tensor(a, device=device)
    t = torch.tensor(a)
    want = torch.sort(t, dim=dim, descending=desc, stable=True)
    got = nr.sort(x, dim, desc)
    assert got.indices.dtype is nr.int32
    assert got.indices.tolist() == want.indices.tolist()
    np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
    assert nr.argsort(x, dim, descending=desc).tolist() == torch.argsort(
        t, dim=dim, descending=desc, stable=True).tolist()


def test_a_long_row_through_every_stage(device):
    a = np.random.default_rng(0).integers(-20, 20, size=(2, 777)).astype(np.float32)
    a[0, ::50] = NAN
    for desc in (False, True):
        got = nr.argsort(nr.tensor(a, device=device), 1, descending=desc).tolist()
        assert got == torch.argsort(torch.tensor(a), dim=1, descending=desc, stable=True).tolist()


def test_sort_values_gradient_as_torch(device):
    a = np.random.default_rng(1).standard_normal((3, 6))
    g = np.random.default_rng(2).standard_normal((3, 6))
    x = nr.tensor(a, dtype="float32", device=device, requires_grad=True)
    t = torch.tensor(a, dtype=torch.float32, requires_grad=True)
    nr.sort(x, 0, descending=True).values.backward(nr.tensor(g, dtype="float32", device=device))
    torch.sort(t, 0, descending=True).values.backward(torch.tensor(g, dtype=torch.float32))
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())
    x.grad = None
    values, indices = nr.topk(x, 2, largest=False)            # unpacks as torch's result
    values.sum().backward()
    t.grad = None
    torch.topk(t, 2, largest=False).values.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("k", [0, 1, 3, 7])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_as_torch(device, k, largest):
    a = np.array([[3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0], [6.0, 5.0, 3.0, 5.0, 8.0, 9.0, 7.0]], np.float32)
    got = nr.topk(nr.tensor(a, device=device), k, largest=largest)
    want = torch.topk(torch.tensor(a), k, largest=largest)
    np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
    # torch's topk does not promise an order among ties: check the indices point at the values
    np.testing.assert_array_equal(np.take_along_axis(a, got.indices.numpy(), 1), want.values.numpy())


def test_kthvalue_median_msort_as_torch(device):
    a = np.array([[3.0, NAN, 1.0, 2.0], [5.0, 5.0, -1.0, 0.0], [2.0, 1.0, 4.0, 3.0]], np.float32)
    x, t = nr.tensor(a, device=device), torch.tensor(a)
    for k in (1, 2, 4):
        got, want = nr.kthvalue(x[1:], k, 1), torch.kthvalue(t[1:], k, 1)
        np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
    got, want = nr.median(x, 1), torch.median(t, 1)
    np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
    assert got.indices.tolist() == want.indices.tolist()
    got = nr.median(x[1:], 0, keepdim=True)
    assert got.values.shape == (1, 4)
    np.testing.assert_array_equal(got.values.numpy(), torch.median(t[1:], 0, keepdim=True).values.numpy())
    assert math.isnan(nr.median(x).item()) and nr.median(x[1:]).item() == torch.median(t[1:]).item()
    i = nr.tensor([4, 1, 3], dtype="int32", device=device)
    assert nr.median(i).item() == 3 and nr.msort(x[1:]).tolist() == torch.msort(t[1:]).tolist()


BAD = {
    "topk k too big": (lambda d: nr.topk(nr.ones(3, device=d), 4), nr.IndexOutOfRangeError),
    "topk k negative": (lambda d: nr.topk(nr.ones(3, device=d), -1), nr.IndexOutOfRangeError),
    "topk k float": (lambda d: nr.topk(nr.ones(3, device=d), 1.5), nr.NumrError),
    "kthvalue 0": (lambda d: nr.kthvalue(nr.ones(3, device=d), 0), nr.IndexOutOfRangeError),
    "sort dim": (lambda d: nr.sort(nr.ones((2, 3), device=d), 2), nr.IndexOutOfRangeError),
    "median empty": (lambda d: nr.median(nr.ones(0, device=d)), nr.IndexOutOfRangeError),
    "argsort list": (lambda d: nr.argsort([3, 1]), nr.DTypeError),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_arguments_raise_typed_errors(device, case):
    make, err = BAD[case]
    with pytest.raises(err):
        make(device)


