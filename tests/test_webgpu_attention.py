"""The webgpu attention kernels (shaders/attention.wgsl, tiled FlashAttention-2 style) in the cases
the op-level suites (differential/test_attention_*.py, test_nn_ops.py) do not reach: every tile
shape of the table (the H200's among them) on the declared knob NUMR_WEBGPU_ATTN_TILE, a key
sequence longer than Mesa llvmpipe's loop limit allows one invocation, the tile table against
WebGPU's default limits, the knob's errors, float16. References: torch in float64."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import numr_web as nr
from numr_web import dtypes
from numr_web.backends.webgpu import launch_attention as la

from helpers import kernels_run

import numr_web.backends.webgpu.backend as wb
ok, why = wb.WebGPUBackend.probe()
if not ok:
    pytest.fail(f"webgpu unavailable here: {why}", pytrace=False)

F32, F16 = dtypes.float32, dtypes.float16
EPS32, EPS16 = 2.0 ** -23, 2.0 ** -10
# WebGPU's default limits, those browsers / lavapipe grant, the H200's Vulkan driver's
LIMITS = {"default": {"maxComputeWorkgroupStorageSize": 16384,
                      "maxComputeInvocationsPerWorkgroup": 256},
          "32k": {"maxComputeWorkgroupStorageSize": 32768,
                  "maxComputeInvocationsPerWorkgroup": 256},
          "h200": {"maxComputeWorkgroupStorageSize": 49152,
                   "maxComputeInvocationsPerWorkgroup": 1024}}


def _truth(q, k, v, g, mask=None, causal=False, scale=None):
    ts = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in (q, k, v)]
    m = None if mask is None else torch.tensor(mask)
    out = F.scaled_dot_product_attention(*ts, attn_mask=m, is_causal=causal, scale=scale)
    out.backward(torch.tensor(g.astype(np.float64)))
    return [out.detach().numpy()] + [t.grad.numpy() for t in ts]


def _run(be, q, k, v, g, mask=None, causal=False, scale=None):
    """out, dq, dk, dv through the backend's primitives (a backend of one's own: its knobs)."""
    dt = F16 if q.dtype == np.float16 else F32
    hs = [be.from_host(np.ascontiguousarray(a), dt) for a in (q, k, v)]
    mh = None
    if mask is not None:
        mh = be.expand(be.from_host(mask, dtypes.bool_), q.shape[:-1] + (k.shape[-2],))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    out, lse = be.attention(*hs, mh, causal, scale)
    grads = be.attention_backward(be.from_host(g, dt), *hs, out, lse, mh, causal, scale)
    return [be.to_numpy(x).astype(np.float64) for x in (out,) + tuple(grads)]


def _close(got, want, tol):
    for name, x, w in zip(("out", "dq", "dk", "dv"), got, want):
        err = np.max(np.abs(x - w) / (np.abs(w) + 1))
        assert err <= tol, f"{name}: {err:.3g} > {tol:.3g}"


@pytest.mark.parametrize("limits", list(LIMITS))
def test_every_head_dim_has_a_tile_within_the_limits(limits):
    """Head dims 1..ATTN_MAX_D of q / k and of v, on a device with WebGPU's default limits too:
    each kernel finds a tile of the table whose workgroup memory and invocations fit."""
    lim = LIMITS[limits]
    for kind in la.KINDS:
        for d4 in range(1, la.ATTN_MAX_D // 4 + 1):
            for dv4 in (1, d4, la.ATTN_MAX_D // 4):
                c = la.tiles(kind, d4, dv4, lim)
                assert 16 * c["TILE"] <= lim["maxComputeWorkgroupStorageSize"]
                assert c["NRG"] * c["NL"] <= lim["maxComputeInvocationsPerWorkgroup"]


def test_the_h200_takes_the_first_tiles_at_head_dim_64():
    got = {kind: la.tiles(kind, 16, 16, LIMITS["h200"]) for kind in la.KINDS}
    for kind, c in got.items():
        assert (c["NRG"], c["NL"], c["SK"]) == la.TILES[kind][0]


# tile shapes run on this device: the H100's and H200's (16x8x4; 16x8x8 before), the
# smallest (one column a lane), 16 columns a lane (every unrolled column), 2 and 16 lanes a row
# group (256 invocations), and a mix
TILES = ["16x8x8", "16x8x4", "4x8x1", "8x2x16", "fwd=16x16x4,dq=16x16x4,dkv=16x16x2",
         "fwd=8x4x8,dq=4x8x2,dkv=8x4x4"]


@pytest.mark.parametrize("tile", TILES)
def test_tile_shapes_against_float64(tile):
    """Tq != Tk, neither a multiple of a tile, head dims 12 / 20 (v's not a multiple of 4 vec4s
    per lane), causal and a bool mask broadcast over the heads with a row that sees no key."""
    be = wb.WebGPUBackend(attn_tile=tile)
    r = np.random.default_rng(1)
    q = r.standard_normal((2, 3, 37, 12)).astype(np.float32)
    k = r.standard_normal((2, 3, 70, 12)).astype(np.float32)
    v = r.standard_normal((2, 3, 70, 20)).astype(np.float32)
    g = r.standard_normal((2, 3, 37, 20)).astype(np.float32)
    mask = np.broadcast_to(r.random((2, 1, 37, 70)) < 0.6, (2, 3, 37, 70)).copy()
    mask[:, :, 4] = False
    for m, causal in ((None, True), (mask, False)):
        want = [np.nan_to_num(w) for w in _truth(q, k, v, g, m, causal, 0.4)]
        _close(_run(be, q, k, v, g, m, causal, 0.4), want, 32 * EPS32)
    assert {"attention.attn_fwd", "attention.attn_bwd_dq", "attention.attn_bwd_dkv"} <= \
        set(be.info()["dispatches"])


def test_keys_past_the_loop_limit_of_one_invocation():
    """70000 keys: one invocation walking them all would run more loop iterations than Mesa
    llvmpipe allows (65535, then it stops silently); the backend's loop budget (its default on
    llvmpipe) cuts the keys into dispatches, and the result is exact to float32 rounding."""
    be = wb.WebGPUBackend()
    r = np.random.default_rng(2)
    q, k, v = (r.standard_normal((1, n, 4)).astype(np.float32) for n in (5, 70000, 70000))
    g = r.standard_normal((1, 5, 4)).astype(np.float32)
    before = dict(be.info()["dispatches"])
    got = _run(be, q, k, v, g)
    want = _truth(q, k, v, g)
    for x, w in zip(got, want):
        assert np.max(np.abs(x - w)) <= 64 * EPS32 * np.max(np.abs(w))
    if "llvmpipe" in str(be.adapter.name).lower():
        runs = be.info()["dispatches"]["attention.attn_fwd"] - before.get("attention.attn_fwd", 0)
        assert runs > 1


def test_attn_tile_knob_errors():
    with pytest.raises(nr.BackendUnavailableError, match="NUMR_WEBGPU_ATTN_TILE"):
        wb.WebGPUBackend(attn_tile="64")
    with pytest.raises(nr.BackendUnavailableError, match="RxLxS"):
        wb.WebGPUBackend(attn_tile="fwd=16x8x17")
    be = wb.WebGPUBackend(attn_tile="64x16x16")                 # parses; cannot fit any device
    assert be.info()["knobs"]["attn_tile"] == "64x16x16"
    x = be.from_host(np.ones((1, 8, 8), np.float32), F32)
    with pytest.raises(nr.BackendLimitError, match="64x16x16.*use 'auto'"):
        be.attention(x, x, x, None, False, 1.0)


@pytest.mark.parametrize("case", ["causal", "mask"])
def test_float16_with_float32_accumulation(case):
    """float16 storage, f32 arithmetic and a float32 log-sum-exp: the output within rounding of
    float16 (half an epsilon) of the float64 result on the same float16 inputs; the gradients
    within 2 epsilons (the backward's delta = rowsum(dout * out) reads the rounded output).
    Head dims 20 / 12 (vec4 loads) and, with a bool mask, 6 / 7 (element loads)."""
    be = nr.get_backend("webgpu")
    if not be.f16:
        pytest.skip("adapter without shader-f16")
    r = np.random.default_rng(3)
    tq, tk, d, dv = (70, 45, 20, 12) if case == "causal" else (37, 53, 6, 7)
    q = r.standard_normal((2, 3, tq, d)).astype(np.float16)
    k = r.standard_normal((2, 3, tk, d)).astype(np.float16)
    v = r.standard_normal((2, 3, tk, dv)).astype(np.float16)
    g = r.standard_normal((2, 3, tq, dv)).astype(np.float16)
    mask = None if case == "causal" else np.broadcast_to(r.random((2, 1, tq, tk)) < 0.7,
                                                         (2, 3, tq, tk)).copy()
    got = _run(be, q, k, v, g, mask, case == "causal")
    want = _truth(q, k, v, g, mask, case == "causal")
    _close(got[:1], want[:1], EPS16 / 2)
    _close(got, want, 2 * EPS16)


def test_long_sequences_take_their_own_first_tiles():
    from numr_web.backends.webgpu import launch_attention as la
    short = {k: la.tiles(k, 16, 16, LIMITS["h200"], cols=256) for k in la.KINDS}
    long_ = {k: la.tiles(k, 16, 16, LIMITS["h200"], cols=la.LONG) for k in la.KINDS}
    for kind, tile in la.LONG_TILES.items():
        assert (long_[kind]["NRG"], long_[kind]["NL"], long_[kind]["SK"]) == tile
        assert (short[kind]["NRG"], short[kind]["NL"], short[kind]["SK"]) == la.TILES[kind][0]
    assert long_["dq"] == short["dq"]


@pytest.mark.parametrize("head_dim", [16, 6])     # vec4 reads; element reads (not a multiple of 4)
def test_heads_of_a_fused_projection_are_read_and_written_in_place(head_dim):
    """q, k, v as the heads of one (B, T, 3C) projection (rows 3C apart) and the output's heads
    merged back to (B, T, C), as a GPT block does: the forward runs the attention kernel alone (no
    copy of a head, the merge a view), the backward writes dq, dk, dv where the split's backward
    finds them side by side, the projection's gradient (no copy but the leaf's .grad, which
    owns its memory); the output and that gradient against float64 torch."""
    B, T, H, C = 2, 37, 3, 3 * head_dim
    r = np.random.default_rng(5)
    x, g = r.normal(size=(B, T, 3 * C)), r.normal(size=(B, T, C))

    def block(lib, xt):
        q, k, v = (t.reshape(B, T, H, head_dim).transpose(1, 2) for t in xt.split(C, dim=2))
        att = nr.scaled_dot_product_attention if lib is nr else F.scaled_dot_product_attention
        return att(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)

    xr = torch.tensor(x, requires_grad=True)
    want = block(torch, xr)
    want.backward(torch.tensor(g))
    be = nr.get_backend("webgpu")
    xt = nr.tensor(x.astype(np.float32), device="webgpu", requires_grad=True)
    y = block(nr, xt)
    _, fwd = kernels_run(be, lambda: block(nr, xt).numpy())
    assert fwd == {"attention.attn_fwd": 1}, fwd
    _, bwd = kernels_run(be, lambda: (y.backward(nr.tensor(g.astype(np.float32), device="webgpu")),
                                       xt.grad.numpy()))
    copies = bwd.get("elementwise.unary", 0) + bwd.get("elementwise.unary4", 0)
    assert copies == 1, bwd                                  # xt.grad's own copy of the view
    tol = 8 * EPS32 * np.sqrt(T)
    for got, w in ((y.numpy(), want.detach().numpy()), (xt.grad.numpy(), xr.grad.numpy())):
        assert np.max(np.abs(got - w) / (np.abs(w) + 1)) <= tol


@pytest.mark.parametrize("layout", ["same", "overlapping"])
def test_gradients_of_views_sharing_memory_are_not_written_in_place(layout):
    """q, k, v views of one buffer that are not disjoint (one tensor three times; heads 4 values
    apart in rows of 8): the gradients each in their own memory, summed as torch's."""
    B, T, d = 2, 9, 8
    r = np.random.default_rng(6)
    x, g = r.normal(size=(B, T, 2 * d)), r.normal(size=(B, 1, T, d))

    def views(xt):                  # (B, 1, T, d) heads, as a fused projection's
        cut = (0, 0, 0) if layout == "same" else (0, 4, d)
        return [xt[..., c:c + d].reshape(B, T, 1, d).transpose(1, 2) for c in cut]
    xr = torch.tensor(x, requires_grad=True)
    F.scaled_dot_product_attention(*views(xr), is_causal=True).backward(torch.tensor(g))
    xt = nr.tensor(x.astype(np.float32), device="webgpu", requires_grad=True)
    nr.scaled_dot_product_attention(*views(xt), is_causal=True).backward(
        nr.tensor(g.astype(np.float32), device="webgpu"))
    w = xr.grad.numpy()
    assert np.max(np.abs(xt.grad.numpy() - w) / (np.abs(w) + 1)) <= 8 * EPS32 * np.sqrt(T)
