"""Layers and models built on the model-building ops (conv2d, layer_norm, embedding, attention,
...), against torch (a dev-only reference) with the same weights."""
import math

import numpy as np
import pytest

import numr_web as nr
from numr_web import nn
from numr_web.models import GPT, DigitsCNN, GPTConfig

from helpers import fdtype, tol

import torch
F = torch.nn.functional



def _t(x):
    return torch.tensor(np.asarray(x, dtype=np.float64), requires_grad=True)


def _load_from_torch(ours, ref):
    ours.to(dtype="float64")              # load torch's float64 values without rounding them
    ours.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})


def _check(device, ours, ref, x, wrt=(), t=None):
    """Forward both on x (float array), backward a random cotangent, compare outputs and the
    gradients of x and of the named parameters."""
    dtype = fdtype(device)
    ours.to(device, dtype)
    xt = nr.tensor(x, dtype=dtype, device=device, requires_grad=x.dtype.kind == "f")
    tx = torch.tensor(x, requires_grad=x.dtype.kind == "f")
    y, ty = ours(xt), ref(tx)
    g = np.random.default_rng(9).standard_normal(ty.shape)
    y.backward(nr.tensor(g, dtype=dtype, device=device))
    ty.backward(torch.tensor(g))
    t = t or tol(device)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), **t)
    if x.dtype.kind == "f":
        np.testing.assert_allclose(xt.grad.numpy(), tx.grad.numpy(), err_msg="input grad", **t)
    params, tparams = dict(ours.named_parameters()), dict(ref.named_parameters())
    for name in wrt:
        np.testing.assert_allclose(params[name].grad.numpy(), tparams[name].grad.numpy(),
                                   err_msg=name, **t)


@pytest.mark.parametrize("kw", [dict(stride=1, padding=1), dict(stride=2, padding=0),
                                dict(padding=2, dilation=2, groups=2)])
def test_conv2d(device, kw):
    ours = nn.Conv2d(4, 6, 3, activation="relu", **kw)
    ref = torch.nn.Sequential(torch.nn.Conv2d(4, 6, 3, **kw).double(), torch.nn.ReLU())
    ours.to(dtype="float64")
    ours.load_state_dict({k[2:]: v.detach().numpy() for k, v in ref.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 4, 7, 7))
    _check(device, ours, ref, x)
    assert ours.weight.grad is not None and ours.bias.grad.shape == (6,)


def test_pooling(device):
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 6))
    _check(device, nn.MaxPool2d(2), torch.nn.MaxPool2d(2), x)
    _check(device, nn.AvgPool2d(3, stride=2, padding=1),
           torch.nn.AvgPool2d(3, stride=2, padding=1), x)


def test_layer_norm_and_rms_norm(device):
    x = np.random.default_rng(0).standard_normal((3, 4, 8))
    for ours, ref in [(nn.LayerNorm(8), torch.nn.LayerNorm(8)),
                      (nn.LayerNorm([4, 8], eps=1e-3), torch.nn.LayerNorm([4, 8], eps=1e-3)),
                      (nn.RMSNorm(8), torch.nn.RMSNorm(8))]:
        ref = ref.double()
        with torch.no_grad():
            for p in ref.parameters():
                p.copy_(torch.randn(p.shape, dtype=torch.float64))
        _load_from_torch(ours, ref)
        _check(device, ours, ref, x, wrt=[k for k, _ in ref.named_parameters()])


def test_embedding_accumulates_repeated_ids(device):
    ours, ref = nn.Embedding(10, 4), torch.nn.Embedding(10, 4).double()
    _load_from_torch(ours, ref)
    ids = np.array([[1, 3, 1], [9, 1, 0]], dtype=np.int32)
    ours.to(device, fdtype(device))
    y = ours(nr.tensor(ids, device=device))
    ty = ref(torch.tensor(ids, dtype=torch.long))
    g = np.random.default_rng(1).standard_normal(ty.shape)
    y.backward(nr.tensor(g, dtype=fdtype(device), device=device))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), **tol(device))
    np.testing.assert_allclose(ours.weight.grad.numpy(), ref.weight.grad.numpy(), **tol(device))


def test_dropout_is_the_identity_in_eval_mode_and_for_p0():
    x = nr.randn((4, 5), seed=0)
    d = nn.Dropout(0.5).eval()
    assert d(x) is x and nn.Dropout(0.0)(x) is x
    with pytest.raises(nr.NumrError):
        nn.Dropout(1.5)


def test_dropout_in_training(device):
    x = nr.ones((200, 50), device=device)
    y = nn.Dropout(0.25)(x).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)


@pytest.mark.parametrize("need_weights", [
    True, False])
def test_multihead_attention(device, need_weights):
    E, H, T = 8, 2, 5
    ours, ref = nn.MultiheadAttention(E, H), torch.nn.MultiheadAttention(E, H, batch_first=True)
    ref = ref.double()
    _load_from_torch(ours, ref)
    ours.to(device, fdtype(device))
    x = np.random.default_rng(0).standard_normal((2, T, E))
    causal = np.triu(np.ones((T, T), dtype=bool), 1)
    xt = nr.tensor(x, dtype=fdtype(device), device=device)
    tx = torch.tensor(x)
    for kw, tkw in [({}, {}), (dict(is_causal=True), dict(is_causal=True,
                                                          attn_mask=torch.tensor(causal))),
                    (dict(attn_mask=nr.tensor(causal, device=device)),
                     dict(attn_mask=torch.tensor(causal)))]:
        y, w = ours(xt, xt, xt, need_weights=need_weights, **kw)
        ty, tw = ref(tx, tx, tx, need_weights=need_weights, **tkw)
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), **tol(device))
        if need_weights:
            np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), **tol(device))
        else:
            assert w is None
    kv = np.random.default_rng(1).standard_normal((2, 3, E))     # cross-attention
    y, _ = ours(xt, nr.tensor(kv, dtype=fdtype(device), device=device),
                nr.tensor(kv, dtype=fdtype(device), device=device), need_weights=need_weights)
    ty, _ = ref(tx, torch.tensor(kv), torch.tensor(kv), need_weights=need_weights)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), **tol(device))


# -- models ----------------------------------------------------------------------------------------
class TorchGPT(torch.nn.Module):
    """The same GPT written in torch, with the same parameter names."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        M = torch.nn
        self.tok_emb, self.pos_emb = M.Embedding(c.vocab_size, c.n_embd), M.Embedding(
            c.block_size, c.n_embd)
        self.blocks = M.ModuleList()
        for _ in range(c.n_layer):
            b = M.Module()
            b.ln1, b.ln2 = M.LayerNorm(c.n_embd), M.LayerNorm(c.n_embd)
            b.attn = M.Module()
            b.attn.qkv, b.attn.proj = M.Linear(c.n_embd, 3 * c.n_embd), M.Linear(c.n_embd,
                                                                                  c.n_embd)
            b.fc, b.proj = M.Linear(c.n_embd, 4 * c.n_embd), M.Linear(4 * c.n_embd, c.n_embd)
            self.blocks.append(b)
        self.ln_f = M.LayerNorm(c.n_embd)
        self.head = M.Linear(c.n_embd, c.vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.tok_emb(idx) + self.pos_emb.weight[:T]
        for b in self.blocks:
            q, k, v = b.attn.qkv(b.ln1(x)).split(self.c.n_embd, -1)
            q, k, v = (z.view(B, T, self.c.n_head, -1).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + b.attn.proj(y.transpose(1, 2).reshape(B, T, -1))
            x = x + b.proj(F.gelu(b.fc(b.ln2(x))))
        logits = self.head(self.ln_f(x))
        return logits, F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1))


CFG = GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16)


def test_gpt_checkpoint_loads_into_the_torch_gpt(tmp_path):
    import safetensors  # noqa: F401
    from safetensors.torch import load_file
    model = GPT(CFG, seed=1)
    assert model.head.weight is model.tok_emb.weight
    names = [k for k, _ in model.named_parameters()]
    assert "head.weight" not in names and len(names) == len(set(names))
    nr.save(model.state_dict(), tmp_path / "gpt.safetensors")
    ref = TorchGPT(CFG).double()
    ref.load_state_dict(load_file(str(tmp_path / "gpt.safetensors")))
    assert ref.head.weight is ref.tok_emb.weight
    std = float(np.std(model.blocks[0].fc.weight.numpy()))
    assert 0.017 < std < 0.023 and float(np.abs(model.blocks[0].fc.bias.numpy()).max()) == 0


def test_gpt_matches_torch(device):
    model, ref = GPT(CFG, seed=1), TorchGPT(CFG).double()
    ref.load_state_dict({k: torch.from_numpy(v.numpy()).double()
                         for k, v in model.state_dict().items()})
    model.to(device, fdtype(device))
    rng = np.random.default_rng(0)
    idx, tgt = (rng.integers(0, CFG.vocab_size, (3, CFG.block_size)).astype(np.int32)
                for _ in range(2))
    logits, loss = model(nr.tensor(idx, device=device), nr.tensor(tgt, device=device))
    tlogits, tloss = ref(torch.tensor(idx, dtype=torch.long), torch.tensor(tgt, dtype=torch.long))
    loss.backward()
    tloss.backward()
    t = tol(device)
    np.testing.assert_allclose(logits.numpy(), tlogits.detach().numpy(), **t)
    np.testing.assert_allclose(loss.item(), tloss.item(), **t)
    tgrads = dict(ref.named_parameters())
    for name, p in model.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tgrads[name].grad.numpy(), err_msg=name, **t)
    out = model.generate([1, 2], 12, top_k=3)
    assert len(out) == 14 and out[:2] == [1, 2] and all(0 <= i < CFG.vocab_size for i in out)
    assert model.generate([1, 2], 12, top_k=3) == out


def _torch_cnn():
    M = torch.nn
    return M.Sequential(M.Unflatten(1, (1, 8, 8)), M.Conv2d(1, 32, 3, padding=1), M.ReLU(),
                        M.Conv2d(32, 64, 3, padding=1), M.ReLU(), M.MaxPool2d(2), M.Flatten(),
                        M.Linear(1024, 128), M.ReLU(), M.Linear(128, 10)).double()


def _cnn_keys(k):
    return {"features.0": "1", "features.1": "3", "classifier.1": "7",
            "classifier.3": "9"}[k.rsplit(".", 1)[0]] + "." + k.rsplit(".", 1)[1]


def test_cnn_parameters_line_up_with_torch():
    ours, ref = DigitsCNN(), _torch_cnn()
    assert {_cnn_keys(k): v.shape for k, v in ours.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in ref.state_dict().items()}


def test_cnn_matches_torch(device):
    ours, ref = DigitsCNN(), _torch_cnn()
    ours.load_state_dict({k: ref.state_dict()[_cnn_keys(k)].numpy() for k in ours.state_dict()})
    x = np.random.default_rng(0).random((4, 64))
    _check(device, ours, ref, x, t=dict(rtol=1e-9, atol=1e-10) if device != "webgpu"
           else dict(rtol=1e-3, atol=1e-4))
    assert math.isfinite(float(ours(nr.zeros((1, 1, 8, 8), device=device, dtype=fdtype(device)))
                               .sum().item()))
