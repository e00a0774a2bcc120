"""The losses (functional and module forms) against torch: values and gradients, every reduction,
weights, the extremes where a careless composition gives NaN (p = 0 or 1, logits of +-1e30 or 0),
and the argument errors. References: torch in float64 on the same float32 inputs; the bound is a
few float32 ulps or torch's own float32 error, whichever is larger."""
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import numr_web as nr
from numr_web import nn
from numr_web.nn import functional as F

from _diff import assert_close_ulps, ulps

RED = ("mean", "sum", "none")


def _check(device, nr_fn, torch_fn, arrays, grad=(0,), max_ulps=4, what=""):
    """nr_fn(*tensors) and torch_fn(*tensors) on float32 data: the value and the gradients of
    sum(out * r) (r fixed random weights) for the arguments listed in grad."""
    arrays = [np.asarray(a, np.float32) for a in arrays]
    xs = [nr.tensor(a, device=device, requires_grad=i in grad) for i, a in enumerate(arrays)]
    out = nr_fn(*xs)
    r = np.random.default_rng(7).uniform(0.5, 1.5, out.shape).astype(np.float32)
    (out * nr.tensor(r, device=device)).sum().backward()
    res = {}
    for dtype in (torch.float32, torch.float64):
        ts = [torch.tensor(a, dtype=dtype, requires_grad=i in grad) for i, a in enumerate(arrays)]
        o = torch_fn(*ts)
        (o * torch.tensor(r, dtype=dtype)).sum().backward()
        res[dtype] = [o.detach().numpy()] + [ts[i].grad.numpy() for i in grad]
    got = [out.numpy()] + [xs[i].grad.numpy() for i in grad]
    for k, (g, w32, w64) in enumerate(zip(got, res[torch.float32], res[torch.float64])):
        assert g.shape == w64.shape, (what, k, g.shape, w64.shape)
        assert_close_ulps(g, w64, "float32", max_ulps, device,
                          torch_err=2 * ulps(w32, w64, "float32"),
                          what=f"{what} {'value' if k == 0 else f'grad {grad[k - 1]}'}")


def _rng(seed=0):
    return np.random.default_rng(seed)


@pytest.mark.parametrize("reduction", RED)
def test_mse_l1(device, reduction):
    r = _rng()
    x, y, w = r.normal(size=(4, 5)), r.normal(size=(4, 5)), r.uniform(0.1, 2, (4, 5))
    for name in ("mse_loss", "l1_loss"):
        _check(device, lambda a, b, n=name: getattr(F, n)(a, b, reduction=reduction),
               lambda a, b, n=name: getattr(TF, n)(a, b, reduction=reduction), [x, y],
               grad=(0, 1), what=name)
        _check(device, lambda a, b, c, n=name: getattr(F, n)(a, b, reduction=reduction, weight=c),
               lambda a, b, c, n=name: getattr(TF, n)(a, b, reduction=reduction, weight=c),
               [x, y, w], grad=(0, 1), what=name + " weight")


@pytest.mark.parametrize("reduction", RED)
def test_smooth_l1_and_huber(device, reduction):
    r = _rng(1)
    x, y = r.normal(size=(3, 7)) * 2, r.normal(size=(3, 7))
    x[0, 0] = y[0, 0]                     # d = 0: gradient 0 (torch's sign(0))
    for beta in (0.5, 1.0, 0.0):
        _check(device, lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=beta),
               lambda a, b: TF.smooth_l1_loss(a, b, reduction=reduction, beta=beta), [x, y],
               grad=(0, 1), what=f"smooth_l1 beta={beta}")
    w = r.uniform(0.1, 2, x.shape)
    for delta in (0.5, 2.0):
        _check(device, lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=delta),
               lambda a, b: TF.huber_loss(a, b, reduction=reduction, delta=delta), [x, y],
               grad=(0, 1), what=f"huber delta={delta}")
        _check(device, lambda a, b, c: F.huber_loss(a, b, reduction, delta, weight=c),
               lambda a, b, c: TF.huber_loss(a, b, reduction, delta, weight=c), [x, y, w],
               grad=(0, 1), what=f"huber delta={delta} weight")


@pytest.mark.parametrize("reduction", RED)
def test_binary_cross_entropy_clamps_logs_at_minus_100(device, reduction):
    p = np.array([[0.0, 1.0, 0.5, 1e-30, 0.999, 0.25], [1.0, 0.0, 0.1, 0.9, 0.3, 0.7]])
    y = np.array([[0.0, 1.0, 1.0, 1.0, 0.0, 0.3], [0.0, 1.0, 0.0, 1.0, 0.5, 1.0]])
    if device == "webgpu":                # a device that flushes subnormals reads 1e-30 as is,
        p[0, 3] = 1e-20                   # but keep the input normal either way
    _check(device, lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction),
           lambda a, b: TF.binary_cross_entropy(a, b, reduction=reduction), [p, y],
           grad=(0,), what="bce")
    w = np.array([0.5, 2.0, 1.0, 1.5, 0.1, 3.0])             # broadcast over the rows
    _check(device, lambda a, b, c: F.binary_cross_entropy(a, b, c, reduction=reduction),
           lambda a, b, c: TF.binary_cross_entropy(a, b, c, reduction=reduction), [p, y, w],
           grad=(0,), what="bce weight")
    q = np.array([0.2, 0.5, 0.9])
    _check(device, lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction),
           lambda a, b: TF.binary_cross_entropy(a, b, reduction=reduction),
           [q, np.array([0.0, 0.7, 1.0])], grad=(0, 1), what="bce target grad")


@pytest.mark.parametrize("reduction", RED)
def test_bce_with_logits_is_stable(device, reduction):
    x = np.array([[0.0, -1e30, 1e30, 100.0, -100.0, 3.0], [-0.5, 20.0, -20.0, 1e-3, 7.0, -88.0]])
    y = np.array([[0.0, 1.0, 0.0, 1.0, 0.0, 0.25], [1.0, 0.0, 1.0, 0.5, 1.0, 0.0]])
    _check(device, lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction=reduction),
           lambda a, b: TF.binary_cross_entropy_with_logits(a, b, reduction=reduction), [x, y],
           grad=(0, 1), what="bce_logits")
    pw = np.array([1.0, 2.0, 0.5, 3.0, 1.5, 4.0])
    w = np.array([[2.0], [0.5]])
    _check(device, lambda a, b, c, d: F.binary_cross_entropy_with_logits(
               a, b, c, reduction=reduction, pos_weight=d),
           lambda a, b, c, d: TF.binary_cross_entropy_with_logits(
               a, b, c, reduction=reduction, pos_weight=d), [x, y, w, pw],
           grad=(0, 1), what="bce_logits pos_weight")


@pytest.mark.parametrize("reduction", RED + ("batchmean",))
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(device, reduction, log_target):
    r = _rng(2)
    inp = np.log(r.dirichlet(np.ones(5), size=3))
    t = r.dirichlet(np.ones(5), size=3)
    t[0, 1] = 0.0                                     # xlogy(0, 0) = 0
    if log_target:
        t = np.log(t + 0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")               # torch warns about 'mean'
        _check(device, lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target),
               lambda a, b: TF.kl_div(a, b, reduction=reduction, log_target=log_target),
               [inp, t], grad=(0,), what="kl_div")


@pytest.mark.parametrize("reduction", RED)
def test_nll_loss_shapes_weights_ignore_index(device, reduction):
    r = _rng(3)
    lp = np.log(r.dirichlet(np.ones(4), size=6))
    lab = np.array([0, 3, 1, 1, 2, 3], np.int32)
    w = np.array([0.5, 1.0, 2.0, 1.5])

    def both(lp, lab, weighted=False, **kw):
        arrays = [lp, w] if weighted else [lp]
        _check(device,
               lambda a, b=None: F.nll_loss(a, nr.tensor(lab, device=device), b,
                                            reduction=reduction, **kw),
               lambda a, b=None: TF.nll_loss(a, torch.tensor(lab, dtype=torch.long), b,
                                             reduction=reduction, **kw),
               arrays, grad=(0,), what=f"nll {lp.shape} {kw} weighted={weighted}")

    both(lp, lab)
    both(lp, lab, weighted=True)
    both(lp, np.array([0, -100, 1, -100, 2, 3], np.int32))
    both(lp, np.array([0, 2, 1, 2, 2, 3], np.int32), ignore_index=2, weighted=True)
    lp4 = np.log(r.dirichlet(np.ones(3), size=(2, 4, 5))).transpose(0, 3, 1, 2)   # (N, C, d1, d2)
    both(np.ascontiguousarray(lp4), r.integers(0, 3, (2, 4, 5)).astype(np.int32))
    if reduction != "none":
        both(lp[0], np.array(2, np.int32))                  # (C,) with a 0-d target


def test_nll_loss_all_ignored_is_nan_as_torch(device):
    lp = nr.tensor([[-1.0, -0.5]], device=device)
    got = F.nll_loss(lp, nr.tensor([-100], device=device)).item()
    want = TF.nll_loss(torch.tensor([[-1.0, -0.5]]), torch.tensor([-100])).item()
    assert np.isnan(got) and np.isnan(want)


@pytest.mark.parametrize("reduction", RED)
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_labels_shapes_ignore_index_smoothing(device, reduction, smoothing):
    """Class-index targets without a weight: the one fused row (loss and row stats in one
    kernel, the gradient in one more), every shape torch takes, ignored rows, label smoothing,
    against torch in float64. Bounds: K ulps of the magnitudes of the terms each result adds
    (its cancellations, p - s / C, are the formula's, also torch's), where x - max(x) rounded to
    float32 puts up to |x - max(x)| ulps into exp's result (torch's float32 too): K = 4 + that
    on the cpu (numpy's exp: 2.2 ulps), 8 + twice that on a GPU (WGSL allows exp 3 + 2 |x|)."""
    r = _rng(5)
    u = 2.0 ** -24

    def both(logits, lab, **kw):
        logits = np.asarray(logits, np.float32)
        a = nr.tensor(logits, device=device, requires_grad=True)
        out = F.cross_entropy(a, nr.tensor(lab, device=device), reduction=reduction,
                              label_smoothing=smoothing, **kw)
        w = _rng(7).uniform(0.5, 1.5, out.shape).astype(np.float32)
        (out * nr.tensor(w, device=device)).sum().backward()
        t = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
        tl = torch.tensor(lab, dtype=torch.long)
        want = TF.cross_entropy(t, tl, reduction=reduction, label_smoothing=smoothing, **kw)
        (want * torch.tensor(w, dtype=torch.float64)).sum().backward()
        # the terms' magnitudes: a row's loss adds |log p_label| and s mean |log p|; an element
        # of the gradient g_row (p + (1 - s) [label] + s / C)
        cd = 1 if t.ndim > 1 else 0
        C, lp = t.shape[cd], torch.log_softmax(t.detach(), cd)
        sh = (t.detach() - t.detach().amax(cd, keepdim=True)).abs().numpy()
        K = ((4 + sh) if device == "cpu" else (8 + 2 * sh)) * u
        Krow = K.max(cd) * (np.log(C) + 1) if reduction == "none" else \
            K.max() * (np.log(C) + 1)                # log S: a sum of C terms, then its log
        keep = (tl != kw.get("ignore_index", -100)).double()
        onehot = TF.one_hot(tl.clamp(min=0), C).double().movedim(-1, cd)
        # (+ 1: log S, S >= 1, carries S's relative error as an absolute one)
        row = ((-lp * onehot).sum(cd) + smoothing * lp.abs().mean(cd) + 1) * keep
        mag = row if reduction == "none" else row.sum() / (keep.sum() if reduction == "mean"
                                                            else 1)
        assert np.all(np.abs(out.numpy() - want.detach().numpy()) <= Krow * mag.numpy()), \
            f"loss {logits.shape}"
        gr = torch.tensor(w, dtype=torch.float64) * keep
        if reduction == "mean":
            gr = gr / keep.sum()
        gmag = (gr.unsqueeze(cd) * (lp.exp() + (1 - smoothing) * onehot + smoothing / C)).abs()
        err = np.abs(a.grad.numpy() - t.grad.numpy())
        assert np.all(err <= K * gmag.numpy()), \
            f"grad {logits.shape} {float((err / (gmag.numpy() + 1e-300)).max() / u)} ulps"

    both(r.normal(size=(7, 5)) * 3, np.array([0, 4, -100, 2, 1, 3, 4], np.int32))
    both(r.normal(size=(6, 70)) * 3, r.integers(0, 70, 6).astype(np.int32))     # > a warp
    both(r.normal(size=(5, 4)), np.array([1, 3, 3, 0, 3], np.int32), ignore_index=3)
    both(r.normal(size=(2, 3, 4, 5)), r.integers(0, 3, (2, 4, 5)).astype(np.int32))
    both(r.normal(size=(4, 6)) + 1000, np.array([5, 0, 2, 3], np.int32))          # far from 0
    if reduction != "none":
        both(r.normal(size=(5,)), np.array(2, np.int32))                          # (C,)


def test_cross_entropy_gradient_of_a_confident_row_keeps_its_digits(device):
    """p near 1 at the label: p - 1 (about -3e-6 here) to a few ulps of its own size, not of 1
    (exp(x - lse) - 1 in float32 would lose all but a few of its bits)."""
    x = np.array([[0.0, 0.5, -0.5, 13.0], [1.0, 2.0, 3.0, 4.0]], np.float32)
    lab = np.array([3, 0], np.int32)
    a = nr.tensor(x, device=device, requires_grad=True)
    F.cross_entropy(a, nr.tensor(lab, device=device), reduction="sum").backward()
    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    TF.cross_entropy(t, torch.tensor(lab, dtype=torch.long), reduction="sum").backward()
    got, want = a.grad.numpy()[0, 3], t.grad.numpy()[0, 3]
    assert abs(got - want) <= (4 if device == "cpu" else 16) * 2.0 ** -24 * abs(want), (got, want)


def test_cross_entropy_all_ignored_mean_is_nan_as_torch(device):
    got = F.cross_entropy(nr.tensor([[1.0, 2.0]], device=device),
                          nr.tensor([-100], device=device)).item()
    assert np.isnan(got) and np.isnan(TF.cross_entropy(torch.tensor([[1.0, 2.0]]),
                                                       torch.tensor([-100])).item())


def test_cross_entropy_keeps_torch_positional_order(device):
    logits = np.random.default_rng(4).normal(size=(5, 3))
    lab = np.array([0, 2, 1, 1, 0], np.int32)
    w = np.array([1.0, 2.0, 0.5])
    for legacy in ({}, {"size_average": False}, {"reduce": False}):
        _check(device,
               lambda a, b: F.cross_entropy(a, nr.tensor(lab, device=device), b, **legacy),
               lambda a, b: TF.cross_entropy(a, torch.tensor(lab, dtype=torch.long), b, **legacy),
               [logits, w], grad=(0,), what=f"cross_entropy weight {legacy}")


MODULES = [
    ("CrossEntropyLoss", dict(label_smoothing=0.1), "labels"),
    ("NLLLoss", dict(ignore_index=1), "labels"),
    ("MSELoss", dict(reduction="sum"), "float"),
    ("L1Loss", dict(), "float"),
    ("SmoothL1Loss", dict(beta=0.5), "float"),
    ("HuberLoss", dict(delta=0.3, reduction="none"), "float"),
    ("BCELoss", dict(), "prob"),
    ("BCEWithLogitsLoss", dict(), "float01"),
    ("KLDivLoss", dict(reduction="batchmean", log_target=True), "float"),
]


@pytest.mark.parametrize("name,kw,kind", MODULES, ids=[m[0] for m in MODULES])
def test_loss_modules_match_torch(device, name, kw, kind):
    r = _rng(5)
    x = r.normal(size=(4, 3))
    if kind == "prob":
        x = r.uniform(0.01, 0.99, (4, 3))
    if kind == "labels":
        tgt_nr = nr.tensor([0, 2, 1, 1], device=device)
        tgt_t = torch.tensor([0, 2, 1, 1])
        if name == "NLLLoss":
            x = np.log(r.dirichlet(np.ones(3), size=4))
    else:
        t = r.uniform(0, 1, (4, 3)) if kind in ("prob", "float01") else r.normal(size=(4, 3))
        tgt_nr, tgt_t = nr.tensor(t, dtype="float32", device=device), \
            torch.tensor(t, dtype=torch.float64)
    mod, ref = getattr(nn, name)(**kw), getattr(torch.nn, name)(**kw)
    assert repr(mod) == repr(ref)
    _check(device, lambda a: mod(a, tgt_nr), lambda a: ref(a, tgt_t.to(a.dtype)
                                                              if tgt_t.is_floating_point()
                                                              else tgt_t),
           [x], grad=(0,), what=name)


def test_weighted_loss_modules_keep_weight_as_buffer(device):
    w = nr.tensor([1.0, 2.0, 0.5], device=device)
    m = nn.CrossEntropyLoss(w)
    assert list(m.state_dict()) == list(torch.nn.CrossEntropyLoss(torch.ones(3)).state_dict())
    assert m.weight is w
    assert list(nn.BCEWithLogitsLoss(pos_weight=w).state_dict()) == \
        list(torch.nn.BCEWithLogitsLoss(pos_weight=torch.ones(3)).state_dict())


def test_loss_argument_errors(device):
    x = nr.ones((2, 3), device=device)
    with pytest.raises(nr.ShapeError, match="not a valid value for reduction"):
        F.mse_loss(x, x, reduction="avg")
    with pytest.raises(ValueError):
        TF.mse_loss(torch.ones(2), torch.ones(2), reduction="avg")
    with pytest.raises(nr.ShapeError, match="same as input size"):
        F.binary_cross_entropy(x * 0.5, nr.ones((2, 1), device=device))
    with pytest.raises(ValueError):
        TF.binary_cross_entropy(torch.ones(2, 3) * 0.5, torch.ones(2, 1))
    with pytest.raises(nr.ShapeError, match="same as input size"):
        F.binary_cross_entropy_with_logits(x, nr.ones(3, device=device))
    with pytest.raises(nr.ShapeError, match="weight must have the input's shape"):
        F.l1_loss(x, x, weight=nr.ones(3, device=device))
    with pytest.raises(nr.ShapeError, match="cannot be broadcast"):
        F.mse_loss(x, nr.ones((4,), device=device))
    with pytest.raises(nr.DTypeError, match="floating point"):
        F.mse_loss(nr.ones((2,), dtype="int32", device=device), nr.ones(2, device=device))
    with pytest.raises(nr.ShapeError, match="delta must be > 0"):
        F.huber_loss(x, x, delta=0.0)
    with pytest.raises(nr.ShapeError, match="weight must have shape \\(3,\\)"):
        F.nll_loss(x, nr.tensor([0, 1], device=device), weight=nr.ones(2, device=device))
    with pytest.raises(nr.DTypeError, match="int32 class indices"):
        F.nll_loss(x, nr.tensor([0.0, 1.0], device=device))
    with pytest.raises(UserWarning, match="different to the input size"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            F.mse_loss(x, nr.ones((1, 3), device=device))


def test_bce_input_outside_0_1_is_reported_at_readback(device):
    p = nr.tensor([0.5, 1.5], device=device)
    with pytest.raises(nr.ShapeError, match="between 0 and 1"):    # at once on the cpu
        F.binary_cross_entropy(p, nr.tensor([0.0, 1.0], device=device)).item()
    with pytest.raises(RuntimeError):
        TF.binary_cross_entropy(torch.tensor([0.5, 1.5]), torch.tensor([0.0, 1.0]))


SECOND = [
    ("binary_cross_entropy", np.array([0.2, 0.5, 0.9, 0.999]), np.array([0.0, 1.0, 0.3, 1.0])),
    ("binary_cross_entropy_with_logits", np.array([-3.0, 0.0, 2.5, 40.0]),
     np.array([1.0, 0.5, 0.0, 1.0])),
    ("smooth_l1_loss", np.array([-3.0, 0.1, 2.5, 0.0]), np.array([1.0, 0.5, 0.0, 0.2])),
    ("kl_div", np.log(np.array([0.1, 0.2, 0.3, 0.4])), np.array([0.25, 0.25, 0.5, 0.0])),
]


@pytest.mark.parametrize("name,x,y", SECOND, ids=[s[0] for s in SECOND])
def test_second_derivatives_match_torch(name, x, y):
    """create_graph through the losses (the binary cross entropies' own VJPs included), float64."""
    xs, ys = nr.tensor(x, requires_grad=True), nr.tensor(y, requires_grad=True)
    g, = nr.grad(getattr(F, name)(xs, ys, reduction="sum"), [xs], create_graph=True)
    (g * g).sum().backward()
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.tensor(y, requires_grad=True)
    gt, = torch.autograd.grad(getattr(TF, name)(xt, yt, reduction="sum"), [xt], create_graph=True)
    (gt * gt).sum().backward()
    # torch's double backward of binary_cross_entropy adds eps = 1e-12 to p and 1 - p: its
    # second derivatives are off by about 1e-12 / min(p, 1 - p), relatively (2e-9 at p = 0.999)
    rtol = 1e-8 if name == "binary_cross_entropy" else 1e-12
    np.testing.assert_allclose(g.numpy(), gt.detach().numpy(), rtol=1e-13, atol=1e-15)
    for ours, ref in ((xs, xt), (ys, yt)):                 # None: no path, a zero gradient
        got = np.zeros_like(x) if ours.grad is None else ours.grad.numpy()
        want = np.zeros_like(x) if ref.grad is None else ref.grad.numpy()
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-14)


def test_float64_values_match_torch_to_the_ulp():
    r = _rng(8)
    x, y = r.normal(size=(3, 5)) * 3, r.uniform(0, 1, (3, 5))
    p = r.uniform(0, 1, (3, 5))
    for name, a in (("mse_loss", x), ("l1_loss", x), ("smooth_l1_loss", x), ("huber_loss", x),
                    ("binary_cross_entropy_with_logits", x), ("binary_cross_entropy", p)):
        got = getattr(F, name)(nr.tensor(a), nr.tensor(y), reduction="none").numpy()
        want = getattr(TF, name)(torch.tensor(a), torch.tensor(y), reduction="none").numpy()
        assert ulps(got, want, "float64").max() <= 2, name


def test_minus_inf_logits_of_other_classes(device):
    """-inf logits (masked classes) give finite losses and gradients, as torch's."""
    logits = np.array([[0.5, -np.inf, 2.0], [-np.inf, -np.inf, 1.0], [1e30, 0.0, -1e30]])
    lab = np.array([0, 2, 0], np.int32)
    for red in RED:
        _check(device, lambda a: F.cross_entropy(a, nr.tensor(lab, device=device), reduction=red),
               lambda a: TF.cross_entropy(a, torch.tensor(lab, dtype=torch.long), reduction=red),
               [logits], what=f"cross_entropy -inf {red}")
        _check(device, lambda a: F.nll_loss(a.log_softmax(1), nr.tensor(lab, device=device),
                                            reduction=red),
               lambda a: TF.nll_loss(a.log_softmax(1), torch.tensor(lab, dtype=torch.long),
                                     reduction=red), [logits], what=f"nll -inf {red}")


def test_weights_of_binary_cross_entropies_are_not_differentiable_as_in_torch(device):
    x = nr.tensor([0.2, 0.7], device=device)
    w = nr.tensor([1.0, 2.0], device=device, requires_grad=True)
    for fn, tfn in ((lambda **k: F.binary_cross_entropy(x, x, **k),
                     lambda **k: TF.binary_cross_entropy(torch.tensor([0.2, 0.7]),
                                                         torch.tensor([0.2, 0.7]), **k)),
                    (lambda **k: F.binary_cross_entropy_with_logits(x, x, **k),
                     lambda **k: TF.binary_cross_entropy_with_logits(torch.tensor([0.2, 0.7]),
                                                                     torch.tensor([0.2, 0.7]),
                                                                     **k))):
        with pytest.raises(nr.GradientError, match="not differentiable with respect to weight"):
            fn(weight=w)
        with pytest.raises(RuntimeError, match="not differentiable"):
            tfn(weight=torch.ones(2, requires_grad=True))
    with pytest.raises(nr.GradientError, match="pos_weight"):
        F.binary_cross_entropy_with_logits(x, x, pos_weight=w)
    with nr.no_grad():
        F.binary_cross_entropy_with_logits(x, x, pos_weight=w)        # fine without recording


@pytest.mark.parametrize("reduction", RED)
def test_cross_entropy_probability_targets_with_weight_and_smoothing(device, reduction):
    r = _rng(9)
    logits = r.normal(size=(4, 3, 2))                       # (N, C, d1)
    p = r.dirichlet(np.ones(3), size=(4, 2)).transpose(0, 2, 1)
    w = np.array([0.5, 2.0, 1.0])
    for ls in (0.0, 0.2):
        _check(device, lambda a, b, c: F.cross_entropy(a, b, c, reduction=reduction,
                                                       label_smoothing=ls),
               lambda a, b, c: TF.cross_entropy(a, b, c, reduction=reduction,
                                                label_smoothing=ls),
               # the logits' gradient w softmax sum(t) - w t cancels terms ~1 into values ~0.02:
               # a few ulp of the terms are 16 of the result
               [logits, np.ascontiguousarray(p), w], grad=(0, 1), max_ulps=16,
               what=f"soft targets smoothing={ls}")
