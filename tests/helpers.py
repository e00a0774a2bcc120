"""tinygrad-style helper: one function checks an op's forward against an independent float64
reference (numpy closed forms written in the tests, or torch) and its gradients against central
finite differences of that same reference — never against the engine itself."""
import mpmath as mp
import numpy as np

import numr_web as nr


def fdtype(device):
    """Highest float precision the device supports (float64 on cpu/cuda, float32 on webgpu)."""
    return nr.float64 if device in ("cpu", "cuda") else nr.float32


def tol(device):
    """Forward tolerance: a few float64 ulp, or a few float32 ulp (plus accumulated rounding of
    sums and products) on webgpu."""
    return dict(rtol=1e-12, atol=1e-13) if device in ("cpu", "cuda") else dict(rtol=1e-5, atol=1e-6)


def grad_tol(device):
    """Gradients: finite differences of a float64 reference are good to ~1e-9; float32 gradients
    get at most 10x the forward's tolerance."""
    return dict(rtol=1e-7, atol=1e-8) if device in ("cpu", "cuda") else dict(rtol=1e-4, atol=1e-5)


def fd_grad(ref, xs, i, g_out, eps=1e-6):
    """Central finite differences of sum(ref(*xs) * g_out) w.r.t. xs[i], in float64."""
    x = xs[i]
    grad = np.zeros_like(x)
    flat = x.reshape(-1)
    for k in range(flat.size):
        old = flat[k]
        vals = []
        for h in (eps, -eps):
            flat[k] = old + h
            vals.append(float((np.asarray(ref(*[v.copy() for v in xs]), np.float64) * g_out).sum()))
        flat[k] = old
        grad.reshape(-1)[k] = (vals[0] - vals[1]) / (2 * eps)
    return grad


def check_op(device, fn, ref, xs, grad=True, fd_eps=1e-6, fwd_tol=None, grad_tol_=None):
    """fn: numr function of tensors; ref: float64 numpy function of arrays; xs: inputs."""
    dtype = fdtype(device)
    np_dtype = np.float64 if dtype is nr.float64 else np.float32
    xs = [np.asarray(x, dtype=np_dtype).astype(np.float64) for x in xs]   # what the device sees
    expected = np.asarray(ref(*[x.copy() for x in xs]), dtype=np.float64)
    ts = [nr.tensor(x, dtype=dtype, device=device, requires_grad=grad) for x in xs]
    out = fn(*ts)
    assert out.shape == expected.shape, (out.shape, expected.shape)
    np.testing.assert_allclose(out.detach().numpy().astype(np.float64), expected,
                               **(fwd_tol or tol(device)))
    if not grad:
        return
    g_out = np.random.default_rng(1).standard_normal(expected.shape)
    out.backward(nr.tensor(g_out, dtype=out.dtype, device=device))
    for i, t in enumerate(ts):
        assert t.grad is not None, f"input {i} got no gradient"
        want = fd_grad(ref, [x.copy() for x in xs], i, g_out, fd_eps)
        np.testing.assert_allclose(t.grad.numpy().astype(np.float64), want,
                                   err_msg=f"gradient of input {i}", **(grad_tol_ or grad_tol(device)))


def attention_reference(q, k, v, mask, causal, scale, g):
    """softmax(q k^T * scale + mask) v in float64 with torch 2.x's conventions (is_causal: query i
    sees keys 0..i; a bool mask keeps True; a row that sees no key gives 0), its log-sum-exp (-inf
    for such a row) and the gradients of sum(out * g) w.r.t. q, k, v, written from the closed
    forms: (out, lse, dq, dk, dv)."""
    q, k, v, g = (np.asarray(a, np.float64) for a in (q, k, v, g))
    s = q @ np.swapaxes(k, -1, -2) * scale
    keep = np.ones(s.shape[-2:], bool)
    if causal:
        keep = np.tril(keep)
    if mask is not None and np.asarray(mask).dtype == bool:
        keep = keep & np.asarray(mask)
    elif mask is not None:
        s = s + np.asarray(mask, np.float64)
    s = np.where(np.broadcast_to(keep, s.shape), s, -np.inf)
    m = s.max(-1, keepdims=True) if s.shape[-1] else np.full(s.shape[:-1] + (1,), -np.inf)
    dead = m == -np.inf
    p = np.exp(s - np.where(dead, 0, m))
    total = p.sum(-1, keepdims=True)
    p = np.where(dead, 0, p / np.where(dead, 1, total))
    lse = np.where(dead, -np.inf, m + np.log(np.where(dead, 1, total)))[..., 0]
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    return (p @ v, lse, (ds @ k) * scale, (np.swapaxes(ds, -1, -2) @ q) * scale,
            np.swapaxes(p, -1, -2) @ g)


def same_bits(a, b, what):
    """a and b hold the same bits: values, NaN places and signed zeros (a NaN's sign is none)."""
    assert a.dtype == b.dtype and a.shape == b.shape, (what, a.dtype, b.dtype, a.shape, b.shape)
    np.testing.assert_array_equal(a, b, err_msg=what)
    if a.dtype.kind == "f":
        keep = ~np.isnan(a)
        np.testing.assert_array_equal(np.signbit(a[keep]), np.signbit(b[keep]), err_msg=what)


def restored_cpu_settings():
    """The cpu device's thread settings as they were before a test, after it (a generator for
    an autouse fixture: `_settings = pytest.fixture(autouse=True)(restored_cpu_settings)`)."""
    from numr_web.backends import cpu_threads
    before = cpu_threads.configure()
    yield
    cpu_threads.configure(*before)


def kernel_argv(args):
    """A kernel's arguments as tests/cuda_emu.h's emu_call takes them: (buffer, void** argv) of
    8-byte values (arrays by address, floats as double, ints as int64)."""
    import ctypes
    import struct
    vals = []
    for a in args:
        if isinstance(a, np.ndarray):
            vals.append(struct.pack("=Q", a.ctypes.data))
        elif isinstance(a, float):
            vals.append(struct.pack("=d", a))
        else:
            vals.append(struct.pack("=q", a))
    buf = ctypes.create_string_buffer(b"".join(vals))
    base = ctypes.addressof(buf)
    return buf, (ctypes.c_void_p * len(vals))(*range(base, base + 8 * len(vals), 8))


def emu_compile(tmp, source, kernels):
    """A library of `source` (kernel code) compiled with g++ against tests/cuda_emu.h, with
    run_i(gx, bx, args) launching kernels[i] on gx blocks of bx threads."""
    import ctypes
    import shutil
    import subprocess
    from pathlib import Path
    import pytest
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("g++ is not installed")
    runs = []
    for i, name in enumerate(kernels):
        runs += [f'extern "C" int run_{i}(unsigned gx, unsigned bx, void** args) {{',
                 f"    return emu_launch(gx, 1, bx, 0, [&] {{ emu_call(&{name}, args); }});", "}"]
    cpp, so = tmp / "kernels.cpp", tmp / "kernels.so"
    cpp.write_text("\n".join(['#include "cuda_emu.h"', source] + runs))
    r = subprocess.run([cxx, "-std=c++20", "-O0", "-shared", "-fPIC", "-pthread",
                        "-Wno-unknown-pragmas", "-I", str(Path(__file__).parent), "-o", str(so),
                        str(cpp)], capture_output=True, text=True)
    if r.returncode and "barrier" in r.stderr:
        pytest.skip(f"{cxx} cannot compile tests/cuda_emu.h: {r.stderr.strip()[:200]}")
    assert r.returncode == 0, r.stderr
    return ctypes.CDLL(str(so))


def emu_run(lib, i, blocks, threads, args):
    """Launch kernel i of an emu_compile library on `blocks` blocks of `threads` threads; args:
    8-byte values (kernel_argv), or the bytes of one struct passed by value."""
    import ctypes
    if isinstance(args, bytes):
        keep = ctypes.create_string_buffer(args, len(args))
        argv = (ctypes.c_void_p * 1)(ctypes.addressof(keep))
    else:
        keep, argv = kernel_argv(args)
    fn = getattr(lib, f"run_{i}")
    fn.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]
    assert fn(blocks, threads, argv)


def kernels_run(be, fn):
    """fn()'s result and the kernels a webgpu backend dispatched for it: {"file.entry": count}."""
    before = dict(be.info()["dispatches"])
    out = fn()
    after = be.info()["dispatches"]
    return out, {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


# -- activations: PyTorch's definitions at high precision (mpmath), written independently of the
# table the backends generate their code from; derivatives by mpmath.diff ------------------------
_S2, _C = mp.sqrt(2), mp.sqrt(2 / mp.pi)
_SELU_L, _SELU_A = mp.mpf("1.0507009873554804934193349852946"), mp.mpf("1.6732632423543772848170429916717")
MP_ACT = {
    "none": lambda z: z,
    "relu": lambda z: z if z > 0 else 0 * z,
    "sigmoid": lambda z: 1 / (1 + mp.exp(-z)),
    "tanh": mp.tanh,
    "silu": lambda z: z / (1 + mp.exp(-z)),
    "gelu": lambda z: z / 2 * mp.erfc(-z / _S2),
    "gelu_tanh": lambda z: z / (1 + mp.exp(-2 * _C * (z + mp.mpf("0.044715") * z ** 3))),
    "leaky_relu": lambda z: z if z > 0 else z / 100,
    "elu": lambda z: z if z > 0 else mp.expm1(z),
    "softplus": lambda z: z if z > 20 else mp.log1p(mp.exp(z)),
    "mish": lambda z: z * mp.tanh(mp.log1p(mp.exp(z))),
    "hardswish": lambda z: z * min(max(z + 3, 0), 6) / 6,
    "selu": lambda z: _SELU_L * (z if z > 0 else _SELU_A * mp.expm1(z)),
    "celu": lambda z: z if z > 0 else mp.expm1(z),
    "softsign": lambda z: z / (1 + abs(z)),
    "tanhshrink": lambda z: z - mp.tanh(z),
}
# the points where an activation's derivative jumps (compared only away from them)
KINKS = {"relu": (0,), "leaky_relu": (0,), "elu": (0,), "hardswish": (-3, 3), "softplus": (20,),
         "selu": (0,), "celu": (0,), "softsign": (0,)}
