"""The webgpu kernels behind the nn ops, in the cases the op-level suites (test_nn_ops.py,
test_nn_layers.py) do not reach: loops cut into several dispatches by a small loop budget (the
declared knob; lavapipe's real limit is 65535 iterations per invocation), rows longer than a
workgroup, repeated indices, broadcast masks, float16. References: torch in float64."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import numr_web as nr
from numr_web import dtypes

from helpers import kernels_run

import numr_web.backends.webgpu.backend as wb
ok, why = wb.WebGPUBackend.probe()
if not ok:
    pytest.fail(f"webgpu unavailable here: {why}", pytrace=False)

F32, I32, F16, B = dtypes.float32, dtypes.int32, dtypes.float16, dtypes.bool_
NP = {np.float32: F32, np.int32: I32, np.float16: F16, np.bool_: B}


def backend(**knobs):
    return wb.WebGPUBackend(**knobs)


def up(be, x):
    x = np.ascontiguousarray(x)
    return be.from_host(x, NP[x.dtype.type])


def down(be, h):
    return be.to_numpy(h).astype(np.float64)


def t64(x):
    return torch.tensor(np.asarray(x, np.float64))


def test_embedding_backward_with_repeated_indices_is_exact_and_chunked():
    """scatter_add of a char-GPT's embedding backward (vocab 65, 2050 ids: the last chunk of
    the counting sort partial, dim 128): every output
    sums its rows in index order, so the segmented reduction (no budget) and the scan cut into
    dispatches by a small budget give the same bits, close to the float64 sum."""
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 65, 2050).astype(np.int32)
    ids[:50] = 7                                            # a heavily repeated id
    g = rng.standard_normal((2050, 128)).astype(np.float32)
    want = np.zeros((65, 128))
    np.add.at(want, ids, g.astype(np.float64))
    got = {}
    for budget in (0, 600):
        be = backend(loop_budget=budget)
        index = be.expand(be.reshape(up(be, ids), (2050, 1)), (2050, 128))
        got[budget], ran = kernels_run(be, lambda: down(be, be.scatter_add((65, 128), 0, index,
                                                                            up(be, g))))
        if budget:
            assert ran["index.scatter_add"] == -(-2050 // 300)
        else:
            assert ran["index.seg_sum"] == 1 and "index.scatter_add" not in ran
    np.testing.assert_array_equal(got[0], got[600])
    sizes = np.abs(g).max() * np.bincount(ids, minlength=65)[:, None]
    assert (np.abs(got[0] - want) <= 4e-7 * sizes + 1e-30).all()


def test_gather_and_scatter_add_on_strided_views():
    be = nr.get_backend("webgpu")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 6, 4)).astype(np.float32)
    i = rng.integers(0, 6, (3, 7, 4)).astype(np.int32)      # index dims below x's, except axis
    xt = be.permute(up(be, x.transpose(2, 0, 1).copy()), (1, 2, 0))   # a strided view of x
    got = down(be, be.gather(xt, 1, up(be, i)))
    np.testing.assert_array_equal(got, torch.gather(t64(x)[:3], 1, torch.tensor(i, dtype=torch.long)))
    src = rng.standard_normal((3, 7, 4)).astype(np.float32)
    got = down(be, be.scatter_add((5, 6, 4), 1, up(be, i), up(be, src)))
    want = torch.zeros(5, 6, 4, dtype=torch.float64).scatter_add_(
        1, torch.tensor(i, dtype=torch.long), t64(src))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    ii = rng.integers(0, 4, (9, 2)).astype(np.int32)       # int32 values, axis 0
    got = be.to_numpy(be.scatter_add((4, 2), 0, up(be, ii), up(be, ii)))
    want = np.zeros((4, 2), np.int64)
    np.add.at(want, (ii, np.arange(2)[None, :]), ii)
    np.testing.assert_array_equal(got, want)


def _attn_ref(q, k, v, mask=None, causal=False, scale=None):
    """causal: torch's is_causal (query i sees keys 0..i, whatever Tq and Tk), as the engine's."""
    qt, kt, vt = (t64(x).requires_grad_() for x in (q, k, v))
    mt = None if mask is None else (torch.tensor(mask) if mask.dtype == np.bool_ else t64(mask))
    out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mt, is_causal=causal, scale=scale)
    return out, (qt, kt, vt)


@pytest.mark.parametrize("budget", [0, 200])
@pytest.mark.parametrize("kind", ["causal", "bool", "float"])
def test_attention_across_chunks(budget, kind):
    """Tq != Tk, neither a multiple of a tile, head dims 16 / 24; with budget 200 every tile of
    keys (of queries for dk / dv) is a dispatch of its own, the running state kept between them."""
    rng = np.random.default_rng(2)
    Bh, TQ, TK, D, DV = 3, 70, 150, 16, 24
    q = rng.standard_normal((2, Bh, TQ, D)).astype(np.float32)
    k = rng.standard_normal((2, Bh, TK, D)).astype(np.float32)
    v = rng.standard_normal((2, Bh, TK, DV)).astype(np.float32)
    mask = None
    if kind == "bool":                                       # broadcast over the batch dims
        mask = rng.random((TQ, TK)) < 0.7
        mask[:, 0] = True
    elif kind == "float":
        mask = rng.standard_normal((Bh, 1, TK)).astype(np.float32)
    be = backend(loop_budget=budget)
    hs = [up(be, x) for x in (q, k, v)]
    mh = None
    if mask is not None:
        mh = be.expand(up(be, mask), (2, Bh, TQ, TK))
    causal = kind == "causal"
    (out, lse), ran = kernels_run(be, lambda: be.attention(*hs, mh, causal, 0.3))
    assert ran["attention.attn_fwd"] == 1 if budget == 0 else ran["attention.attn_fwd"] > 2
    ref, leaves = _attn_ref(q, k, v, mask, causal, 0.3)
    np.testing.assert_allclose(down(be, out), ref.detach().numpy(), rtol=2e-5, atol=2e-6)
    g = rng.standard_normal(ref.shape).astype(np.float32)
    ref.backward(t64(g))
    (dq, dk, dv), ran = kernels_run(be, lambda: be.attention_backward(
        up(be, g), *hs, out, lse, mh, causal, 0.3))
    if budget:
        assert ran["attention.attn_bwd_dq"] > 2 and ran["attention.attn_bwd_dkv"] > 2
    for got, leaf in zip((dq, dk, dv), leaves):
        np.testing.assert_allclose(down(be, got), leaf.grad.numpy(), rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("D", [128, 160])
def test_attention_head_dims_up_to_128_fused_and_beyond_composed(D):
    """The fused kernels hold rows of up to 128 values; longer head dims take GEMMs and
    reductions (the scores held in memory), with the same results."""
    be = nr.get_backend("webgpu")
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 9, D)).astype(np.float32) for _ in range(3))
    mask = rng.random((9, 9)) < 0.8
    mask[:, 0] = True
    mh = be.expand(up(be, mask), (2, 9, 9))
    (out, lse), ran = kernels_run(be, lambda: be.attention(*[up(be, x) for x in (q, k, v)], mh,
                                                          False, D ** -0.5))
    assert ("attention.attn_fwd" in ran) == (D <= 128)
    ref, leaves = _attn_ref(q, k, v, mask, scale=D ** -0.5)
    np.testing.assert_allclose(down(be, out), ref.detach().numpy(), rtol=2e-5, atol=2e-6)
    g = rng.standard_normal(ref.shape).astype(np.float32)
    ref.backward(t64(g))
    grads = be.attention_backward(up(be, g), *[up(be, x) for x in (q, k, v)], out, lse, mh,
                                  False, D ** -0.5)
    for got, leaf in zip(grads, leaves):
        np.testing.assert_allclose(down(be, got), leaf.grad.numpy(), rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("rms", [False, True])
def test_layer_norm_rows_longer_than_a_workgroup(rms):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((6, 1000)) * 3 + 1).astype(np.float32)
    w, b = (rng.standard_normal(1000).astype(np.float32) for _ in range(2))
    be = nr.get_backend("webgpu")
    y, mean, rstd = be.layer_norm(up(be, x), up(be, w), None if rms else up(be, b), 1, 1e-5, rms)
    xt, wt, bt = (t64(a).requires_grad_() for a in (x, w, b))
    ref = F.rms_norm(xt, (1000,), wt, eps=1e-5) if rms else F.layer_norm(xt, (1000,), wt, bt)
    np.testing.assert_allclose(down(be, y), ref.detach().numpy(), rtol=1e-5, atol=1e-5)
    g = rng.standard_normal(x.shape).astype(np.float32)
    ref.backward(t64(g))
    dx, dw, db = be.layer_norm_backward(up(be, g), up(be, x), up(be, w), mean, rstd, 1, rms)
    np.testing.assert_allclose(down(be, dx), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(down(be, dw), wt.grad.numpy(), rtol=1e-4, atol=1e-5)
    assert db is None if rms else np.allclose(down(be, db), bt.grad.numpy(), rtol=1e-5, atol=1e-5)
    # gradients of their own (a leaf's .grad would copy a view of them)
    assert not be.is_view(dw) and (db is None or not be.is_view(db))


def test_float16_norm_and_attention():
    be = nr.get_backend("webgpu")
    if not be.f16:
        pytest.skip("adapter without shader-f16")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 64)).astype(np.float16)
    y, _, _ = be.layer_norm(up(be, x), None, None, 1, 1e-5, False)
    ref = F.layer_norm(t64(x), (64,)).numpy()
    np.testing.assert_allclose(down(be, y), ref, rtol=2e-3, atol=2e-3)
    q, k, v = (rng.standard_normal((2, 7, 8)).astype(np.float16) for _ in range(3))
    out, _ = be.attention(*[up(be, a) for a in (q, k, v)], None, True, 0.5)
    ref, _ = _attn_ref(q, k, v, causal=True, scale=0.5)
    np.testing.assert_allclose(down(be, out), ref.detach().numpy(), rtol=2e-3, atol=2e-3)
    g = rng.standard_normal((9, 3)).astype(np.float16)
    ids = np.array([0, 2, 0, 0, 1, 2, 0, 1, 0], np.int32)
    got = down(be, be.scatter_add((3, 3), 0, be.expand(be.reshape(up(be, ids), (9, 1)), (9, 3)),
                                  up(be, g)))
    want = np.zeros((3, 3))
    np.add.at(want, ids, g.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("kw", [dict(kernel=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2)),
                                dict(kernel=(2, 2), stride=(2, 2), padding=(0, 0), dilation=(1, 1))])
def test_im2col_and_col2im_match_unfold_and_fold(kw):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    be = nr.get_backend("webgpu")
    args = (kw["kernel"], kw["stride"], kw["padding"], kw["dilation"])
    cols = be.im2col(up(be, x), *args)
    want = F.unfold(t64(x), *args[:1], dilation=args[3], padding=args[2], stride=args[1])
    np.testing.assert_array_equal(down(be, cols), want.numpy().astype(np.float32))
    c = rng.standard_normal(cols.shape).astype(np.float32)
    got = down(be, be.col2im(up(be, c), x.shape, *args))
    want = F.fold(t64(c), (7, 6), args[0], dilation=args[3], padding=args[2], stride=args[1])
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-6, atol=1e-6)
    pooled = down(be, be.im2col(up(be, x), (3, 3), (2, 2), (1, 1), (1, 1), float("-inf")))
    assert np.isneginf(pooled[0, 0, 0]) and not np.isinf(pooled[0, 4]).any()


def test_prod_of_a_long_row():
    """The workgroup schedule (few long rows): lanes other than the first start from 1."""
    x = np.random.default_rng(7).uniform(0.9, 1.1, (3, 700)).astype(np.float32)
    got = nr.tensor(x, device="webgpu").prod(1).numpy()
    np.testing.assert_allclose(got, np.prod(x.astype(np.float64), axis=1), rtol=2e-5)


def test_attention_backward_with_the_output_as_its_gradient():
    """dout may be the forward's output itself (y.backward(y)): read-only bindings for both."""
    rng = np.random.default_rng(8)
    q, k, v = (rng.standard_normal((2, 6, 8)).astype(np.float32) for _ in range(3))
    x = [nr.tensor(a, device="webgpu", requires_grad=True) for a in (q, k, v)]
    y = nr.scaled_dot_product_attention(*x, is_causal=True)
    y.backward(y.detach())
    ref, leaves = _attn_ref(q, k, v, causal=True)
    ref.backward(ref.detach())
    for got, leaf in zip(x, leaves):
        np.testing.assert_allclose(got.grad.numpy(), leaf.grad.numpy(), rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("shape, kernel, stride", [((2, 3, 8, 9), (2, 3), (2, 3)),   # windows tile x
                                                   ((2, 3, 7, 9), (2, 3), (2, 3)),   # a row left over
                                                   ((1, 2, 8, 8), (3, 3), (2, 2))])  # overlapping
def test_max_pool_backward_per_window_and_per_element(shape, kernel, stride):
    """Max pooling's gradient: where the windows tile the input exactly, one invocation per window
    writes it (dy at the argmax, 0 elsewhere); otherwise each element gathers from the windows
    that chose it. Both exact (one dy value per element here, or a sum of two for overlaps)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float32)
    x[0, 0, 0, :3] = 1.5                                   # a tie: the first one wins, as torch
    xt = t64(x).requires_grad_()
    y = F.max_pool2d(xt, kernel, stride)
    g = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    y.backward(t64(g))
    be = backend()
    yh, idx = be.max_pool2d(up(be, x), kernel, stride, (0, 0), (1, 1), tuple(y.shape[2:]))
    dx, ran = kernels_run(be, lambda: be.max_pool2d_backward(up(be, g), idx, shape, kernel, stride,
                                                             (0, 0), (1, 1)))
    assert ran == {"conv.maxpool_bwd_tiles" if shape[2] == 8 and stride == kernel else
                   "conv.maxpool_bwd": 1}
    np.testing.assert_array_equal(down(be, yh), y.detach().numpy())
    np.testing.assert_allclose(down(be, dx), xt.grad.numpy(), rtol=2 ** -23, atol=0)


@pytest.mark.parametrize("cn", [False, True])
def test_im2col_and_col2im_with_the_shape_as_constants(cn):
    """GPU adapters compile im2col / col2im with the layer's shape as override constants (SPEC):
    the same columns and the same gather as the words-only pipelines (which this CPU adapter
    runs) and as torch's unfold / fold, with stride, padding and dilation."""
    from numr_web.backends.webgpu import launch_conv as lc
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 9, 7)).astype(np.float32)
    geom = ((3, 2), (2, 1), (1, 2), (1, 2))                   # kernel, stride, padding, dilation
    kw = dict(kernel_size=geom[0], stride=geom[1], padding=geom[2], dilation=geom[3])
    cols = F.unfold(t64(x), **kw)                            # (N, C*kh*kw, L)
    n, ck, L = cols.shape
    be = backend()
    for spec in (False, True):
        shape = (ck, n * L) if cn else (n, ck, L)
        got = lc.im2col(be.d, up(be, x), be.d.alloc(shape, F32), *geom, 0.0, cn, spec)
        want = cols.permute(1, 0, 2).reshape(ck, n * L) if cn else cols
        np.testing.assert_array_equal(down(be, got), want.numpy())
        back = lc.col2im(be.d, got, be.d.alloc(x.shape, F32), *geom, cn, spec)
        np.testing.assert_allclose(down(be, back), F.fold(cols, x.shape[2:], **kw).numpy(),
                                   rtol=4 * 2 ** -23, atol=0)


def test_a_linear_layers_weight_gradient_arrives_without_a_copy():
    """nn.Linear multiplies by weight.T; the weight's gradient is computed in the weight's own
    layout and the transposes undo each other (no view left for the leaf's .grad to copy): the
    backward's kernels are GEMMs and the bias's column sums only. Values against torch float64."""
    rng = np.random.default_rng(8)
    x, g = rng.standard_normal((64, 32)), rng.standard_normal((64, 48))
    lin = nr.nn.Linear(32, 48, device="webgpu")
    y = lin(nr.tensor(x.astype(np.float32), device="webgpu"))
    be = nr.get_backend("webgpu")
    _, ran = kernels_run(be, lambda: (y.backward(nr.tensor(g.astype(np.float32), device="webgpu")),
                                      lin.weight.grad.numpy()))
    assert not any(k.startswith("elementwise.") for k in ran), ran
    wt = torch.tensor(lin.weight.detach().numpy().astype(np.float64), requires_grad=True)
    F.linear(t64(x), wt).backward(t64(g))
    np.testing.assert_allclose(lin.weight.grad.numpy(), wt.grad.numpy(), rtol=1e-5, atol=1e-5)
