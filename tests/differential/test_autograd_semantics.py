"""Autograd's torch surface against torch 2.x, each device: backward(inputs=...), retain_graph and
the typed error after the graph is freed, retain_grad, register_hook (leaves and non-leaves,
replacement gradients, handles), grad(allow_unused / materialize_grads), set_grad_enabled as a
function, inference_mode, detach_, requires_grad_ of integer tensors."""
import numpy as np
import pytest
import torch

import numr_web as nr

X0 = [1.5, -2.0, 0.5]


def _leaf(device, data=X0):
    return nr.tensor(data, device=device, requires_grad=True), torch.tensor(data, requires_grad=True)


def _eq(a, ta):
    if ta is None:
        assert a is None
    else:
        assert a is not None
        np.testing.assert_allclose(a.numpy(), ta.detach().numpy(), rtol=2e-7, atol=0)


def test_backward_inputs_accumulates_only_into_the_listed_tensors(device):
    x, tx = _leaf(device)
    w, tw = _leaf(device, [2.0, 3.0, 4.0])
    u, tu = _leaf(device, [1.0, 1.0, 1.0])
    for lib, (a, b, c) in ((nr, (x, w, u)), (torch, (tx, tw, tu))):
        y = a * a
        (y * b).sum().backward(inputs=[a, c])          # c unused: no error, .grad stays None
    _eq(x.grad, tx.grad)
    _eq(w.grad, tw.grad)
    _eq(u.grad, tu.grad)
    y, ty = x.exp(), tx.exp()
    (y * w).sum().backward(inputs=[y])
    (ty * tw).sum().backward(inputs=[ty])
    _eq(y.grad, ty.grad)                               # a non-leaf input gets its .grad
    _eq(x.grad, tx.grad)
    (x * 2).sum().backward(inputs=x)                   # a single tensor is accepted
    (tx * 2).sum().backward(inputs=tx)
    _eq(x.grad, tx.grad)
    with pytest.raises(nr.GradientError):
        (x * 2).sum().backward(inputs=[])
    with pytest.raises(nr.GradientError):
        (x * 2).sum().backward(inputs=[nr.ones(3, device=device)])


def test_retain_graph_and_the_error_once_freed(device):
    x, tx = _leaf(device)
    y, ty = (x.exp() * x).sum(), (tx.exp() * tx).sum()
    y.backward(retain_graph=True)
    ty.backward(retain_graph=True)
    y.backward()
    ty.backward()
    _eq(x.grad, tx.grad)
    with pytest.raises(RuntimeError):
        ty.backward()
    with pytest.raises(nr.GradientError, match="retain_graph=True"):
        y.backward()
    z = (x.exp() * x).sum()
    nr.grad(z, [x])
    with pytest.raises(nr.GradientError, match="second time"):
        nr.grad(z, [x])


def test_retain_grad_on_non_leaves(device):
    x, tx = _leaf(device)
    outs = []
    for a in (x, tx):
        y = a * 3
        y.retain_grad()
        y.retain_grad()                                # twice is once
        z = (y * y).sum()
        z.backward(retain_graph=True)
        z.backward()                                    # accumulates, as a leaf's
        outs.append(y)
    assert outs[0].retains_grad and outs[1].retains_grad
    _eq(outs[0].grad, outs[1].grad)
    _eq(x.grad, tx.grad)
    x.retain_grad()                                    # no-op on a leaf
    assert not x.retains_grad and x.retains_grad == tx.retains_grad
    assert (x * 2).grad is None


def test_register_hook_replaces_the_gradient(device):
    res = []
    x, tx = _leaf(device)
    seen, tseen = [], []
    for a, log in ((x, seen), (tx, tseen)):
        h = a.register_hook(lambda g, log=log: (log.append(g.detach().clone()), g * 10)[1])
        y = a * 2
        y.register_hook(lambda g: g + 1)               # on a non-leaf, before its VJP
        y.register_hook(lambda g: None)                # None: the gradient unchanged (the
        #                                                handle dropped: the hook stays)
        y.retain_grad()                                # sees the hooks' result (torch >= 2.0)
        (y * a + a * 4).sum().backward()               # a used twice: the leaf hook sees the total
        res.append((a.grad, y.grad))
        h.remove()
        a.grad = None
        (a * 3).sum().backward()                        # removed
        res.append((a.grad, None))
    assert len(seen) == len(tseen) == 1
    _eq(seen[0], tseen[0])
    for (g, yg), (tg, tyg) in zip(res[:2], res[2:]):
        _eq(g, tg)
        _eq(yg, tyg)
    (gx,) = nr.grad((x * 3).sum(), [x])                # leaf hooks run in grad() too
    x.register_hook(lambda g: g * 10)
    (gx2,) = nr.grad((x * 3).sum(), [x])
    tx.register_hook(lambda g: g * 10)
    (tgx,) = torch.autograd.grad((tx * 3).sum(), [tx])
    _eq(gx2, tgx)
    with pytest.raises(nr.GradientError):
        nr.ones(2, device=device).register_hook(lambda g: g)
    bad = nr.tensor([1.0], device=device, requires_grad=True)
    bad.register_hook(lambda g: nr.ones(3, device=device))
    with pytest.raises(nr.GradientError):
        (bad * 2).sum().backward()


def test_grad_allow_unused_and_materialize_grads(device):
    x, tx = _leaf(device)
    u, tu = _leaf(device, [1.0])
    with pytest.raises(RuntimeError):
        torch.autograd.grad((tx * 2).sum(), [tx, tu])
    with pytest.raises(nr.GradientError, match="allow_unused=True"):
        nr.grad((x * 2).sum(), [x, u])
    g = nr.grad((x * 2).sum(), [x, u], allow_unused=True)
    tg = torch.autograd.grad((tx * 2).sum(), [tx, tu], allow_unused=True)
    _eq(g[0], tg[0])
    assert g[1] is None and tg[1] is None
    g = nr.grad((x * 2).sum(), [x, u], materialize_grads=True)
    tg = torch.autograd.grad((tx * 2).sum(), [tx, tu], materialize_grads=True)
    _eq(g[1], tg[1])
    assert g[1].device == device
    with pytest.raises(ValueError):
        torch.autograd.grad((tx * 2).sum(), [tx, tu], allow_unused=False, materialize_grads=True)
    with pytest.raises(nr.GradientError):
        nr.grad((x * 2).sum(), [x, u], allow_unused=False, materialize_grads=True)
    with pytest.raises(nr.GradientError):
        nr.grad((x * 2).sum(), [nr.ones(1, device=device)])
    assert nr.autograd.grad is nr.grad


def test_grad_create_graph_and_grad_outputs(device):
    x, tx = _leaf(device)
    go, tgo = nr.tensor([1.0, -1.0, 2.0], device=device), torch.tensor([1.0, -1.0, 2.0])
    (g,) = nr.grad(x ** 3, [x], grad_outputs=[go], create_graph=True)
    (tg,) = torch.autograd.grad(tx ** 3, [tx], grad_outputs=[tgo], create_graph=True)
    _eq(g, tg)
    assert g.requires_grad == tg.requires_grad
    (h,) = nr.grad(g.sum(), [x])
    (th,) = torch.autograd.grad(tg.sum(), [tx])
    _eq(h, th)
    (g,) = nr.grad((x ** 3).sum(), [x])
    assert not g.requires_grad and g.grad_fn is None


def test_set_grad_enabled_inference_mode_no_grad(device):
    x, tx = _leaf(device)
    try:
        nr.set_grad_enabled(False)
        torch.set_grad_enabled(False)
        assert (x * 2).requires_grad == (tx * 2).requires_grad == False  # noqa: E712
        assert nr.is_grad_enabled() == torch.is_grad_enabled() == False  # noqa: E712
    finally:
        nr.set_grad_enabled(True)
        torch.set_grad_enabled(True)
    with nr.set_grad_enabled(False):
        assert not (x * 2).requires_grad
        with nr.enable_grad():
            assert (x * 2).requires_grad
    assert nr.is_grad_enabled()

    @nr.set_grad_enabled(False)
    def f():
        return (x * 2).requires_grad
    assert nr.is_grad_enabled() and f() is False and nr.is_grad_enabled()

    @nr.no_grad()
    def g():
        return (x * 2).requires_grad
    assert g() is False and nr.is_grad_enabled()
    with nr.inference_mode(), torch.inference_mode():
        assert nr.is_inference_mode_enabled() == torch.is_inference_mode_enabled() == True  # noqa
        assert (x * 2).requires_grad == (tx * 2).requires_grad == False  # noqa: E712
    with nr.inference_mode(False):
        assert not nr.is_inference_mode_enabled() and (x * 2).requires_grad
    assert not nr.is_inference_mode_enabled() and nr.is_grad_enabled()
    with pytest.raises(nr.DTypeError):
        nr.set_grad_enabled("no")


def test_detach_and_requires_grad_(device):
    x, tx = _leaf(device)
    y, ty = x * 2, tx * 2
    assert y.grad_fn is not None and ty.grad_fn is not None and not y.is_leaf
    y.detach_()
    ty.detach_()
    assert (y.requires_grad, y.grad_fn, y.is_leaf) == (ty.requires_grad, None, ty.is_leaf)
    i = nr.tensor([1, 2], device=device)
    with pytest.raises(RuntimeError):
        torch.tensor([1, 2]).requires_grad_()
    with pytest.raises(nr.GradientError, match="floating"):
        i.requires_grad_()
    assert i.requires_grad_(False) is i
    f = nr.tensor([1.0], device=device).requires_grad_()
    assert f.requires_grad and f.is_leaf


def test_autograd_backward_of_several_tensors(device):
    x, tx = _leaf(device)
    w, tw = _leaf(device, [2.0, 3.0, 4.0])
    g1, tg1 = nr.tensor([1.0, 2.0, 3.0], device=device), torch.tensor([1.0, 2.0, 3.0])
    nr.autograd.backward([x * w, (x * x).sum()], [g1, None])
    torch.autograd.backward([tx * tw, (tx * tx).sum()], [tg1, None])
    _eq(x.grad, tx.grad)
    _eq(w.grad, tw.grad)
    nr.autograd.backward([x.exp()], [g1], inputs=[w])      # w unused: nothing accumulates
    torch.autograd.backward([tx.exp()], [tg1], inputs=[tw])
    _eq(w.grad, tw.grad)
    y = (x * 3).sum()
    with nr.no_grad():                                      # grad mode does not matter here
        y.backward(inputs=[x])
    ty = (tx * 3).sum()
    with torch.no_grad():
        ty.backward(inputs=[tx])
    _eq(x.grad, tx.grad)
    with pytest.raises(nr.GradientError):
        nr.autograd.backward([x * 2], [g1, g1])


def test_requires_grad_true_on_a_non_leaf_is_a_no_op(device):
    x, tx = _leaf(device)
    y, ty = x * 2, tx * 2
    assert y.requires_grad_() is y and ty.requires_grad_() is ty
    y.requires_grad = True
    with pytest.raises(RuntimeError):
        ty.requires_grad = False
    with pytest.raises(nr.GradientError):
        y.requires_grad = False


def test_bare_decorators_and_one_instance_entered_twice(device):
    x = nr.tensor([1.0], device=device, requires_grad=True)

    @nr.no_grad
    def f():
        return (x * 2).requires_grad

    @torch.no_grad
    def tf():
        return torch.is_grad_enabled()

    @nr.inference_mode
    def h():
        return nr.is_inference_mode_enabled()
    assert f() is False and tf() is False and h() is True and nr.is_grad_enabled()
    ng = nr.no_grad()
    with ng:
        with nr.enable_grad():
            with ng:
                assert not nr.is_grad_enabled()
            assert nr.is_grad_enabled()
        assert not nr.is_grad_enabled()
    assert nr.is_grad_enabled()
