"""scaled_dot_product_attention at shapes that span several blocks of the fused kernels (more than
64 query and key rows, key counts that are not multiples of a tile, head dims that are not multiples
of 4 or 16), with causal, bool and float masks broadcast over heads, in every dtype a device
stores; single rows and keys, Tq above and below Tk with is_causal, head dims 1 to 128, batch dims
broadcast between q, k and v: output and gradients of q, k, v against float64 truth from torch
(dev-only dependency)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import numr_web as nr

from _diff import dtypes_on

# measured on cpu and lavapipe: float32 within 1.2e-6 (|err| / (|want| + 1)), float16 within 4e-3
# (cpu; webgpu 3e-3): mostly the inputs' rounding to float16, as the truth takes the unrounded
# values (tests/test_webgpu_attention.py bounds the kernels' own float16 error)
TOL = {"float64": (1e-12, 1e-12), "float32": (4e-6, 4e-6), "float16": (6e-3, 6e-3)}


def _case(kind, TQ=130, TK=70, D=20, DV=12, seed=0):
    r = np.random.default_rng(seed)
    q = r.normal(size=(2, 3, TQ, D))
    k = r.normal(size=(2, 3, TK, D))
    v = r.normal(size=(2, 3, TK, DV))
    mask = None
    if kind == "bool":                    # broadcast over the heads: (2, 1, TQ, TK)
        mask = r.random((2, 1, TQ, TK)) > 0.3
        mask[0, 0, 5] = False             # a row that sees no key
    elif kind == "float":                 # broadcast over the batch: (TQ, TK)
        mask = r.normal(size=(TQ, TK))
        mask[:, 3] = -np.inf
    g = r.normal(size=(2, 3, TQ, DV))
    return q, k, v, mask, g


def _truth(q, k, v, mask, g, causal, scale):
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v)]
    m = None if mask is None else torch.tensor(mask)
    out = TF.scaled_dot_product_attention(*ts, attn_mask=m, is_causal=causal, scale=scale)
    out = torch.nan_to_num(out)           # torch's math path: NaN for a fully masked row; 2.x kernels: 0
    (out * torch.tensor(g)).sum().backward()
    return [out.detach().numpy()] + [np.nan_to_num(t.grad.numpy()) for t in ts]


@pytest.mark.parametrize("kind", ["none", "causal", "bool", "float"])
def test_attention_across_blocks_against_float64(device, kind):
    q, k, v, mask, g = _case(kind)
    causal = kind == "causal"
    want = _truth(q, k, v, mask, g, causal, 0.3)
    for dtype in (d for d in dtypes_on(device) if d.startswith("float")):
        ts = [nr.tensor(a.astype(dtype), device=device, requires_grad=True) for a in (q, k, v)]
        m = None
        if mask is not None:
            m = nr.tensor(mask if mask.dtype == bool else mask.astype(dtype), device=device)
        out = nr.scaled_dot_product_attention(*ts, attn_mask=m, is_causal=causal, scale=0.3)
        (out * nr.tensor(g.astype(dtype), device=device)).sum().backward()
        rtol, atol = TOL[dtype]
        for name, got, w in zip(("out", "dq", "dk", "dv"), [out] + [t.grad for t in ts], want):
            np.testing.assert_allclose(got.numpy().astype(np.float64), w, rtol=rtol, atol=atol,
                                       err_msg=f"{kind} {dtype} {name}")


def test_attention_long_sequence_causal(device):
    """Causal, 300 x 300, head dim 64: the key loop of the last row block passes 9 tiles."""
    q, k, v, _, g = _case("none", TQ=300, TK=300, D=64, DV=64, seed=1)
    q, k, v, g = (a[:1, :2] for a in (q, k, v, g))
    want = _truth(q, k, v, None, g, True, None)
    ts = [nr.tensor(a.astype(np.float32), device=device, requires_grad=True) for a in (q, k, v)]
    out = nr.scaled_dot_product_attention(*ts, is_causal=True)
    (out * nr.tensor(g.astype(np.float32), device=device)).sum().backward()
    for name, got, w in zip(("out", "dq", "dk", "dv"), [out] + [t.grad for t in ts], want):
        np.testing.assert_allclose(got.numpy(), w, rtol=4e-6, atol=4e-6, err_msg=name)


# (q, k, v shapes, is_causal): one query / one key, Tq < Tk and Tq > Tk under is_causal (rows past
# the keys, a partial last block), head dims 1, 3 (scalar loads), 128 (the fused kernels' widest),
# batch dims broadcast (k and v shared by the batch; q shared by the heads), no batch dims
SHAPES = [((2, 3, 1, 8), (2, 3, 1, 8), (2, 3, 1, 8), False),
          ((1, 2, 9, 1), (1, 2, 70, 1), (1, 2, 70, 3), True),
          ((1, 2, 70, 3), (1, 2, 9, 3), (1, 2, 9, 5), True),
          ((2, 2, 33, 128), (2, 2, 66, 128), (2, 2, 66, 128), True),
          ((2, 3, 40, 16), (1, 3, 65, 16), (1, 3, 65, 8), False),
          ((2, 1, 40, 16), (2, 3, 65, 16), (3, 65, 16), True),
          ((65, 24), (65, 24), (65, 24), True)]


@pytest.mark.parametrize("shapes", SHAPES, ids=lambda c: "x".join(map(str, c[0])) + ("c" if c[3] else ""))
def test_attention_shapes_against_float64(device, shapes):
    *dims, causal = shapes
    r = np.random.default_rng(2)
    q, k, v = (r.normal(size=s) for s in dims)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    g = r.normal(size=lead + (q.shape[-2], v.shape[-1]))
    want = _truth(q, k, v, None, g, causal, None)
    ts = [nr.tensor(a.astype(np.float32), device=device, requires_grad=True) for a in (q, k, v)]
    out = nr.scaled_dot_product_attention(*ts, is_causal=causal)
    (out * nr.tensor(g.astype(np.float32), device=device)).sum().backward()
    rtol, atol = TOL["float32"]
    for name, got, w in zip(("out", "dq", "dk", "dv"), [out] + [t.grad for t in ts], want):
        assert got.shape == w.shape, name
        np.testing.assert_allclose(got.numpy(), w, rtol=rtol, atol=atol, err_msg=name)
