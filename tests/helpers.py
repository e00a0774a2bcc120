"""tinygrad-style helper: one function checks an op's forward against a numpy reference and its
gradients against central finite differences (float64 on cpu) or against the cpu backend's float64
gradients (other devices, at float32 tolerances)."""
import numpy as np

import numr_web as nr



def _fd_grad(fn, xs, i, g_out, eps=1e-6):
    """Central finite differences of sum(fn(*xs) * g_out) w.r.t. xs[i], in float64 on cpu."""
    x = xs[i]
    grad = np.zeros_like(x)
    flat = x.reshape(-1)
    for k in range(flat.size):
        old = flat[k]
        vals = []
        for h in (eps, -eps):
            flat[k] = old + h
            ts = [nr.tensor(v, dtype="float64") for v in xs]
            vals.append(float((np.asarray(fn(*ts).numpy(), dtype=np.float64) * g_out).sum()))
        flat[k] = old
        grad.reshape(-1)[k] = (vals[0] - vals[1]) / (2 * eps)
    return grad


def analytic_grads(fn, xs, g_out, device, dtype, int_args=()):
    ts = [nr.tensor(x, dtype=dtype, device=device, requires_grad=True) for x in xs]
    out = fn(*ts)
    out.backward(nr.tensor(g_out, dtype=out.dtype, device=device))
    return out, [t.grad.numpy().astype(np.float64) if t.grad is not None else None for t in ts]


def check_op(device, fn, ref, xs, grad=True, fd_eps=1e-6, grad_tol=None, fwd_tol=None):
    """fn: numr function of tensors; ref: numpy function of float64 arrays; xs: float64 arrays."""
    xs = [np.asarray(x, dtype=np.float64) for x in xs]
    expected = np.asarray(ref(*[x.copy() for x in xs]), dtype=np.float64)
    dtype = fdtype(device)
    t = fwd_tol or tol(device)
    ts = [nr.tensor(x, dtype=dtype, device=device) for x in xs]
    out = fn(*ts)
    assert out.shape == expected.shape, (out.shape, expected.shape)
    np.testing.assert_allclose(np.asarray(out.numpy(), dtype=np.float64), expected, **t)
    if not grad:
        return
    g_out = np.random.default_rng(1).standard_normal(expected.shape)
    _, grads = analytic_grads(fn, xs, g_out, device, dtype)
    if device == "cpu":
        want = [_fd_grad(fn, [x.copy() for x in xs], i, g_out, fd_eps) for i in range(len(xs))]
        gt = grad_tol or dict(rtol=1e-5, atol=1e-6)
    else:
        _, want = analytic_grads(fn, xs, g_out, "cpu", nr.float64)
        gt = grad_tol or dict(rtol=2e-3, atol=2e-4)
    for i, (g, w) in enumerate(zip(grads, want)):
        assert g is not None, f"input {i} got no gradient"
        np.testing.assert_allclose(g, w, err_msg=f"gradient of input {i}", **gt)


def fdtype(device):
    """Highest float precision the device supports (float64 on cpu/cuda, float32 on webgpu)."""
    return nr.float64 if device in ("cpu", "cuda") else nr.float32


def tol(device):
    return dict(rtol=1e-9, atol=1e-10) if device in ("cpu", "cuda") else dict(rtol=2e-4, atol=2e-5)
