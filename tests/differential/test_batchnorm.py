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
