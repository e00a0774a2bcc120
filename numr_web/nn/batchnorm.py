"""BatchNorm1d / BatchNorm2d, as torch's: in training the batch's statistics over every dim but
the channels (dim 1) normalise (biased variance) and update the running ones (unbiased variance;
momentum, or a cumulative average with momentum=None); in eval the running statistics normalise.
One fused op each way (numr_web.ops.batchnorm, which is also F.batch_norm); the running statistics
are updated on the device (re-pointed, as optimizer steps do: nothing is read back). numr's
`activation=` applies an activation in the same kernel (BatchNorm2d(c, activation="relu") is
torch's BatchNorm2d followed by ReLU)."""
from __future__ import annotations

from . import _core
from ..ops.batchnorm import batch_norm
from .module import Module, Parameter


class _BatchNorm(Module):
    _dims = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True,
                 activation="none"):
        super().__init__()
        self.activation = _core.get_act(activation).name
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
                    momentum = 1.0 / t.astype("float32" if x.dtype.itemsize < 8 else x.dtype)
        return batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                          self.training or not self.track_running_stats, momentum, self.eps,
                          activation=self.activation)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.has_bias}, "
                f"track_running_stats={self.track_running_stats}" +
                (f", activation={self.activation!r}" if self.activation != "none" else ""))


class BatchNorm1d(_BatchNorm):
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    _dims = (4,)
