"""scaled_dot_product_attention forward + backward in the browser (Pyodide, WebGPU in Chromium:
SwiftShader here) on the tiled kernels of shaders/attention.wgsl, against torch float64 truth
computed in this process: several row blocks and partial tiles, Tq != Tk, bool and float masks
broadcast over batch dims (a row that sees no key), head dims that are not multiples of 4 and the
widest fused one, and the keys cut into one dispatch per tile by a small loop budget (the running
state kept between dispatches, as on Mesa llvmpipe)."""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

# (name, q, k, v shapes, mask shape or None, mask kind, is_causal, loop budget)
CASES = [("causal", (1, 2, 70, 20), (1, 2, 70, 20), (1, 2, 70, 12), None, None, True, 0),
         ("bool", (2, 2, 37, 8), (2, 2, 53, 8), (2, 2, 53, 8), (2, 1, 37, 53), "bool", False, 0),
         ("float", (2, 2, 37, 6), (2, 2, 53, 6), (2, 2, 53, 7), (37, 53), "float", False, 0),
         ("d128", (1, 1, 9, 128), (1, 1, 11, 128), (1, 1, 11, 128), None, None, True, 0),
         ("chunked", (1, 2, 70, 20), (1, 2, 150, 20), (1, 2, 150, 12), None, None, True, 200)]

BROWSER = """
import json
import numr_web as nr
from numr_web.backends import get_backend
be = get_backend("webgpu")
res = {"workgroup_bytes": be.adapter.limits["maxComputeWorkgroupStorageSize"]}


def flat(x):
    return [y for r in x for y in flat(r)] if isinstance(x, list) else [x]


for case in json.loads(CASES_JSON):
    before = dict(be.info()["dispatches"])
    budget, be.loop_budget = be.loop_budget, case["budget"]
    try:
        q, k, v = (nr.tensor(case[n], device="webgpu", requires_grad=True) for n in "qkv")
        mask = None if case["mask"] is None else nr.tensor(case["mask"], device="webgpu")
        if mask is not None and case["kind"] == "float":
            mask = nr.where(mask > -1e30, mask, float("-inf"))
        out = nr.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=case["causal"])
        (out * nr.tensor(case["g"], device="webgpu")).sum().backward()
        got = [flat(await t.read()) for t in (out, q.grad, k.grad, v.grad)]
    finally:
        be.loop_budget = budget
    ran = {k: v - before.get(k, 0) for k, v in be.info()["dispatches"].items()
           if k.startswith("attention") and v != before.get(k, 0)}
    res[case["name"]] = {"got": got, "ran": ran}
res
"""


def _case(name, qs, ks, vs, ms, kind, causal, budget, r):
    q, k, v = (r.standard_normal(s).astype(np.float32) for s in (qs, ks, vs))
    lead = np.broadcast_shapes(qs[:-2], ks[:-2], vs[:-2])
    g = r.standard_normal(lead + (qs[-2], vs[-1])).astype(np.float32)
    mask = None
    if kind == "bool":
        mask = r.random(ms) < 0.6
        mask[..., 3, :] = False                       # query 3 sees no key: 0 out, 0 gradients
    elif kind == "float":
        mask = r.standard_normal(ms).astype(np.float32)
        mask[:, 5] = -np.inf
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v)]
    out = F.scaled_dot_product_attention(*ts, attn_mask=None if mask is None else torch.tensor(mask),
                                         is_causal=causal)
    out = torch.nan_to_num(out)                       # torch's math path: NaN for a row seeing none
    out.backward(torch.tensor(g, dtype=torch.float64))
    want = [out.detach().numpy()] + [np.nan_to_num(t.grad.numpy()) for t in ts]
    jmask = None
    if mask is not None:                              # JSON has no -inf: the page restores it
        jmask = mask.tolist() if kind == "bool" else np.where(np.isinf(mask), -3e38, mask).tolist()
    spec = {"name": name, "q": q.tolist(), "k": k.tolist(), "v": v.tolist(), "g": g.tolist(),
            "mask": jmask, "kind": kind, "causal": causal, "budget": budget}
    return spec, want


def test_tiled_attention_forward_and_backward_in_the_browser(app):
    r = np.random.default_rng(0)
    specs, wants = zip(*(_case(*c, r) for c in CASES))
    app.goto("index.html")
    res = app.py(f"CASES_JSON = {json.dumps(json.dumps(list(specs)))}\n" + BROWSER)
    print(f"\nbrowser attention: workgroup memory {res['workgroup_bytes']}, "
          + ", ".join(f"{c[0]}: {res[c[0]]['ran']}" for c in CASES))
    for (name, *_), want in zip(CASES, wants):
        ran = res[name]["ran"]
        assert {"attention.attn_fwd", "attention.attn_bwd_dq", "attention.attn_bwd_dkv"} <= set(ran)
        if name == "chunked":                         # one dispatch per tile of keys / queries
            assert ran["attention.attn_fwd"] > 1 and ran["attention.attn_bwd_dkv"] > 1, ran
        for what, got, w in zip(("out", "dq", "dk", "dv"), res[name]["got"], want):
            got = np.asarray(got, np.float64).reshape(w.shape)
            err = np.max(np.abs(got - w) / (np.abs(w) + 1))
            assert err <= 32 * 2.0 ** -23, f"{name} {what}: {err:.3g}"
    app.assert_clean()
