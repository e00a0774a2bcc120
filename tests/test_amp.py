"""numr_web.amp.GradScaler and the float16 mixed-precision Linear recipe (float16 GEMM with the
fused bias + GELU epilogue, float32 master weights), against closed forms and torch float64."""
import math

import numpy as np
import pytest

import numr_web as nr
from numr_web import nn
from numr_web.amp import GradScaler
from numr_web.errors import NumrError


def _webgpu_f16():
    if "webgpu" not in nr.available_devices():
        pytest.skip("no webgpu adapter")
    if not nr.get_backend("webgpu").f16:
        pytest.skip("this adapter has no shader-f16")


def test_scaler_skips_non_finite_steps_and_adapts_the_scale():
    w = nr.tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)
    opt = nn.optim.SGD([w], lr=0.5)
    s = GradScaler(init_scale=8.0, growth_interval=2)
    (s.scale((w * w).sum())).backward()             # grad 8 * 2w = (16, 32); unscaled (2, 4)
    s.step(opt)
    s.update()
    assert w.tolist() == [0.0, 0.0] and s.get_scale() == 8.0
    w.grad = nr.tensor(np.array([math.inf, 1.0], np.float32))
    s.step(opt)                                     # skipped: w unchanged
    s.update()
    assert w.tolist() == [0.0, 0.0] and s.get_scale() == 4.0
    for _ in range(2):
        w.grad = nr.tensor(np.array([4.0, 8.0], np.float32))
        s.step(opt)
        s.update()
    assert w.tolist() == [-1.0, -2.0] and s.get_scale() == 8.0     # 2 finite steps: doubled
    off = GradScaler(enabled=False)
    assert off.scale(w) is w and off.get_scale() == 1.0
    with pytest.raises(NumrError, match="backoff_factor"):
        GradScaler(backoff_factor=2.0)


def test_mixed_precision_linear_step_on_webgpu():
    """One step of the recipe in numr_web/amp.py: float16 x, w, b into the fused GEMM + GELU,
    float32 master weights; the master gradients match torch float64 on the float16-rounded
    inputs (up to the float16 roundings of the GEMM outputs and of the backward's products)."""
    _webgpu_f16()
    import torch
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (64, 32)).astype(np.float32)
    w0 = rng.uniform(-0.5, 0.5, (32, 48)).astype(np.float32)
    b0 = rng.uniform(-0.5, 0.5, 48).astype(np.float32)
    w = nr.tensor(w0, device="webgpu", requires_grad=True)
    b = nr.tensor(b0, device="webgpu", requires_grad=True)
    opt = nn.optim.SGD([w, b], lr=0.1)
    s = GradScaler(init_scale=1024.0)
    xt = nr.tensor(x, device="webgpu")
    h = nr.matmul_bias_activation(xt.astype("float16"), w.astype("float16"),
                                  b.astype("float16"), "gelu")
    assert h.dtype == nr.float16
    loss = (h.astype("float32") ** 2).mean()
    s.scale(loss).backward()
    assert w.grad.dtype == nr.float32 and b.grad.dtype == nr.float32
    s.unscale_(opt)
    gw, gb = w.grad.numpy(), b.grad.numpy()
    s.step(opt)
    s.update()

    tx = torch.tensor(x.astype(np.float16).astype(np.float64))
    tw = torch.tensor(w0.astype(np.float16).astype(np.float64), requires_grad=True)
    tb = torch.tensor(b0.astype(np.float16).astype(np.float64), requires_grad=True)
    ty = torch.nn.functional.gelu(tx @ tw + tb)
    (ty ** 2).mean().backward()
    eps16 = float(np.finfo(np.float16).eps)
    # every factor of the gradients passes through a few float16 roundings (relative eps16 / 2
    # each), summed over at most 64 rows: a bound of 8 eps16 of the magnitudes
    magw = (np.abs(tx.numpy()).T @ np.abs(ty.detach().numpy())) * 2 / ty.numel()
    assert np.all(np.abs(gw - tw.grad.numpy()) <= 8 * eps16 * (magw + np.abs(tw.grad.numpy())) + 1e-7)
    magb = np.abs(ty.detach().numpy()).sum(0) * 2 / ty.numel()
    assert np.all(np.abs(gb - tb.grad.numpy()) <= 8 * eps16 * (magb + np.abs(tb.grad.numpy())) + 1e-7)
    np.testing.assert_allclose(w.numpy(), w0 - 0.1 * gw, rtol=1e-6, atol=1e-7)


def test_scaler_matches_torchs_on_the_same_gradients(device):
    """nr.amp.GradScaler and torch.amp.GradScaler given the same gradients step after step
    (finite, inf, NaN; growth after growth_interval finite steps; backoff): the same scales,
    growth trackers, skipped steps and parameters (SGD), and the same state_dict."""
    import torch
    w0 = np.array([1.0, -2.0, 3.0], np.float32)
    w = nr.tensor(w0, device=device, requires_grad=True)
    tw = torch.tensor(w0, requires_grad=True)
    opt, topt = nn.optim.SGD([w], lr=0.25), torch.optim.SGD([tw], lr=0.25)
    kw = dict(init_scale=2.0 ** 10, growth_factor=4.0, backoff_factor=0.25, growth_interval=3)
    s = GradScaler(**kw)
    ts = torch.amp.GradScaler("cpu", **kw)
    grads = [[1.0, 2.0, 4.0], [math.inf, 1.0, 0.0], [0.5, 0.5, 0.5], [1.0, math.nan, 1.0],
             [2.0, 2.0, 2.0], [1.0, 1.0, 1.0], [3.0, 0.0, -1.0], [0.25, 0.5, 1.0],
             [-math.inf, 0.0, 0.0], [1.0, 2.0, 3.0]]
    for g in grads:
        loss = s.scale((w * 1.0).sum())
        tloss = ts.scale((tw * 1.0).sum())
        assert loss.shape == tuple(tloss.shape) and loss.item() == tloss.item()
        scaled = np.array(g, np.float32) * np.float32(s.get_scale())     # as a backward gives
        w.grad = nr.tensor(scaled, device=device)
        tw.grad = torch.tensor(scaled)
        s.step(opt)
        ts.step(topt)
        s.update()
        ts.update()
        np.testing.assert_array_equal(w.numpy(), tw.detach().numpy())
        assert s.get_scale() == ts.get_scale()
        assert s.state_dict() == ts.state_dict()


@pytest.mark.parametrize("decoupled", [False, True])
def test_scaler_undoes_a_capturable_step_on_the_device(device, decoupled):
    """A capturable optimizer's step under GradScaler reads nothing back: it runs, and what it
    changed is selected back on the device where a gradient was inf / NaN. The parameters, the
    moments and the step count equal, bit for bit, those of the same optimizer stepped on the
    finite gradients only (the scales are powers of two, so unscaling is exact), over a
    sequence that starts with a skipped step (the moments then start from zeros); the scales
    follow torch's GradScaler."""
    import torch
    w0 = np.array([[1.0, -2.0], [3.0, 0.5]], np.float32)
    w = nr.tensor(w0, device=device, requires_grad=True)
    ref = nr.tensor(w0, device=device, requires_grad=True)
    cls = nn.optim.AdamW if decoupled else nn.optim.Adam
    opt = cls([w], lr=0.1, weight_decay=0.01, capturable=True)
    ropt = cls([ref], lr=0.1, weight_decay=0.01, capturable=True)
    kw = dict(init_scale=2.0 ** 8, growth_interval=2)
    s, ts = GradScaler(**kw), torch.amp.GradScaler("cpu", **kw)
    tw = torch.zeros(1, requires_grad=True)
    topt = torch.optim.SGD([tw], lr=0.0)
    grads = [[math.nan, 1.0, 0.0, 1.0], [1.0, 2.0, -4.0, 0.5], [0.5, 0.25, 0.5, 8.0],
             [1.0, math.inf, 1.0, 1.0], [2.0, -2.0, 2.0, 1.0], [1.0, 1.0, -1.0, 3.0]]
    for g in grads:
        s.scale((w * 1.0).sum())
        ts.scale((tw * 1.0).sum())
        g = np.array(g, np.float32).reshape(2, 2)
        w.grad = nr.tensor(g * np.float32(s.get_scale()), device=device)
        tw.grad = torch.tensor([float(g.sum())]) * ts.get_scale()
        s.step(opt)
        ts.step(topt)
        s.update()
        ts.update()
        assert s.get_scale() == ts.get_scale()
        if np.isfinite(g).all():
            ref.grad = nr.tensor(g, device=device)
            ropt.step()
        np.testing.assert_array_equal(w.numpy(), ref.numpy())
    st, rst = opt.state[w], ropt.state[ref]
    for k in ("exp_avg", "exp_avg_sq", "step"):
        np.testing.assert_array_equal(st[k].numpy(), rst[k].numpy())
    assert float(st["step"].item()) == 4.0


def test_scaler_call_order_and_fp16_gradients_are_checked():
    from numr_web.errors import DTypeError, GradientError
    w = nr.tensor([1.0, 2.0], requires_grad=True)
    opt = nn.optim.SGD([w], lr=0.1)
    s = GradScaler()
    with pytest.raises(GradientError, match="scale"):
        s.step(opt)                                     # nothing scaled yet
    s.scale((w * w).sum()).backward()
    s.unscale_(opt)
    with pytest.raises(GradientError, match="already"):
        s.unscale_(opt)
    s.step(opt)
    with pytest.raises(GradientError, match="step"):
        s.step(opt)
    s.update()
    assert s.get_scale() == 2.0 ** 16 and s.state_dict()["_growth_tracker"] == 1
    h = nr.tensor([1.0], dtype="float16", requires_grad=True)
    hopt = nn.optim.SGD([h], lr=0.1)
    s.scale((h * 1.0).sum()).backward()
    with pytest.raises(DTypeError, match="float16 gradients"):
        s.step(hopt)
    t = GradScaler(init_scale=8.0)
    t.load_state_dict(s.state_dict())
    assert t.get_scale() == 2.0 ** 16 and t.state_dict() == s.state_dict()
    import pickle
    u = pickle.loads(pickle.dumps(s))
    assert u.state_dict() == s.state_dict()


def test_a_skipped_capturable_adam_step_is_skipped_in_its_fused_update(device):
    """Where the device's fused Adam takes GradScaler's flag (`adam_takes_found`), the skip
    happens inside the update: no select of the parameter and each moment afterwards (three
    small kernels a parameter on a GPU); elsewhere the scaler selects them back."""
    ws = [nr.tensor(np.ones((3, 2), np.float32) * (i + 1), device=device, requires_grad=True)
          for i in range(3)]
    opt = nn.optim.AdamW(ws, lr=0.1, capturable=True)
    s = GradScaler(init_scale=4.0)
    for bad in (False, True):
        s.scale(sum((w * 1.0).sum() for w in ws))
        for w in ws:
            w.grad = nr.tensor(np.full((3, 2), math.nan if bad else 1.0, np.float32),
                               device=device)
        before = [w.numpy().copy() for w in ws]
        with nr.profile() as prof:
            s.step(opt)
        s.update()
        selects = {r.name: r.calls for r in prof.rows()}.get("where", 0)
        fused = nr.get_backend(device).adam_takes_found
        assert selects == (0 if fused else 4 * len(ws)), selects   # p, exp_avg(_sq), step
        if bad:
            for w, b in zip(ws, before):
                np.testing.assert_array_equal(w.numpy(), b)
    assert [float(opt.state[w]["step"].item()) for w in ws] == [1.0] * 3
