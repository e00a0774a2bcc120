"""The one-pass Adam / AdamW update (a backend primitive where the device has it: webgpu, cuda)
against the update written here in float64: within a few float32 roundings of the terms' size.
(capturable=True computes the bias corrections in float32 on the device, as torch does; its
cancellation in 1 - beta2^t is test_optim's torch comparison's business.)"""
import numpy as np
import pytest

import numr_web as nr
from numr_web import nn


def _reference(p, grads, lr, b1, b2, eps, wd, decoupled):
    """torch.optim.Adam / AdamW's update in float64: (p, m, v), and the same recursions on the
    terms' magnitudes (no cancellation), which bound the rounding error of a float32 run."""
    p = p.astype(np.float64)
    m, v = np.zeros_like(p), np.zeros_like(p)
    pa, ma, va = np.abs(p), np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, 1):
        g = g.astype(np.float64)
        ga = np.abs(g)
        if decoupled:
            p, pa = p * (1 - lr * wd), pa * (1 - lr * wd)
        elif wd:
            g, ga = g + p * wd, ga + pa * wd
        m, ma = b1 * m + (1 - b1) * g, b1 * ma + (1 - b1) * ga
        v, va = b2 * v + (1 - b2) * g * g, b2 * va + (1 - b2) * ga * ga
        den = np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps
        p = p - lr / (1 - b1 ** t) * m / den
        pa = pa + lr / (1 - b1 ** t) * ma / den
    return (p, m, v), (pa, ma, va)


@pytest.mark.parametrize("name, kw", [
    ("AdamW", dict(weight_decay=0.1)),
    ("Adam", dict(weight_decay=0.01)),
    ("Adam", dict()),
    ("AdamW", dict(betas=(0.3, 0.99), weight_decay=0.0)),     # torch.lerp's second form
])
def test_adam_step_matches_float64(device, name, kw):
    if nr.get_backend(device).dtype_of(nr.ones(1, device=device)._data) is not nr.float32:
        pytest.skip("float32 only")
    rng = np.random.default_rng(0)
    shape, steps, lr = (257, 33), 5, 0.01
    p0 = rng.normal(size=shape).astype(np.float32)
    grads = [rng.normal(size=shape).astype(np.float32) for _ in range(steps)]
    p = nn.Parameter(nr.tensor(p0, device=device))
    opt = getattr(nn.optim, name)([p], lr=lr, **kw)
    for g in grads:
        p.grad = nr.tensor(g, device=device)
        opt.step()
    b1, b2 = kw.get("betas", (0.9, 0.999))
    wd = kw.get("weight_decay", 0.01 if name == "AdamW" else 0.0)
    want, size = _reference(p0, grads, lr, b1, b2, 1e-8, wd, name == "AdamW")
    st = opt.state[p]
    got = (p.numpy(), st["exp_avg"].numpy(), st["exp_avg_sq"].numpy())
    u = 2.0 ** -24                                   # float32's unit roundoff
    for what, g, w, a in zip(("p", "m", "v"), got, want, size):
        # each step rounds a handful of float32 operations, each within u of its terms' size
        err = np.abs(g.astype(np.float64) - w) / (u * a)
        assert err.max() <= 2 * steps, f"{what}: {err.max():.1f} u"


def _sgd_float32(p, grads, lr, momentum, dampening, nesterov, wd, maximize):
    """torch.optim.SGD's update in float32 numpy, each operation rounded on its own (the composed
    form's order): (p, momentum buffer)."""
    f32, buf = np.float32, None
    for g in grads:
        if maximize:
            g = -g
        if wd:
            g = g + p * f32(wd)
        if momentum:
            buf = g.copy() if buf is None else \
                buf * f32(momentum) + (g * f32(1 - dampening) if dampening else g)
            g = g + buf * f32(momentum) if nesterov else buf
        p = p - g * f32(lr)
    return p, buf


@pytest.mark.parametrize("kw", [
    dict(), dict(momentum=0.9), dict(momentum=0.9, dampening=0.3, weight_decay=0.01),
    dict(momentum=0.8, nesterov=True, weight_decay=0.05), dict(weight_decay=0.1, maximize=True),
    dict(momentum=0.5, maximize=True)])
def test_sgd_step_matches_the_composed_update(device, kw):
    """SGD in one pass (a backend primitive: numpy's ops on cpu, a kernel on cuda and webgpu):
    the float32 composed update's bits (WGSL may contract a product and a sum into one rounding:
    there within a rounding of the terms' size a step), over five steps; the momentum buffer too."""
    if nr.get_backend(device).dtype_of(nr.ones(1, device=device)._data) is not nr.float32:
        pytest.skip("float32 only")
    rng = np.random.default_rng(1)
    shape, steps, lr = (257, 33), 5, 0.05
    p0 = rng.normal(size=shape).astype(np.float32)
    grads = [rng.normal(size=shape).astype(np.float32) for _ in range(steps)]
    p = nn.Parameter(nr.tensor(p0, device=device))
    opt = nn.optim.SGD([p], lr=lr, **kw)
    for g in grads:
        p.grad = nr.tensor(g, device=device)
        opt.step()
    want_p, want_b = _sgd_float32(p0, grads, lr, kw.get("momentum", 0.0), kw.get("dampening", 0.0),
                                  kw.get("nesterov", False), kw.get("weight_decay", 0.0),
                                  kw.get("maximize", False))
    buf = opt.state[p].get("momentum_buffer")
    assert (buf is None) == (want_b is None)
    for what, got, want in (("p", p.numpy(), want_p), ("buf", None if buf is None else
                                                       buf.numpy(), want_b)):
        if want is None:
            continue
        if device == "webgpu":
            size = np.abs(want) + lr * steps * 10        # |p| and the updates' terms
            assert (np.abs(got - want) <= steps * 2.0 ** -24 * size).all(), what
        else:
            np.testing.assert_array_equal(got, want, err_msg=what)


def _parameter_set(rng, count, steps):
    """count float32 parameters of assorted shapes (one empty), and each one's gradients: None
    on some steps (a parameter without a gradient is not updated, and its step count lags)."""
    shapes = [(7, 5), (3,), (1,), (0, 4), (65,), (2, 3, 4)]
    p0 = [rng.normal(size=shapes[i % len(shapes)]).astype(np.float32) for i in range(count)]
    grads = [[None if (i + t) % 4 == 0 else rng.normal(size=p.shape).astype(np.float32)
              for t in range(steps)] for i, p in enumerate(p0)]
    return p0, grads


def test_adam_over_many_parameters_matches_each_ones_update(device):
    """AdamW over 53 parameters (more than one cuda list launch takes), whose step counts differ
    (some steps leave a parameter without a gradient): each parameter ends where its own
    sequence of updates takes it, as in test_adam_step_matches_float64."""
    if nr.get_backend(device).dtype_of(nr.ones(1, device=device)._data) is not nr.float32:
        pytest.skip("float32 only")
    rng = np.random.default_rng(3)
    steps, lr, wd = 4, 0.01, 0.1
    p0, grads = _parameter_set(rng, 53, steps)
    ps = _run(nn.optim.AdamW, p0, grads, device, lr=lr, weight_decay=wd)
    u = 2.0 ** -24
    for (p, st), a0, gs in zip(ps, p0, grads):
        given = [g for g in gs if g is not None]
        want, size = _reference(a0, given, lr, 0.9, 0.999, 1e-8, wd, True)
        assert st["step"] == len(given)
        for what, g, w, a in zip(("p", "m", "v"), (p.numpy(), st["exp_avg"].numpy(),
                                                   st["exp_avg_sq"].numpy()), want, size):
            err = np.abs(g.astype(np.float64) - w) / (u * np.maximum(a, 1e-30))
            assert err.max(initial=0) <= 2 * len(given), (what, p.shape)


def test_capturable_adam_over_many_parameters_as_one_by_one(device):
    """The step counts on the device (one per parameter, differing): the parameters updated
    together are the bits of each updated by an optimizer of its own (whose float32 bias
    corrections test_optim compares with torch's)."""
    rng = np.random.default_rng(5)
    p0, grads = _parameter_set(rng, 53, 4)
    together = _run(nn.optim.AdamW, p0, grads, device, lr=0.01, capturable=True)
    for (p, st), a0, gs in zip(together, p0, grads):
        (q, sq), = _run(nn.optim.AdamW, [a0], [gs], device, lr=0.01, capturable=True)
        for a, b in ((p, q), (st["exp_avg"], sq["exp_avg"]), (st["exp_avg_sq"], sq["exp_avg_sq"]),
                     (st["step"], sq["step"])):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def _run(opt_class, p0, grads, device, **kw):
    """[(parameter, its optimizer state)] after len(grads[0]) steps of one optimizer over them."""
    ps = [nn.Parameter(nr.tensor(p, device=device)) for p in p0]
    opt = opt_class(ps, **kw)
    for t in range(len(grads[0])):
        for p, gs in zip(ps, grads):
            p.grad = None if gs[t] is None else nr.tensor(gs[t], device=device)
        opt.step()
    return [(p, opt.state[p]) for p in ps]


def test_sgd_over_many_parameters_matches_each_ones_update(device):
    if nr.get_backend(device).dtype_of(nr.ones(1, device=device)._data) is not nr.float32:
        pytest.skip("float32 only")
    rng = np.random.default_rng(4)
    steps, lr = 4, 0.05
    p0, grads = _parameter_set(rng, 53, steps)
    ps = _run(nn.optim.SGD, p0, grads, device, lr=lr, momentum=0.9, weight_decay=0.01)
    for (p, st), a0, gs in zip(ps, p0, grads):
        want_p, want_b = _sgd_float32(a0, [g for g in gs if g is not None], lr, 0.9, 0.0, False,
                                      0.01, False)
        got_p, got_b = p.numpy(), st["momentum_buffer"].numpy()
        if device == "webgpu":
            for got, want in ((got_p, want_p), (got_b, want_b)):
                size = np.abs(want) + lr * steps * 10
                assert (np.abs(got - want) <= steps * 2.0 ** -24 * size).all()
        else:
            np.testing.assert_array_equal(got_p, want_p)
            np.testing.assert_array_equal(got_b, want_b)
