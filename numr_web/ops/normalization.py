"""Layer norm, RMS norm (one fused kernel forward, one backward; the backward reuses the saved
mean and 1/std) and dropout.

Under create_graph the norms' VJP is written with differentiable ops instead of the fused kernel
(mean and 1/std recomputed from x so that their dependence on x is part of the graph): a slower
path used only for higher-order gradients."""
from __future__ import annotations

from .. import shapes as sh
from ..autograd import apply
from ..creation import rand
from ..generator import resolve_seed
from ..errors import DTypeError, ShapeError
from ..gradmode import is_create_graph
from ..autocast_state import active as amp_active, cast as amp_cast
from ..tensor import Tensor
from .common import check_same_device
from ..vocab.registry import OPS, register


def _norm_forward(be, x, *wb, k, eps, rms, has_weight, has_bias):
    w = wb[0] if has_weight else None
    b = wb[-1] if has_bias else None
    y, mean, rstd = be.layer_norm(x, w, b, k, eps, rms)
    return y, {"mean": mean, "rstd": rstd}


def _norm_vjp(n, g):
    x = n.args[0]
    k, rms = n.attrs["k"], n.attrs["rms"]
    w = n.args[1] if n.attrs["has_weight"] else None
    has_b = n.attrs["has_bias"]
    if is_create_graph():
        dx, dw, db = _composed_norm_grads(g, x, w, k, n.attrs["eps"], rms)
    else:
        be = g._backend
        dxh, dwh, dbh = be.layer_norm_backward(g._data, x._data, None if w is None else w._data,
                                               n.saved_handle("mean"), n.saved_handle("rstd"),
                                               k, rms)
        wrap = lambda h: None if h is None else g._wrap(h, g.dtype, g.device, be)  # noqa: E731
        dx, dw, db = wrap(dxh), wrap(dwh), wrap(dbh)
    out = (dx,)
    if w is not None:
        out += (dw,)
    if has_b:
        out += (db if db is not None else g.sum(tuple(range(g.ndim - k))),)
    return out


def _composed_norm_grads(g, x, w, k, eps, rms):
    axes = tuple(range(x.ndim - k, x.ndim))
    lead = tuple(range(x.ndim - k))
    xc = x if rms else x - x.mean(axes, keepdim=True)
    rstd = ((xc * xc).mean(axes, keepdim=True) + eps).rsqrt()
    xhat = xc * rstd
    gw = g * w if w is not None else g
    proj = (gw * xhat).mean(axes, keepdim=True)
    dx = (gw - xhat * proj) if rms else (gw - gw.mean(axes, keepdim=True) - xhat * proj)
    dx = dx * rstd
    dw = (g * xhat).sum(lead) if w is not None else None
    db = g.sum(lead) if lead else g
    return dx, dw, db


register("layer_norm", _norm_forward, _norm_vjp, backward_name="NativeLayerNormBackward")


def _norm(x, normalized_shape, weight, bias, eps, rms):
    if amp_active() is not None:
        x, weight, bias = amp_cast("rms_norm" if rms else "layer_norm", x, weight, bias)
    if not isinstance(x, Tensor):
        raise DTypeError(f"{'rms_norm' if rms else 'layer_norm'}: x must be a Tensor")
    if not x.dtype.is_floating:
        raise DTypeError(f"layer_norm needs a floating-point tensor, got {x.dtype.name}")
    shape = sh.check_shape(normalized_shape)
    k = len(shape)
    if k == 0 or x.shape[x.ndim - k:] != shape or k > x.ndim:
        raise ShapeError(f"normalized_shape {shape} must be the last dims of the input, whose "
                         f"shape is {x.shape}")
    args = [x]
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            if not isinstance(t, Tensor) or t.shape != shape:
                raise ShapeError(f"{name} must be a tensor of shape {shape}, got "
                                 f"{getattr(t, 'shape', type(t).__name__)}")
            check_same_device(x, t)
            args.append(t.astype(x.dtype))
    return apply(OPS["layer_norm"], *args, k=k, eps=float(eps), rms=rms,
                 has_weight=weight is not None, has_bias=bias is not None)


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    return _norm(x, normalized_shape, weight, bias, eps, False)


def rms_norm(x, normalized_shape, weight=None, eps=None):
    """RMSNorm; eps None means torch's default, the dtype's machine epsilon."""
    if eps is None:
        eps = {"float16": 2 ** -10, "bfloat16": 2 ** -7, "float32": 2 ** -23,
               "float64": 2 ** -52}[x.dtype.name] if x.dtype.is_floating else 1e-6
    return _norm(x, normalized_shape, weight, None, eps, True)


# -- dropout -------------------------------------------------------------------------------------------
def dropout(x, p=0.5, training=True, seed=None, generator=None):
    """Zero each element with probability p and scale the rest by 1/(1-p) (device RNG; the same
    seed gives the same mask on one device)."""
    if isinstance(p, (str, bytes)) or not hasattr(p, "__float__"):
        raise DTypeError(f"dropout probability must be a number in [0, 1], got {p!r}")
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ShapeError(f"dropout probability must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    seed = resolve_seed(seed, generator)      # the default generator: nr.manual_seed
    keep = rand(x.shape, seed=seed, dtype=x.dtype, device=x.device) >= p
    return x * keep.astype(x.dtype) * (1.0 / (1.0 - p))
