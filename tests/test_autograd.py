import subprocess
import sys

import numpy as np
import pytest

import numr_web as nr
import torch
import torch.nn.functional as F

from helpers import fdtype


TORCH_ACT = {"none": lambda z: z, "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
             "silu": F.silu, "gelu": F.gelu, "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"),
             "leaky_relu": lambda z: F.leaky_relu(z, 0.01), "elu": F.elu, "softplus": F.softplus,
             "mish": F.mish, "hardswish": F.hardswish, "selu": F.selu, "celu": F.celu,
             "softsign": F.softsign, "tanhshrink": F.tanhshrink}


@pytest.mark.parametrize("act", list(nr.ACT))
def test_fused_second_derivatives(device, act):
    """Hessian-vector products of the fused layer, d/dθ <∇L(θ), v>, against torch's in float64
    (numr 0.5 gets this wrong by treating act'(Z) as a constant). Random inputs: no kinks hit."""
    assert set(TORCH_ACT) == set(nr.ACT), "add the torch reference of the new activation"
    rng = np.random.default_rng(7)
    dtype = fdtype(device)
    npd = np.float64 if dtype is nr.float64 else np.float32
    A, B, C = [rng.normal(size=s).astype(npd) for s in ((4, 3), (3, 5), (5,))]
    W = rng.normal(size=(4, 5)).astype(npd)
    V = [rng.normal(size=x.shape).astype(npd) for x in (A, B, C)]

    ts = [nr.tensor(x, dtype=dtype, device=device, requires_grad=True) for x in (A, B, C)]
    gs = nr.grad((nr.matmul_bias_activation(*ts, act) * nr.tensor(W, device=device)).sum(), ts,
                 create_graph=True)
    s = sum((g * nr.tensor(v, device=device)).sum() for g, v in zip(gs, V))
    got = [np.zeros(x.shape) if h is None else h.numpy() for h, x in
           zip(nr.grad(s, ts, allow_unused=True), (A, B, C))]

    tt = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (A, B, C)]
    out = TORCH_ACT[act](tt[0] @ tt[1] + tt[2])
    tg = torch.autograd.grad((out * torch.tensor(W, dtype=torch.float64)).sum(), tt, create_graph=True)
    ts2 = sum((g * torch.tensor(v, dtype=torch.float64)).sum() for g, v in zip(tg, V))
    want = [np.zeros(x.shape) if h is None else h.numpy()
            for h, x in zip(torch.autograd.grad(ts2, tt, allow_unused=True), (A, B, C))]
    tol = dict(rtol=1e-10, atol=1e-12) if dtype is nr.float64 else dict(rtol=1e-4, atol=1e-5)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, **tol)


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


def test_the_graph_holds_only_what_the_gradients_read(device):
    """torch's rule: a residual add, a reshape and a Linear without activation save nothing of
    their operands / output (AddBackward0 and AddmmBackward0's output are not saved), so a
    branch's output is freed once the caller drops it; ops whose gradient reads data keep it."""
    import gc
    import weakref
    x = nr.randn((4, 8), seed=0, device=device, requires_grad=True)
    w = nr.randn((8, 8), seed=1, device=device, requires_grad=True)
    b = nr.randn(8, seed=2, device=device, requires_grad=True)
    branch = nr.matmul_bias_activation(x, w, b, "none")      # the output nobody reads in backward
    flat = (x * 3.0).reshape(32)                              # x * 3 is read by nobody either
    h = branch + x
    kept = x * 2.0                                            # max reads its input and output
    top = kept.max(dim=1).values
    refs = [weakref.ref(t) for t in (branch, flat, kept)]
    assert branch.grad_fn.saved_tensors == (x, w, b)          # the inputs only, not the output
    assert h.grad_fn.saved_tensors == ()
    loss = (h * h).sum() + flat.sum() + top.sum()
    del branch, flat, kept, h, top
    gc.collect()
    assert [r() is None for r in refs] == [True, True, False]
    loss.backward()
    xn, wn, bn = (t.numpy().astype(np.float64) for t in (x, w, b))
    hn = xn @ wn + bn + xn
    d = 2 * hn
    gx = d @ wn.T + d + 3.0
    gx[np.arange(4), (2 * xn).argmax(1)] += 2.0
    tol = dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), gx, **tol)
    np.testing.assert_allclose(w.grad.numpy(), xn.T @ d, **tol)
    np.testing.assert_allclose(b.grad.numpy(), d.sum(0), **tol)


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


def test_linear_and_norm_gradients_reach_grad_without_a_copy(monkeypatch):
    """nn.Linear multiplies by weight.T, and layer norm's weight gradient is reshaped to the
    weight's shape: computed in the leaves' own layouts, they arrive as arrays of their own (x.T.T
    is x; a reshape to an array's own shape is the array), not as views a leaf's .grad copies.
    Values against torch float64."""
    be = nr.get_backend("cpu")
    copies = []
    orig = be.copy
    monkeypatch.setattr(be, "copy", lambda h: copies.append(h.shape) or orig(h))
    rng = np.random.default_rng(3)
    x, g = rng.standard_normal((16, 8)), rng.standard_normal((16, 6))
    lin, ln = nr.nn.Linear(8, 6), nr.nn.LayerNorm(6)
    ln(lin(nr.tensor(x, dtype="float32"))).backward(nr.tensor(g, dtype="float32"))
    assert copies == []
    w = torch.tensor(lin.weight.detach().numpy().astype(np.float64), requires_grad=True)
    b = torch.tensor(lin.bias.detach().numpy().astype(np.float64), requires_grad=True)
    lw, lb = (torch.ones(6, dtype=torch.float64, requires_grad=True),
              torch.zeros(6, dtype=torch.float64, requires_grad=True))
    F.layer_norm(F.linear(torch.tensor(x), w, b), (6,), lw, lb).backward(torch.tensor(g))
    for got, want in ((lin.weight, w), (lin.bias, b), (ln.weight, lw), (ln.bias, lb)):
        np.testing.assert_allclose(got.grad.numpy(), want.grad.numpy(), rtol=2e-5, atol=2e-6)


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


def test_backward_twice_needs_retain_graph(device):
    x = nr.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()                                   # the graph was kept: accumulates
    assert x.grad.tolist() == [4.0, 8.0]
    with pytest.raises(nr.GradientError, match="retain_graph"):
        y.backward()                               # freed by the last call, as in torch
    z = (x + 1).sum()                              # nothing saved: torch allows a second pass
    z.backward()
    z.backward()


def test_leaf_gradients_own_their_memory(device):
    a = nr.tensor([1.0, 2.0], device=device, requires_grad=True)
    b = nr.tensor([3.0, 4.0], device=device, requires_grad=True)
    g = nr.tensor([1.0, 1.0], device=device)
    (a + b).backward(g)                            # add passes the same gradient to both
    ga = a.grad.numpy()
    ga[0] = 9.0                                    # writable, and not b's or the caller's buffer
    assert b.grad.tolist() == [1.0, 1.0] and g.tolist() == [1.0, 1.0]
    c = nr.tensor([[1.0], [2.0]], device=device, requires_grad=True)
    (c.expand(2, 3) * 1.0).sum().backward()
    assert c.grad.tolist() == [[3.0], [3.0]]
    c.grad.numpy()[0, 0] = 7.0                     # a broadcast gradient is a writable copy
    assert c.grad.tolist() == [[7.0], [3.0]] if device == "cpu" else True


def test_post_accumulate_grad_hooks_fire_when_final(device):
    w1 = nr.tensor([1.0], device=device, requires_grad=True)
    w2 = nr.tensor([2.0], device=device, requires_grad=True)
    seen = []
    h = w1.register_post_accumulate_grad_hook(lambda p: seen.append(("w1", p.grad.tolist())))
    w2.register_post_accumulate_grad_hook(lambda p: seen.append(("w2", p.grad.tolist())))
    y = (w1 * w2 * 3.0 + w1 * 5.0).sum()           # w1 used twice: its hook fires once, complete
    y.backward()
    assert sorted(seen) == [("w1", [11.0]), ("w2", [3.0])]
    h.remove()
    seen.clear()
    (w1 * 2.0).sum().backward()
    assert seen == []


def test_grad_mode_is_per_task():
    """Two coroutines: no_grad in one must not switch recording off in the other."""
    import asyncio

    async def inference(started, release):
        with nr.no_grad():
            started.set()
            await release.wait()
            return nr.is_grad_enabled()

    async def training(started, release):
        await started.wait()
        x = nr.tensor([1.0], requires_grad=True)
        y = x * 2
        release.set()
        return y.requires_grad and nr.is_grad_enabled()

    async def main():
        started, release = asyncio.Event(), asyncio.Event()
        return await asyncio.gather(inference(started, release), training(started, release))

    assert asyncio.run(main()) == [False, True]


def test_third_derivative_of_an_activation():
    x = nr.tensor([0.3], dtype="float64", requires_grad=True)
    g, = nr.grad(nr.tanh(x).sum(), x, create_graph=True)
    h, = nr.grad(g.sum(), x, create_graph=True)
    np.testing.assert_allclose(h.numpy(), [-2 * np.tanh(0.3) * (1 - np.tanh(0.3) ** 2)], rtol=1e-12)
    d3, = nr.grad(h.sum(), x)           # composed (ops/act_higher.py); all rows: tests/differential
    t = np.tanh(0.3)
    np.testing.assert_allclose(d3.numpy(), [-2 * (1 - t * t) * (1 - 3 * t * t)], rtol=1e-12)
