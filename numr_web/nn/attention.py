"""MultiheadAttention with torch's parameters (in_proj_weight (3E, E), in_proj_bias, out_proj),
so torch checkpoints load. batch_first defaults to True here (DESIGN.md); torch's default is False.

Masks follow torch's MultiheadAttention: a bool attn_mask or key_padding_mask is True where
attention is NOT allowed, a float one is added to the scores. is_causal=True alone is enough here (torch also wants the
causal attn_mask). need_weights=False takes the fused scaled_dot_product_attention path."""
from __future__ import annotations

import math

from . import _core
from . import functional as F
from . import init
from .linear import Linear, linear
from .module import Module, Parameter


class MultiheadAttention(Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, batch_first=True,
                 device=None, dtype=None, seed=None):
        super().__init__()
        if embed_dim % num_heads:
            raise _core.NumrError(f"embed_dim ({embed_dim}) must be divisible by num_heads "
                                  f"({num_heads})")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.head_dim, self.batch_first = embed_dim // num_heads, batch_first
        kw = dict(dtype=dtype, device=device)
        self.in_proj_weight = Parameter(_core.zeros((3 * embed_dim, embed_dim), **kw))
        init.xavier_uniform_(self.in_proj_weight, seed=seed)
        self.in_proj_bias = Parameter(_core.zeros((3 * embed_dim,), **kw)) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype,
                               seed=None if seed is None else seed + 1)
        if bias:
            init.zeros_(self.out_proj.bias)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        """-> (output, attention weights averaged over heads, or per head; None when
        need_weights=False). key_padding_mask (B, S): bool, True where a key is padding (not
        attended), or float, added to the scores (torch's)."""
        if not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        q, k, v = self._project(query, key, value)
        attn_mask = _merge_masks(attn_mask, key_padding_mask, q.shape[0], self.num_heads,
                                 q.shape[2], k.shape[2])
        if need_weights or (self.training and self.dropout > 0):
            y, w = self._explicit(q, k, v, attn_mask, is_causal)
        else:
            if attn_mask is not None and attn_mask.dtype.name == "bool":
                attn_mask = ~attn_mask                 # SDPA's bool masks mark what is allowed
            y, w = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask,
                                                  is_causal=is_causal), None
        b, h, t, d = y.shape
        out = self.out_proj(y.transpose(1, 2).reshape(b, t, h * d))
        if not self.batch_first:
            out = out.transpose(0, 1)
        if w is not None and average_attn_weights:
            w = w.mean(axis=1)
        return out, (w if need_weights else None)

    def _project(self, query, key, value):
        E, W, bias = self.embed_dim, self.in_proj_weight, self.in_proj_bias
        if query is key and key is value:               # self-attention: one fused GEMM
            qkv = linear(query, W, bias)
            parts = (qkv[..., :E], qkv[..., E:2 * E], qkv[..., 2 * E:])
        else:
            parts = tuple(linear(x, W[i * E:(i + 1) * E],
                                 None if bias is None else bias[i * E:(i + 1) * E])
                          for i, x in enumerate((query, key, value)))
        return tuple(self._heads(p) for p in parts)

    def _heads(self, x):
        b, t, _ = x.shape
        return x.reshape(b, t, self.num_heads, self.head_dim).transpose(1, 2)

    def _explicit(self, q, k, v, attn_mask, is_causal):
        """softmax(q k^T / sqrt(d) + mask) v with the weights kept (B, H, T, S)."""
        scores = _core.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        t, s = scores.shape[-2], scores.shape[-1]
        if is_causal:
            causal = _core.tensor([[j > i for j in range(s)] for i in range(t)],
                                  device=scores.device)
            scores = _core.where(causal, -math.inf, scores)
        if attn_mask is not None:
            scores = _core.where(attn_mask, -math.inf, scores) \
                if attn_mask.dtype.name == "bool" else scores + attn_mask
        w = _core.softmax(scores, -1)
        if self.training and self.dropout > 0:
            w = F.dropout(w, self.dropout, True)
        return _core.matmul(w, v), w

    def extra_repr(self):
        return ""


def _merge_masks(attn_mask, key_padding_mask, b, heads, t, s):
    """attn_mask ((T, S), or (B * H, T, S) as torch) and key_padding_mask ((B, S)) as one mask
    broadcastable to (B, H, T, S): bool (True: not attended) when both are bool, else float
    (added to the scores; a True of a bool mask becomes -inf), as torch merges them."""
    if attn_mask is not None and attn_mask.ndim == 3:
        attn_mask = attn_mask.reshape(-1, heads, t, s)
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (b, s):
            raise _core.ShapeError(f"key_padding_mask must have shape (batch, source length) = "
                                   f"{(b, s)}, got {tuple(key_padding_mask.shape)}")
        key_padding_mask = key_padding_mask.reshape(b, 1, 1, s)
    masks = [m for m in (attn_mask, key_padding_mask) if m is not None]
    if len(masks) < 2:
        return masks[0] if masks else None
    if all(m.dtype.name == "bool" for m in masks):
        return masks[0] | masks[1]
    return _as_float_mask(masks[0], masks[1]) + _as_float_mask(masks[1], masks[0])


def _as_float_mask(m, other):
    dtype = other.dtype if other.dtype.is_floating else m.dtype
    if m.dtype.name == "bool":
        return _core.where(m, -math.inf, 0.0).astype(dtype)
    return m.astype(dtype)
