"""torch.nn.init's in-place initialisers. The engine has no in-place ops: each one makes new
values and re-points the tensor at them (identity kept, so tied weights stay tied). `seed` makes
a draw reproducible (torch uses its global generator instead)."""
from __future__ import annotations

import math

from . import _core


def _set(t, values):
    _core.rebind(t, values.astype(t.dtype))
    return t


def uniform_(tensor, a=0.0, b=1.0, seed=None):
    r = _core.rand(tensor.shape, seed=seed, dtype=tensor.dtype, device=tensor.device)
    return _set(tensor, r * (b - a) + a)


def normal_(tensor, mean=0.0, std=1.0, seed=None):
    r = _core.randn(tensor.shape, seed=seed, dtype=tensor.dtype, device=tensor.device)
    return _set(tensor, r * std + mean)


def constant_(tensor, val):
    return _set(tensor, _core.full(tensor.shape, float(val), dtype=tensor.dtype,
                                   device=tensor.device))


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def _fans(tensor):
    if tensor.ndim < 2:
        raise _core.ShapeError("fan in and fan out need a tensor of at least 2 dimensions")
    field = 1
    for s in tensor.shape[2:]:
        field *= s
    return tensor.shape[1] * field, tensor.shape[0] * field


def xavier_uniform_(tensor, gain=1.0, seed=None):
    fan_in, fan_out = _fans(tensor)
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -a, a, seed)


def kaiming_uniform_(tensor, a=0.0, nonlinearity="leaky_relu", seed=None):
    """fan_in mode; with a = sqrt(5) this is torch's default Linear/Conv initialisation."""
    gain = math.sqrt(2.0 / (1 + a * a)) if nonlinearity == "leaky_relu" else \
        {"relu": math.sqrt(2.0), "linear": 1.0, "sigmoid": 1.0, "tanh": 5.0 / 3}[nonlinearity]
    bound = math.sqrt(3.0) * gain / math.sqrt(_fans(tensor)[0])
    return uniform_(tensor, -bound, bound, seed)
