"""A character-level GPT (nanoGPT-shaped): token + position embeddings, pre-LayerNorm blocks of
causal self-attention (one fused qkv GEMM, scaled_dot_product_attention) and a GELU MLP whose
first layer fuses bias + GELU into the GEMM, a final LayerNorm and an output layer tied to the
token embedding. Initialisation as GPT-2: N(0, 0.02), residual projections scaled by
1/sqrt(2 n_layer), zero biases."""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

from .. import nn
from ..nn import _core
from ..nn import functional as F


@dataclass
class GPTConfig:
    vocab_size: int = 96
    block_size: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg, **kw):
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, **kw)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd, **kw)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        b, t, c = x.shape
        qkv = self.qkv(x)
        q, k, v = (z.reshape(b, t, self.n_head, c // self.n_head).transpose(1, 2)
                   for z in qkv.split(c, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.drop(self.proj(y.transpose(1, 2).reshape(b, t, c)))


class Block(nn.Module):
    def __init__(self, cfg, **kw):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd, device=kw["device"], dtype=kw["dtype"])
        self.attn = CausalSelfAttention(cfg, **kw)
        self.ln2 = nn.LayerNorm(cfg.n_embd, device=kw["device"], dtype=kw["dtype"])
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, activation="gelu", **kw)
        self.proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, **kw)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.drop(self.proj(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, cfg=None, device=None, dtype=None, seed=0, **overrides):
        super().__init__()
        cfg = cfg or GPTConfig(**overrides)
        self.cfg = cfg
        kw = dict(device=device, dtype=dtype)
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd, **kw)
        self.pos_emb = nn.Embedding(cfg.block_size, cfg.n_embd, **kw)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg, **kw) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, **kw)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False, **kw)
        self.head.weight = self.tok_emb.weight          # weight tying (torch's (out, in) layout)
        self._init_weights(seed)

    def _init_weights(self, seed):
        resid = 0.02 / math.sqrt(2 * self.cfg.n_layer)
        for i, (name, p) in enumerate(self.named_parameters()):
            s = None if seed is None else seed + i
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.ndim == 2:
                std = resid if name.endswith(".proj.weight") else 0.02    # residual outputs
                nn.init.normal_(p, 0.0, std, seed=s)

    def forward(self, idx, targets=None):
        """idx: int32 (B, T) token ids, T <= block_size. Returns (logits (B, T, V), loss or None:
        the mean cross-entropy against `targets` (B, T))."""
        b, t = idx.shape
        if t > self.cfg.block_size:
            raise _core.ShapeError(f"sequence of {t} tokens, longer than block_size "
                                   f"{self.cfg.block_size}")
        x = self.drop(self.tok_emb(idx) + self.pos_emb.weight[:t])
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        if targets is None:
            return logits, None
        v = self.cfg.vocab_size
        return logits, _core.cross_entropy(logits.reshape(b * t, v), targets.reshape(b * t))

    # -- sampling (on the host: one readback of V probabilities per new token) ---------------------
    def _sampler(self, ids, max_new_tokens, temperature, top_k, rng):
        ids = list(ids)
        device = self.tok_emb.weight.device
        for _ in range(max_new_tokens):
            ctx = ids[-self.cfg.block_size:]
            with _core.no_grad():
                logits, _ = self(_core.tensor([ctx], dtype="int32", device=device))
                probs = _core.softmax(logits[0, -1] * (1.0 / temperature), -1)
            ids.append(_sample((yield probs), top_k, rng))
        return ids

    def generate(self, ids, max_new_tokens, temperature=1.0, top_k=None, rng=None):
        """Extend the token list `ids` by sampling; returns the whole list."""
        gen = self._sampler(ids, max_new_tokens, temperature, top_k, rng or random.Random(0))
        try:
            t = next(gen)
            while True:
                t = gen.send(t.tolist())
        except StopIteration as done:
            return done.value

    async def generate_async(self, ids, max_new_tokens, temperature=1.0, top_k=None, rng=None):
        """generate() for the browser: awaits each readback."""
        gen = self._sampler(ids, max_new_tokens, temperature, top_k, rng or random.Random(0))
        try:
            t = next(gen)
            while True:
                t = gen.send(await t.read())
        except StopIteration as done:
            return done.value


def _sample(probs, top_k, rng):
    if top_k is not None and top_k < len(probs):
        cut = sorted(probs, reverse=True)[top_k - 1]
        probs = [p if p >= cut else 0.0 for p in probs]
    return rng.choices(range(len(probs)), weights=probs)[0]
