"""Activations, the fused layer and unary math at the extremes (+-1e4, +-88, subnormals, +-inf, NaN,
-0.0) against mpmath truth: within a few ulp, and never looser than torch's own error there."""
import math

import mpmath
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import numr_web as nr

from _diff import assert_close_ulps, flushed, flushes_subnormals, ulps
from helpers import MP_ACT

mpmath.mp.prec = 100
EXTREMES = [1e4, -1e4, 88.0, -88.0, 87.5, -87.5, 1e-40, -1e-40, 1.4e-45, -0.0, 0.0, 1e-30, -1e-30,
            20.0, -20.0, 9.25, -9.25, 30.0, -30.0, 3.0, -3.0, 0.5, -0.5, 1e-4, -1e-4, 1e38, -1e38]
SPECIAL = [math.inf, -math.inf, math.nan]
GRID = list(np.linspace(-12, 12, 97)) + EXTREMES


TORCH = {"relu": F.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "silu": F.silu,
         "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
         "leaky_relu": F.leaky_relu, "elu": F.elu, "softplus": F.softplus, "mish": F.mish,
         "hardswish": F.hardswish, "selu": F.selu, "celu": F.celu, "softsign": F.softsign,
         "tanhshrink": F.tanhshrink}
LIMITS = {"relu": (math.inf, 0), "sigmoid": (1, 0), "tanh": (1, -1), "silu": (math.inf, 0),
          "gelu": (math.inf, 0), "gelu_tanh": (math.inf, 0), "leaky_relu": (math.inf, -math.inf),
          "elu": (math.inf, -1), "softplus": (math.inf, 0), "mish": (math.inf, 0),
          "hardswish": (math.inf, 0), "selu": (math.inf, -1.7580993408473766), "celu": (math.inf, -1),
          "softsign": (1, -1), "tanhshrink": (math.inf, -math.inf)}
KINKS = {"relu": (0.0,), "leaky_relu": (0.0,), "elu": (0.0,), "hardswish": (-3.0, 3.0),
         "selu": (0.0,), "celu": (0.0,)}
# nr.activation's names that have a closed form here ("none" is the identity)
ACTS = [a for a in nr.ACT if a != "none"]


def truth(fn, xs):
    out = []
    for x in xs:
        if math.isnan(x):
            out.append(math.nan)
            continue
        v = fn(mpmath.mpf(float(x)))
        out.append(float(v))
    return np.array(out)


def test_every_activation_has_a_reference():
    assert set(ACTS) <= set(MP_ACT)


@pytest.mark.parametrize("name", ACTS)
def test_activation_forward_at_extremes(device, name):
    z = np.array(GRID, np.float32)
    want = truth(MP_ACT[name], z.astype(np.float64))
    tz = TORCH[name](torch.from_numpy(z)).numpy()
    got = nr.activation(nr.tensor(z, device=device), name).numpy()
    assert_close_ulps(got, want, np.float32, ACT_ULPS.get(name, 4), device,
                      ulps(tz, want, np.float32), name,
                      truth(MP_ACT[name], flushed(z).astype(np.float64)))


@pytest.mark.parametrize("name", ACTS)
def test_activation_special_values(device, name):
    """+-inf give the limits, or NaN where torch gives NaN (silu(-inf) = -inf * 0, gelu(inf));
    NaN stays NaN."""
    z = np.array(SPECIAL, np.float32)
    want = np.array(list(LIMITS[name]) + [math.nan], np.float32)
    tz = TORCH[name](torch.from_numpy(z)).numpy()
    assert ((tz == want) | np.isnan(tz)).all()
    got = nr.activation(nr.tensor(z, device=device), name).numpy()
    ok = (got == want) | (got == tz) | (np.isnan(got) & np.isnan(tz))
    assert ok.all(), (name, got, want, tz)


@pytest.mark.parametrize("name", ACTS)
def test_activation_gradient_against_torch_float64(device, name):
    """d act/dz through the fused layer's backward, against torch's float64 autograd."""
    z = np.array([v for v in GRID if abs(v) < 1e30 and v not in KINKS.get(name, ())], np.float32)
    tz = torch.from_numpy(z.astype(np.float64)).requires_grad_()
    TORCH[name](tz).sum().backward()
    want = tz.grad.numpy()
    x = nr.tensor(z, device=device, requires_grad=True)
    nr.activation(x, name).sum().backward()
    got = x.grad.numpy()
    assert np.isfinite(got).all(), (name, z[~np.isfinite(got)])
    t32 = torch.from_numpy(z).requires_grad_()
    TORCH[name](t32).sum().backward()
    err_torch = ulps(t32.grad.numpy(), want, np.float32)
    # derivatives are computed from rounded forward pieces: allow 16 ulp or torch's float32 error,
    # with an absolute floor at float32's resolution of the largest derivative (~1)
    err = ulps(got, want, np.float32)
    ok = (err <= np.maximum(16, err_torch)) | (np.abs(got - want) <= 4e-7)
    if flushes_subnormals(device):     # a subnormal input may be read as 0 (README): relu'(1e-40)
        tf = torch.from_numpy(flushed(z).astype(np.float64)).requires_grad_()
        TORCH[name](tf).sum().backward()
        ok |= (ulps(got, tf.grad.numpy(), np.float32) <= np.maximum(16, err_torch)) & (z != flushed(z))
    assert ok.all(), (name, z[~ok], got[~ok], want[~ok])


@pytest.mark.parametrize("name", ["none", "relu", "gelu", "silu", "tanh", "sigmoid"])
@pytest.mark.parametrize("shape", [(3, 4, 5), (1, 0, 3), (2, 3, 0), (0, 2, 2)])
def test_fused_layer_against_torch_float64(device, name, shape):
    M, K, N = shape
    rng = np.random.default_rng(M * 100 + K * 10 + N)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    ta, tb, tbias = (torch.from_numpy(v.astype(np.float64)).requires_grad_() for v in (a, b, bias))
    fn = TORCH.get(name, lambda t: t)
    ty = fn(ta @ tb + tbias)
    g = rng.standard_normal(ty.shape)
    ty.backward(torch.from_numpy(g))
    xa, xb, xbias = (nr.tensor(v, device=device, requires_grad=True) for v in (a, b, bias))
    y = nr.matmul_bias_activation(xa, xb, xbias, name)
    y.backward(nr.tensor(g.astype(np.float32), device=device))
    tol = 1e-5 * (K + 1)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    for mine, ref in ((xa, ta), (xb, tb), (xbias, tbias)):
        assert mine.grad.shape == tuple(ref.shape)
        np.testing.assert_allclose(mine.grad.numpy(), ref.grad.numpy(), rtol=tol,
                                   atol=tol * (M + 1))


UNARY = {"exp": (mpmath.exp, torch.exp), "expm1": (mpmath.expm1, torch.expm1),
         "log1p": (lambda t: mpmath.log1p(t) if t > -1 else (mpmath.mpf("-inf") if t == -1
                                                               else mpmath.mpf("nan")),
                   torch.log1p),
         "erf": (mpmath.erf, torch.erf), "sin": (mpmath.sin, torch.sin),
         "cos": (mpmath.cos, torch.cos), "tanh": (mpmath.tanh, torch.tanh),
         "sqrt": (lambda t: mpmath.sqrt(t) if t >= 0 else mpmath.mpf("nan"), torch.sqrt),
         "log": (lambda t: mpmath.log(t) if t > 0 else (mpmath.mpf("-inf") if t == 0
                                                          else mpmath.mpf("nan")), torch.log)}
# ulp bounds beyond the default 4: gelu_tanh's sigmoid(2u) amplifies the float32 rounding of
# u = c (z + a z^3) (and of the constants) by |2u| (~9 at z = -3.6, where torch's own error is 8.6
# ulp); gelu's lower tail is a product of erfc pieces, each rounded once.
ACT_ULPS = {"gelu_tanh": 12, "gelu": 8}
TRIG_BIG = [1e5, -1e5, 1e6, 3e7, 12867.963, 6.2831855, 3.1415927, 1.5707964, 1e20, 3.4e38]


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_math_at_extremes(device, name):
    pts = GRID + (TRIG_BIG if name in ("sin", "cos") else [])
    z = np.array(pts, np.float32)
    mp_fn, t_fn = UNARY[name]
    want = truth(lambda t: mp_fn(t) if not (name == "tanh" and abs(t) > 1e4) else mpmath.sign(t),
                 z.astype(np.float64))
    tz = t_fn(torch.from_numpy(z)).numpy()
    got = getattr(nr, name)(nr.tensor(z, device=device)).numpy()
    want_ftz = truth(mp_fn, flushed(z).astype(np.float64))
    assert_close_ulps(got, want, np.float32, 4, device, ulps(tz, want, np.float32), name, want_ftz)


def test_float16_is_computed_in_float32_and_rounded_once(device):
    z = np.array([-90.0, -20.0, -9.5, 0.1, 5.0, 85.0, 300.0], np.float16)
    for name in ("sigmoid", "gelu_tanh", "silu", "softplus"):
        want = TORCH[name](torch.from_numpy(z.astype(np.float32))).numpy().astype(np.float16)
        got = nr.activation(nr.tensor(z, device=device), name).numpy()
        assert got.dtype == np.float16
        err = ulps(got, want.astype(np.float64), np.float16)
        assert (err <= 1).all(), (name, z, got, want)


def test_sin_cos_over_the_whole_float32_range(device):
    """Every exponent, and arguments next to multiples of pi/2 (where reduction cancels)."""
    rng = np.random.default_rng(5)
    bits = rng.integers(0x3f000000, 0x7f800000, 4000, dtype=np.int64).astype(np.uint32)
    x = bits.view(np.float32) * np.where(rng.random(4000) < 0.5, -1, 1).astype(np.float32)
    near = (rng.integers(1, 10 ** 7, 1000) * np.pi / 2).astype(np.float32)
    x = np.concatenate([x, near])
    for name, f in (("sin", np.sin), ("cos", np.cos)):
        want = f(x.astype(np.float64))           # float64 truth at the float32 argument
        got = getattr(nr, name)(nr.tensor(x, device=device)).numpy()
        assert_close_ulps(got, want, np.float32, 3, device, None, name)


@pytest.mark.parametrize("name", ACTS)
def test_activation_of_0d_and_empty_tensors(device, name):
    x = nr.tensor(0.75, device=device, requires_grad=True)
    y = nr.activation(x, name)
    assert y.shape == () and abs(y.item() - float(MP_ACT[name](mpmath.mpf(0.75)))) < 1e-6
    y.backward()
    t = torch.tensor(0.75, dtype=torch.float64, requires_grad=True)
    TORCH[name](t).backward()
    assert abs(x.grad.item() - t.grad.item()) < 1e-6
    e = nr.zeros((0, 3), device=device, requires_grad=True)
    nr.activation(e, name).sum().backward()
    assert e.grad.shape == (0, 3)
