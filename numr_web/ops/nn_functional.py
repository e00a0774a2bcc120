"""Neural-network functions built from the op families: one_hot, nll_loss, cross_entropy
(the other losses: ops/losses.py).

Nothing here reads a value back to the host: a check on values (labels in range) is queued on the
device and reported at the next readback, as CUDA reports a device-side assert (numr_web.backends
`Backend.check_later`); on the cpu it is immediate.
"""
from __future__ import annotations

import warnings

from .. import dtypes as dt
from ..autograd import apply
from ..errors import BackendLimitError, DTypeError, ShapeError
from ..gradmode import is_create_graph
from ..autocast_state import active as amp_active, cast as amp_cast
from ..tensor import Tensor
from .common import as_tensor, check_same_device
from .elementwise import where
from ..vocab.registry import OPS, register

register("one_hot", lambda be, x, n, dtype: (be.one_hot(x, n, dtype), None), None)


def _xent_forward(be, x, labels, ignore_index, smoothing):
    loss, stats = be.cross_entropy(be.contiguous(x), labels, ignore_index, smoothing)
    return loss, {"stats": stats}


def _xent_vjp(n, g):
    """dx = g (softmax(x) - (1 - s) onehot - s / C), 0 in ignored rows: one kernel from the
    saved row stats (Backend.cross_entropy's); composed (differentiable again) under
    create_graph."""
    x, labels = n.args
    ignore, s = n.attrs["ignore_index"], n.attrs["smoothing"]
    if is_create_graph():
        keep = (labels != ignore).reshape(-1, 1)
        d = x.softmax(-1) - one_hot(where(labels != ignore, labels, 0), x.shape[1],
                                    x.dtype) * (1 - s)
        return where(keep, (d - s / x.shape[1]) * g.reshape(-1, 1), 0.0), None
    be = g._backend
    dx = be.cross_entropy_backward(be.contiguous(x._data), labels._data, n.saved_handle("stats"),
                                   g._data, ignore, s)
    return g._wrap(dx, x.dtype, x.device, be), None


# one row: logits (R, C), labels (R,) -> the loss per row (0 where ignored); its VJP reads the
# logits and the saved row stats
register("cross_entropy", _xent_forward, _xent_vjp)


def _check_labels(labels, n, op, ignore_index=None, what="labels"):
    """Queue the check "every label is in [0, n) or equals ignore_index" on the device."""
    bad = (labels < 0) | (labels >= n)
    if ignore_index is not None:
        bad = bad & (labels != ignore_index)
    labels._backend.check_later(
        bad.max()._data if bad.size else None, op,
        f"{what} must be in [0, {n})" + (f" or equal ignore_index={ignore_index}"
                                         if ignore_index is not None else "") +
        f" for {n} classes; some are not")


def one_hot(labels, num_classes=-1, dtype=dt.float32):
    if not isinstance(labels, Tensor):
        raise DTypeError(f"one_hot expects an integer Tensor, got {type(labels).__name__}")
    if labels.dtype.kind != "i":
        raise DTypeError(f"one_hot needs integer labels (int32), got {labels.dtype.name}")
    if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 1:
        raise ShapeError(f"one_hot: num_classes must be a positive int, got {num_classes!r} "
                         "(inferring it from the data would need a readback)")
    dtype = dt.get_dtype(dtype)
    limit = labels._backend.max_elements(dtype)
    if labels.size * num_classes > limit:
        raise BackendLimitError(f"one_hot: {labels.size} labels x {num_classes} classes is more "
                                f"than the {labels.device} device can hold ({limit} elements)")
    _check_labels(labels, num_classes, "one_hot")
    return apply(OPS["one_hot"], labels, n=num_classes, dtype=dtype)


def legacy_reduction(size_average, reduce, reduction):
    """torch's _Reduction.legacy_get_string: the deprecated size_average/reduce flags, when given,
    decide the reduction (reduce=False: "none"; else size_average=False: "sum"; else "mean")."""
    if size_average is None and reduce is None:
        return reduction
    warnings.warn("size_average and reduce are deprecated (as in torch); use reduction='mean', "
                  "'sum' or 'none'", UserWarning, stacklevel=3)
    if reduce is False:
        return "none"
    return "sum" if size_average is False else "mean"


def check_reduction(what, reduction, extra=()):
    if reduction not in ("mean", "sum", "none") + tuple(extra):
        allowed = ", ".join(repr(r) for r in ("mean", "sum", "none") + tuple(extra))
        raise ShapeError(f"{what}: {reduction!r} is not a valid value for reduction; expected "
                         f"one of {allowed}")


def _class_rows(x, what):
    """(N, C, d1, ...) / (N, C) / (C,) -> (rows, C) with classes last, the batch shape (N, d1,
    ...) and C."""
    if x.ndim == 0:
        raise ShapeError(f"{what}: input must have a class dimension: (C,), (N, C) or "
                         "(N, C, d1, ...); got a 0-d tensor")
    lead = x.shape[:1] + x.shape[2:] if x.ndim > 1 else ()
    C = x.shape[1] if x.ndim > 1 else x.shape[0]
    if x.ndim > 2:
        x = x.permute((0,) + tuple(range(2, x.ndim)) + (1,))
    return x.reshape(-1, C), lead, C


def _class_weight(weight, like, C, what):
    if weight is None:
        return None
    w = as_tensor(weight, like).astype(like.dtype)
    check_same_device(like, w)
    if w.shape != (C,):
        raise ShapeError(f"{what}: weight must have shape ({C},) (one per class), got {w.shape}")
    return w


def _labels(target, lead, C, ignore_index, what):
    """The class-index target as one label per row (R,), its shape and values checked."""
    if target.dtype.kind != "i":
        raise DTypeError(f"{what}: target must be int32 class indices, got {target.dtype.name}")
    if target.shape != lead:
        raise ShapeError(f"{what}: target must have shape {lead} to match input of shape "
                         f"{(lead[:1] + (C,) + lead[1:]) if lead else (C,)}, got {target.shape}")
    labels = target.reshape(-1)
    _check_labels(labels, C, what, ignore_index, "targets")
    return labels


def _picked(lp, target, lead, C, w, ignore_index, what):
    """Per row: -lp[label] * weight[label] (0 for ignored rows), and the row weights."""
    labels = _labels(target, lead, C, ignore_index, what)
    keep = labels != ignore_index                           # rows that count
    idx = where(keep, labels, 0)                            # an ignored row reads class 0 ...
    # one gather of each row's label (O(rows)), not a one-hot mask over every class (O(rows C))
    picked = apply(OPS["gather"], lp, idx.reshape(-1, 1), axis=1).reshape(-1)
    picked = where(keep, picked, 0.0)                       # ... and drops it (no -inf * 0)
    kept = keep.astype(lp.dtype)
    if w is None:
        return -picked, kept, kept
    w_rows = apply(OPS["gather"], w, idx, axis=0) * kept
    return -picked * w_rows, w_rows, kept


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """torch.nn.functional.nll_loss: input log-probabilities (N, C), (N, C, d1, ...) or (C,);
    target int32 class indices (N,) / (N, d1, ...) / (). "mean" divides by the summed weights of
    the rows that count (NaN when every row is ignored, as torch)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if amp_active() is not None:
        input, weight = amp_cast("nll_loss", input, weight)
    if not isinstance(input, Tensor):
        raise DTypeError(f"nll_loss: input must be a Tensor, got {type(input).__name__}")
    if not input.dtype.is_floating:
        raise DTypeError(f"nll_loss: input must be floating point, got {input.dtype.name}")
    target = as_tensor(target, input)
    check_same_device(input, target)
    check_reduction("nll_loss", reduction)
    lp, lead, C = _class_rows(input, "nll_loss")
    w = _class_weight(weight, lp, C, "nll_loss")
    nll, w_rows, _ = _picked(lp, target, lead, C, w, ignore_index, "nll_loss")
    return _reduce(nll, w_rows, reduction, lead)


def cross_entropy(logits, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """torch.nn.functional.cross_entropy: logits (N, C), (N, C, d1, ...) or (C,); target class
    indices (N,) / (N, d1, ...) / () as int32, or class probabilities of the logits' shape."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if amp_active() is not None:
        logits, target, weight = amp_cast("cross_entropy", logits, target, weight)
    if not isinstance(logits, Tensor):
        raise DTypeError(f"cross_entropy: logits must be a Tensor, got {type(logits).__name__}")
    if not logits.dtype.is_floating:
        raise DTypeError(f"cross_entropy: logits must be floating point, got {logits.dtype.name}")
    target = as_tensor(target, logits)
    check_same_device(logits, target)
    check_reduction("cross_entropy", reduction)
    if not 0.0 <= float(label_smoothing) <= 1.0:
        raise ShapeError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    rows, lead, C = _class_rows(logits, "cross_entropy")
    w = _class_weight(weight, rows, C, "cross_entropy")
    if target.dtype.is_floating:                           # class probabilities
        return _soft_targets(rows.log_softmax(-1), target, C, lead, w, reduction,
                             label_smoothing, logits)
    if target.dtype.kind != "i":
        raise DTypeError(f"cross_entropy: target must be int32 class indices or float "
                         f"probabilities, got {target.dtype.name}")
    if w is None and rows.size:                            # the fused row: one kernel each way
        labels = _labels(target, lead, C, ignore_index, "cross_entropy")
        per_row = apply(OPS["cross_entropy"], rows, labels, ignore_index=int(ignore_index),
                        smoothing=float(label_smoothing))
        return _reduce(per_row, None if reduction != "mean" else
                       (labels != ignore_index).astype(per_row.dtype), reduction, lead)
    lp = rows.log_softmax(-1)
    nll, w_rows, kept = _picked(lp, target, lead, C, w, ignore_index, "cross_entropy")
    loss = _reduce(nll, w_rows, reduction, lead)
    if label_smoothing:
        smooth = -(lp * w).sum(-1) if w is not None else -lp.sum(-1)
        smooth = where(kept > 0, smooth, 0.0)
        loss = loss * (1 - label_smoothing) + _reduce(smooth, w_rows, reduction, lead) * \
            (label_smoothing / C)
    return loss


def _reduce(per_row, denom, reduction, lead):
    if reduction == "none":
        return per_row.reshape(lead)
    if reduction == "sum":
        return per_row.sum()
    return per_row.sum() / denom.sum()


def _soft_targets(lp, target, C, lead, w, reduction, label_smoothing, logits):
    full = (lead[:1] + (C,) + lead[1:]) if lead else (C,)
    if target.shape != full:
        raise ShapeError(f"cross_entropy: probability targets must have the logits' shape "
                         f"{full}, got {target.shape}")
    if len(full) > 2:
        target = target.permute((0,) + tuple(range(2, len(full))) + (1,))
    p = target.reshape(-1, C).astype(lp.dtype)
    if label_smoothing:
        p = p * (1 - label_smoothing) + label_smoothing / C
    terms = where(p == 0, 0.0, lp * p)
    if w is not None:
        terms = terms * w
    per_row = -terms.sum(-1)
    if reduction == "none":
        return per_row.reshape(lead)
    if reduction == "sum":
        return per_row.sum()
    return per_row.sum() / max(1, per_row.shape[0])
