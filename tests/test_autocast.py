"""nr.autocast: which ops run in which dtype (the output dtypes, against torch's CUDA lists written
out here), the region's semantics (nesting, enabled=, decorator, threads and asyncio tasks,
backward outside it), and training steps under autocast against float32 and against torch's own
autocast step, with tolerances derived from float16's unit roundoff and the computation."""
import asyncio
import threading

import numpy as np
import pytest

import numr_web as nr
from numr_web import nn
from numr_web.errors import DeviceError, DTypeError

BF16_DEVICES = ("cpu", "cuda")   # hold bfloat16 (the cpu and CuPy through ml_dtypes, a dev dependency)

U16 = 2.0 ** -11                      # float16's unit roundoff (half an ulp at 1)
F16, F32 = nr.float16, nr.float32


def _f16_or_skip(device):
    if device == "webgpu" and not nr.get_backend("webgpu").f16:
        pytest.skip("this WebGPU adapter lacks shader-f16")


def _t(shape, device, seed, dtype="float32", scale=1.0):
    a = np.random.default_rng(seed).standard_normal(shape) * scale
    return nr.tensor(a.astype(dtype), device=device)


# -- which ops run in which dtype -----------------------------------------------------------------
# torch's CUDA autocast lists (torch/csrc/autocast docs, "CUDA Ops that can autocast to float16"
# and "... to float32"), for the ops numr has; "same" = not listed: the inputs' dtype
def _cases(d):
    x32, y32 = _t((4, 6), d, 0), _t((6, 5), d, 1)
    x16 = x32.astype("float16")
    w = nn.Linear(6, 3, device=d)
    q = _t((2, 3, 4, 8), d, 2)
    img, ker = _t((2, 3, 6, 6), d, 3), _t((4, 3, 3, 3), d, 4)
    labels = nr.tensor([0, 1, 2, 1], dtype="int32", device=d)
    return {
        "matmul": (lambda: nr.matmul(x32, y32), F16),
        "@": (lambda: x32 @ y32, F16),
        "mm": (lambda: nr.mm(x32, y32), F16),
        "bmm": (lambda: nr.bmm(q[0], q[0].transpose(-1, -2)), F16),
        "addmm": (lambda: nr.addmm(_t((5,), d, 5), x32, y32), F16),
        "einsum": (lambda: nr.einsum("ij,jk->ik", x32, y32), F16),
        "linear": (lambda: w(x32), F16),
        "linear of float16": (lambda: w(x16), F16),
        "matmul_bias_activation": (lambda: nr.matmul_bias_activation(
            x32, y32, _t((5,), d, 6), "gelu"), F16),
        "conv2d": (lambda: nr.conv2d(img, ker, padding=1), F16),
        "sdpa": (lambda: nr.scaled_dot_product_attention(q, q, q, is_causal=True), F16),
        "softmax": (lambda: nr.softmax(x16, -1), F32),
        "log_softmax": (lambda: nr.log_softmax(x16, -1), F32),
        "cross_entropy": (lambda: nr.cross_entropy(x16, labels), F32),
        "nll_loss": (lambda: nr.nll_loss(x16, labels), F32),
        "mse_loss": (lambda: nr.mse_loss(x16, x16 * 2), F32),
        "layer_norm": (lambda: nr.layer_norm(x16, (6,)), F32),
        "rms_norm": (lambda: nr.rms_norm(x16, (6,)), F32),
        "exp": (lambda: x16.exp(), F32),
        "log": (lambda: x16.abs().log(), F32),
        "pow": (lambda: x16 ** 2, F32),
        "rsqrt": (lambda: nr.rsqrt(x16.abs()), F32),
        "reciprocal": (lambda: nr.reciprocal(x16), F32),
        "sum": (lambda: x16.sum(), F32),
        "prod": (lambda: x16.prod(-1), F32),
        "cumsum": (lambda: nr.cumsum(x16, 1), F32),
        "logsumexp": (lambda: nr.logsumexp(x16, 1), F32),
        "softplus": (lambda: nr.softplus(x16), F32),
        "mean (not listed)": (lambda: x16.mean(), F16),
        "gelu (not listed)": (lambda: nr.gelu(x16), F16),
        "relu of float32 (not listed)": (lambda: nr.relu(x32), F32),
        "add: mixed inputs promote": (lambda: x16 + x32, F32),
        "dot: promote, float32 stays": (lambda: nr.dot(x32[0], x32[1]), F32),
        "dot: promote, float16 pair": (lambda: nr.dot(x16[0], x16[1]), F16),
        "tensordot: promote": (lambda: nr.tensordot(x32, y32, 1), F32),
    }


def test_output_dtypes_follow_torchs_lists(device):
    _f16_or_skip(device)
    cases = _cases(device)
    with nr.autocast(device, dtype=nr.float16):
        got = {name: fn().dtype for name, (fn, _) in cases.items()}
    assert got == {name: want for name, (_, want) in cases.items()}
    # outside the region every op keeps its inputs' dtype
    assert cases["matmul"][0]().dtype is F32 and cases["softmax"][0]().dtype is F16


def test_float64_is_never_lowered():
    a = nr.randn(3, 3, dtype="float64")
    with nr.autocast("cpu", dtype="float16"):
        assert nr.matmul(a, a).dtype is nr.float64
        assert nr.matmul(a, a.float()).dtype is nr.float64        # numr's promotion after it


def test_region_covers_its_device_only_and_nests():
    x = nr.randn(4, 4)
    with nr.autocast("cuda"):                       # cuda's region: cpu tensors untouched
        assert nr.matmul(x, x).dtype is F32
        assert nr.is_autocast_enabled("cuda") and not nr.is_autocast_enabled("cpu")
    with nr.autocast("cpu", dtype="float16"):
        assert nr.matmul(x, x).dtype is F16
        with nr.autocast("cpu", enabled=False):
            assert nr.matmul(x, x).dtype is F32 and not nr.is_autocast_enabled("cpu")
            with nr.autocast("cpu", dtype="float16"):
                assert nr.matmul(x, x).dtype is F16
        assert nr.matmul(x, x).dtype is F16 and nr.get_autocast_dtype("cpu") is F16
    assert not nr.is_autocast_enabled("cpu") and nr.matmul(x, x).dtype is F32
    assert all(nr.get_autocast_dtype(d) is F16 for d in ("cpu", "cuda", "webgpu"))


def test_decorator_on_functions_and_coroutines():
    x = nr.randn(4, 4)

    @nr.autocast("cpu", dtype="float16")
    def f():
        return nr.matmul(x, x).dtype

    @nr.autocast("cpu", dtype="float16")
    async def g():
        await asyncio.sleep(0)
        return nr.matmul(x, x).dtype

    assert f() is F16 and asyncio.run(g()) is F16
    assert nr.matmul(x, x).dtype is F32


def test_state_is_per_task_and_per_thread():
    x = nr.randn(4, 4)
    seen = {}

    async def lowered():
        with nr.autocast("cpu", dtype="float16"):
            await asyncio.sleep(0.01)               # the other task runs inside this region
            seen["in"] = nr.matmul(x, x).dtype

    async def plain():
        await asyncio.sleep(0.005)
        seen["other task"] = nr.matmul(x, x).dtype

    async def both():
        await asyncio.gather(lowered(), plain())
    asyncio.run(both())
    with nr.autocast("cpu", dtype="float16"):
        th = threading.Thread(target=lambda: seen.__setitem__("thread", nr.matmul(x, x).dtype))
        th.start()
        th.join()
    assert seen == {"in": F16, "other task": F32, "thread": F32}


def test_backward_runs_in_the_forward_dtypes_and_params_stay_float32():
    lin = nn.Linear(8, 4)
    x = nr.randn(5, 8)
    with nr.autocast("cpu", dtype="float16"):
        y = lin(x)
        loss = nr.cross_entropy(y, nr.tensor([0, 1, 2, 3, 0], dtype="int32"))
        loss.backward()                             # inside the region: autocast is off there
    assert y.dtype is F16 and loss.dtype is F32
    assert lin.weight.dtype is F32 and lin.weight.grad.dtype is F32
    assert lin.bias.grad.dtype is F32


def test_a_parameter_is_cast_once_per_region():
    lin = nn.Linear(8, 8)
    x = nr.randn(2, 8)
    with nr.autocast("cpu", dtype="float16"):
        a, b = lin(x), lin(x)
        # the float16 copy of the weight is shared: one AstypeBackward node feeds both
        wa = a.grad_fn.inputs[1].inputs[0]              # weight.T's node <- astype's node
        wb = b.grad_fn.inputs[1].inputs[0]
        assert wa is wb
        nn.init.zeros_(lin.weight)                      # a write: the next op casts anew
        assert lin(x).abs().sum().item() == pytest.approx(lin.bias.abs().sum().item() * 2,
                                                          rel=1e-3)
    with nr.autocast("cpu", dtype="float16", cache_enabled=False):
        assert lin(x).grad_fn.inputs[1].inputs[0] is not lin(x).grad_fn.inputs[1].inputs[0]


def test_bad_arguments_are_typed_errors():
    with pytest.raises(DeviceError, match="device_type"):
        nr.autocast("cuda:0")
    with pytest.raises(DTypeError, match="float16"):
        nr.autocast("cpu", dtype="float32")
    import torch
    assert nr.autocast("cpu", dtype=torch.bfloat16).fast_dtype is nr.bfloat16   # torch's object
    for dev in set(nr.available_devices()) - set(BF16_DEVICES):   # webgpu has no bfloat16
        with pytest.raises(DTypeError, match="use dtype=float16"):
            with nr.autocast(dev, dtype="bfloat16"):
                pass
    with nr.autocast("cpu", dtype="float16"):
        p = nr.sigmoid(nr.randn(4))
        with pytest.raises(DTypeError, match="binary_cross_entropy_with_logits"):
            nr.binary_cross_entropy(p, nr.ones(4))


# -- training steps ---------------------------------------------------------------------------------
def _mlp_bounds(x, w1, b1, w2, b2, labels, U):
    """The float32 step in float64 (loss, grads), and first-order bounds on how far the autocast
    step may be from it: every rounding to the autocast dtype (x, the weights and biases, the hidden layer,
    the logits; in backward the logits' gradient, the hidden gradient and the weight-gradient
    GEMMs' outputs) perturbs its value by at most U (its unit roundoff) of its magnitude, propagated through the
    layers with absolute values (GEMMs: |a| @ |b|, each of whose products also carries two
    rounded factors)."""
    from math import erf, sqrt
    verf = np.vectorize(erf)
    z1 = x @ w1.T + b1
    cdf = 0.5 * (1 + verf(z1 / sqrt(2)))
    pdf = np.exp(-z1 * z1 / 2) / sqrt(2 * np.pi)
    h = z1 * cdf
    z2 = h @ w2.T + b2
    p = np.exp(z2 - z2.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    n = len(labels)
    onehot = np.eye(z2.shape[1])[labels]
    loss = -np.log(p[np.arange(n), labels]).mean()
    dz2 = (p - onehot) / n
    dh = dz2 @ w2
    dz1 = dh * (cdf + z1 * pdf)
    grads = {"w1": dz1.T @ x, "b1": dz1.sum(0), "w2": dz2.T @ h, "b2": dz2.sum(0)}
    A = np.abs
    gelu1 = A(cdf + z1 * pdf)                                   # |gelu'|
    gelu2 = A(2 * pdf - z1 * z1 * pdf)                          # |gelu''|
    e_z1 = 2 * U * (A(x) @ A(w1).T + A(b1))
    e_z1b = e_z1 + U * A(z1)                                  # z is saved in the autocast dtype
    e_h = gelu1 * e_z1 + U * A(h)
    e_z2 = 2 * U * (A(h) @ A(w2).T + A(b2)) + e_h @ A(w2).T + U * A(z2)
    e_dz2 = 2 * p * e_z2.max(1, keepdims=True) / n + U * A(dz2)       # softmax's Lipschitz
    e_dh = e_dz2 @ A(w2) + 3 * U * A(dz2) @ A(w2) + U * A(dh)
    e_dz1 = e_dh * gelu1 + A(dh) * gelu2 * e_z1b + U * A(dz1)
    bounds = {"w1": e_dz1.T @ A(x) + 3 * U * A(dz1).T @ A(x),
              "b1": e_dz1.sum(0) + U * A(dz1).sum(0),
              "w2": e_dz2.T @ A(h) + A(dz2).T @ e_h + 3 * U * A(dz2).T @ A(h),
              "b2": e_dz2.sum(0) + U * A(dz2).sum(0)}
    e_loss = (A(p - onehot) * e_z2).sum() / n
    return loss, grads, e_loss, bounds


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
@pytest.mark.parametrize("with_scaler", [False, True], ids=["plain", "scaler"])
def test_mlp_step_under_autocast_agrees_with_float32(device, with_scaler, low):
    if low == "bfloat16" and device not in BF16_DEVICES:
        with pytest.raises(DTypeError, match="use dtype=float16"):
            with nr.autocast(device, dtype=low):
                pass
        return
    _f16_or_skip(device)
    U, rnd = UNIT_ROUNDOFF[low], _ROUND[low]
    rng = np.random.default_rng(7)
    x = rng.standard_normal((48, 20)).astype(np.float32)
    labels = rng.integers(0, 6, 48)
    model = nn.MLP([20, 32, 6], activation="gelu", device=device, seed=3)
    params = {"w1": model.layers[0].weight, "b1": model.layers[0].bias,
              "w2": model.layers[1].weight, "b2": model.layers[1].bias}
    ref = {k: v.numpy().astype(np.float64) for k, v in params.items()}
    loss64, grads64, e_loss, bounds = _mlp_bounds(x.astype(np.float64), ref["w1"], ref["b1"],
                                                  ref["w2"], ref["b2"], labels, U)
    xt = nr.tensor(x, device=device)
    yt = nr.tensor(labels.astype(np.int32), device=device)
    with nr.autocast(device, dtype=low):
        logits = model(xt)
        loss = nr.cross_entropy(logits, yt)
    assert logits.dtype is nr.get_dtype(low) and loss.dtype is F32
    if with_scaler:
        scaler = nr.amp.GradScaler(init_scale=2.0 ** 12)
        opt = nn.optim.SGD(model.parameters(), lr=0.1)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
    else:
        loss.backward()
    # 2x the first-order bound: room for the second-order terms and float32 accumulation
    assert abs(loss.item() - loss64) <= 2 * e_loss + 1e-6
    for k, p in params.items():
        g = p.grad.numpy().astype(np.float64)
        assert p.grad.dtype is F32
        err = np.abs(g - grads64[k])
        assert np.all(err <= 2 * bounds[k] + 1e-7), (k, float((err / (bounds[k] + 1e-12)).max()))
    # the same step with the low dtype's roundings applied where autocast applies them (float64
    # otherwise): only float32's sums and a rare neighbouring low-precision value in between
    # differ, a couple of rounding units of the products' magnitudes
    emul, mag = _mlp_emulated(x.astype(np.float64), ref["w1"], ref["b1"], ref["w2"], ref["b2"],
                              labels, with_scaler, rnd)
    for k, p in params.items():
        err = np.abs(p.grad.numpy().astype(np.float64) - emul[k])
        assert np.all(err <= 4 * U * mag[k] + 1e-9), (k, float((err / mag[k]).max() / U))


def _f16(a):
    return np.asarray(a, np.float64).astype(np.float16).astype(np.float64)


def _bf16(a):
    """Rounded to bfloat16 by torch (through float32, as numr casts float64), back in float64."""
    import torch
    return torch.from_numpy(np.asarray(a, np.float64)).to(torch.bfloat16).double().numpy()


UNIT_ROUNDOFF = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
_ROUND = {"float16": _f16, "bfloat16": _bf16}


def _mlp_emulated(x, w1, b1, w2, b2, labels, scaled, rnd):
    """The autocast step's arithmetic in float64 with explicit roundings to the low dtype (rnd): the casts of
    x, weights and biases, the fused layer's output (and its saved z), the logits, the logits'
    gradient (times the loss scale when scaled), the hidden gradient and the GEMMs' outputs.
    Also the magnitudes |a| @ |b| of each gradient's products."""
    from math import erf, sqrt
    verf = np.vectorize(erf)
    s = 2.0 ** 12 if scaled else 1.0
    x, w1, b1, w2, b2 = (rnd(v) for v in (x, w1, b1, w2, b2))
    z1 = x @ w1.T + b1
    h = rnd(z1 * 0.5 * (1 + verf(z1 / sqrt(2))))
    z1 = rnd(z1)
    z2 = rnd(h @ w2.T + b2)
    p = np.exp(z2 - z2.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    n = len(labels)
    dz2 = rnd((p - np.eye(z2.shape[1])[labels]) / n * s)
    dh = rnd(dz2 @ w2)
    d1 = 0.5 * (1 + verf(z1 / sqrt(2))) + z1 * np.exp(-z1 * z1 / 2) / sqrt(2 * np.pi)
    dz1 = rnd(dh * d1)
    A = np.abs
    emul = {"w1": rnd(dz1.T @ x) / s, "b1": rnd(dz1.sum(0)) / s,
            "w2": rnd(dz2.T @ h) / s, "b2": rnd(dz2.sum(0)) / s}
    mag = {"w1": A(dz1).T @ A(x) / s, "b1": A(dz1).sum(0) / s,
           "w2": A(dz2).T @ A(h) / s, "b2": A(dz2).sum(0) / s}
    return emul, mag


def _gpt_pair(device, seed=0):
    """A small numr GPT and the same model in torch (float32, same parameters)."""
    import torch
    from numr_web.models import GPT, GPTConfig
    cfg = GPTConfig(vocab_size=17, block_size=12, n_layer=2, n_head=2, n_embd=32)
    m = GPT(cfg, device=device, dtype="float32", seed=seed)
    sd = {k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()}
    tm = _torch_gpt(cfg)
    tm.load_state_dict(sd, strict=True)
    return m, tm, cfg


def _torch_gpt(cfg):
    import torch.nn as tnn
    import torch.nn.functional as F

    class Attn(tnn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = tnn.Linear(cfg.n_embd, 3 * cfg.n_embd), \
                tnn.Linear(cfg.n_embd, cfg.n_embd)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = (z.reshape(b, t, cfg.n_head, c // cfg.n_head).transpose(1, 2)
                       for z in self.qkv(x).split(c, dim=2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).reshape(b, t, c))

    class Block(tnn.Module):
        def __init__(self):
            super().__init__()
            c = cfg.n_embd
            self.ln1, self.ln2, self.attn = tnn.LayerNorm(c), tnn.LayerNorm(c), Attn()
            self.fc, self.proj = tnn.Linear(c, 4 * c), tnn.Linear(4 * c, c)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.proj(F.gelu(self.fc(self.ln2(x))))

    class GPT(tnn.Module):
        def __init__(self):
            super().__init__()
            self.tok_emb = tnn.Embedding(cfg.vocab_size, cfg.n_embd)
            self.pos_emb = tnn.Embedding(cfg.block_size, cfg.n_embd)
            self.blocks = tnn.ModuleList(Block() for _ in range(cfg.n_layer))
            self.ln_f = tnn.LayerNorm(cfg.n_embd)
            self.head = tnn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
            self.head.weight = self.tok_emb.weight

        def forward(self, idx, targets):
            x = self.tok_emb(idx) + self.pos_emb.weight[:idx.shape[1]]
            for blk in self.blocks:
                x = blk(x)
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    return GPT().double()


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
def test_gpt_step_under_autocast_agrees_with_torch_autocast_and_float32(device, low):
    """The same GPT step three ways: numr under nr.autocast(low); torch under
    torch.autocast("cpu", low), which casts this model's ops alike (linear and attention in the
    low dtype; embedding, layer norm, residual adds and the loss in float32); and torch in float64
    (the float32 step's truth). Tolerances: each rounding to the low dtype on a path perturbs by
    U (its unit roundoff) of the values' scale; a path through this model meets at most R
    roundings forward and R backward, so the autocast results lie within 2 R U of the gradients'
    scale from the float64 ones, and numr's and torch's autocast steps (the same roundings,
    differently ordered float32 sums: a few operands rounded to the neighbouring low-precision
    value) much closer."""
    if low == "bfloat16" and device not in BF16_DEVICES:
        with pytest.raises(DTypeError, match="bfloat16"):
            nr.zeros(2, device=device, dtype=low)
        return
    _f16_or_skip(device)
    U = UNIT_ROUNDOFF[low]
    import torch
    m, tm, cfg = _gpt_pair(device)
    rng = np.random.default_rng(1)
    idx = rng.integers(0, cfg.vocab_size, (3, cfg.block_size + 1))
    xi, yi = idx[:, :-1], idx[:, 1:]
    with nr.autocast(device, dtype=low):
        _, loss = m(nr.tensor(xi.astype(np.int32), device=device),
                    nr.tensor(yi.astype(np.int32), device=device))
    loss.backward()
    ours = {k: p.grad.numpy().astype(np.float64) for k, p in m.named_parameters()}

    t16 = _torch_gpt(cfg).float()
    t16.load_state_dict({k: v.float() for k, v in tm.state_dict().items()})
    with torch.autocast("cpu", dtype=getattr(torch, low)):
        tloss16 = t16(torch.tensor(xi), torch.tensor(yi))
    tloss16.backward()
    theirs = {k: p.grad.double().numpy() for k, p in t16.named_parameters()}
    tloss = tm(torch.tensor(xi), torch.tensor(yi))
    tloss.backward()
    exact = {k: p.grad.numpy() for k, p in tm.named_parameters()}
    assert set(ours) == set(exact)
    # roundings on the longest path, per block: ln1 cast, qkv, attention, proj; ln2 cast, fc +
    # gelu, proj (7); then ln_f's cast and the head (2); as many backward
    r = 2 * (7 * cfg.n_layer + 2)
    lv = loss.item()
    assert abs(lv - tloss.item()) <= 2 * r * U * abs(tloss.item())
    assert abs(lv - tloss16.item()) <= 4 * U * abs(tloss.item())
    for k in exact:
        scale = np.abs(exact[k]).max()
        assert np.abs(ours[k] - exact[k]).max() <= 2 * r * U * scale, k
        assert np.abs(ours[k] - theirs[k]).max() <= 8 * U * scale, k
