import subprocess
import sys

import numpy as np
import pytest

import numr_web as nr
from numr_web.ops.activations import ACT

from helpers import fdtype


def _fused_first_grads(a, b, bias, act, w):
    out = nr.matmul_bias_activation(a, b, bias, act)
    return nr.grad((out * w).sum(), [a, b, bias], create_graph=True)


@pytest.mark.parametrize("act", [a for a in ACT if ACT[a].smooth])
def test_fused_second_derivatives(device, act):
    """Hessian-vector products of the fused layer: d/dθ <∇L(θ), v> vs finite differences of ∇L
    (cpu, float64) or vs the cpu backend (other devices). numr 0.5 gets this wrong by treating
    act'(Z) as a constant."""
    rng = np.random.default_rng(7)
    A, B, C = rng.normal(size=(4, 3)), rng.normal(size=(3, 5)), rng.normal(size=5)
    W = rng.normal(size=(4, 5))
    V = [rng.normal(size=x.shape) for x in (A, B, C)]

    def hvp(dev, dtype, arrays):
        ts = [nr.tensor(x, dtype=dtype, device=dev, requires_grad=True) for x in arrays]
        w = nr.tensor(W, dtype=dtype, device=dev)
        gs = _fused_first_grads(*ts, act, w)
        s = sum((g * nr.tensor(v, dtype=dtype, device=dev)).sum() for g, v in zip(gs, V))
        hs = nr.grad(s, ts, allow_unused=True)   # e.g. "none": nothing depends on bias twice
        return [np.zeros(x.shape) if h is None else h.numpy().astype(np.float64)
                for h, x in zip(hs, arrays)]

    got = hvp(device, fdtype(device), [A, B, C])
    if device == "cpu":
        eps = 1e-6

        def first(arrays):
            ts = [nr.tensor(x, dtype="float64", requires_grad=True) for x in arrays]
            gs = _fused_first_grads(*ts, act, nr.tensor(W, dtype="float64"))
            return sum(float((g.numpy() * v).sum()) for g, v in zip(gs, V))

        want = []
        for i, x in enumerate((A, B, C)):
            g = np.zeros_like(x)
            for k in range(x.size):
                vals = []
                for h in (eps, -eps):
                    arrs = [A.copy(), B.copy(), C.copy()]
                    arrs[i].reshape(-1)[k] += h
                    vals.append(first(arrs))
                g.reshape(-1)[k] = (vals[0] - vals[1]) / (2 * eps)
            want.append(g)
        tol = dict(rtol=1e-5, atol=1e-6)
    else:
        want = hvp("cpu", nr.float64, [A, B, C])
        tol = dict(rtol=2e-3, atol=2e-4)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, **tol)
    # the second derivative is not the "act' constant" answer: it depends on act''
    assert any(np.abs(g).max() > 1e-3 for g in got)


def test_second_derivative_elementwise(device):
    x = nr.tensor([0.5, -1.0, 2.0], dtype=fdtype(device), device=device, requires_grad=True)
    y = (nr.tanh(x) * x.exp()).sum()
    g, = nr.grad(y, x, create_graph=True)
    h, = nr.grad(g.sum(), x)
    xv = np.array([0.5, -1.0, 2.0])
    t, e = np.tanh(xv), np.exp(xv)
    d1 = (1 - t ** 2) * e + t * e
    d2 = -2 * t * (1 - t ** 2) * e + 2 * (1 - t ** 2) * e + t * e
    np.testing.assert_allclose(g.numpy(), d1, rtol=1e-5)
    np.testing.assert_allclose(h.numpy(), d2, rtol=1e-5)


def test_grad_accumulates_for_reused_tensors(device):
    x = nr.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = x * x + x * 3.0 + x
    y.sum().backward()
    assert x.grad.tolist() == [6.0, 8.0]
    (x * 2.0).sum().backward()            # .grad accumulates across calls
    assert x.grad.tolist() == [8.0, 10.0]
    x.grad = None
    (x * 2.0).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_broadcast_gradients_are_summed(device):
    a = nr.ones((3, 4), device=device, requires_grad=True)
    b = nr.ones((4,), device=device, requires_grad=True)
    c = nr.ones((3, 1), device=device, requires_grad=True)
    ((a * b) + c).sum().backward()
    assert b.grad.shape == (4,) and b.grad.tolist() == [3.0] * 4
    assert c.grad.shape == (3, 1) and c.grad.tolist() == [[4.0]] * 3


def test_no_grad_and_detach(device):
    x = nr.tensor([1.0], device=device, requires_grad=True)
    with nr.no_grad():
        y = x * 2
    assert not y.requires_grad and y.grad_fn is None
    z = (x * 2).detach()
    assert not z.requires_grad
    assert nr.is_grad_enabled()


def test_grad_fn_introspection():
    a = nr.randn((2, 3), seed=0, requires_grad=True)
    b = nr.randn((3, 4), seed=1, requires_grad=True)
    bias = nr.zeros(4, requires_grad=True)
    y = nr.matmul_bias_activation(a, b, bias, "gelu")
    assert y.grad_fn.name == "MatmulBiasActivationBackward"
    assert y.grad_fn.inputs == (a, b, bias)
    assert len(y.grad_fn.saved_tensors) >= 3
    z = (y * 2).sum()
    assert z.grad_fn.inputs[0].name == "MulBackward"
    assert a.grad_fn is None and a.is_leaf


def test_fused_backward_does_not_recompute_the_gemm(monkeypatch):
    """Forward runs the GEMM once and saves Z; first-order backward must not call gemm_bias_act."""
    be = nr.get_backend("cpu")
    calls = {"gemm": 0, "act_backward": 0}
    orig_g, orig_b = be.gemm_bias_act, be.act_backward

    def g(*a, **k):
        calls["gemm"] += 1
        return orig_g(*a, **k)

    def b(*a, **k):
        calls["act_backward"] += 1
        return orig_b(*a, **k)
    monkeypatch.setattr(be, "gemm_bias_act", g)
    monkeypatch.setattr(be, "act_backward", b)
    a = nr.randn((8, 4), seed=0, requires_grad=True)
    w = nr.randn((4, 3), seed=1, requires_grad=True)
    bias = nr.zeros(3, requires_grad=True)
    nr.matmul_bias_activation(a, w, bias, "gelu").sum().backward()
    assert calls == {"gemm": 1, "act_backward": 1}


def test_deep_chain_20000_ops(device):
    x = nr.tensor([1.0], device=device, requires_grad=True)
    y = x
    for _ in range(20000):
        y = y * 1.0
    y.sum().backward()
    assert x.grad.tolist() == [1.0]


def test_grad_function_and_unused(device):
    x = nr.tensor([3.0], device=device, requires_grad=True)
    u = nr.tensor([1.0], device=device, requires_grad=True)
    y = x * x
    gx, = nr.grad(y.sum(), [x])
    assert gx.tolist() == [6.0]
    assert x.grad is None                 # grad() does not touch .grad
    with pytest.raises(nr.GradientError, match="allow_unused"):
        nr.grad((x * 2).sum(), [x, u])
    assert nr.grad((x * 2).sum(), [x, u], allow_unused=True)[1] is None
    mid = x * 2
    gm, = nr.grad((mid * mid).sum(), [mid])
    assert gm.tolist() == [12.0]


def test_import_does_not_load_numpy():
    code = ("import sys, numr_web as nr; assert 'numpy' not in sys.modules, 'imported numpy';"
            "nr.available_devices(); t = nr.tensor([1.0]); assert 'numpy' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
