"""The model-building ops (shape/view, indexing, math, nn functional) on every device: forward and
gradients against torch in float64 (an independent implementation), tolerances of a few ulp."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import numr_web as nr
from numr_web.ops import recurrent

from helpers import fdtype

rng = np.random.default_rng(3)


def R(*shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape)


def _tol(device, scale=1.0):
    return dict(rtol=1e-10 * scale, atol=1e-12 * scale) if fdtype(device) is nr.float64 \
        else dict(rtol=2e-5 * scale, atol=2e-6 * scale)


def check_torch(device, fn, tfn, xs, ints=(), grad=True, scale=1.0):
    """fn(numr tensors) vs tfn(torch float64 tensors): outputs and the gradients of every float
    input for a random output gradient. xs: float arrays; ints: integer arrays passed after them."""
    dtype = fdtype(device)
    npd = np.float64 if dtype is nr.float64 else np.float32
    xs = [np.asarray(x, dtype=npd) for x in xs]
    ts = [nr.tensor(x, device=device, requires_grad=grad) for x in xs]
    its = [nr.tensor(np.asarray(i, dtype=np.int32), device=device) for i in ints]
    out = fn(*ts, *its)
    tt = [torch.tensor(x.astype(np.float64), requires_grad=grad) for x in xs]
    tout = tfn(*tt, *[torch.tensor(np.asarray(i, dtype=np.int64)) for i in ints])
    outs, touts = (out, tout) if isinstance(out, (tuple, list)) else ((out,), (tout,))
    for o, t in zip(outs, touts):
        assert o.shape == tuple(t.shape), (o.shape, tuple(t.shape))
        np.testing.assert_allclose(o.detach().numpy().astype(np.float64), t.detach().numpy(),
                                   **_tol(device, scale))
    if not grad:
        return
    gs = [rng.standard_normal(t.shape) for t in touts]
    got = nr.grad(list(outs), ts, [nr.tensor(g.astype(npd), device=device) for g in gs],
                  allow_unused=True)
    want = torch.autograd.grad(list(touts), tt, [torch.tensor(g) for g in gs], allow_unused=True)
    for i, (g, w) in enumerate(zip(got, want)):
        w = np.zeros(xs[i].shape) if w is None else w.numpy()
        g = np.zeros(xs[i].shape) if g is None else g.numpy().astype(np.float64)
        np.testing.assert_allclose(g, w, err_msg=f"gradient of input {i}", **_tol(device, scale * 10))


CASES = [
    ("squeeze", lambda a: a.squeeze(1), lambda a: a.squeeze(1), [R(2, 1, 3)]),
    ("squeeze_all", lambda a: a.squeeze(), lambda a: a.squeeze(), [R(1, 3, 1)]),
    ("unsqueeze", lambda a: a.unsqueeze(-1) * 2, lambda a: a.unsqueeze(-1) * 2, [R(2, 3)]),
    ("flatten", lambda a: a.flatten(1, 2), lambda a: a.flatten(1, 2), [R(2, 3, 4, 2)]),
    ("clone", lambda a: a.clone() * a, lambda a: a.clone() * a, [R(3, 2)]),
    ("contiguous", lambda a: a.T.contiguous() * 3, lambda a: a.T.contiguous() * 3, [R(3, 2)]),
    ("split", lambda a: a.split(2, dim=1), lambda a: a.split(2, dim=1), [R(2, 5)]),
    ("split_sections", lambda a: a.split([1, 3], dim=0), lambda a: a.split([1, 3], dim=0), [R(4, 2)]),
    ("chunk", lambda a: a.chunk(3, dim=-1), lambda a: a.chunk(3, dim=-1), [R(2, 7)]),
    ("flip", lambda a: a.flip((0, 2)), lambda a: a.flip((0, 2)), [R(2, 3, 4)]),
    ("cat", lambda a, b: nr.cat([a, b], dim=1), lambda a, b: torch.cat([a, b], 1), [R(2, 3), R(2, 1)]),
    ("stack", lambda a, b: nr.stack([a, b], dim=-1), lambda a, b: torch.stack([a, b], -1), [R(2, 3), R(2, 3)]),
    ("tril", lambda a: nr.tril(a, 1), lambda a: torch.tril(a, 1), [R(2, 4, 5)]),
    ("triu", lambda a: nr.triu(a, -1), lambda a: torch.triu(a, -1), [R(4, 3)]),
    ("masked_fill", lambda a: a.masked_fill(a > 0.5, -3.0), lambda a: a.masked_fill(a > 0.5, -3.0), [R(3, 4)]),
    ("where", lambda a, b: nr.where(a > b, a, b * 2), lambda a, b: torch.where(a > b, a, b * 2), [R(3, 4), R(4)]),
    ("rsqrt", nr.rsqrt, torch.rsqrt, [R(3, 4, lo=0.5, hi=3)]),
    ("log1p", nr.log1p, torch.log1p, [R(3, 4, lo=-0.9, hi=3)]),
    ("expm1", nr.expm1, torch.expm1, [R(3, 4)]),
    ("clamp", lambda a: nr.clamp(a, -0.5, 1.0), lambda a: torch.clamp(a, -0.5, 1.0), [R(4, 5)]),
    ("clamp_min", lambda a: a.clamp(min=0.1), lambda a: a.clamp(min=0.1), [R(4, 5)]),
    ("logsumexp", lambda a: nr.logsumexp(a, 1), lambda a: torch.logsumexp(a, 1), [R(3, 5)]),
    ("logsumexp_keep", lambda a: a.logsumexp(0, keepdim=True), lambda a: a.logsumexp(0, keepdim=True), [R(3, 5)]),
    ("var", lambda a: a.var(1), lambda a: a.var(1), [R(3, 5)]),
    ("var_all_biased", lambda a: a.var(correction=0), lambda a: a.var(correction=0), [R(3, 5)]),
    ("std", lambda a: a.std(0, keepdim=True), lambda a: a.std(0, keepdim=True), [R(4, 3)]),
    ("prod", lambda a: a.prod(1), lambda a: a.prod(1), [R(3, 4)]),
    ("prod_zero", lambda a: (a * (a > -0.7)).prod(), lambda a: (a * (a > -0.7)).prod(),
     [np.array([0.5, -1.0, 2.0, 1.5])]),
    ("softmax", lambda a: nr.softmax(a, dim=0), lambda a: torch.softmax(a, 0), [R(4, 3)]),
    ("layer_norm", lambda a, w, b: nr.layer_norm(a, (4,), w, b), lambda a, w, b: F.layer_norm(a, (4,), w, b),
     [R(3, 4), R(4), R(4)]),
    ("layer_norm_2d", lambda a: nr.layer_norm(a, (3, 4)), lambda a: F.layer_norm(a, (3, 4)), [R(2, 3, 4)]),
    ("rms_norm", lambda a, w: nr.rms_norm(a, (5,), w, eps=1e-6), lambda a, w: F.rms_norm(a, (5,), w, eps=1e-6),
     [R(2, 3, 5), R(5)]),
    ("sdpa", lambda q, k, v: nr.scaled_dot_product_attention(q, k, v),
     lambda q, k, v: F.scaled_dot_product_attention(q, k, v), [R(2, 3, 4), R(2, 5, 4), R(2, 5, 6)]),
    ("sdpa_causal", lambda q, k, v: nr.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3),
     lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3),
     [R(2, 2, 5, 4), R(2, 2, 5, 4), R(2, 2, 5, 4)]),
    ("sdpa_causal_short_q", lambda q, k, v: nr.scaled_dot_product_attention(q, k, v, is_causal=True),
     lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     [R(2, 3, 4), R(2, 5, 4), R(2, 5, 3)]),
    ("sdpa_causal_long_q", lambda q, k, v: nr.scaled_dot_product_attention(q, k, v, is_causal=True),
     lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     [R(2, 5, 4), R(2, 3, 4), R(2, 3, 3)]),
    ("sdpa_float_mask", lambda q, k, v, m: nr.scaled_dot_product_attention(q, k, v, attn_mask=m),
     lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
     [R(3, 4), R(5, 4), R(5, 2), R(3, 5)]),
    ("conv2d", lambda x, w, b: nr.conv2d(x, w, b, stride=2, padding=1),
     lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), [R(2, 3, 7, 6), R(4, 3, 3, 3), R(4)]),
    ("conv2d_dilated", lambda x, w: nr.conv2d(x, w, padding=(2, 1), dilation=2),
     lambda x, w: F.conv2d(x, w, padding=(2, 1), dilation=2), [R(1, 2, 6, 6), R(3, 2, 3, 2)]),
    ("conv2d_groups", lambda x, w, b: nr.conv2d(x, w, b, groups=2),
     lambda x, w, b: F.conv2d(x, w, b, groups=2), [R(2, 4, 5, 5), R(6, 2, 3, 3), R(6)]),
    ("conv2d_gelu", lambda x, w, b: nr.conv2d_bias_activation(x, w, b, "gelu", padding=1),
     lambda x, w, b: F.gelu(F.conv2d(x, w, b, padding=1)), [R(2, 3, 5, 5), R(4, 3, 3, 3), R(4)]),
    ("max_pool2d", lambda x: nr.max_pool2d(x, 2), lambda x: F.max_pool2d(x, 2), [R(2, 3, 6, 5)]),
    ("max_pool2d_pad", lambda x: nr.max_pool2d(x, 3, stride=2, padding=1),
     lambda x: F.max_pool2d(x, 3, stride=2, padding=1), [R(1, 2, 7, 7)]),
    ("avg_pool2d", lambda x: nr.avg_pool2d(x, 2, padding=1), lambda x: F.avg_pool2d(x, 2, padding=1),
     [R(2, 3, 5, 4)]),
    ("batch_norm", lambda x, w, b: nr.nn.functional.batch_norm(x, None, None, w, b, training=True),
     lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
     [R(4, 3, 5), R(3), R(3)]),
    ("lstm_cell", recurrent.lstm_cell, lambda xw, hw, c: _torch_lstm(xw, hw, c),
     [R(3, 8), R(3, 8), R(3, 2)]),
    ("gru_cell", recurrent.gru_cell, lambda xw, hw, h: _torch_gru(xw, hw, h),
     [R(3, 6), R(3, 6), R(3, 2)]),
    ("rnn_layer_lstm", lambda xw, h, c, w, b: recurrent.layer("lstm", xw, h, c, w, b, False),
     lambda xw, h, c, w, b: _torch_layer("lstm", xw, h, c, w, b, False),
     [R(4, 2, 12), R(2, 3), R(2, 3), R(12, 3), R(12)]),
    ("rnn_layer_gru_reverse", lambda xw, h, w: recurrent.layer("gru", xw, h, None, w, None, True),
     lambda xw, h, w: _torch_layer("gru", xw, h, None, w, None, True),
     [R(5, 2, 9), R(2, 3), R(9, 3)]),
    ("rnn_layer_tanh", lambda xw, h, w, b: recurrent.layer("tanh", xw, h, None, w, b, False),
     lambda xw, h, w, b: _torch_layer("tanh", xw, h, None, w, b, False),
     [R(4, 2, 3), R(2, 3), R(3, 3), R(3)]),
    ("rnn_layer_relu_reverse", lambda xw, h, w: recurrent.layer("relu", xw, h, None, w, None, True),
     lambda xw, h, w: _torch_layer("relu", xw, h, None, w, None, True),
     [R(4, 2, 3), R(2, 3), R(3, 3)]),
]


def _torch_lstm(xw, hw, c):
    """torch's LSTM cell arithmetic (its CPU cell's order), written here as the reference."""
    i, f, g, o = (hw + xw).chunk(4, -1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def _torch_gru(xw, hw, h):
    xr, xz, xn = xw.chunk(3, -1)
    hr, hz, hn = hw.chunk(3, -1)
    r, z = torch.sigmoid(hr + xr), torch.sigmoid(hz + xz)
    n = torch.tanh(xn + hn * r)
    return (h - n) * z + n


def _torch_layer(kind, xw, h, c, w, b, reverse):
    outs = [None] * xw.shape[0]
    for t in (reversed(range(xw.shape[0])) if reverse else range(xw.shape[0])):
        hw = h @ w.T + (b if b is not None else 0)
        if kind == "lstm":
            h, c = _torch_lstm(xw[t], hw, c)
        elif kind == "gru":
            h = _torch_gru(xw[t], hw, h)
        else:
            h = torch.tanh(xw[t] + hw) if kind == "tanh" else torch.relu(xw[t] + hw)
        outs[t] = h
    return (torch.stack(outs), h) + ((c,) if kind == "lstm" else ())


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_nn_op(device, case):
    _, fn, tfn, xs = case
    check_torch(device, fn, tfn, xs)


def test_indexing_ops(device):
    w = R(6, 3)
    check_torch(device, lambda a, i: nr.embedding(i, a), lambda a, i: F.embedding(i, a), [w],
                ints=[np.array([[1, 5, 1], [0, 2, 1]])])
    check_torch(device, lambda a, i: nr.gather(a, 1, i), lambda a, i: torch.gather(a, 1, i),
                [R(3, 4)], ints=[np.array([[0, 3], [2, 2], [1, 0]])])
    check_torch(device, lambda a, i: nr.gather(a, 1, i), lambda a, i: torch.gather(a, 1, i),
                [R(3, 4)], ints=[np.array([[2], [0], [3]])])      # one index a row: unique targets
    check_torch(device, lambda a, i: nr.index_select(a, 0, i), lambda a, i: torch.index_select(a, 0, i),
                [R(4, 3)], ints=[np.array([3, 0, 3])])
    check_torch(device, lambda a, i: a[i], lambda a, i: a[i], [R(5, 2)], ints=[np.array([[4, -1], [0, 2]])])
    check_torch(device, lambda a, i: a[:, i] * 2, lambda a, i: a[:, i] * 2, [R(2, 5)], ints=[np.array([1, 1, 4])])


def test_gather_one_index_a_row_backward_adds_into_zeros(device):
    """A gather with one index a row (a cross-entropy's label pick) scatters its gradient to
    distinct targets; each is still a sum 0 + g, as torch's scatter_add: -0.0 lands as +0.0."""
    dtype = fdtype(device)
    x = nr.tensor(np.ones((3, 4)), dtype=dtype, device=device, requires_grad=True)
    nr.gather(x, 1, nr.tensor(np.array([[2], [0], [3]], np.int32), device=device)).backward(
        nr.tensor(np.array([[-0.0], [1.5], [-2.0]]), dtype=dtype, device=device))
    want = np.zeros((3, 4))
    want[1, 0], want[2, 3] = 1.5, -2.0
    got = x.grad.numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))     # +0.0 at [0, 2]


def test_boolean_mask_indexing(device):
    x = nr.tensor([[1.0, -2.0], [3.0, 4.0], [-5.0, 6.0]], device=device, requires_grad=True)
    y = x[x > 0]
    assert y.tolist() == [1.0, 3.0, 4.0, 6.0]
    y.sum().backward()
    assert x.grad.tolist() == [[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]
    assert x.detach()[nr.tensor([True, False, True], device=device)].tolist() == [[1.0, -2.0], [-5.0, 6.0]]


def test_out_of_range_indices_are_reported(device):
    w = nr.ones((4, 2), device=device)
    with pytest.raises(nr.ShapeError, match="out of range"):
        nr.embedding(nr.tensor([1, 4], device=device), w).tolist()
    with pytest.raises(nr.ShapeError, match="out of range"):
        nr.index_select(w, 0, nr.tensor([-1], device=device)).tolist()


def test_a_deferred_index_check_belongs_to_the_task_that_queued_it(device):
    """Two coroutines share a device: one indexes out of range, the other reads back a good
    result; only the first sees the ShapeError (checks are per task, as grad mode is)."""
    import asyncio
    w = nr.ones((4, 2), device=device)

    async def bad():
        out = nr.embedding(nr.tensor([1, 4], device=device), w)     # cpu may raise right here
        for _ in range(3):                                          # the other task reads first
            await asyncio.sleep(0)
        return await out.read()

    async def good():
        await asyncio.sleep(0)
        out = nr.embedding(nr.tensor([0, 3], device=device), w)
        return await out.read()

    async def both():
        return await asyncio.gather(bad(), good(), return_exceptions=True)

    r_bad, r_good = asyncio.run(both())
    assert isinstance(r_bad, nr.ShapeError) and "out of range" in str(r_bad)
    assert r_good == [[1.0, 1.0], [1.0, 1.0]]


def test_dropout_is_seeded_and_scaled(device):
    x = nr.ones((64, 64), device=device)
    a = nr.dropout(x, 0.25, seed=5).numpy()
    b = nr.dropout(x, 0.25, seed=5).numpy()
    np.testing.assert_array_equal(a, b)
    kept = a != 0
    assert abs(kept.mean() - 0.75) < 0.03 and np.allclose(a[kept], 1 / 0.75)
    assert nr.dropout(x, 0.5, training=False) is x
    nr.manual_seed(1)
    c = nr.dropout(x, 0.5).numpy()
    nr.manual_seed(1)
    np.testing.assert_array_equal(c, nr.dropout(x, 0.5).numpy())


@pytest.mark.parametrize("name", ["layer_norm", "sdpa"])
def test_second_order(device, name):
    """Smooth ops are twice differentiable (the composed create_graph path) — vs torch."""
    case = {c[0]: c for c in CASES}[name]
    _, fn, tfn, xs = case
    dtype = fdtype(device)
    npd = np.float64 if dtype is nr.float64 else np.float32
    xs = [np.asarray(x, dtype=npd) for x in xs]
    ts = [nr.tensor(x, device=device, requires_grad=True) for x in xs]
    tt = [torch.tensor(x.astype(np.float64), requires_grad=True) for x in xs]
    w = rng.standard_normal(tfn(*tt).shape)
    g = nr.grad((fn(*ts) * nr.tensor(w.astype(npd), device=device)).sum(), ts, create_graph=True)
    h = nr.grad(sum((gi * gi).sum() for gi in g), ts, allow_unused=True)
    tg = torch.autograd.grad((tfn(*tt) * torch.tensor(w)).sum(), tt, create_graph=True)
    th = torch.autograd.grad(sum((gi * gi).sum() for gi in tg), tt, allow_unused=True)
    for a, b, x in zip(h, th, xs):
        a = np.zeros(x.shape) if a is None else a.numpy()
        b = np.zeros(x.shape) if b is None else b.numpy()
        np.testing.assert_allclose(a, b, **_tol(device, 100))
