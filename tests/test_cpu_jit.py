"""The cpu backend's compiled loops (numba; numr_web/backends/cpu_jit.py): each compiled
activation row's forward and fused backward against float64 / mpmath truth written here, the
fused layer's epilogue against numpy's formulas (NUMR_CPU_JIT=0: the same GEMM, so the same z),
layer / RMS norm forward and backward against float64 formulas, Adam's update bit for bit
against the numpy path; the same bits on 1 and 4 threads; the knob."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import numr_web as nr
from numr_web import nn
from numr_web.backends import cpu_jit, cpu_threads
from numr_web.errors import BackendUnavailableError

from helpers import restored_cpu_settings, same_bits

pytest.importorskip("numba")      # the [jit] extra ([dev] installs it)

_restore_settings = pytest.fixture(autouse=True)(restored_cpu_settings)


@pytest.fixture(autouse=True)
def _jit_on():
    before = cpu_jit.configure(True)
    assert cpu_jit.kernels() is not None
    yield
    cpu_jit.configure(before)


def _ulps(got, want, dtype):
    want = np.asarray(want, np.float64)
    scale = np.spacing(np.maximum(np.abs(want.astype(dtype)), np.finfo(dtype).tiny)).astype(
        np.float64)
    diff = np.abs(got.astype(np.float64) - want)
    diff[(got == want) | (np.isnan(got) & np.isnan(want))] = 0.0
    return diff / scale


def _mp(fn, x):
    import mpmath
    mpmath.mp.prec = 120
    return np.array([float(fn(mpmath.mpf(float(v)))) if math.isfinite(v) else math.nan for v in x])


def _gelu(t):
    import mpmath
    return t * mpmath.erfc(-t / mpmath.sqrt(2)) / 2


def _gelu_dz(t):
    import mpmath
    return mpmath.erfc(-t / mpmath.sqrt(2)) / 2 + t * mpmath.exp(-t * t / 2) / mpmath.sqrt(2 * mpmath.pi)


def _gelu_tanh(t):
    import mpmath
    c = mpmath.sqrt(2 / mpmath.pi)
    return t / (1 + mpmath.exp(-2 * c * (t + mpmath.mpf("0.044715") * t ** 3)))


def _gelu_tanh_dz(t):
    import mpmath
    return mpmath.diff(_gelu_tanh, t)


def _silu(t):
    import mpmath
    return t / (1 + mpmath.exp(-t))


def _silu_dz(t):
    import mpmath
    s = 1 / (1 + mpmath.exp(-t))
    return s * (1 + t * (1 - s))


def _gelu_terms(t):              # |Phi(z)| + |z phi(z)|: the derivative's two terms
    import mpmath
    return abs(mpmath.erfc(-t / mpmath.sqrt(2)) / 2) + abs(t * mpmath.exp(-t * t / 2)) / mpmath.sqrt(2 * mpmath.pi)


def _gelu_tanh_terms(t):         # s and 2 z u' s q
    import mpmath
    c = mpmath.sqrt(2 / mpmath.pi)
    u2 = 2 * c * (t + mpmath.mpf("0.044715") * t ** 3)
    s, q = 1 / (1 + mpmath.exp(-u2)), 1 / (1 + mpmath.exp(u2))
    return s + abs(2 * t * s * q * c * (1 + 3 * mpmath.mpf("0.044715") * t * t))


def _silu_terms(t):              # s and s z (1 - s)
    import mpmath
    s = 1 / (1 + mpmath.exp(-t))
    return s + abs(s * t * (1 - s))


ROWS = {"gelu": (lambda x: nr.gelu(x), _gelu, _gelu_dz, _gelu_terms),
        "gelu_tanh": (lambda x: nr.gelu(x, approximate="tanh"), _gelu_tanh, _gelu_tanh_dz,
                      _gelu_tanh_terms),
        "silu": (lambda x: nr.silu(x), _silu, _silu_dz, _silu_terms)}


def _points(dtype):
    """A sweep through every part of the formulas (the erf table's grid and clip, the tails)."""
    sweep = np.linspace(-9, 9, 1801)
    extra = [-40.0, -12.0, -5.6, -5.5, -5.4999, -3.9375, -1e-30, 0.0, 1e-30, 5.4999, 5.5, 5.6, 30.0]
    return np.concatenate([sweep, extra]).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(ROWS))
def test_compiled_activation_against_mpmath(name, dtype):
    """Forward and fused backward (dy * act'(z), dy = 1.5). float32 (evaluated in float64 and
    rounded once): within 1 ulp; gelu's forward is the numpy formula's, as torch's, z (1 +
    erf(z / sqrt 2)) / 2 with erf rounded to float32: 2 ulp plus that rounding's |z| eps / 4 (the
    lower tail rounds to -0.0, as torch's). float64: 4 ulp plus what the rounding of the
    formula's argument and of its terms can cost, 8 eps (|z f'(z)| + |f(z)|) for f the
    activation or 8 eps (|z f''(z)| + its terms' size) for its derivative."""
    import mpmath
    op, fwd, dz, terms = ROWS[name]
    z = _points(dtype)
    x = nr.tensor(z, requires_grad=True)
    y = op(x)
    (y * 1.5).sum().backward()
    got, dgot = y.numpy().astype(np.float64), x.grad.numpy().astype(np.float64)
    want, dwant = _mp(fwd, z), 1.5 * _mp(dz, z)
    eps = np.finfo(dtype).eps
    if dtype == np.float32:
        if name == "gelu":
            bound = 2 * np.spacing(np.abs(want).astype(dtype)) + np.abs(z) * eps / 4
            assert (np.abs(got - want) <= bound).all()
        else:
            assert _ulps(got, want, dtype).max() <= 1
        assert _ulps(dgot, dwant, dtype).max() <= 1
        return
    d1 = _mp(lambda t: mpmath.diff(fwd, t), z)
    d2 = 1.5 * _mp(lambda t: mpmath.diff(dz, t), z)
    size = 1.5 * _mp(terms, z)
    ulp, dulp = np.spacing(np.abs(want)), np.spacing(np.abs(dwant))
    assert (np.abs(got - want) <= 4 * ulp + 8 * eps * (np.abs(z * d1) + np.abs(want))).all()
    assert (np.abs(dgot - dwant) <= 4 * dulp + 8 * eps * (np.abs(z * d2) + size)).all()


@pytest.mark.parametrize("name", ["relu", "gelu", "gelu_tanh", "silu"])
def test_compiled_activation_specials_as_numpy(name):
    """inf, -inf, NaN, signed zeros and subnormals: the numpy formulas' values (the reference
    semantics) bit for bit, their gradients' values (gelu_tanh's float32 numpy formula gives
    -0.0 at -inf where the compiled loop gives 0.0)."""
    z = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, -1e-45], np.float32)
    op = {"relu": nr.relu, "silu": nr.silu, "gelu": nr.gelu,
          "gelu_tanh": lambda t: nr.gelu(t, approximate="tanh")}[name]

    def run():
        x = nr.tensor(z, requires_grad=True)
        y = op(x)
        (y * nr.tensor(np.full(z.shape, 1.5, np.float32))).sum().backward()
        return y.numpy(), x.grad.numpy()
    got = run()
    cpu_jit.configure(False)
    want = run()
    same_bits(got[0], want[0], name)
    assert np.array_equal(got[1], want[1], equal_nan=True), (got[1], want[1])


def _act64(act, z):
    """The activations in float64, written here (scipy's erfc)."""
    from scipy.special import erfc
    z = z.astype(np.float64)
    if act == "gelu":
        return z * erfc(-z / np.sqrt(2)) / 2
    if act == "gelu_tanh":
        with np.errstate(over="ignore"):                # z / inf = -0.0 far in the lower tail
            return z / (1 + np.exp(-2 * np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3)))
    if act == "silu":
        return z / (1 + np.exp(-z))
    return np.maximum(z, 0) if act == "relu" else z


@pytest.mark.parametrize("act", ["gelu", "gelu_tanh", "silu", "relu", "none"])
def test_fused_layer_epilogue(act):
    """act(x @ w + b) with the compiled epilogue: act of the unfused z = x @ w + b (the same
    GEMM tiles, the same float32 bias add) within 1 ulp of float64 (gelu: the numpy formula's
    bound, as above); its gradients close to numpy's formulas' (NUMR_CPU_JIT=0)."""
    x = nr.randn((300, 96), seed=0)
    w = nr.randn((96, 130), seed=1)
    b = nr.randn((130,), seed=2)

    def run():
        xs, ws, bs = (nr.tensor(t.numpy(), requires_grad=True) for t in (x, w, b))
        y = nr.matmul_bias_activation(xs, ws, bs, activation=act)
        (y * y).sum().backward()
        return y.numpy(), xs.grad.numpy(), ws.grad.numpy(), bs.grad.numpy()
    got = run()
    z = (nr.matmul(x, w) + b).numpy()
    want = _act64(act, z)
    if act == "gelu":
        bound = 2 * np.spacing(np.abs(want).astype(np.float32)) + np.abs(z) * 2.0 ** -25
        assert (np.abs(got[0] - want) <= bound).all()
    else:
        assert _ulps(got[0], want, np.float32).max() <= 1
    cpu_jit.configure(False)
    want = run()
    for g, wv in zip(got[1:], want[1:]):             # gradients through GEMMs of dy: close
        assert np.allclose(g, wv, rtol=1e-5, atol=1e-5 * np.abs(wv).max())


@pytest.mark.parametrize("rms", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_norm_against_extended_precision(rms, dtype):
    """layer / RMS norm against its formulas in numpy's extended precision (longdouble), written
    here: the forward within 1 ulp plus 4 eps of its terms (xhat w, b) plus the bound of a
    float64 sum of n terms (n eps64 mean|x| rstd |w|: the loops add the row's mean and variance in
    float64); the backward's dx within 8 eps of its row's largest term (|g w rstd|), dw and db
    within 8 eps of their sums' absolute values."""
    rng = np.random.default_rng(3)
    n = 257
    xa = (rng.standard_normal((70, n)) * 2 + 0.5).astype(dtype)
    wa, ba = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    ga = rng.standard_normal((70, n)).astype(dtype)
    x, w = nr.tensor(xa, requires_grad=True), nr.tensor(wa, requires_grad=True)
    b = None if rms else nr.tensor(ba, requires_grad=True)
    y = nr.rms_norm(x, (n,), w, eps=1e-5) if rms else nr.layer_norm(x, (n,), w, b, eps=1e-5)
    (y * nr.tensor(ga)).sum().backward()
    L = np.longdouble
    xl, wl, bl, gl = (a.astype(L) for a in (xa, wa, ba, ga))
    m = L(0) if rms else xl.mean(axis=1, keepdims=True)
    r = 1 / np.sqrt(((xl - m) ** 2).mean(axis=1, keepdims=True) + L(1e-5))
    xhat = (xl - m) * r
    want = xhat * wl + (0 if rms else bl)
    eps = np.finfo(dtype).eps
    size = np.abs(xhat * wl) + (0 if rms else np.abs(bl))
    sums = n * np.finfo(np.float64).eps * np.abs(xl).mean(axis=1, keepdims=True) * r * np.abs(wl)
    err = np.abs(y.numpy().astype(L) - want)
    assert (err <= np.spacing(np.abs(want).astype(dtype)) + 4 * eps * size + sums).all()
    gw = gl * wl
    dx = (gw - (0 if rms else gw.mean(axis=1, keepdims=True))
          - xhat * (gw * xhat).mean(axis=1, keepdims=True)) * r
    scale = np.abs(gw * r).max(axis=1, keepdims=True)
    assert (np.abs(x.grad.numpy().astype(L) - dx) <= 8 * eps * scale).all()
    dw = (gl * xhat).sum(axis=0)
    assert (np.abs(w.grad.numpy().astype(L) - dw) <= 8 * eps * np.abs(gl * xhat).sum(axis=0)).all()
    if not rms:
        db = gl.sum(axis=0)
        assert (np.abs(b.grad.numpy().astype(L) - db) <= 8 * eps * np.abs(gl).sum(axis=0)).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["adamw", "adam_l2", "adam"])
def test_compiled_adam_bits_as_numpy(kind, dtype):
    """Adam / AdamW through three steps: the compiled update gives the numpy path's bits
    (the first step, without m and v, included)."""
    def run():
        rng = np.random.default_rng(5)
        p = nn.Parameter(nr.tensor(rng.standard_normal((333, 77)).astype(dtype)))
        if kind == "adamw":
            opt = nn.optim.AdamW([p], lr=1e-2, weight_decay=0.1)
        else:
            opt = nn.optim.Adam([p], lr=1e-2, weight_decay=0.1 if kind == "adam_l2" else 0.0)
        for _ in range(3):
            p.grad = nr.tensor(rng.standard_normal((333, 77)).astype(dtype))
            opt.step()
        return p.detach().numpy()
    got = run()
    cpu_jit.configure(False)
    same_bits(got, run(), kind)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("act,bias", [("relu", True), ("relu", False), ("none", True)])
@pytest.mark.parametrize("geometry", [(1, 1, 1), (2, 1, 1), (1, 2, 2)], ids=["wide", "stride",
                                                                           "dilation"])
def test_compiled_convolution_bits_as_numpy(dtype, act, bias, geometry):
    """A convolution's blocks with the compiled im2col, bias + relu, transposing copy and
    wide col2im (stride and dilation 1): the forward and the three gradients are the numpy
    path's bits (-0.0 in the gradient included)."""
    from numr_web.ops.convolution import conv2d_bias_activation
    stride, padding, dilation = geometry
    rng = np.random.default_rng(3)
    x = rng.standard_normal((12, 5, 20, 20)).astype(dtype)       # OW 20: the wide col2im
    w = (rng.standard_normal((7, 5, 3, 3)) / 4).astype(dtype)
    b = rng.standard_normal(7).astype(dtype) if bias else None
    cpu_threads.configure(threads=3, parallel_min=1024)       # the blocked path at this size

    def run():
        ts = [nr.tensor(a, requires_grad=True) for a in (x, w) + ((b,) if bias else ())]
        y = conv2d_bias_activation(ts[0], ts[1], ts[2] if bias else None, activation=act,
                                   stride=stride, padding=padding, dilation=dilation)
        g = np.random.default_rng(4).standard_normal(y.shape).astype(dtype)
        g[0, 0, 0, :3] = -0.0
        y.backward(nr.tensor(g))
        return [y.numpy()] + [t.grad.numpy() for t in ts]
    got = run()
    cpu_jit.configure(False)
    for name, a, c in zip(["y", "dx", "dw", "db"], got, run()):
        same_bits(a, c, name)


def test_compiled_convolution_input_gradient_alone():
    """A frozen weight (no weight gradient): the wide col2im alone, the numpy path's bits."""
    rng = np.random.default_rng(10)
    x = rng.standard_normal((12, 5, 20, 20)).astype(np.float32)
    w = (rng.standard_normal((7, 5, 3, 3)) / 4).astype(np.float32)
    cpu_threads.configure(threads=3, parallel_min=1024)

    def run():
        t = nr.tensor(x, requires_grad=True)
        y = nr.nn.functional.conv2d(t, nr.tensor(w), padding=1)
        y.backward(nr.tensor(np.random.default_rng(11).standard_normal(y.shape).astype(np.float32)))
        return t.grad.numpy()
    got = run()
    cpu_jit.configure(False)
    same_bits(got, run(), "dx")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("geometry", [(2, 2, 0, 1, False), (3, 2, 1, 1, False), (3, 1, 1, 2, False),
                                      (3, 2, 0, 1, True)],
                         ids=["2x2", "overlap-padded", "dilated", "ceil"])
def test_compiled_max_pool_bits_as_numpy(dtype, geometry):
    """Max pooling's gradient compiled (disjoint windows: one write each; overlapping ones:
    the tap-ordered adds) is the numpy path's, for inputs with ties, NaN windows and -inf
    (-0.0 in the gradient included)."""
    k, st, pad, dil, ceil = geometry
    rng = np.random.default_rng(6)
    x = rng.integers(-3, 4, (6, 5, 17, 17)).astype(dtype)      # many ties
    x[0, 0, 3, 3], x[1, 2, 5, 6], x[2, 1, 0, 0] = np.nan, np.nan, -np.inf
    x[2, 1, 0, 1], x[0, 0, 3, 2] = -np.inf, np.nan          # a window with two NaNs
    cpu_threads.configure(threads=3, parallel_min=1024)

    def run():
        t = nr.tensor(x, requires_grad=True)
        y = nr.nn.functional.max_pool2d(t, k, st, pad, dil, ceil_mode=ceil)
        g = np.random.default_rng(7).standard_normal(y.shape).astype(dtype)
        g[0, 1, :2, :2] = -0.0
        y.backward(nr.tensor(g))
        return y.numpy(), t.grad.numpy()
    got = run()
    cpu_jit.configure(False)
    for name, a, c in zip(["y", "dx"], got, run()):
        same_bits(a, c, name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_max_pool_2x2_follows_torch_rule(dtype):
    """The compiled 2x2 pool of stride 2 (an odd plane: the last row and column unread) against
    torch's rule written here, window by window: the first maximum in row order wins unless a
    NaN comes, then the last NaN; y is x at that index (signed zeros tying: the first's sign)."""
    rng = np.random.default_rng(12)
    x = rng.integers(-2, 3, (4, 3, 9, 11)).astype(dtype)
    x[rng.random(x.shape) < 0.3] = -0.0                    # ties of -0.0 and +0.0
    x[0, 0, 2, 3], x[0, 0, 3, 2], x[1, 1, 4, 4], x[3, 2, 0, 1] = np.nan, np.nan, np.inf, -np.inf
    x[2, 2, :2, :2] = -np.inf
    cpu_threads.configure(threads=3, parallel_min=64)
    y, idx = nr.nn.functional.max_pool2d(nr.tensor(x), 2, return_indices=True)
    y, idx = y.numpy(), idx.numpy()
    want_y, want_i = np.empty(y.shape, dtype), np.empty(y.shape, np.int64)
    for n, c, oy, ox in np.ndindex(*y.shape):
        best, at = None, None
        for r in (2 * oy, 2 * oy + 1):
            for q in (2 * ox, 2 * ox + 1):
                v = x[n, c, r, q]
                if best is None or v > best or np.isnan(v):
                    best, at = v, r * x.shape[3] + q
        want_y[n, c, oy, ox], want_i[n, c, oy, ox] = best, at
    np.testing.assert_array_equal(idx, want_i)
    same_bits(y, want_y, "y")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_embedding_gradient_in_add_at_order(dtype):
    """An embedding's weight gradient (rows of g added at their tokens) compiled: numpy's
    np.add.at (each row adds 0 + its tokens' g in index order) written here is the reference,
    bit for bit: repeated tokens, an unused one, -0.0 gradients, on 3 threads."""
    rng = np.random.default_rng(13)
    vocab, dim = 11, 70
    idx = rng.integers(0, vocab - 1, (9, 40))              # token vocab - 1 never occurs
    w = rng.standard_normal((vocab, dim)).astype(dtype)
    g = (rng.standard_normal((9, 40, dim)) * 10.0 ** rng.integers(-6, 6, (9, 40, 1))).astype(dtype)
    g[0, :5] = -0.0
    cpu_threads.configure(threads=3, parallel_min=1024)
    t = nr.tensor(w, requires_grad=True)
    nr.nn.functional.embedding(nr.tensor(idx, dtype="int64"), t).backward(nr.tensor(g))
    want = np.zeros((vocab, dim), dtype)
    np.add.at(want, idx.reshape(-1), g.reshape(-1, dim))
    same_bits(t.grad.numpy(), want, "weight gradient")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("act", ["relu", "none"])
@pytest.mark.parametrize("training,affine", [(True, True), (True, False), (False, True)])
def test_compiled_batch_norm_against_numpy_and_float64(dtype, act, training, affine):
    """Batch norm compiled (its per-row sums in float64, its passes writing y and dx): y, the
    running statistics and the gradients within 4 ulp (of each output's largest value) of
    torch in float64, and no further from it than twice the numpy path's error (float32 / 64
    pairwise row sums); where no sum is involved (eval's y and dx) the numpy path's bits."""
    import torch
    import torch.nn.functional as TF
    from numr_web.ops.batchnorm import batch_norm
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((10, 6, 9, 9)) * 3 + 1).astype(dtype)
    w, b = rng.uniform(0.5, 2, 6).astype(dtype), rng.standard_normal(6).astype(dtype)
    g = np.random.default_rng(9).standard_normal(x.shape).astype(dtype)
    cpu_threads.configure(threads=3, parallel_min=1024)

    def run():
        xt = nr.tensor(x, requires_grad=True)
        wt, bt = (nr.tensor(w, requires_grad=True), nr.tensor(b, requires_grad=True)) \
            if affine else (None, None)
        rm, rv = nr.tensor(np.zeros(6, dtype)), nr.tensor(np.ones(6, dtype))
        y = batch_norm(xt, rm, rv, wt, bt, training=training, activation=act)
        y.backward(nr.tensor(g))
        return [y.numpy(), rm.numpy(), rv.numpy(), xt.grad.numpy()] + \
            ([wt.grad.numpy(), bt.grad.numpy()] if affine else [])
    got = run()
    cpu_jit.configure(False)
    numpy_path = run()
    t = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w, b)]
    rm, rv = torch.zeros(6, dtype=torch.float64), torch.ones(6, dtype=torch.float64)
    z = TF.batch_norm(t[0], rm, rv, t[1] if affine else None, t[2] if affine else None,
                      training=training)
    y = torch.relu(z) if act == "relu" else z
    grads = torch.autograd.grad(y, t if affine else t[:1], torch.tensor(g, dtype=torch.float64))
    eps = np.finfo(dtype).eps
    for name, a, c, ref in zip(["y", "running mean", "running var", "dx", "dw", "db"], got,
                               numpy_path, [y, rm, rv] + list(grads)):
        if not training and name in ("y", "dx"):
            same_bits(a, c, name)
        ref = ref.detach().numpy()
        scale = np.abs(ref).max()
        err, err_numpy = np.abs(a - ref).max(), np.abs(c - ref).max()
        assert err <= 4 * eps * scale and err <= 2 * err_numpy + 2 * eps * scale, \
            (name, err / scale / eps, err_numpy / scale / eps)


def test_compiled_loops_same_bits_on_any_thread_count():
    """A GPT step's compiled ops (the GELU layers' epilogue and backward, the norms, Adam) in
    blocks on 1 and 4 threads: the same bits."""
    from numr_web.models import GPT, GPTConfig

    def step():
        model = GPT(GPTConfig(vocab_size=17, block_size=16, n_layer=1, n_head=2, n_embd=64), seed=0)
        opt = nn.optim.AdamW(model.parameters(), lr=1e-2)
        idx = nr.tensor(np.arange(8 * 16).reshape(8, 16) % 17, dtype="int32")
        _, loss = model(idx, idx)
        loss.backward()
        opt.step()
        return [p.detach().numpy() for p in model.parameters()]
    cpu_threads.configure(threads=1, parallel_min=1024)
    ref = step()
    cpu_threads.configure(threads=4, parallel_min=1024)
    for i, (a, b) in enumerate(zip(ref, step())):
        same_bits(a, b, f"parameter {i}")


def test_knob_turns_the_loops_off_and_says_what_is_wrong(monkeypatch):
    monkeypatch.setenv("NUMR_CPU_JIT", "0")
    cpu_jit.configure(None)
    assert cpu_jit.kernels() is None and "NUMR_CPU_JIT=0" in cpu_jit.status()
    monkeypatch.setenv("NUMR_CPU_JIT", "yes")
    with pytest.raises(BackendUnavailableError, match="expected 1"):
        cpu_jit.configure(None)
    monkeypatch.delenv("NUMR_CPU_JIT")
    cpu_jit.configure(None)
    assert "on (numba" in cpu_jit.status()
    with pytest.raises(BackendUnavailableError, match="True, False or None"):
        cpu_jit.configure("on")


def test_info_reports_the_loops():
    env = dict(os.environ, NUMR_CPU_JIT="0")
    out = subprocess.run([sys.executable, "-m", "numr_web", "info"], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0 and "NUMR_CPU_JIT=0" in out.stdout, out.stdout + out.stderr


_ACTIVATIONS_IN_A_PROCESS = """
import numpy as np, numr_web as nr
from numr_web.nn import functional as F
x = nr.tensor(np.linspace(-4, 4, 1 << 17, dtype=np.float32).reshape(256, 512), requires_grad=True)
y = F.gelu(x) + F.silu(x)
y.sum().backward()
print(float(y.sum().item()), float(x.grad.sum().item()))
"""


def test_the_on_disk_cache_does_not_grow_with_every_process(tmp_path):
    """Processes running the same compiled activations leave numba's cache as the first left
    it: before, each appended an entry for the loops that take an activation function, and once
    the index held more than numba keeps alive (128), every compile failed."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(nr.__file__)))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=root)
    sizes, outs = [], []
    for _ in range(3):
        r = subprocess.run([sys.executable, "-c", _ACTIVATIONS_IN_A_PROCESS], capture_output=True,
                           text=True, env=env, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        outs.append(r.stdout)
        sizes.append(sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file()))
    assert outs[0] == outs[1] == outs[2]
    assert sizes[1] == sizes[2], sizes
