"""numr_web.nn.optim against torch.optim: the argument checks (a ValueError each, torch's
message first), per-group hyperparameters, maximize, state_dict round trips that continue
exactly, zero_grad, and the learning-rate schedulers' sequences."""
import math

import numpy as np
import pytest
import torch

import numr_web as nr
from numr_web import nn

BAD = [
    ("SGD", dict(lr=-1.0), "Invalid learning rate"),
    ("SGD", dict(lr=0.1, momentum=-0.5), "Invalid momentum value"),
    ("SGD", dict(lr=0.1, weight_decay=-1.0), "Invalid weight_decay value"),
    ("SGD", dict(lr=0.1, nesterov=True),
     "Nesterov momentum requires a momentum and zero dampening"),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.5, nesterov=True), "Nesterov momentum"),
    ("Adam", dict(lr=-1e-3), "Invalid learning rate"),
    ("Adam", dict(betas=(1.0, 0.999)), "Invalid beta parameter at index 0"),
    ("Adam", dict(betas=(0.9, -0.1)), "Invalid beta parameter at index 1"),
    ("Adam", dict(eps=-1e-8), "Invalid epsilon value"),
    ("AdamW", dict(weight_decay=-0.1), "Invalid weight_decay value"),
    ("AdamW", dict(lr=float("nan")), "Invalid learning rate"),
]


@pytest.mark.parametrize("name,kw,msg", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_argument_checks_match_torch(name, kw, msg):
    with pytest.raises(ValueError, match=msg):
        getattr(torch.optim, name)([torch.nn.Parameter(torch.ones(2))], **kw)
    with pytest.raises(nr.ShapeError, match=msg) as e:
        getattr(nn.optim, name)([nn.Parameter(nr.ones(2))], **kw)
    assert isinstance(e.value, ValueError) and "expected" in str(e.value) or "Nesterov" in msg


def _models(device, dtype):
    r = np.random.default_rng(0)
    w1, w2 = r.normal(size=(3, 4)), r.normal(size=(4,))
    ours = [nn.Parameter(nr.tensor(w, dtype=dtype, device=device)) for w in (w1, w2)]
    ref = [torch.nn.Parameter(torch.tensor(w, dtype=torch.float64)) for w in (w1, w2)]
    x = r.normal(size=(5, 3))
    return ours, ref, x


def _loss_nr(ps, x, device, dtype):
    h = (nr.tensor(x, dtype=dtype, device=device) @ ps[0]).tanh()
    return ((h * ps[1]).sum(-1) ** 2).mean()


def _loss_t(ps, x):
    h = (torch.tensor(x) @ ps[0]).tanh()
    return ((h * ps[1]).sum(-1) ** 2).mean()


OPTS = [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01), dict(lr=0.02)),
    ("SGD", dict(lr=0.05, momentum=0.5, dampening=0.1, maximize=True), dict(momentum=0.0)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, amsgrad=True), dict(lr=0.003, betas=(0.8, 0.9))),
    ("AdamW", dict(lr=0.02, maximize=True), dict(weight_decay=0.5, eps=1e-6)),
]


@pytest.mark.parametrize("name,kw,group1", OPTS, ids=[f"{o[0]}-{i}" for i, o in enumerate(OPTS)])
def test_param_groups_state_dict_and_resume_match_torch(device, name, kw, group1):
    dtype = "float32" if device == "webgpu" else "float64"
    ours, ref, x = _models(device, dtype)
    make_o = lambda ps: getattr(nn.optim, name)([{"params": [ps[0]]},        # noqa: E731
                                                 {"params": [ps[1]], **group1}], **kw)
    make_t = lambda ps: getattr(torch.optim, name)([{"params": [ps[0]]},     # noqa: E731
                                                    {"params": [ps[1]], **group1}], **kw)
    o, t = make_o(ours), make_t(ref)
    assert [g["lr"] for g in o.param_groups] == [g["lr"] for g in t.param_groups]
    for step in range(6):
        if step == 3:                              # save, rebuild, load: the run continues
            so, st = o.state_dict(), t.state_dict()
            assert [sorted(g) for g in so["param_groups"]] == \
                [sorted(k for k in g if k in so["param_groups"][0]) for g in st["param_groups"]]
            assert [g["params"] for g in so["param_groups"]] == \
                [g["params"] for g in st["param_groups"]]
            assert {k: sorted(v) for k, v in so["state"].items()} == \
                {k: sorted(v) for k, v in st["state"].items()}
            o, t = make_o(ours), make_t(ref)
            o.load_state_dict(so)
            t.load_state_dict(st)
        o.zero_grad()
        t.zero_grad()
        _loss_nr(ours, x, device, dtype).backward()
        _loss_t(ref, x).backward()
        o.step()
        t.step()
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-13)
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), **tol)


def test_zero_grad_set_to_none_false_keeps_zeros(device):
    p = nn.Parameter(nr.ones(3, device=device))
    opt = nn.optim.SGD([p], lr=0.1)
    (p * 2).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert p.grad is not None and p.grad.tolist() == [0.0, 0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None


SCHEDS = [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("MultiStepLR", dict(milestones=[2, 5, 6], gamma=0.3)),
    ("ExponentialLR", dict(gamma=0.9)),
    ("CosineAnnealingLR", dict(T_max=5, eta_min=0.01)),
    ("LinearLR", dict(start_factor=0.25, end_factor=0.9, total_iters=4)),
    ("LinearLR", dict()),
]


@pytest.mark.parametrize("name,kw", SCHEDS, ids=[f"{s[0]}-{i}" for i, s in enumerate(SCHEDS)])
def test_schedulers_match_torch(name, kw):
    o = nn.optim.SGD([{"params": [nn.Parameter(nr.ones(1))]},
                      {"params": [nn.Parameter(nr.ones(1))], "lr": 0.3}], lr=0.1)
    t = torch.optim.SGD([{"params": [torch.nn.Parameter(torch.ones(1))]},
                         {"params": [torch.nn.Parameter(torch.ones(1))], "lr": 0.3}], lr=0.1)
    so, st = getattr(nn.optim.lr_scheduler, name)(o, **kw), \
        getattr(torch.optim.lr_scheduler, name)(t, **kw)
    for _ in range(14):
        got, want = so.get_last_lr(), st.get_last_lr()
        assert [g["lr"] for g in o.param_groups] == got
        for a, b in zip(got, want):
            assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15), (name, a, b)
        o.step()
        t.step()
        so.step()
        st.step()


def test_scheduler_argument_checks():
    o = nn.optim.SGD([nn.Parameter(nr.ones(1))], lr=0.1)
    t = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    for name, kw in (("LinearLR", dict(start_factor=0.0)), ("LinearLR", dict(end_factor=1.5))):
        with pytest.raises(ValueError):
            getattr(torch.optim.lr_scheduler, name)(t, **kw)
        with pytest.raises(nr.ShapeError, match="factor"):
            getattr(nn.optim.lr_scheduler, name)(o, **kw)
    with pytest.raises(nr.ShapeError, match="step_size"):
        nn.optim.lr_scheduler.StepLR(o, step_size=0)
