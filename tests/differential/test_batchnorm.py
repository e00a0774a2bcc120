"""BatchNorm1d / BatchNorm2d / F.batch_norm against torch: training steps (output, gradients,
running statistics, num_batches_tracked), eval, momentum=None, affine=False,
track_running_stats=False, state_dict keys, repr and argument errors."""
import inspect

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import numr_web as nr
from numr_web import nn
from numr_web.nn import functional as F

TORCH_HAS_BIAS = "bias" in inspect.signature(torch.nn.BatchNorm1d.__init__).parameters
CASES = [
    ("BatchNorm2d", (4, 3, 5, 6), {}),
    ("BatchNorm2d", (2, 3, 4, 4), {"momentum": None}),
    ("BatchNorm2d", (2, 3, 4, 4), {"affine": False, "eps": 1e-3}),
    ("BatchNorm2d", (2, 3, 4, 4), {"track_running_stats": False}),
    ("BatchNorm1d", (8, 3), {"momentum": 0.3}),
    ("BatchNorm1d", (4, 3, 7), {"bias": False}),
]


@pytest.mark.parametrize("name,shape,kw", CASES, ids=[f"{c[0]}{c[2]}" for c in CASES])
def test_batchnorm_matches_torch(device, name, shape, kw):
    if "bias" in kw and not TORCH_HAS_BIAS:
        pytest.skip(f"torch {torch.__version__}'s BatchNorm has no bias= (torch >= 2.13 has it)")
    ours = getattr(nn, name)(3, device=device, **kw)
    ref = getattr(torch.nn, name)(3, **kw).double()
    want = repr(ref)
    if not TORCH_HAS_BIAS:              # torch >= 2.13's repr, which names bias after affine
        bias = kw.get("affine", True) and kw.get("bias", True)
        want = want.replace(", track_running_stats", f", bias={bias}, track_running_stats")
    assert repr(ours) == want
    assert list(ours.state_dict()) == list(ref.state_dict())
    r = np.random.default_rng(0)
    if ours.affine:
        w, b = r.uniform(0.5, 2, 3), r.normal(size=3)
        ours.load_state_dict({"weight": w.astype(np.float32), "bias": b.astype(np.float32)},
                             strict=False)
        with torch.no_grad():
            ref.weight.copy_(torch.tensor(w.astype(np.float32), dtype=torch.float64))
            if ref.bias is not None:
                ref.bias.copy_(torch.tensor(b.astype(np.float32), dtype=torch.float64))
    tol = dict(rtol=3e-5, atol=3e-6)
    for step in range(4):
        training = step < 3
        ours.train(training)
        ref.train(training)
        a = (r.normal(size=shape) * 2 + 1).astype(np.float32)
        x = nr.tensor(a, device=device, requires_grad=True)
        t = torch.tensor(a, dtype=torch.float64, requires_grad=True)
        y, yt = ours(x), ref(t)
        g = r.normal(size=shape).astype(np.float32)
        (y * nr.tensor(g, device=device)).sum().backward()
        (yt * torch.tensor(g, dtype=torch.float64)).sum().backward()
        np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), **tol)
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), **tol)
        if ours.affine:
            np.testing.assert_allclose(ours.weight.grad.numpy(), ref.weight.grad.numpy(), **tol)
            ours.zero_grad()
            ref.zero_grad()
        for k, v in ref.state_dict().items():
            np.testing.assert_allclose(ours.state_dict()[k].numpy(), v.numpy(), **tol,
                                       err_msg=f"{k} after step {step}")


def test_functional_batch_norm_updates_the_callers_tensors(device):
    a = np.random.default_rng(1).normal(size=(5, 2, 3)).astype(np.float32)
    rm, rv = nr.zeros(2, device=device), nr.ones(2, device=device)
    trm, trv = torch.zeros(2), torch.ones(2)
    y = F.batch_norm(nr.tensor(a, device=device), rm, rv, training=True, momentum=0.2)
    yt = TF.batch_norm(torch.tensor(a), trm, trv, training=True, momentum=0.2)
    np.testing.assert_allclose(y.numpy(), yt.numpy(), rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(rm.numpy(), trm.numpy(), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(rv.numpy(), trv.numpy(), rtol=2e-6, atol=1e-7)


def test_batchnorm_errors(device):
    with pytest.raises(nr.ShapeError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3, device=device)(nr.ones((1, 3), device=device))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        torch.nn.BatchNorm1d(3)(torch.ones(1, 3))
    with pytest.raises(nr.ShapeError, match="4D"):
        nn.BatchNorm2d(3, device=device)(nr.ones((2, 3), device=device))
    with pytest.raises(nr.ShapeError, match=r"\(3,\)"):
        F.batch_norm(nr.ones((2, 3), device=device), nr.zeros(2, device=device),
                     nr.ones(2, device=device))


# -- the fused op: activations, many chunks, eval gradients, second derivatives ------------------------
def _bn_case(device, shape, act, training, seed=0, dtype="float32"):
    r = np.random.default_rng(seed)
    c = shape[1]
    a = (r.normal(size=shape) * 2 + 1).astype(np.float32)
    w, b = r.uniform(0.5, 2, c).astype(np.float32), r.normal(size=c).astype(np.float32)
    rm, rv = r.normal(size=c).astype(np.float32), r.uniform(0.5, 2, c).astype(np.float32)
    g = r.normal(size=shape).astype(np.float32)
    mk = lambda v, grad=False: nr.tensor(v, device=device, dtype=dtype, requires_grad=grad)  # noqa
    xs, ws, bs = mk(a, True), mk(w, True), mk(b, True)
    rms, rvs = mk(rm), mk(rv)
    y = F.batch_norm(xs, rms, rvs, ws, bs, training=training, momentum=0.3, activation=act)
    (y * mk(g)).sum().backward()
    t = lambda v, grad=False: torch.tensor(v, dtype=torch.float64, requires_grad=grad)  # noqa
    xt, wt, bt, trm, trv = t(a, True), t(w, True), t(b, True), t(rm), t(rv)
    yt = TF.batch_norm(xt, trm, trv, wt, bt, training=training, momentum=0.3)
    yt = {"none": lambda v: v, "relu": torch.relu, "gelu": TF.gelu, "sigmoid": torch.sigmoid,
          "tanh": torch.tanh}[act](yt)
    (yt * t(g)).sum().backward()
    return (y, xs, ws, bs, rms, rvs), (yt, xt, wt, bt, trm, trv)


@pytest.mark.parametrize("act", ["none", "relu", "gelu", "sigmoid", "tanh"])
@pytest.mark.parametrize("training", [True, False])
def test_fused_activation_matches_torch(device, act, training):
    ours, ref = _bn_case(device, (5, 3, 4, 6), act, training)
    tol = dict(rtol=2e-5, atol=2e-6)
    for o, t, what in zip(ours, ref, ("y", "x.grad", "w.grad", "b.grad", "rm", "rv")):
        if what.endswith("grad"):
            o, t = o.grad, t.grad
        np.testing.assert_allclose(o.numpy(), t.detach().numpy(), **tol, err_msg=what)


def test_many_chunks_and_a_far_mean(device):
    """10800 values per channel (several partial sums on every device) about a mean of 1000:
    the statistics lose no digits to the offset."""
    r = np.random.default_rng(5)
    a = (1000 + r.normal(size=(3, 2, 60, 60))).astype(np.float32)
    x = nr.tensor(a, device=device, requires_grad=True)
    bn = nn.BatchNorm2d(2, device=device)
    y = bn(x)
    (y * y * y).sum().backward()
    t = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    ref = torch.nn.BatchNorm2d(2).double()
    yt = ref(t)
    (yt * yt * yt).sum().backward()
    # (x - mean in float32: the errors are those of x's own rounding, ulp(1000) = 6e-5)
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=0, atol=6e-5)
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=0, atol=1e-3)
    np.testing.assert_allclose(bn.running_mean.numpy(), ref.running_mean.numpy(), rtol=2e-7)
    np.testing.assert_allclose(bn.running_var.numpy(), ref.running_var.numpy(), rtol=2e-6)


@pytest.mark.parametrize("training", [True, False])
def test_second_derivatives_match_torch(device, training):
    r = np.random.default_rng(6)
    a = r.normal(size=(4, 3, 5)).astype(np.float32)
    w = r.uniform(0.5, 2, 3).astype(np.float32)
    rm, rv = r.normal(size=3).astype(np.float32), r.uniform(0.5, 2, 3).astype(np.float32)
    x = nr.tensor(a, device=device, requires_grad=True)
    wn = nr.tensor(w, device=device, requires_grad=True)
    y = F.batch_norm(x, nr.tensor(rm, device=device), nr.tensor(rv, device=device), wn,
                     training=training, activation="gelu")
    gx, = nr.grad((y * y).sum(), [x], create_graph=True)
    (gx * gx).sum().backward()
    xt = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    wt = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    yt = TF.gelu(TF.batch_norm(xt, torch.tensor(rm).double(), torch.tensor(rv).double(), wt,
                               training=training))
    gt, = torch.autograd.grad((yt * yt).sum(), [xt], create_graph=True)
    (gt * gt).sum().backward()
    np.testing.assert_allclose(gx.numpy(), gt.detach().numpy(), rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=2e-3, atol=2e-4)
    np.testing.assert_allclose(wn.grad.numpy(), wt.grad.numpy(), rtol=2e-3, atol=2e-4)


def test_module_activation_and_one_op(device):
    bn = nn.BatchNorm2d(3, activation="relu", device=device)
    assert repr(bn).endswith("track_running_stats=True, activation='relu')")
    x = nr.tensor(np.random.default_rng(7).normal(size=(2, 3, 4, 4)).astype(np.float32),
                  device=device, requires_grad=True)
    y = bn(x)
    assert y.grad_fn.name == "NativeBatchNormBackward"
    ref = nn.BatchNorm2d(3, device=device)(x).relu()
    np.testing.assert_array_equal(y.numpy(), ref.numpy())
    assert bn.num_batches_tracked.item() == 1
    with pytest.raises(nr.UnknownActivationError):
        nn.BatchNorm2d(3, activation="swish")


def test_functional_argument_errors(device):
    x = nr.ones((4, 3), device=device)
    with pytest.raises(nr.ShapeError, match="both be None"):
        F.batch_norm(x, nr.zeros(3, device=device), None, training=True)
    with pytest.raises(ValueError, match="both be None"):
        TF.batch_norm(torch.ones(4, 3), torch.zeros(3), None, training=True)
    with pytest.raises(nr.ShapeError, match="one value"):
        F.batch_norm(x, nr.zeros(3, device=device), nr.ones(3, device=device), training=True,
                     momentum=nr.ones(2, device=device))
    with pytest.raises(nr.DTypeError, match="momentum"):
        F.batch_norm(x, None, None, training=True, momentum="0.1")


def test_captured_step_carries_the_running_statistics(device):
    """nr.capture replays a conv + batch norm + max pool step: losses, weights and running
    statistics as the eager step's (on cpu capture just calls the step)."""
    r = np.random.default_rng(8)
    x = nr.tensor(r.normal(size=(4, 2, 8, 8)).astype(np.float32), device=device)
    y = nr.tensor(r.integers(0, 3, 4).astype(np.int32), device=device)
    results = []
    for capture in (False, True):
        model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, device=device, seed=0),
                              nn.BatchNorm2d(4, device=device, activation="relu"),
                              nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(4 * 16, 3, device=device, seed=1))
        opt = nn.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            loss = nr.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        run = nr.capture(step) if capture else step
        losses = [run(x, y).item() for _ in range(4)]
        results.append((losses, model[1].running_mean.numpy(), model[1].running_var.numpy(),
                        model[0].weight.numpy(), model[1].num_batches_tracked.item()))
    (l0, m0, v0, w0, n0), (l1, m1, v1, w1, n1) = results
    np.testing.assert_allclose(l1, l0, rtol=1e-6)
    np.testing.assert_allclose(m1, m0, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(v1, v0, rtol=1e-6)
    np.testing.assert_allclose(w1, w0, rtol=1e-6, atol=1e-7)
    assert n0 == n1 == 4
