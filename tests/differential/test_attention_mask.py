"""scaled_dot_product_attention where a mask hides every key of a query row: torch 2.x gives 0 for
that row (and 0 gradients through it), not NaN. Checked on each device, for bool and float masks,
with the fused kernels and the composed path (head dims past the fused kernels' limit), through
the create_graph VJP, and with no keys at all."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from torch.nn.attention import SDPBackend, sdpa_kernel

import numr_web as nr

def _data(d, seed=0):
    r = np.random.default_rng(seed)
    q, k, v = (r.normal(size=(2, 4, n, d)).astype(np.float32) for n in (3, 5, 5))
    keep = np.ones((3, 5), bool)
    keep[1] = False                       # query 1 sees nothing
    keep[2, :2] = False
    return q, k, v, keep


def _torch(q, k, v, mask, dtype, float_mask, mask_grad=False):
    ts = [torch.tensor(a, dtype=dtype, requires_grad=True) for a in (q, k, v)]
    m = torch.tensor(mask)
    if float_mask:
        m = torch.zeros(mask.shape, dtype=dtype).masked_fill(~m, float("-inf"))
        m.requires_grad_(mask_grad)
    out = TF.scaled_dot_product_attention(*ts, attn_mask=m)
    r = torch.tensor(np.random.default_rng(9).normal(size=out.shape), dtype=dtype)
    (out * r).sum().backward()
    return [out.detach().numpy()] + [t.grad.numpy() for t in ts] + \
        ([m.grad.numpy()] if mask_grad else []), r.numpy()


@pytest.mark.parametrize("d", [4, 136])
@pytest.mark.parametrize("kind", ["bool", "float", "float_grad"])
def test_fully_masked_rows_give_zero(device, d, kind):
    q, k, v, keep = _data(d)
    float_mask, mask_grad = kind != "bool", kind == "float_grad"
    want, r = _torch(q, k, v, keep, torch.float64, float_mask, mask_grad)
    want32, _ = _torch(q, k, v, keep, torch.float32, float_mask, mask_grad)
    xs = [nr.tensor(a, device=device, requires_grad=True) for a in (q, k, v)]
    m = nr.tensor(keep, device=device)
    if float_mask:
        m = nr.where(m, 0.0, float("-inf")).astype("float32")
        if mask_grad:
            m = m.detach()
            m.requires_grad = True
    out = nr.scaled_dot_product_attention(*xs, attn_mask=m)
    (out * nr.tensor(r.astype(np.float32), device=device)).sum().backward()
    got = [out.numpy()] + [x.grad.numpy() for x in xs] + ([m.grad.numpy()] if mask_grad else [])
    assert np.all(got[0][:, :, 1] == 0) and np.all(got[1][:, :, 1] == 0)
    for i, (g, w, w32) in enumerate(zip(got, want, want32)):
        assert np.isfinite(g).all(), i
        # float32 sums of products: bound by torch's own float32 error on the tensor, or a few
        # float32 epsilons of its largest value
        tol = max(4 * np.abs(w32 - w).max(), 8 * 2.0 ** -23 * np.abs(w).max())
        assert np.abs(g - w).max() <= tol, (i, np.abs(g - w).max(), tol)


def test_fully_masked_rows_second_order(device):
    q, k, v, keep = _data(4, 1)
    xs = [nr.tensor(a, device=device, requires_grad=True) for a in (q, k, v)]
    out = nr.scaled_dot_product_attention(*xs, attn_mask=nr.tensor(keep, device=device))
    gq, = nr.grad((out * out).sum(), [xs[0]], create_graph=True)
    gq.sum().backward()
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v)]
    with sdpa_kernel(SDPBackend.MATH):            # torch's twice-differentiable path
        o = TF.scaled_dot_product_attention(*ts, attn_mask=torch.tensor(keep))
    tq, = torch.autograd.grad((o * o).sum(), [ts[0]], create_graph=True)
    tq.sum().backward()
    for g, w in ((gq.numpy(), tq.detach().numpy()), (xs[1].grad.numpy(), ts[1].grad.numpy())):
        assert np.isfinite(g).all()
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5)


def test_no_keys_gives_zeros(device):
    q = nr.ones((1, 3, 4), device=device, requires_grad=True)
    kv = nr.ones((1, 0, 4), device=device)
    out = nr.scaled_dot_product_attention(q, kv, kv)
    want = TF.scaled_dot_product_attention(torch.ones(1, 3, 4), torch.ones(1, 0, 4),
                                           torch.ones(1, 0, 4))
    assert out.tolist() == want.tolist()
    out.sum().backward()
    assert q.grad.tolist() == np.zeros((1, 3, 4)).tolist()
