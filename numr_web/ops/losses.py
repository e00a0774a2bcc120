"""Losses under torch.nn.functional's names, argument names and reductions ("mean", "sum",
"none"; the deprecated size_average/reduce flags too): mse_loss, l1_loss, smooth_l1_loss,
huber_loss, binary_cross_entropy, binary_cross_entropy_with_logits, kl_div (nll_loss and
cross_entropy: nn_functional.py).

They are composed of elementwise ops and reductions. The two binary cross entropies are rows of
their own: their values are composed without recording (torch's formulas: the logs clamped at
-100; the logits form through log1p(exp(-|x|)), never exp of a large number) and their VJPs are
torch's gradient formulas, finite where a composed gradient would be 0 * inf (p = 0 or 1, x = 0).
"""
from __future__ import annotations

import warnings

from .. import shapes as sh
from ..autograd import attach
from ..errors import DTypeError, GradientError, ShapeError
from ..gradmode import is_grad_enabled, no_grad
from ..autocast_state import active as amp_active, cast as amp_cast, lowers as amp_lowers
from ..tensor import Tensor
from .common import as_tensor, check_same_device
from .elementwise import maximum, sigmoid, where
from .generated import FUNCTIONS
from .nn_functional import check_reduction, legacy_reduction
from ..vocab.registry import OPS, register

_abs, exp, log, log1p = (FUNCTIONS[n] for n in ("abs", "exp", "log", "log1p"))   # generated rows


def _bce_vjp(n, g):
    p, y = n.args
    dp = g * (p - y) / maximum(p * (1 - p), 1e-12)            # torch's EPSILON
    dy = g * (log1p(-p) - _log(p)) if y.requires_grad else None
    return dp, dy


def _bce_logits_vjp(n, g):
    x, y = n.args[:2]
    pw = n.args[2] if len(n.args) == 3 else None
    if pw is None:
        dx = g * (sigmoid(x) - y)
    else:
        t = pw * y
        dx = g * ((t + 1 - y) * sigmoid(x) - t)
    dy = None
    if y.requires_grad:
        dy = -x if pw is None else (pw - 1) * _softplus_neg(x) - x
        dy = g * dy
    return (dx, dy) + ((None,) if pw is not None else ())


def _never(be, *args, **attrs):
    raise AssertionError("losses attach their value; this row's forward never runs")


register("binary_cross_entropy", _never, _bce_vjp, backward_name="BinaryCrossEntropyBackward")
register("binary_cross_entropy_with_logits", _never, _bce_logits_vjp,
         backward_name="BinaryCrossEntropyWithLogitsBackward")


# -- argument checks ------------------------------------------------------------------------------
def _pair(what, input, target, same_shape=False):
    if not isinstance(input, Tensor):
        raise DTypeError(f"{what}: input must be a Tensor, got {type(input).__name__}")
    if not input.dtype.is_floating:
        raise DTypeError(f"{what}: input must be floating point, got {input.dtype.name}")
    target = as_tensor(target, input)
    check_same_device(input, target)
    if not target.dtype.is_floating:
        raise DTypeError(f"{what}: target must be floating point like the input, got "
                         f"{target.dtype.name}; convert it with .astype({input.dtype.name!r})")
    if target.shape != input.shape:
        if same_shape:
            raise ShapeError(f"{what}: target size {target.shape} must be the same as input "
                             f"size {input.shape}")
        sh.broadcast_shapes(input.shape, target.shape)      # ShapeError if they cannot
        warnings.warn(f"{what}: using a target size ({target.shape}) that is different to the "
                      f"input size ({input.shape}); they are broadcast, which is likely wrong",
                      UserWarning, stacklevel=3)
    return target


def _weight(what, weight, input, exact):
    if weight is None:
        return None
    w = as_tensor(weight, input)
    check_same_device(input, w)
    if exact and w.shape != input.shape:
        raise ShapeError(f"{what}: weight must have the input's shape {input.shape}, got "
                         f"{w.shape}")
    sh.broadcast_shapes(input.shape, w.shape)
    return w


def _not_differentiable(what, **tensors):
    """torch refuses a weight or pos_weight of the binary cross entropies that requires grad."""
    for name, t in tensors.items():
        if t is not None and t.requires_grad and is_grad_enabled():
            raise GradientError(f"{what} is not differentiable with respect to {name}; pass "
                                f"{name}.detach() (as torch requires)")


def _reduce(loss, reduction):
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


def _weighted(loss, w, reduction, mean_by_weight):
    """torch's weighted mse/l1 divide the sum by the summed weights; huber takes the mean."""
    if w is None:
        return _reduce(loss, reduction)
    loss = loss * w
    if reduction == "mean" and mean_by_weight:
        return loss.sum() / w.sum()
    return _reduce(loss, reduction)


def _log(x):
    """log x, through log1p(x - 1) above 0.5 (x - 1 is exact there): WGSL's log is accurate
    to an absolute 2**-21 only, many ulps of a result near 0 (log(0.9) is 6 ulps off on
    lavapipe)."""
    return where(x > 0.5, log1p(x - 1), log(x))


def _softplus_neg(x):
    """log(1 + exp(-x)) without overflow: log1p(exp(-|x|)) + max(-x, 0)."""
    return log1p(exp(-_abs(x))) + maximum(-x, 0.0)


# -- the losses ----------------------------------------------------------------------------------
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = legacy_reduction(size_average, reduce, reduction)
    if amp_active() is not None:
        input, target = amp_cast("mse_loss", input, target)
    check_reduction("mse_loss", reduction)
    target = _pair("mse_loss", input, target)
    w = _weight("mse_loss", weight, input, exact=True)
    d = input - target
    return _weighted(d * d, w, reduction, True)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = legacy_reduction(size_average, reduce, reduction)
    if amp_active() is not None:
        input, target = amp_cast("l1_loss", input, target)
    check_reduction("l1_loss", reduction)
    target = _pair("l1_loss", input, target)
    w = _weight("l1_loss", weight, input, exact=True)
    return _weighted(_abs(input - target), w, reduction, True)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d² / beta where |d| < beta, else |d| - 0.5 beta (beta = 0: the L1 loss)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if amp_active() is not None:
        input, target = amp_cast("smooth_l1_loss", input, target)
    check_reduction("smooth_l1_loss", reduction)
    beta = float(beta)
    if not beta >= 0:
        raise ShapeError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    target = _pair("smooth_l1_loss", input, target)
    d = input - target
    z = _abs(d)
    if beta == 0:
        return _reduce(z, reduction)
    return _reduce(where(z < beta, 0.5 * d * d / beta, z - 0.5 * beta), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d² where |d| < delta, else delta (|d| - 0.5 delta)."""
    if amp_active() is not None:
        input, target = amp_cast("huber_loss", input, target)
    check_reduction("huber_loss", reduction)
    delta = float(delta)
    if not delta > 0:
        raise ShapeError(f"huber_loss: delta must be > 0, got {delta}")
    target = _pair("huber_loss", input, target)
    w = _weight("huber_loss", weight, input, exact=True)
    d = input - target
    z = _abs(d)
    return _weighted(where(z < delta, 0.5 * d * d, delta * (z - 0.5 * delta)), w, reduction,
                     False)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """-w (y log p + (1 - y) log(1 - p)), each log clamped at -100 as torch does (finite at p = 0
    and 1). Probabilities outside [0, 1] are reported at the next readback."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if amp_active() is not None and amp_lowers(input):
        raise DTypeError("binary_cross_entropy is unsafe to autocast (its float16 input cannot "
                         "hold probabilities near 0 and 1 precisely), as in torch: use "
                         "binary_cross_entropy_with_logits on the logits (it is safe to "
                         "autocast), or compute it outside the autocast region")
    check_reduction("binary_cross_entropy", reduction)
    target = _pair("binary_cross_entropy", input, target, same_shape=True)
    w = _weight("binary_cross_entropy", weight, input, exact=False)
    _not_differentiable("binary_cross_entropy", weight=w)
    ok = (input >= 0) & (input <= 1)
    input._backend.check_later(
        (~ok).max()._data if input.size else None, "binary_cross_entropy",
        "all elements of input should be between 0 and 1 (probabilities; "
        "for logits use binary_cross_entropy_with_logits)")
    with no_grad():
        value = (target - 1) * maximum(log1p(-input), -100.0) - \
            target * maximum(_log(input), -100.0)
    loss = attach(value._data, OPS["binary_cross_entropy"], (input, target), {}, value)
    if w is not None:
        loss = loss * w
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """The binary cross entropy of sigmoid(input), stably: (1 - y) x + (1 + (pos_weight - 1) y)
    log(1 + exp(-x)), with log(1 + exp(-x)) = log1p(exp(-|x|)) + max(-x, 0)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if amp_active() is not None:
        input, target, weight, pos_weight = amp_cast("binary_cross_entropy_with_logits", input,
                                                     target, weight, pos_weight)
    check_reduction("binary_cross_entropy_with_logits", reduction)
    target = _pair("binary_cross_entropy_with_logits", input, target, same_shape=True)
    w = _weight("binary_cross_entropy_with_logits", weight, input, exact=False)
    _not_differentiable("binary_cross_entropy_with_logits", weight=w)
    args = (input, target)
    if pos_weight is not None:
        pw = as_tensor(pos_weight, input)
        check_same_device(input, pw)
        sh.broadcast_shapes(input.shape, pw.shape)
        _not_differentiable("binary_cross_entropy_with_logits", pos_weight=pw)
        args += (pw.expand(sh.broadcast_shapes(input.shape, pw.shape)),)
    with no_grad():
        sp = _softplus_neg(input)
        if pos_weight is None:
            value = (1 - target) * input + sp
        else:
            value = (1 - target) * input + ((args[2] - 1) * target + 1) * sp
    loss = attach(value._data, OPS["binary_cross_entropy_with_logits"], args, {}, value)
    if w is not None:
        loss = loss * w
    return _reduce(loss, reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Pointwise target (log target - input) (input: log-probabilities; 0 where target is 0);
    with log_target the target is given as log-probabilities. "batchmean" divides the sum by
    the batch size (the first dim), "mean" by the number of elements (as torch)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if amp_active() is not None:
        input, target = amp_cast("kl_div", input, target)
    check_reduction("kl_div", reduction, ("batchmean",))
    target = _pair("kl_div", input, target)
    if log_target:
        loss = exp(target) * (target - input)
    else:
        safe = where(target == 0, 1.0, target)                  # xlogy(t, t): 0 at t = 0
        loss = target * _log(safe) - target * input
    if reduction == "batchmean":
        total = loss.sum()
        return total / input.shape[0] if input.ndim else total
    return _reduce(loss, reduction)

