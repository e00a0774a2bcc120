"""First, second and third derivatives of every activation of the ACT table, through nr.<name>
and through the fused matmul_bias_activation, with create_graph three levels deep, on each device.
Truth: mpmath (40 digits) where the function is smooth; torch's values at its kinks and
conventions (elu''(0) = 0, hardswish'(+-3) = 0 and 1, relu'(0) = 0). The bound: a few ulp of
the derivatives' scale, or torch's own float32 error on the same points where that is larger."""
import mpmath as mp
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import numr_web as nr

from _diff import flushes_subnormals, ulps

mp.mp.dps = 40
_C, _A = mp.sqrt(2 / mp.pi), mp.mpf("0.044715")
MP = {
    "sigmoid": lambda z: 1 / (1 + mp.exp(-z)),
    "tanh": mp.tanh,
    "silu": lambda z: z / (1 + mp.exp(-z)),
    "gelu": lambda z: z * (1 + mp.erf(z / mp.sqrt(2))) / 2,
    "gelu_tanh": lambda z: z * (1 + mp.tanh(_C * (z + _A * z ** 3))) / 2,
    "softplus": lambda z: mp.log1p(mp.exp(z)),
    "mish": lambda z: z * mp.tanh(mp.log1p(mp.exp(z))),
    "elu": lambda z: mp.expm1(z),                  # tested on z < 0 only (a kink at 0)
    "selu": lambda z: _SELU_LA * mp.expm1(z),      # (z < 0 only, as elu)
    "celu": lambda z: mp.expm1(z),                 # (z < 0 only)
    "softsign": lambda z: z / (1 + abs(z)),        # (z != 0: act'' jumps there)
    "tanhshrink": lambda z: z - mp.tanh(z),
}
_SELU_LA = mp.mpf("1.0507009873554804934193349852946") * mp.mpf("1.6732632423543772848170429916717")
SIDE = {"elu": lambda p: p < 0, "selu": lambda p: p < 0, "celu": lambda p: p < 0,
        "softsign": lambda p: p != 0}
TORCH = {"none": lambda x: x, "relu": F.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
         "silu": F.silu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
         "leaky_relu": F.leaky_relu, "elu": F.elu, "softplus": F.softplus, "mish": F.mish,
         "hardswish": F.hardswish, "selu": F.selu, "celu": F.celu, "softsign": F.softsign,
         "tanhshrink": F.tanhshrink}
SMOOTH_PTS = [-9.0, -4.5, -2.25, -1.3, -0.6, -0.125, 0.0, 0.3, 0.7, 1.1, 2.5, 4.0, 7.5, 12.0]
# kinks and thresholds: torch's values (its double-backward formulas) are the convention
KINK_PTS = {"relu": [0.0, -0.0, -1.0, 2.0], "leaky_relu": [0.0, -0.0, -1.0, 2.0],
            "elu": [0.0, -0.0, 1.5], "selu": [0.0, -0.0, 1.5], "celu": [0.0, -0.0, 1.5], "hardswish": [-3.0, 3.0, -4.0, 4.0, 0.0, 1.0],
            "none": [0.0, -2.0, 3.0], "softplus": [25.0, 30.0]}


def test_every_table_row_is_covered():
    assert set(MP) | set(KINK_PTS) >= set(nr.ACT) and set(TORCH) == set(nr.ACT)


def _derivs(fn, x, grad, n=3):
    """[f'(x), f''(x), f'''(x)] of an elementwise f, each with the graph of the next."""
    out, g = [], fn(x)
    for _ in range(n):
        if not g.requires_grad:          # linear in x (the fused layer without activation): no
            out.append(g * 0)            # graph left, as in torch; the derivative is 0
            g = out[-1]
            continue
        (g,) = grad(g.sum(), x)
        out.append(g)
    return out


def _nr_derivs(name, pts, device, fused):
    x = nr.tensor(pts, device=device, requires_grad=True)
    if fused:    # z = x @ [[1]] + 0: the fused layer's forward, act_backward and its VJPs
        one = nr.ones((1, 1), device=device)
        fn = lambda v: nr.matmul_bias_activation(v.reshape(-1, 1), one, nr.zeros(1, device=device),  # noqa: E731
                                                 activation=name).reshape(-1)
    else:
        fn = lambda v: nr.activation(v, name)  # noqa: E731
    ds = _derivs(fn, x, lambda y, v: nr.grad(y, [v], create_graph=True))
    return [d.numpy().astype(np.float64) for d in ds]


def _torch_derivs(name, pts, dtype):
    x = torch.tensor(pts, dtype=dtype, requires_grad=True)
    out = []
    g = TORCH[name](x)
    for _ in range(3):
        if not g.requires_grad:          # torch: no graph left, the derivative is 0
            out.append(torch.zeros_like(x))
            g = out[-1]
            continue
        (g,) = torch.autograd.grad(g.sum(), x, create_graph=True)
        out.append(g)
    return [d.detach().double().numpy() for d in out]


def _truth(name, pts):
    return [np.array([float(mp.diff(MP[name], mp.mpf(p), k)) for p in pts]) for k in (1, 2, 3)]


def _check(got, want, scale, bound_ulps, what, extra=0.0):
    eps = float(np.finfo(np.float32).eps)
    err = np.abs(got - want)
    tol = bound_ulps * eps * np.maximum(np.abs(want), scale) + extra
    bad = ~(err <= tol)
    assert not bad.any(), (f"{what}: got {got[bad]}, want {want[bad]}, err {err[bad]}, "
                           f"tol {tol[bad]}")


@pytest.mark.parametrize("fused", [False, True], ids=["act", "fused"])
@pytest.mark.parametrize("name", sorted(MP))
def test_three_derivatives_of_smooth_activations(device, name, fused):
    pts = [p for p in SMOOTH_PTS if SIDE.get(name, lambda p: True)(p)]
    got = _nr_derivs(name, pts, device, fused)
    truth = _truth(name, pts)
    t32 = _torch_derivs(name, pts, torch.float32)
    for k in range(3):
        # scale: the derivative's size around these points (an ulp of values near a root of
        # f^(k) is meaningless: the inputs' own rounding moves it by more)
        scale = 2.0 ** -4 * float(np.max(np.abs(truth[k])))
        torch_rel = np.abs(t32[k] - truth[k]) / (float(np.finfo(np.float32).eps)
                                                 * np.maximum(np.abs(truth[k]), scale))
        # webgpu's exp/tanh are a few ulp off (WGSL allows it), which 1 - y^2 amplifies
        bound = np.maximum(32.0 if device == "webgpu" else 16.0, 2.0 * torch_rel)
        # rows that save y differentiate through y (1 - y^2, as torch's tanh_backward): on
        # webgpu y itself is a couple of ulp off, and a polynomial in y with coefficients up to
        # ~4 carries that over as an absolute error
        extra = 8 * float(np.finfo(np.float32).eps) if (
            device == "webgpu" and nr.ACT[name].saves == "y") else 0.0
        _check(got[k], truth[k], scale, bound, f"{name} derivative {k + 1} ({device})", extra)


@pytest.mark.parametrize("fused", [False, True], ids=["act", "fused"])
@pytest.mark.parametrize("name", sorted(KINK_PTS))
def test_derivatives_at_kinks_follow_torch(device, name, fused):
    pts = KINK_PTS[name]
    got = _nr_derivs(name, pts, device, fused)
    want = _torch_derivs(name, pts, torch.float64)
    for k in range(3):
        _check(got[k], want[k], 1.0, 4.0, f"{name} derivative {k + 1} at {pts} ({device})")


ONE_SIDED = ("elu", "selu", "celu")      # MP holds their z < 0 branch only
FAR = {"softsign": lambda k, p: 0.0, "tanhshrink": lambda k, p: 1.0 if k == 0 else 0.0}


@pytest.mark.parametrize("name", sorted(MP))
def test_far_tails_are_finite_and_right(device, name):
    """No NaN from inf * 0 far out (z**3 overflowing while exp underflows), values still right."""
    pts = [-80.0, -30.0, 30.0, 80.0, -3e4, 3e4] if name not in ONE_SIDED else [-80.0, -30.0]
    got = _nr_derivs(name, pts, device, False)
    far = FAR.get(name, lambda k, p: 1.0 if k == 0 and p > 0 and name not in ("sigmoid", "tanh")
                  else 0.0)
    for k in range(3):
        want = np.array([float(mp.diff(MP[name], mp.mpf(p), k + 1)) if abs(p) < 100 else far(k, p)
                         for p in pts])
        assert np.isfinite(got[k]).all(), f"{name} derivative {k + 1}: {got[k]}"
        np.testing.assert_allclose(got[k], want, rtol=1e-4, atol=1e-6, err_msg=f"{name} {k + 1}")


def test_elu_derivatives_keep_their_size_far_left(device):
    """elu'(z) = exp(z) from z, as torch: not y + 1 (0 in float32 below z = -17)."""
    pts = [-20.0, -40.0, -80.0]
    got = _nr_derivs("elu", pts, device, False)
    want = [np.exp(np.array(pts))] * 3
    for k in range(3):
        w = want[k].copy()
        if flushes_subnormals(device):
            w[np.abs(w) < np.finfo(np.float32).tiny] = 0.0
        np.testing.assert_allclose(got[k], w, rtol=4e-6, atol=1e-45)


def test_fourth_derivative_comes_from_autograd(device):
    pts = [-1.5, -0.4, 0.2, 1.7]
    x = nr.tensor(pts, device=device, requires_grad=True)
    (d4,) = nr.grad(_derivs(nr.tanh, x, lambda y, v: nr.grad(y, [v], create_graph=True))[2].sum(),
                    [x])
    want = np.array([float(mp.diff(mp.tanh, mp.mpf(p), 4)) for p in pts])
    _check(d4.numpy().astype(np.float64), want, 2.0 ** -8 * np.max(np.abs(want)), 32.0,
           "tanh''''")


# where a derivative's terms cancel: near the roots of f' and f'' (mish' = tanh(sp) + z sech²(sp)
# sigmoid(z) is 0.06 at z = -1 from terms of 0.3; 1 - tanh² of z = 10), found with mpmath below
ROOT_PTS = {"mish": [(1, -1.19), (2, -2.25), (2, 0.35)], "silu": [(1, -1.28), (2, -2.4), (2, 2.4)],
            "gelu": [(1, -0.75), (2, -1.41), (2, 1.41)], "gelu_tanh": [(1, -0.75), (2, -1.4)],
            "sigmoid": [(2, 0.0)], "tanh": [(2, 0.0)]}


def _near_roots(name):
    """float32 points spread over [-12, 12] plus the float32 neighbourhood of each root."""
    pts = list(np.linspace(-12, 12, 241))
    for k, guess in ROOT_PTS.get(name, []):
        r = float(mp.findroot(lambda z: mp.diff(MP[name], z, k), guess))
        pts += list(r + np.linspace(-1e-3, 1e-3, 21)) + list(r * (1 + np.arange(-8, 9) * 2.0 ** -23))
    return np.array(sorted(set(np.float32(pts))), np.float32)


@pytest.mark.parametrize("name", sorted(set(MP) - set(ONE_SIDED)))
def test_cpu_float32_derivatives_are_rounded_once_near_their_roots(name):
    """On cpu, act' and act'' of float32 inputs are within an ulp of the truth, also where the
    formula's terms cancel: those derivatives are evaluated in float64 and rounded once, so the
    result does not depend on which transcendental code path (SSE, AVX2, AVX-512) numpy takes on
    this CPU. Checked: nr.activation(x, name, "dz" / "d2"), and the gradient of act(x) (the fused
    backward) where it is computed from z. Rows that save y (sigmoid, tanh) differentiate
    through y as torch does (1 - y² cancels), and exact GELU's fused backward recovers Phi(z) as
    y / z from the float32 output (no second erf), so near its root at -0.75 it carries y's
    rounding times the cancellation: those two are bounded by torch's error elsewhere."""
    mp.mp.dps = 60
    pts = _near_roots(name)
    truth = [np.array([float(mp.diff(MP[name], mp.mpf(float(p)), k)) for p in pts])
             for k in (1, 2)]
    x = nr.tensor(pts, device="cpu")
    got = [("act'", nr.activation(x, name, "dz").numpy(), truth[0]),
           ("act''", nr.activation(x, name, "d2").numpy(), truth[1])]
    if nr.ACT[name].saves == "z" and name != "gelu":
        xg = nr.tensor(pts, device="cpu", requires_grad=True)
        (d1,) = nr.grad(nr.activation(xg, name).sum(), [xg])
        got.append(("gradient of act(x)", d1.numpy(), truth[0]))
    # sigmoid, tanh and softplus multiply float32 factors that do not cancel (no float64 needed)
    bound = 1.0 if name in ("mish", "silu", "gelu", "gelu_tanh") else 4.0
    for what, g, want in got:
        err = ulps(g, want, "float32")
        bad = err > bound
        assert not bad.any(), (f"{name} {what}: {bad.sum()} of {bad.size} beyond {bound} ulp: "
                               f"z {pts[bad][:6]}, got {g[bad][:6]}, want {want[bad][:6]}, "
                               f"err {err[bad][:6]}")
