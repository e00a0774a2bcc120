"""nn.optim against torch.optim on the same gradients (float64 on cpu: tight tolerance), plus the
schedules and the no-readback property of a training step."""
import math

import numpy as np
import pytest

import numr_web as nr
from numr_web import nn

from helpers import fdtype, tol

SHAPES = [(3, 4), (4,)]
STEPS = 4


def _grads(seed):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s) for s in SHAPES] for _ in range(STEPS)]


def _run_ours(make_opt, device, init, grads, groups=False):
    dtype = fdtype(device)
    ps = [nn.Parameter(nr.tensor(x, dtype=dtype, device=device)) for x in init]
    opt = make_opt([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.05}] if groups else ps)
    out = []
    for gs in grads:
        for p, g in zip(ps, gs):
            p.grad = nr.tensor(g, dtype=dtype, device=device)
        opt.step()
        out.append([p.numpy().astype(np.float64) for p in ps])
    return out, opt


def _run_torch(make_opt, init, grads, groups=False):
    import torch
    ps = [torch.tensor(x, requires_grad=True) for x in init]
    opt = make_opt([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.05}] if groups else ps)
    out = []
    for gs in grads:
        for p, g in zip(ps, gs):
            p.grad = torch.tensor(g)
        opt.step()
        out.append([p.detach().numpy().copy() for p in ps])
    return out


CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.5, dampening=0.3, weight_decay=0.1)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, betas=(0.3, 0.8), weight_decay=0.1, amsgrad=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1, amsgrad=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, capturable=True)),      # the step count on the device
    ("AdamW", dict(lr=0.01, amsgrad=True, capturable=True)),
]


@pytest.mark.parametrize("name,kw", CONFIGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CONFIGS)])
def test_matches_torch(device, name, kw):
    import torch
    init = [g for g in _grads(7)[0]]
    grads = _grads(8)
    groups = True                                  # the second group overrides lr
    ours, _ = _run_ours(lambda p: getattr(nn.optim, name)(p, **kw), device, init, grads, groups)
    tkw = {k: v for k, v in kw.items() if k != "capturable"}    # torch's needs CUDA parameters
    ref = _run_torch(lambda p: getattr(torch.optim, name)(p, **tkw), init, grads, groups)
    t = dict(rtol=1e-12, atol=1e-14) if fdtype(device) == nr.float64 else dict(rtol=1e-5, atol=1e-6)
    for step, (a, b) in enumerate(zip(ours, ref)):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, err_msg=f"step {step + 1}", **t)


def test_closed_forms_without_torch():
    p = nn.Parameter(nr.tensor([1.0, -2.0], dtype="float64"))
    p.grad = nr.tensor([0.5, -4.0], dtype="float64")
    nn.SGD([p], lr=0.1).step()
    np.testing.assert_allclose(p.numpy(), [0.95, -1.6], rtol=1e-15)
    opt = nn.Adam([p], lr=0.1, eps=0.0)               # step 1: m_hat = g, v_hat = g^2
    opt.step()
    np.testing.assert_allclose(p.numpy(), [0.85, -1.5], rtol=1e-14)
    q = nn.Parameter(nr.tensor([2.0], dtype="float64"))
    q.grad = nr.zeros(1, dtype="float64")
    nn.AdamW([q], lr=0.1, weight_decay=0.5).step()    # zero gradient: decay only
    np.testing.assert_allclose(q.numpy(), [2.0 * 0.95], rtol=1e-15)


def test_state_dict_resumes_exactly():
    init, grads = _grads(1)[0], _grads(2)
    full, _ = _run_ours(lambda p: nn.optim.AdamW(p, lr=0.01, amsgrad=True), "cpu", init, grads)
    half, opt = _run_ours(lambda p: nn.optim.AdamW(p, lr=0.01, amsgrad=True), "cpu", init,
                          grads[:2])
    sd = opt.state_dict()
    assert sd["param_groups"][0]["params"] == [0, 1] and sd["state"][0]["step"] == 2
    ps = [nn.Parameter(nr.tensor(x, dtype="float64")) for x in half[-1]]
    opt2 = nn.optim.AdamW(ps, lr=0.5)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == 0.01
    for gs in grads[2:]:
        for p, g in zip(ps, gs):
            p.grad = nr.tensor(g, dtype="float64")
        opt2.step()
    for x, y in zip(ps, full[-1]):
        np.testing.assert_array_equal(x.numpy(), y)


def test_optimizer_errors_and_zero_grad():
    p = nn.Parameter(nr.ones(2))
    with pytest.raises(nr.NumrError, match="empty"):
        nn.Adam([])
    with pytest.raises(nr.NumrError, match="non-leaf"):
        nn.SGD([p * 2], lr=0.1)
    with pytest.raises(nr.NumrError, match="more than once"):
        nn.SGD([p, p], lr=0.1)
    with pytest.raises(nr.NumrError, match="Nesterov"):
        nn.SGD([p], lr=0.1, nesterov=True)
    opt = nn.SGD([p], lr=0.1)
    p.grad = nr.ones(2)
    opt.zero_grad(set_to_none=False)
    assert p.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None
    assert opt.step(lambda: 7) == 7


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf, 3.0])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clip_grad_norm_matches_torch(device, norm_type, max_norm):
    import torch
    gs = _grads(3)[0]
    dtype = fdtype(device)
    ps = [nn.Parameter(nr.zeros(g.shape, dtype=dtype, device=device)) for g in gs]
    tp = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in gs]
    for p, q, g in zip(ps, tp, gs):
        p.grad, q.grad = nr.tensor(g, dtype=dtype, device=device), torch.tensor(g)
    total = nn.clip_grad_norm_(ps, max_norm, norm_type)
    ref = torch.nn.utils.clip_grad_norm_(tp, max_norm, norm_type)
    assert isinstance(total, nr.Tensor) and total.shape == ()
    np.testing.assert_allclose(total.item(), ref.item(), **tol(device))
    for p, q in zip(ps, tp):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), **tol(device))


def test_schedules():
    import torch
    p = nn.Parameter(nr.ones(1))
    opt = nn.SGD([{"params": [p]}, {"params": [nn.Parameter(nr.ones(1))], "lr": 0.2}], lr=1.0)
    sched = nn.optim.CosineWithWarmup(opt, warmup_steps=4, total_steps=12, min_lr=0.1)
    got = []
    for _ in range(15):
        got.append(sched.get_last_lr())
        opt.step()
        sched.step()
    for s, (lr0, lr1) in enumerate(got):
        for base, lr in [(1.0, lr0), (0.2, lr1)]:
            want = base * (s + 1) / 4 if s < 4 else \
                0.1 + (base - 0.1) * 0.5 * (1 + math.cos(math.pi * min(1.0, (s - 4) / 8)))
            assert lr == pytest.approx(want, rel=1e-15)
    assert got[3] == [1.0, 0.2] and got[12][0] == pytest.approx(0.1)
    assert opt.param_groups[1]["lr"] == sched.get_last_lr()[1]
    f = lambda s: 0.5 ** s  # noqa: E731
    ours = nn.optim.LambdaLR(nn.SGD([p], lr=0.3), f)
    tp = torch.zeros(1, requires_grad=True)
    ref = torch.optim.lr_scheduler.LambdaLR(torch.optim.SGD([tp], lr=0.3), f)
    for _ in range(4):
        assert ours.get_last_lr() == ref.get_last_lr()
        ours.optimizer.step(), ref.optimizer.step()
        ours.step(), ref.step()


def test_a_training_step_reads_nothing_back(device, monkeypatch):
    """opt.step(), clip_grad_norm_ and the schedule queue device work only (a GPU never waits)."""
    model = nn.MLP([8, 16, 4], activation="gelu", device=device)
    opt = nn.optim.AdamW(model.parameters(), lr=1e-2)
    sched = nn.optim.CosineWithWarmup(opt, 2, 10)
    x, y = nr.randn((5, 8), seed=0, device=device), nr.tensor([0, 1, 2, 3, 0], device=device)
    be = nr.get_backend(device)
    for _ in range(2):
        loss = nr.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        with monkeypatch.context() as mp:
            for name in ("to_bytes", "to_numpy", "to_list"):
                mp.setattr(be, name, lambda *a, **k: pytest.fail("read back during a step"))
            nn.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
    assert np.isfinite(loss.item())
