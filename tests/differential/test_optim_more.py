"""Adadelta, Adagrad, RMSprop, Adamax, NAdam, RAdam and LBFGS against torch.optim on the same
gradients (float64 on cpu: to a few ulp; float32 on webgpu), and the schedulers ConstantLR,
MultiplicativeLR, PolynomialLR, CosineAnnealingWarmRestarts, OneCycleLR, ReduceLROnPlateau and
SequentialLR against torch.optim.lr_scheduler."""
import numpy as np
import pytest
import torch

import numr_web as nr
from numr_web import nn

from helpers import fdtype

SHAPES = [(3, 4), (4,)]
STEPS = 6


def _grads(seed):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s) for s in SHAPES] for _ in range(STEPS)]


def _tol(device):
    return dict(rtol=1e-12, atol=1e-14) if fdtype(device) is nr.float64 else \
        dict(rtol=2e-5, atol=2e-6)


CONFIGS = [
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1, maximize=True)),
    ("Adagrad", dict()),
    ("Adagrad", dict(lr=0.05, lr_decay=0.1, weight_decay=0.1, initial_accumulator_value=0.3)),
    ("RMSprop", dict()),
    ("RMSprop", dict(lr=0.01, alpha=0.9, momentum=0.9, centered=True, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, maximize=True)),
    ("Adamax", dict()),
    ("Adamax", dict(lr=0.01, betas=(0.5, 0.9), weight_decay=0.1)),
    ("NAdam", dict()),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict()),
    ("RAdam", dict(lr=0.01, weight_decay=0.1)),
    ("RAdam", dict(lr=0.01, betas=(0.9, 0.5), weight_decay=0.1, decoupled_weight_decay=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),   # = AdamW
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
]


@pytest.mark.parametrize("name, kw", CONFIGS, ids=[f"{n}-{i}" for i, (n, _) in
                                                   enumerate(CONFIGS)])
def test_optimizers_match_torch(device, name, kw):
    dtype = fdtype(device)
    np_dtype = np.float64 if dtype is nr.float64 else np.float32
    init, grads = _grads(7)[0], _grads(8)
    ps = [nn.Parameter(nr.tensor(x.astype(np_dtype), device=device)) for x in init]
    tps = [torch.tensor(x.astype(np_dtype), requires_grad=True) for x in init]
    groups = lambda q: [{"params": [q[0]]}, {"params": [q[1]], "lr": 0.05}]  # noqa: E731
    opt, topt = getattr(nn.optim, name)(groups(ps), **kw), getattr(torch.optim, name)(groups(tps),
                                                                                     **kw)
    for step, gs in enumerate(grads):
        for p, tp, g in zip(ps, tps, gs):
            p.grad = nr.tensor(g.astype(np_dtype), device=device)
            tp.grad = torch.tensor(g.astype(np_dtype))
        opt.step()
        topt.step()
        for p, tp in zip(ps, tps):
            np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), err_msg=f"step {step + 1}",
                                       **_tol(device))
    assert set(opt.state_dict()["state"][0]) <= set(topt.state_dict()["state"][0]) | {"step"}


@pytest.mark.parametrize("name, kw, match", [
    ("Adadelta", dict(rho=1.5), "rho"), ("Adagrad", dict(lr_decay=-1), "lr_decay"),
    ("RMSprop", dict(alpha=-0.1), "alpha"), ("Adamax", dict(betas=(1.0, 0.9)), "beta"),
    ("NAdam", dict(momentum_decay=-1), "momentum_decay"), ("RAdam", dict(eps=-1), "epsilon"),
])
def test_invalid_hyperparameters_raise_value_errors_as_torch(name, kw, match):
    with pytest.raises(ValueError):
        getattr(torch.optim, name)([torch.zeros(1, requires_grad=True)], **kw)
    with pytest.raises(nr.ShapeError, match=match):
        getattr(nn.optim, name)([nn.Parameter(nr.zeros(1))], **kw)


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs_matches_torch(device, line_search):
    """A convex quadratic 0.5 x'Ax - b'x, three steps of up to 4 iterations each."""
    dtype = fdtype(device)
    np_dtype = np.float64 if dtype is nr.float64 else np.float32
    rng = np.random.default_rng(0)
    m = rng.standard_normal((6, 6))
    a, b, x0 = (m @ m.T + np.eye(6)).astype(np_dtype), rng.standard_normal(6).astype(np_dtype), \
        rng.standard_normal(6).astype(np_dtype)
    p, tp = nn.Parameter(nr.tensor(x0, device=device)), torch.tensor(x0, requires_grad=True)
    na, nb = nr.tensor(a, device=device), nr.tensor(b, device=device)
    ta, tb = torch.tensor(a), torch.tensor(b)
    opt = nn.optim.LBFGS([p], lr=0.5, max_iter=4, history_size=3, line_search_fn=line_search)
    topt = torch.optim.LBFGS([tp], lr=0.5, max_iter=4, history_size=3,
                             line_search_fn=line_search)

    def closure():
        opt.zero_grad()
        loss = 0.5 * (p * (na * p).sum(1)).sum() - (nb * p).sum()
        loss.backward()
        return loss

    def tclosure():
        topt.zero_grad()
        loss = 0.5 * (tp * (ta * tp).sum(1)).sum() - (tb * tp).sum()
        loss.backward()
        return loss

    t = dict(rtol=1e-12, atol=1e-12) if dtype is nr.float64 else dict(rtol=1e-5, atol=1e-5)
    for step in range(3):
        loss, tloss = opt.step(closure), topt.step(tclosure)
        np.testing.assert_allclose(loss.item(), tloss.item(), err_msg=f"step {step}", **t)
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), err_msg=f"step {step}", **t)
        assert opt.state[p]["func_evals"] == topt.state[tp]["func_evals"]
        assert opt.state[p]["n_iter"] == topt.state[tp]["n_iter"]


def test_lbfgs_argument_errors():
    p = nn.Parameter(nr.zeros(2))
    with pytest.raises(nr.ShapeError):
        nn.optim.LBFGS([p], line_search_fn="armijo")
    with pytest.raises(nr.NumrError):
        nn.optim.LBFGS([{"params": [p]}, {"params": [nn.Parameter(nr.zeros(1))]}])
    with pytest.raises(TypeError):                 # as torch's: the closure is required
        nn.optim.LBFGS([p]).step()


def test_custom_optimizer_written_for_torch_runs():
    """A torch-style optimizer subclass: its own step() reading self.state[p] (a defaultdict,
    as torch's) and writing parameters in place."""
    class SignSGD(nn.optim.Optimizer):
        def __init__(self, params, lr=0.1):
            super().__init__(params, dict(lr=lr))

        def step(self, closure=None):
            with nr.no_grad():
                for group in self.param_groups:
                    for p in group["params"]:
                        state = self.state[p]
                        state["n"] = state.get("n", 0) + 1
                        p.add_(p.grad.sign(), alpha=-group["lr"])

    p = nn.Parameter(nr.tensor([1.0, -1.0]))
    p.grad = nr.tensor([3.0, -0.5])
    opt = SignSGD([p])
    opt.step()
    assert p.tolist() == pytest.approx([0.9, -0.9], rel=1e-7) and opt.state[p]["n"] == 1


# -- schedulers ------------------------------------------------------------------------------------
def _opt(lib, name="SGD"):
    P = (lambda v: nn.Parameter(nr.tensor(v))) if lib is nn.optim else \
        (lambda v: torch.tensor(v, requires_grad=True))
    kw = dict(momentum=0.9) if name == "SGD" else {}
    return getattr(lib, name)([{"params": [P([1.0])]}, {"params": [P([2.0])], "lr": 0.05}],
                              lr=0.1, **kw)


SCHEDULES = [
    ("ConstantLR", dict(factor=0.5, total_iters=3), "SGD"),
    ("MultiplicativeLR", dict(lr_lambda=lambda e: 0.9), "SGD"),
    ("PolynomialLR", dict(total_iters=6, power=2.0), "SGD"),
    ("CosineAnnealingWarmRestarts", dict(T_0=3, T_mult=2, eta_min=0.01), "SGD"),
    ("OneCycleLR", dict(max_lr=1.0, total_steps=12), "SGD"),
    ("OneCycleLR", dict(max_lr=[1.0, 0.5], total_steps=12, three_phase=True,
                        anneal_strategy="linear"), "Adam"),
]


@pytest.mark.parametrize("name, kw, opt", SCHEDULES, ids=[f"{n}-{i}" for i, (n, _, _) in
                                                          enumerate(SCHEDULES)])
def test_schedulers_match_torch(name, kw, opt):
    o, to = _opt(nn.optim, opt), _opt(torch.optim, opt)
    s = getattr(nn.optim, name)(o, **kw)
    ts = getattr(torch.optim.lr_scheduler, name)(to, **kw)
    for _ in range(11):
        o.step()
        to.step()
        s.step()
        ts.step()
        np.testing.assert_allclose(s.get_last_lr(), ts.get_last_lr(), rtol=1e-14)
        for g, tg in zip(o.param_groups, to.param_groups):
            key = "momentum" if opt == "SGD" else "betas"
            np.testing.assert_allclose(np.ravel(g[key]), np.ravel(tg[key]), rtol=1e-14)


def test_reduce_lr_on_plateau_matches_torch():
    o, to = _opt(nn.optim), _opt(torch.optim)
    for kw in (dict(patience=2, cooldown=1, factor=0.5),
               dict(mode="max", threshold_mode="abs", threshold=0.1, patience=0, min_lr=0.01)):
        s = nn.optim.ReduceLROnPlateau(o, **kw)
        ts = torch.optim.lr_scheduler.ReduceLROnPlateau(to, **kw)
        for metric in [5, 4, 4, 4, 4, 4, 3, 3, 3, 3.05, 3, 3, 2]:
            s.step(metric)
            ts.step(metric)
            assert s.get_last_lr() == ts.get_last_lr()
    with pytest.raises(nr.ShapeError):
        nn.optim.ReduceLROnPlateau(o, factor=1.0)


def test_sequential_lr_matches_torch():
    o, to = _opt(nn.optim), _opt(torch.optim)
    s = nn.optim.SequentialLR(o, [nn.optim.LinearLR(o, 0.1, total_iters=3),
                                  nn.optim.ExponentialLR(o, 0.9)], [3])
    ts = torch.optim.lr_scheduler.SequentialLR(
        to, [torch.optim.lr_scheduler.LinearLR(to, 0.1, total_iters=3),
             torch.optim.lr_scheduler.ExponentialLR(to, 0.9)], [3])
    for _ in range(8):
        o.step()
        to.step()
        s.step()
        ts.step()
        np.testing.assert_allclose(s.get_last_lr(), ts.get_last_lr(), rtol=1e-14)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adadelta", "Adagrad", "RMSprop",
                                  "Adamax", "NAdam", "RAdam"])
def test_torchs_implementation_options(name):
    """foreach= / fused= pick an implementation in torch (same values): accepted;
    differentiable=True (autograd through the step) is not supported."""
    p = [nn.Parameter(nr.ones(2))]
    kw = dict(fused=False) if name in ("SGD", "Adam", "AdamW", "Adagrad") else {}
    getattr(nn.optim, name)(p, lr=0.1, foreach=False, **kw)
    getattr(torch.optim, name)([torch.ones(2, requires_grad=True)], lr=0.1, foreach=False, **kw)
    with pytest.raises(nr.UnsupportedError, match="differentiable"):
        getattr(nn.optim, name)(p, lr=0.1, differentiable=True)
    p[0].grad = nr.ones(2)
    nn.utils.clip_grad_norm_(p, 1.0, foreach=True)
