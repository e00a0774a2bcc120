"""scaled_dot_product_attention: softmax(q k^T * scale + mask) v as one op. The forward keeps
only the output and each score row's log-sum-exp (O(T) per row); the backward recomputes the
probabilities from them (GPU backends: fused kernels that never hold the T x T scores in memory).
Under create_graph the VJP is written with differentiable ops (matmul, softmax), a slower path
used only for higher-order gradients."""
from __future__ import annotations

import math

from .. import dtypes as dt
from .. import shapes as sh
from ..autocast_state import active as amp_active, cast as amp_cast
from ..autograd import apply
from ..creation import arange
from ..errors import DTypeError, ShapeError
from ..gradmode import is_create_graph
from ..tensor import Tensor
from .common import check_same_device, sum_to_shape
from .elementwise import where
from ..vocab.registry import OPS, register


def _attn_forward(be, q, k, v, *mask, causal, scale):
    out, lse = be.attention(q, k, v, mask[0] if mask else None, causal, scale)
    return out, {"lse": lse}


def _attn_vjp(n, g):
    q, k, v = n.args[:3]
    mask = n.args[3] if len(n.args) == 4 else None
    causal, scale = n.attrs["causal"], n.attrs["scale"]
    dmask = None
    if is_create_graph() or (mask is not None and mask.requires_grad):
        dq, dk, dv, ds = _composed_grads(g, q, k, v, mask, causal, scale)
        dmask = ds if mask is not None and mask.requires_grad else None
    else:
        be = g._backend
        dqh, dkh, dvh = be.attention_backward(g._data, q._data, k._data, v._data,
                                              n.outs[0] if n.outs else None,
                                              n.saved_handle("lse"),
                                              None if mask is None else mask._data, causal, scale)
        dq, dk, dv = (g._wrap(h, g.dtype, g.device, be) for h in (dqh, dkh, dvh))
    return (sum_to_shape(dq, q.shape), sum_to_shape(dk, k.shape),
            sum_to_shape(dv, v.shape)) + ((dmask,) if mask is not None else ())


def _scores(q, k, mask, causal, scale):
    s = (q @ k.mT) * scale
    if causal:
        tq, tk = s.shape[-2], s.shape[-1]
        keep = _causal_mask(tq, tk, q.device)
        s = where(keep, s, float("-inf"))
    if mask is not None:
        s = where(mask, s, float("-inf")) if mask.dtype is dt.bool_ else s + mask
    return s


def _causal_mask(tq, tk, device):
    # torch's is_causal: tril(ones(tq, tk)), top-left aligned: query i sees keys 0..i
    return arange(tk, device=device).reshape(1, tk) <= arange(tq, device=device).reshape(tq, 1)


def _composed_grads(g, q, k, v, mask, causal, scale):
    s = _scores(q, k, mask, causal, scale)
    dead = (s == float("-inf")).all(-1, keepdim=True)     # fully masked rows: p = 0, as torch
    p = where(dead, 0.0, where(dead, 0.0, s).softmax(-1))
    dv = p.mT @ g
    dp = g @ v.mT
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return (ds @ k) * scale, (ds.mT @ q) * scale, dv, ds


register("attention", _attn_forward, _attn_vjp, save_out=True,
         backward_name="ScaledDotProductAttentionBackward")


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None):
    """torch.nn.functional.scaled_dot_product_attention for (..., T, d) tensors. attn_mask: bool
    (True: attend) or float (added to the scores), broadcastable to (..., Tq, Tk)."""
    if amp_active() is not None:
        q, k, v = amp_cast("scaled_dot_product_attention", q, k, v)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor):
            raise DTypeError(f"scaled_dot_product_attention: {name} must be a Tensor")
        if not t.dtype.is_floating or t.dtype is not q.dtype:
            raise DTypeError("scaled_dot_product_attention: q, k, v must share one floating "
                             f"dtype; got {q.dtype.name}, {k.dtype.name}, {v.dtype.name}")
        if t.ndim < 2:
            raise ShapeError(f"scaled_dot_product_attention: {name} must be (..., T, d), got "
                             f"{t.shape}")
    check_same_device(q, k, v)
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ShapeError(f"scaled_dot_product_attention: q {q.shape}, k {k.shape} and v "
                         f"{v.shape} must agree: q and k on d, k and v on the key length")
    if dropout_p:
        raise ShapeError("scaled_dot_product_attention: dropout_p is not supported; apply "
                         "nr.dropout to the output instead")
    if is_causal and attn_mask is not None:
        raise ShapeError("scaled_dot_product_attention: give attn_mask or is_causal, not both")
    lead = _broadcast_lead(q, k, v)
    q, k, v = (t.expand(lead + t.shape[-2:]) for t in (q, k, v))
    args = [q, k, v]
    if attn_mask is not None:
        if not isinstance(attn_mask, Tensor):
            raise DTypeError("attn_mask must be a Tensor")
        check_same_device(q, attn_mask)
        m = attn_mask if attn_mask.dtype is dt.bool_ else attn_mask.astype(q.dtype)
        args.append(m.expand(lead + (q.shape[-2], k.shape[-2])))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    return apply(OPS["attention"], *args, causal=bool(is_causal), scale=scale)


def _broadcast_lead(q, k, v):
    return sh.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
