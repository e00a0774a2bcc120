"""DLPack and host-array interop, float16 and int range checks on the cpu device."""
import numpy as np
import pytest

import numr_web as nr


def test_dlpack_zero_copy():
    src = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = nr.from_dlpack(src)                # numpy exports DLPack; torch and cupy work the same way
    assert t.shape == (2, 3) and t.dtype == nr.float32
    src[0, 0] = 42.0                       # shared memory: the change is visible
    assert t.tolist()[0][0] == 42.0
    back = np.from_dlpack(t)               # and back through Tensor.__dlpack__
    assert back.__array_interface__["data"][0] == src.__array_interface__["data"][0]
    assert nr.tensor(np.ones(2, dtype=np.float64)).dtype == nr.float64
    assert np.asarray(nr.tensor([1.0, 2.0])).tolist() == [1.0, 2.0]


def test_float16_on_cpu():
    x = nr.tensor([0.5, -1.0, 2.0], dtype="float16", requires_grad=True)
    y = nr.gelu(x).sum()
    y.backward()
    assert x.grad.dtype == nr.float16
    np.testing.assert_allclose(x.grad.numpy().astype(np.float64), [0.8674, -0.0833, 1.0852], atol=2e-3)


def test_int32_range_is_checked():
    with pytest.raises(nr.DTypeError, match="int32"):
        nr.tensor([2**40])
    with pytest.raises(nr.DTypeError, match="int32"):
        nr.tensor(np.array([2**40], dtype=np.int64))
    assert nr.tensor(np.array([7], dtype=np.int64)).tolist() == [7]
