"""Batch normalization as ONE op row (torch.nn.functional.batch_norm's semantics), with an optional
fused activation after it (numr's `activation=`, as Linear's and Conv2d's).

Forward primitive `be.batch_norm`: per-channel statistics over every dim but dim 1 (training: the
batch's mean and biased variance, deterministic two-level sums; eval: the running ones), y =
act((x - mean) * rstd * weight + bias), and in training the updated running statistics (momentum,
a number or a 0-d tensor; the unbiased variance). Backward primitive `be.batch_norm_backward`:
g = dy * act'(.), then dx, dweight, dbias from the per-channel sums of g and g * xhat (eval: dx =
g * weight * rstd). Under create_graph the VJP is composed of differentiable ops instead."""
from __future__ import annotations

from ..autograd import apply
from ..errors import DTypeError, ShapeError
from ..gradmode import is_create_graph, no_grad
from ..tensor import Tensor
from ..vocab.activations import ACT, get_act
from .common import check_same_device
from .elementwise import act_backward, activation
from ..vocab.registry import OPS, register


def _bn_forward(be, x, *rest, has_w, has_b, has_rm, has_rv, dev_momentum, momentum, eps,
                training, act):
    it = iter(rest)
    w = next(it) if has_w else None
    b = next(it) if has_b else None
    rm = next(it) if has_rm else None
    rv = next(it) if has_rv else None
    m = next(it) if dev_momentum else momentum
    y, s, mean, rstd, new_rm, new_rv = be.batch_norm(x, w, b, rm, rv, m, eps, training, act)
    saved = {"mean": mean, "rstd": rstd, "s": s}
    news = tuple(h for h in (new_rm, new_rv) if h is not None)
    return ((y,) + news if news else y), saved


def _bn_vjp(n, g):
    if type(g) is tuple:                      # (dy, running statistics' gradients: never any)
        g = g[0]
    a = n.attrs
    x = n.args[0]
    w = n.args[1] if a["has_w"] else None
    b = n.args[1 + a["has_w"]] if a["has_b"] else None
    none = (None,) * len(n.args)
    if g is None:
        return none
    if is_create_graph():
        dx, dw, db = _composed_grads(n, g, x, w, b)
    else:
        be = g._backend
        dxh, dwh, dbh = be.batch_norm_backward(
            g._data, x._data, None if w is None else w._data, n.saved_handle("mean"),
            n.saved_handle("rstd"), n.saved_handle("s"), a["act"], a["training"],
            w is not None and w.requires_grad, b is not None and b.requires_grad)
        wrap = lambda h: None if h is None else g._wrap(h, g.dtype, g.device, be)  # noqa: E731
        dx, dw, db = wrap(dxh), wrap(dwh), wrap(dbh)
    out = [dx if x.requires_grad else None]
    if w is not None:
        out.append(dw)
    if b is not None:
        out.append(db)
    return tuple(out) + none[len(out):]


def _composed_grads(n, g, x, w, b):
    """The same gradients from differentiable ops (create_graph): the statistics recomputed from
    x in training, so their dependence on x is part of the graph."""
    a = n.attrs
    dims = (0,) + tuple(range(2, x.ndim))
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    if a["training"]:
        xc = x - x.mean(dims, keepdim=True)
        rstd = ((xc * xc).mean(dims, keepdim=True) + a["eps"]).rsqrt()
    else:
        be = x._backend
        const = lambda h: Tensor._wrap(h, be.dtype_of(h), x.device, be)  # noqa: E731
        xc = x - const(n.saved_handle("mean")).astype(x.dtype).reshape(shape)
        rstd = const(n.saved_handle("rstd")).astype(x.dtype).reshape(shape)
    xhat = xc * rstd
    gz = g
    if a["act"] != "none":
        z = xhat if w is None else xhat * w.reshape(shape)
        z = z if b is None else z + b.reshape(shape)
        y = activation(z, a["act"])
        gz = act_backward(g, y if ACT[a["act"]].saves == "y" else z, a["act"],
                          y=y if ACT[a["act"]].saves == "z" else None)
    dw = (gz * xhat).sum(dims) if w is not None else None
    db = gz.sum(dims) if b is not None else None
    gx = gz if w is None else gz * w.reshape(shape)
    if a["training"]:
        gx = gx - gx.mean(dims, keepdim=True) - xhat * (gx * xhat).mean(dims, keepdim=True)
    return gx * rstd, dw, db


register("batch_norm", _bn_forward, _bn_vjp, backward_name="NativeBatchNormBackward")


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5, *, activation="none"):
    """torch.nn.functional.batch_norm: input (N, C, ...); running_mean/var (C,) or None (then
    training must be True); in training they are updated (the same tensor objects hold the new
    values: nothing is read back). momentum: a number, or a 0-d tensor (BatchNorm's cumulative
    average, 1 / num_batches_tracked, stays on the device). activation: an ACT row applied to the
    result in the same kernel (numr's; "relu" for torch's BatchNorm + ReLU)."""
    x = input
    if not isinstance(x, Tensor) or x.ndim < 2:
        raise ShapeError(f"batch_norm expects an (N, C, ...) tensor, got "
                         f"{getattr(x, 'shape', type(x).__name__)}")
    if not x.dtype.is_floating:
        raise DTypeError(f"batch_norm needs a floating-point input, got {x.dtype.name}")
    act = get_act(activation).name
    C = x.shape[1]
    tensors = []
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var)):
        if t is None:
            continue
        if not isinstance(t, Tensor) or tuple(t.shape) != (C,):
            raise ShapeError(f"batch_norm: {name} must have shape ({C},) for {C} channels, got "
                             f"{getattr(t, 'shape', type(t).__name__)}")
        if not t.dtype.is_floating:
            raise DTypeError(f"batch_norm: {name} must be floating-point, got {t.dtype.name}")
        tensors.append(t)
    check_same_device(x, *tensors)
    if (running_mean is None) != (running_var is None):
        raise ShapeError("batch_norm: running_mean and running_var must either both be None or "
                         "neither be None")
    if not training and running_mean is None:
        raise ShapeError("batch_norm: evaluation (training=False) needs running_mean and "
                         "running_var")
    if training:
        count = x.size // C if C else 0
        if count <= 1:
            raise ShapeError(f"batch_norm: expected more than 1 value per channel when "
                             f"training, got input size {x.shape}")
    dev_m = isinstance(momentum, Tensor)
    if dev_m:
        if momentum.size != 1:
            raise ShapeError(f"batch_norm: a tensor momentum must hold one value, got shape "
                             f"{momentum.shape}")
        check_same_device(x, momentum)
        momentum = momentum.reshape(()).detach()
    elif isinstance(momentum, (str, bytes)) or not hasattr(momentum, "__float__"):
        raise DTypeError(f"batch_norm: momentum must be a number or a 0-d tensor, got "
                         f"{momentum!r}")
    args = [x] + [t.astype(x.dtype) for t in (weight, bias) if t is not None]   # (no-op casts)
    stats = [t for t in (running_mean, running_var) if t is not None]
    args += stats + ([momentum] if dev_m and training and stats else [])
    outs = apply(OPS["batch_norm"], *args, has_w=weight is not None, has_b=bias is not None,
                 has_rm=running_mean is not None, has_rv=running_var is not None,
                 dev_momentum=dev_m and bool(training and stats),
                 momentum=0.0 if dev_m else float(momentum), eps=float(eps),
                 training=bool(training), act=act)
    if not (training and stats):
        return outs
    with no_grad():
        for t, new in zip(stats, outs[1:]):
            _rebind(t, new.detach())
    return outs[0]


def _rebind(t, src):
    """t takes src's storage (nn's rebind: the running statistics' tensor objects keep their
    identity, so module buffers and the caller's references see the new values)."""
    t._data, t.dtype, t.device, t._backend = src._data, src.dtype, src.device, src._backend
