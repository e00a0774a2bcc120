"""conv2d's padding="same"/"valid" and padding modes, and the pooling options (ceil_mode,
count_include_pad, divisor_override, return_indices, adaptive average pooling) against torch:
values and gradients, the modules' reprs, the argument errors."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import numr_web as nr
from numr_web import nn
from numr_web.nn import functional as F


def _both(device, nr_fn, torch_fn, arrays, grad=(0,), rtol=2e-6, atol=2e-6):
    arrays = [np.asarray(a, np.float32) for a in arrays]
    xs = [nr.tensor(a, device=device, requires_grad=i in grad) for i, a in enumerate(arrays)]
    out = nr_fn(*xs)
    r = np.random.default_rng(1).normal(size=out.shape).astype(np.float32)
    (out * nr.tensor(r, device=device)).sum().backward()
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=i in grad)
          for i, a in enumerate(arrays)]
    o = torch_fn(*ts)
    (o * torch.tensor(r, dtype=torch.float64)).sum().backward()
    assert out.shape == tuple(o.shape)
    np.testing.assert_allclose(out.numpy(), o.detach().numpy(), rtol=rtol, atol=atol)
    for i in grad:
        np.testing.assert_allclose(xs[i].grad.numpy(), ts[i].grad.numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("k,dil", [(3, 1), (4, 1), (2, 3), (5, 2), ((2, 3), (1, 2))])
@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv2d_padding_same_and_modes(device, k, dil, mode):
    r = np.random.default_rng(0)
    kh, kw = (k, k) if isinstance(k, int) else k
    x, w, b = r.normal(size=(2, 3, 7, 8)), r.normal(size=(4, 3, kh, kw)), r.normal(size=4)
    if mode == "zeros":
        _both(device, lambda a, c, d: F.conv2d(a, c, d, padding="same", dilation=dil),
              lambda a, c, d: TF.conv2d(a, c, d, padding="same", dilation=dil), [x, w, b],
              grad=(0, 1, 2), rtol=1e-5, atol=1e-5)
        dh, dw = (dil, dil) if isinstance(dil, int) else dil
        if dh * (kh - 1) < 7 and dw * (kw - 1) < 8:
            _both(device, lambda a, c: F.conv2d(a, c, padding="valid", dilation=dil),
                  lambda a, c: TF.conv2d(a, c, padding="valid", dilation=dil), [x, w],
                  grad=(0, 1), rtol=1e-5, atol=1e-5)
    ours = nn.Conv2d(3, 4, k, padding="same", dilation=dil, padding_mode=mode, device=device,
                     seed=0)
    ref = torch.nn.Conv2d(3, 4, k, padding="same", dilation=dil, padding_mode=mode).double()
    assert repr(ours) == repr(ref)
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(ours.weight.numpy(), dtype=torch.float64))
        ref.bias.copy_(torch.tensor(ours.bias.numpy(), dtype=torch.float64))
    _both(device, ours, ref, [x], rtol=1e-5, atol=1e-5)


def test_conv2d_explicit_padding_modes(device):
    r = np.random.default_rng(2)
    x = r.normal(size=(1, 2, 5, 6))
    for mode in ("reflect", "replicate", "circular"):
        ours = nn.Conv2d(2, 3, 3, stride=2, padding=(1, 2), padding_mode=mode, device=device,
                         seed=1)
        ref = torch.nn.Conv2d(2, 3, 3, stride=2, padding=(1, 2), padding_mode=mode).double()
        assert repr(ours) == repr(ref)
        with torch.no_grad():
            ref.weight.copy_(torch.tensor(ours.weight.numpy(), dtype=torch.float64))
            ref.bias.copy_(torch.tensor(ours.bias.numpy(), dtype=torch.float64))
        _both(device, ours, ref, [x], rtol=1e-5, atol=1e-5)


def test_conv2d_padding_errors(device):
    x, w = nr.ones((1, 1, 5, 5), device=device), nr.ones((1, 1, 3, 3), device=device)
    with pytest.raises(nr.ShapeError, match="strided"):
        F.conv2d(x, w, stride=2, padding="same")
    with pytest.raises(RuntimeError, match="strided"):
        TF.conv2d(torch.ones(1, 1, 5, 5), torch.ones(1, 1, 3, 3), stride=2, padding="same")
    with pytest.raises(nr.ShapeError, match="strided"):
        nn.Conv2d(1, 1, 3, stride=2, padding="same")
    with pytest.raises(nr.ShapeError, match="'valid' or 'same'"):
        F.conv2d(x, w, padding="full")
    with pytest.raises(nr.ShapeError, match="padding_mode must be one of"):
        nn.Conv2d(1, 1, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        torch.nn.Conv2d(1, 1, 3, padding_mode="mirror")
    with pytest.raises(nr.ShapeError, match="reflect"):
        nn.Conv2d(1, 1, 3, padding=5, padding_mode="reflect", device=device)(x)


POOLS = [
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=2, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 1), count_include_pad=False),
    dict(kernel_size=3, stride=2, padding=1, divisor_override=5),
    dict(kernel_size=3, stride=1),
]


@pytest.mark.parametrize("kw", POOLS, ids=[str(i) for i in range(len(POOLS))])
def test_avg_pool2d_options(device, kw):
    x = np.random.default_rng(3).normal(size=(2, 3, 7, 6))
    _both(device, lambda a: F.avg_pool2d(a, **kw), lambda a: TF.avg_pool2d(a, **kw), [x])
    assert repr(nn.AvgPool2d(**kw)) == repr(torch.nn.AvgPool2d(**kw))
    _both(device, nn.AvgPool2d(**kw), torch.nn.AvgPool2d(**kw), [x])


MAXPOOLS = [
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=2, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, dilation=2),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 0), ceil_mode=True),
]


@pytest.mark.parametrize("kw", MAXPOOLS, ids=[str(i) for i in range(len(MAXPOOLS))])
def test_max_pool2d_options_and_indices(device, kw):
    x = (np.random.default_rng(4).permutation(2 * 3 * 7 * 6).reshape(2, 3, 7, 6) / 10.0
         ).astype(np.float32)
    _both(device, lambda a: F.max_pool2d(a, **kw), lambda a: TF.max_pool2d(a, **kw), [x])
    assert repr(nn.MaxPool2d(**kw)) == repr(torch.nn.MaxPool2d(**kw))
    out, idx = nn.MaxPool2d(**kw, return_indices=True)(nr.tensor(x, device=device))
    t_out, t_idx = torch.nn.MaxPool2d(**kw, return_indices=True)(torch.tensor(x))
    np.testing.assert_array_equal(out.numpy(), t_out.numpy())
    assert idx.dtype is nr.int32 and idx.tolist() == t_idx.tolist()


@pytest.mark.parametrize("size", [1, (2, 3), (3, None), (4, 5), (7, 6), (5, 4)])
def test_adaptive_avg_pool2d(device, size):
    x = np.random.default_rng(5).normal(size=(2, 3, 7, 6))
    _both(device, lambda a: F.adaptive_avg_pool2d(a, size),
          lambda a: TF.adaptive_avg_pool2d(a, size), [x])
    assert repr(nn.AdaptiveAvgPool2d(size)) == repr(torch.nn.AdaptiveAvgPool2d(size))
    _both(device, lambda a: nn.AdaptiveAvgPool2d(size)(a[0]),
          lambda a: torch.nn.AdaptiveAvgPool2d(size)(a[0]), [x])


def test_pool_errors(device):
    x = nr.ones((1, 1, 4, 4), device=device)
    with pytest.raises(nr.ShapeError, match="half the kernel"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(nr.ShapeError, match="divisor_override"):
        F.avg_pool2d(x, 2, divisor_override=0)
    with pytest.raises(nr.ShapeError, match="smaller than the kernel"):
        F.avg_pool2d(x, 5)
    with pytest.raises(nr.ShapeError, match="output_size"):
        F.adaptive_avg_pool2d(x, (1, 2, 3))


def test_grouped_conv_with_fused_activation(device):
    r = np.random.default_rng(6)
    x, w, b = r.normal(size=(2, 4, 5, 5)), r.normal(size=(6, 2, 3, 3)), r.normal(size=6)
    _both(device, lambda a, c, d: nr.conv2d_bias_activation(a, c, d, "relu", padding=1, groups=2),
          lambda a, c, d: torch.relu(TF.conv2d(a, c, d, padding=1, groups=2)), [x, w, b],
          grad=(0, 1, 2), rtol=1e-5, atol=1e-5)


PADS = [((1, 2), "constant", 0.5), ((2, 0, 1, 3), "constant", None),
        ((-1, 2, 1, -2), "constant", None),
        ((2, 1), "reflect", None), ((3, 1, 1, 2), "reflect", None),
        ((2, 3, 0, 1), "replicate", None),
        ((1, 2, 3, 0), "circular", None), ((1, 1, 1, 1, 1, 1), "constant", -1.0),
        ((1, 1, 1, 1, 1, 1), "replicate", None)]


@pytest.mark.parametrize("p,mode,value", PADS, ids=[f"{m}{p}" for p, m, _ in PADS])
def test_pad_matches_torch(device, p, mode, value):
    # torch's non-constant modes take (batch, channels) + the padded dims
    x = np.random.default_rng(7).normal(size=(2, 3, 4, 5, 6)[:len(p) // 2 + 2])
    kw = {} if value is None else {"value": value}
    _both(device, lambda a: F.pad(a, p, mode=mode, **kw), lambda a: TF.pad(a, p, mode=mode, **kw),
          [x], rtol=1e-6, atol=1e-7)        # values exact; gradients sum repeated elements


def test_pad_errors(device):
    x = nr.ones((1, 2, 3), device=device)
    with pytest.raises(nr.ShapeError, match="even number"):
        F.pad(x, (1, 2, 3))
    with pytest.raises(nr.ShapeError, match="less than the corresponding input dimension"):
        F.pad(x, (3, 3), mode="reflect")
    with pytest.raises(nr.ShapeError, match="unknown mode"):
        F.pad(x, (1, 1), mode="wrap")
    with pytest.raises(nr.ShapeError, match="at least 2 dims"):
        F.pad(nr.ones(3, device=device), (1, 1), mode="reflect")


# -- the fused convolution and max-pool ops --------------------------------------------------------------
_ACTS = {"relu": torch.relu, "gelu": TF.gelu, "tanh": torch.tanh, "none": lambda v: v}


@pytest.mark.parametrize("act", ["none", "relu", "gelu", "tanh"])
@pytest.mark.parametrize("geo", [dict(stride=1, padding=1), dict(stride=2, padding=(1, 0)),
                                 dict(stride=(1, 2), padding=2, dilation=2)])
def test_conv2d_activation_geometry(device, act, geo):
    r = np.random.default_rng(8)
    x, w, b = r.normal(size=(2, 3, 7, 6)), r.normal(size=(5, 3, 3, 2)), r.normal(size=5)
    _both(device, lambda a, c, d: nr.conv2d_bias_activation(a, c, d, act, **geo),
          lambda a, c, d: _ACTS[act](TF.conv2d(a, c, d, **geo)), [x, w, b], grad=(0, 1, 2),
          rtol=1e-5, atol=1e-5)
    # no bias; the weight's gradient only (the input is data)
    _both(device, lambda a, c: nr.conv2d_bias_activation(a, c, None, act, **geo),
          lambda a, c: _ACTS[act](TF.conv2d(a, c, None, **geo)), [x, w], grad=(1,),
          rtol=1e-5, atol=1e-5)


def test_conv2d_second_derivatives(device):
    r = np.random.default_rng(9)
    x, w, b = r.normal(size=(2, 2, 5, 5)), r.normal(size=(3, 2, 3, 3)), r.normal(size=3)
    ours = [nr.tensor(v.astype(np.float32), device=device, requires_grad=True) for v in (x, w, b)]
    refs = [torch.tensor(v, requires_grad=True) for v in (x, w, b)]
    y = nr.conv2d_bias_activation(*ours, "gelu", padding=1)
    gx, gw = nr.grad((y * y).sum(), ours[:2], create_graph=True)
    ((gx * gx).sum() + (gw * gw).sum()).backward()
    yt = TF.gelu(TF.conv2d(*refs, padding=1))
    gxt, gwt = torch.autograd.grad((yt * yt).sum(), refs[:2], create_graph=True)
    ((gxt * gxt).sum() + (gwt * gwt).sum()).backward()
    np.testing.assert_allclose(gx.numpy(), gxt.detach().numpy(), rtol=1e-4, atol=1e-4)
    for o, t in zip(ours, refs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-3)


def test_max_pool_nan_inf_and_ties(device):
    """torch's choice: the first maximum in window order, the last NaN, the window's first
    element inside the input when all are -inf; the gradient goes there."""
    x = np.array([[[[1, 3, 3, 0, 2, 2],
                    [3, 0, np.nan, 1, 2, 2],
                    [-np.inf, -np.inf, 5, np.nan, 0, 1],
                    [-np.inf, -np.inf, 4, np.nan, 2, 1]]]], np.float32)
    for kw in (dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1),
               dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 0))):
        out, idx = F.max_pool2d(nr.tensor(x, device=device), return_indices=True, **kw)
        t_out, t_idx = TF.max_pool2d(torch.tensor(x), return_indices=True, **kw)
        np.testing.assert_array_equal(out.numpy(), t_out.numpy())
        assert idx.tolist() == t_idx.tolist(), kw
        xs = nr.tensor(x, device=device, requires_grad=True)
        F.max_pool2d(xs, **kw).sum().backward()
        xt = torch.tensor(x, requires_grad=True)
        TF.max_pool2d(xt, **kw).sum().backward()
        np.testing.assert_array_equal(xs.grad.numpy(), xt.grad.numpy())


def test_max_pool_second_derivative(device):
    x = (np.random.default_rng(10).permutation(2 * 2 * 6 * 6).reshape(2, 2, 6, 6) / 7.0)
    xs = nr.tensor(x.astype(np.float32), device=device, requires_grad=True)
    y = F.max_pool2d(xs, 3, stride=2, padding=1)
    g, = nr.grad((y * y * y).sum(), [xs], create_graph=True)
    (g * g).sum().backward()
    xt = torch.tensor(x, requires_grad=True)
    yt = TF.max_pool2d(xt, 3, stride=2, padding=1)
    gt, = torch.autograd.grad((yt * yt * yt).sum(), [xt], create_graph=True)
    (gt * gt).sum().backward()
    np.testing.assert_allclose(g.numpy(), gt.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-6, atol=1e-5)
