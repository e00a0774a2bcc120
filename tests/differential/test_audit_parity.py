"""More regressions from the differential audit against torch: where's condition dtype, s / x
as torch rounds it, clamp with NaN bounds, float16 division by a signed zero, signed zeros of the
fused layer, and strides / contiguity."""
import numpy as np
import pytest
import torch

import numr_web as nr
from numr_web.errors import DTypeError

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_where_refuses_a_non_bool_condition_as_torch(device, dtype):
    cond = nr.tensor([1, 0], dtype=dtype, device=device)
    with pytest.raises(RuntimeError):
        torch.where(torch.tensor([1, 0], dtype=getattr(torch, dtype)), 1.0, 0.0)
    with pytest.raises(DTypeError, match="bool"):
        nr.where(cond, 1.0, 0.0)
    assert nr.where(cond != 0, nr.tensor([1, 2], device=device), 0).tolist() == [1, 0]


@pytest.mark.parametrize("dtype", ["float16", "float32", "int32"])
@pytest.mark.parametrize("s", [1.0, 3.3, 0.1, 7, -2, 0.0])
def test_scalar_divided_by_tensor_rounds_as_torch(device, dtype, s):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(4096) * 10).astype(dtype) if dtype != "int32" else \
        rng.integers(-50, 50, 4096).astype("int32")
    if dtype != "int32":
        x[:4] = [0.0, -0.0, INF, -INF]
    ref = (s / torch.tensor(x)).numpy()
    out = (s / nr.tensor(x, device=device)).numpy()
    assert out.dtype == ref.dtype
    # exact: torch's x.reciprocal() * s. WGSL allows 2.5 ulp for a float32 division; lavapipe
    # (the CI's webgpu) divides exactly, so webgpu is held to exact too
    np.testing.assert_array_equal(out, ref)
    num = ~np.isnan(ref)                     # (a NaN's sign bit is the hardware's)
    assert np.array_equal(np.signbit(out[num]), np.signbit(ref[num]))


def test_scalar_divided_by_tensor_gradient(device):
    x0 = np.array([0.5, -3.0, 7.0], dtype=np.float32)
    tx = torch.tensor(x0, requires_grad=True)
    (3.3 / tx).sum().backward()
    x = nr.tensor(x0, device=device, requires_grad=True)
    (3.3 / x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=2e-7)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_division_by_signed_zero(device, dtype):
    z = np.array([-0.0, 0.0, -0.0], dtype=dtype)
    num = np.array([1.0, 1.0, -2.0], dtype=dtype)
    for ref, out in [(1 / torch.tensor(z), 1 / nr.tensor(z, device=device)),
                     (torch.tensor(num) / torch.tensor(z),
                      nr.tensor(num, device=device) / nr.tensor(z, device=device)),
                     (torch.tensor(z).reciprocal(), nr.tensor(z, device=device).reciprocal()),
                     (torch.tensor(num) / -0.0, nr.tensor(num, device=device) / -0.0)]:
        assert out.tolist() == ref.tolist()
        assert out.tolist()[0] == -INF


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_clamp_with_nan_bounds_propagates_nan_as_torch(device, dtype):
    if not torch.clamp(torch.tensor([1.0]), NAN).isnan().all():
        pytest.skip(f"torch {torch.__version__} ignores a NaN bound; numr follows torch >= 2.12")
    x0 = np.array([1.0, NAN, -0.0, 0.0, -5.0, 5.0], dtype=dtype)
    b0 = np.array([NAN, 0.0, 0.0, -0.0, NAN, -1.0], dtype=dtype)
    tx, x = torch.tensor(x0), nr.tensor(x0, device=device)
    tb, b = torch.tensor(b0), nr.tensor(b0, device=device)
    for kw in [dict(min=NAN), dict(max=NAN), dict(min=NAN, max=1.0), dict(min=0.0),
               dict(max=-0.0), dict(min=-1.0, max=NAN), dict(min=-0.0, max=0.0)]:
        ref, out = torch.clamp(tx, **kw).numpy(), nr.clamp(x, **kw).numpy()
        np.testing.assert_array_equal(out, ref)
        assert np.array_equal(np.signbit(out), np.signbit(ref)), kw
    for kw in [dict(min=tb), dict(max=tb), dict(min=tb, max=tb)]:
        ref = torch.clamp(tx, **kw).numpy()
        out = nr.clamp(x, **{k: b for k in kw}).numpy()
        np.testing.assert_array_equal(out, ref)


VIEWS = {
    "dense": lambda x: x,
    "transpose": lambda x: x.transpose(0, 2),
    "permute": lambda x: x.permute(1, 0, 2),
    "step_slice": lambda x: x[:, ::2],
    "select": lambda x: x[..., 1],
    "row_slice": lambda x: x[1:],
    "narrow": lambda x: x.narrow(2, 1, 2),
    "expand": lambda x: x[:, :1].expand(2, 5, 4),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "T_contiguous": lambda x: x.transpose(0, 1).contiguous(),
    "computed": lambda x: x.transpose(0, 1) * 2,
    "reshape": lambda x: x.reshape(6, 4),
    "empty": lambda x: x[:, :0],
}


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_stride_and_is_contiguous_as_torch(device, view):
    fn = VIEWS[view]
    t = fn(torch.zeros(2, 3, 4))
    x = fn(nr.zeros((2, 3, 4), device=device))
    assert x.shape == tuple(t.shape)
    if view == "computed":     # torch keeps the input's layout; webgpu's results are dense
        dense = tuple(int(np.prod(x.shape[d + 1:])) for d in range(x.ndim))
        assert x.is_contiguous() == (x.stride() == dense)
        # cpu: numpy keeps the input's layout, as torch; webgpu writes dense results, CuPy its own
        if device != "cuda":
            assert x.is_contiguous() if device == "webgpu" else x.stride() == t.stride()
    else:
        assert x.is_contiguous() == t.is_contiguous()
        assert x.stride() == t.stride()
        assert [x.stride(d) for d in range(-x.ndim, x.ndim)] == \
            [t.stride(d) for d in range(-t.ndim, t.ndim)]
    assert x.contiguous().is_contiguous()
    assert nr.zeros((), device=device).stride() == ()
    assert nr.zeros((), device=device).is_contiguous()


_F = torch.nn.functional
_ACTS = {"none": lambda z: z, "relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
         "silu": _F.silu, "gelu": _F.gelu, "gelu_tanh": lambda z: _F.gelu(z, approximate="tanh")}


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("act", sorted(_ACTS))
@pytest.mark.parametrize("bias", ["neg_zero", "zero", None])
def test_fused_layer_keeps_signed_zeros_of_torchs_unfused_form(device, dtype, act, bias):
    a0 = -np.zeros((3, 2), dtype)
    a0[1, 0] = 0.0
    w0 = np.ones((2, 4), dtype)
    b0 = None if bias is None else (-np.zeros(4, dtype) if bias == "neg_zero" else
                                    np.zeros(4, dtype))
    a, w = nr.tensor(a0, device=device), nr.tensor(w0, device=device)
    b = None if b0 is None else nr.tensor(b0, device=device)
    z = torch.tensor((a @ w).numpy())                  # the GEMM's own zero (README's table)
    ref = _ACTS[act](z if b0 is None else z + torch.tensor(b0)).numpy()
    for out in (nr.matmul_bias_activation(a, w, b, activation=act).numpy(),
                (a @ w if b is None else a @ w + b).numpy() if act == "none" else None):
        if out is not None:
            np.testing.assert_array_equal(out, ref)
            assert np.array_equal(np.signbit(out), np.signbit(ref))
