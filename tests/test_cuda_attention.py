"""scaled_dot_product_attention on a CUDA GPU (attention_mma.cu's tensor-core kernels for float16,
attention_tiled.cu's SIMT kernels for float32, the row kernels of attention.cu for float64), through
the public API and the backend's Attention and its tile knobs: outputs and the
gradients of q, k, v against float64 references (tests/helpers.attention_reference) over head dims
up to 128 and not multiples of 4, sequence lengths that are not multiples of a tile (1, 63, 65,
200, 1024), Tq != Tk, causal, bool and additive masks broadcast over batch dims, rows that see no
key; the same bits on every run (no atomics); every tile shape the `tiles` knob may be tuned to
gives the same answers. Skipped without a usable CUDA device."""
import numpy as np
import pytest

import numr_web as nr
from numr_web.backends.cuda import attention as A

from helpers import attention_reference

OK, WHY = nr.backends.probe("cuda")
pytestmark = pytest.mark.skipif(not OK, reason=f"cuda: {WHY}")

# |got - want| <= rtol |want| + atol (1 + max |want|): float32 sums of float32 products (torch's
# own float32 SDPA is off by about 1e-6 here); float16 storage, float32 compute, one rounding of
# the results (2^-11 relative) after float16 inputs
TOL = {"float32": (4e-6, 4e-6), "float16": (2e-3, 2e-3), "float64": (1e-12, 1e-12)}


def _data(lead, tq, tk, d, dv, dtype, seed):
    r = np.random.default_rng(seed)
    q, k, v, g = (r.normal(size=(*lead, n, w)).astype(dtype)
                  for n, w in ((tq, d), (tk, d), (tk, dv), (tq, dv)))
    return q, k, v, g


def _sdpa(q, k, v, g, mask=None, causal=False, scale=None, dtype="float32"):
    ts = [nr.tensor(a, device="cuda", requires_grad=True) for a in (q, k, v)]
    m = None if mask is None else nr.tensor(mask, device="cuda")
    out = nr.scaled_dot_product_attention(*ts, attn_mask=m, is_causal=causal, scale=scale)
    out.backward(nr.tensor(g, device="cuda"))
    return [out.numpy()] + [t.grad.numpy() for t in ts]


def _check(got, want, dtype, what=""):
    rtol, atol = TOL[dtype]
    for name, g, w in zip(("out", "dq", "dk", "dv"), got, want):
        g = np.asarray(g, np.float64)
        assert np.isfinite(g).all(), (what, name)
        err = np.abs(g - w) - rtol * np.abs(w)
        assert err.max(initial=0) <= atol * (1 + np.abs(w).max(initial=0)), \
            (what, name, float(np.abs(g - w).max()))


SHAPES = [   # lead dims, Tq, Tk, d, dv
    ((2, 3), 1, 1, 8, 8),
    ((2, 3), 63, 63, 64, 64),
    ((1, 4), 65, 65, 64, 64),
    ((2, 2), 200, 70, 20, 12),       # Tq > Tk, d and dv not multiples of 4
    ((3,), 70, 200, 32, 32),         # Tq < Tk
    ((1, 2), 129, 129, 100, 128),    # head dim 128, d != dv
    ((1, 1), 40, 40, 128, 128),
    ((2, 2), 300, 300, 16, 16),
]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lead,tq,tk,d,dv", SHAPES)
def test_cuda_attention_against_float64(lead, tq, tk, d, dv, causal, dtype):
    q, k, v, g = _data(lead, tq, tk, d, dv, dtype, seed=tq + d)
    scale = 0.7 / np.sqrt(d)
    want = attention_reference(q, k, v, None, causal, scale, g)
    got = _sdpa(q, k, v, g, causal=causal, scale=scale)
    assert got[0].dtype == np.dtype(dtype)
    _check(got, [want[0]] + list(want[2:]), dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("kind", ["bool", "add"])
def test_cuda_attention_masks(kind, dtype):
    """Masks broadcast over the heads (bool) or the batch (additive), rows that see no key."""
    q, k, v, g = _data((2, 3), 130, 77, 40, 24, dtype, seed=3)
    r = np.random.default_rng(4)
    if kind == "bool":
        mask = r.random((2, 1, 130, 77)) > 0.3
        mask[0, 0, 5] = False
        mask[1, 0, 70:] = False
    else:
        mask = r.normal(size=(130, 77)).astype(dtype)
        mask[:, 3] = -np.inf
        mask[9] = -np.inf
    want = attention_reference(q, k, v, mask, False, 0.3, g)
    got = _sdpa(q, k, v, g, mask=mask, scale=0.3)
    _check(got, [want[0]] + list(want[2:]), dtype)
    dead = (0, slice(None), 5) if kind == "bool" else (slice(None), slice(None), 9)
    assert np.all(got[0][dead] == 0) and np.all(got[1][dead] == 0)


@pytest.mark.parametrize("t", [256, 1024])
def test_cuda_attention_long_causal(t):
    """The benchmark's shape (d = 64, causal) at T = 256 and 1024: every tile below the diagonal."""
    q, k, v, g = _data((1, 2), t, t, 64, 64, "float32", seed=t)
    want = attention_reference(q, k, v, None, True, 64 ** -0.5, g)
    _check(_sdpa(q, k, v, g, causal=True), [want[0]] + list(want[2:]), "float32")


def test_cuda_attention_deterministic():
    """The backward accumulates without atomics: the same bits on every run."""
    q, k, v, g = _data((2, 4), 300, 300, 64, 64, "float32", seed=7)
    first = _sdpa(q, k, v, g, causal=True)
    for _ in range(2):
        for a, b in zip(first, _sdpa(q, k, v, g, causal=True)):
            assert a.tobytes() == b.tobytes()


def _direct(att, dtype, causal, mask_kind, seed=11):
    """Attention's forward and backward called directly (CuPy arrays) against the reference."""
    import cupy as cp
    q, k, v, g = _data((2, 2), 150, 90, 40, 40, dtype, seed=seed)
    m = None if mask_kind is None else np.random.default_rng(seed).random((2, 2, 150, 90)) > 0.5
    want = attention_reference(q, k, v, m, causal, 0.2, g)
    dev = [None if a is None else cp.asarray(a) for a in (q, k, v, m, g)]
    out, lse = att.forward(*dev[:4], causal, 0.2)
    assert lse.dtype == cp.float32                 # the tiled kernels ran
    grads = att.backward(dev[4], *dev[:3], out, lse, dev[3], causal, 0.2)
    _check([cp.asnumpy(a) for a in (out, *grads)], [want[0]] + list(want[2:]), dtype,
           what=(dtype, causal, mask_kind))
    np.testing.assert_allclose(cp.asnumpy(lse), want[1], rtol=4e-6, atol=4e-6)


@pytest.mark.parametrize("tile", [(4, 8, 64), (8, 4, 16)])
def test_cuda_attention_tile_shapes(tile):
    """Any tile shape the `tiles` knob of the backend's Attention may be tuned to (warps, rows a
    thread, tile columns) computes the same results, masks and all; float16 on these SIMT
    kernels too (tensor_cores off) keeps its log-sum-exp in float32."""
    att = A.Attention(nr.backends.get_backend("cuda"))
    att.tiles = {kernel: {dm: tile for dm in A.TILED_DIMS} for kernel in A.KERNELS}
    att.tensor_cores = False
    for dtype, causal, mask in (("float32", True, None), ("float32", False, "bool"),
                                ("float16", True, None)):
        _direct(att, dtype, causal, mask)


@pytest.mark.parametrize("tile", [(2, 32), (8, 64)])
def test_cuda_attention_tensor_core_tile_shapes(tile):
    """The same for attention_mma.cu's tiles (warps, tile columns), float16 on tensor cores."""
    att = A.Attention(nr.backends.get_backend("cuda"))
    att.tc_tiles = {kernel: {dm: tile for dm in A.TILED_DIMS} for kernel in A.KERNELS}
    for causal, mask in ((True, None), (False, "bool")):
        _direct(att, "float16", causal, mask)
