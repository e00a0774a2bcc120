"""BatchNorm1d / BatchNorm2d and F.batch_norm, as torch's: in training the batch's statistics
over every dim but the channels (dim 1) normalise (biased variance) and update the running ones
(unbiased variance; momentum, or a cumulative average with momentum=None); in eval the running
statistics normalise. Composed of reductions and elementwise ops, so the gradient is autograd's;
the running statistics are updated on the device (re-pointed, as optimizer steps do: nothing is
read back)."""
from __future__ import annotations

from . import _core
from .module import Module, Parameter


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """torch.nn.functional.batch_norm: input (N, C, ...); running_mean/var (C,) or None (then
    training must be True); in training they are updated (in place for the caller: the same
    tensor objects hold the new values). momentum may be a 0-d tensor (BatchNorm's cumulative
    average, 1 / num_batches_tracked, stays on the device)."""
    x = input
    if not isinstance(x, _core.Tensor) or x.ndim < 2:
        raise _core.ShapeError(f"batch_norm expects an (N, C, ...) tensor, got "
                               f"{getattr(x, 'shape', type(x).__name__)}")
    if not x.dtype.is_floating:
        raise _core.DTypeError(f"batch_norm needs a floating-point input, got {x.dtype.name}")
    C = x.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (C,):
            raise _core.ShapeError(f"batch_norm: {name} must have shape ({C},) for {C} "
                                   f"channels, got {tuple(t.shape)}")
    if not training and (running_mean is None or running_var is None):
        raise _core.ShapeError("batch_norm: evaluation (training=False) needs running_mean and "
                               "running_var")
    dims = (0,) + tuple(range(2, x.ndim))
    shape = (1, C) + (1,) * (x.ndim - 2)
    if training:
        n = x.size // C if C else 0
        if n <= 1:
            raise _core.ShapeError(f"batch_norm: expected more than 1 value per channel when "
                                   f"training, got input size {x.shape}")
        mean = x.mean(dims)
        var = x.var(dims, correction=0)
        if running_mean is not None or running_var is not None:
            with _core.no_grad():
                m = momentum if isinstance(momentum, _core.Tensor) else float(momentum)
                if running_mean is not None:
                    _core.rebind(running_mean, (running_mean * (1 - m) + mean.detach() * m)
                                 .astype(running_mean.dtype))
                if running_var is not None:
                    unbiased = var.detach() * (n / (n - 1))
                    _core.rebind(running_var, (running_var * (1 - m) + unbiased * m)
                                 .astype(running_var.dtype))
    else:
        mean, var = running_mean, running_var
    y = (x - mean.reshape(shape)) * (var.reshape(shape) + eps).rsqrt()
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


class _BatchNorm(Module):
    _dims = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.has_bias = affine and bias                 # torch 2.x's keyword: a weight only
        full = lambda v: _core.full((num_features,), v, dtype=dtype, device=device)  # noqa: E731
        self.weight = Parameter(full(1.0)) if affine else None
        self.bias = Parameter(full(0.0)) if self.has_bias else None
        if track_running_stats:
            self.register_buffer("running_mean", full(0.0))
            self.register_buffer("running_var", full(1.0))
            self.register_buffer("num_batches_tracked",
                                 _core.zeros((), dtype="int32", device=device))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None

    def reset_running_stats(self):
        if self.track_running_stats:
            for name, v in (("running_mean", 0.0), ("running_var", 1.0)):
                t = getattr(self, name)
                _core.rebind(t, _core.full(t.shape, v, dtype=t.dtype, device=t.device))
            t = self.num_batches_tracked
            _core.rebind(t, _core.zeros((), dtype=t.dtype, device=t.device))

    def forward(self, x):
        if x.ndim not in self._dims:
            raise _core.ShapeError(f"{type(self).__name__}: expected a "
                                   f"{' or '.join(f'{d}D' for d in self._dims)} input, got "
                                   f"{x.ndim}D {x.shape}")
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            with _core.no_grad():
                t = self.num_batches_tracked
                _core.rebind(t, t + 1)
                if self.momentum is None:              # cumulative moving average, on the device
                    momentum = 1.0 / t.astype(x.dtype)
        return batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                          self.training or not self.track_running_stats, momentum, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.has_bias}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    _dims = (4,)
