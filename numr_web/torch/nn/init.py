"""torch.nn.init: numr_web.nn.init's initialisers (in place; the default generator draws the
values, so torch.manual_seed makes them reproducible, though not equal to torch's)."""
from ...nn.init import (constant_, kaiming_uniform_, normal_, ones_, uniform_,  # noqa: F401
                        xavier_uniform_, zeros_)
from ...nn.init import _fans

import math as _math


def xavier_normal_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * _math.sqrt(2.0 / (fan_in + fan_out)))


def kaiming_normal_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    fan = _fans(tensor)[0 if mode == "fan_in" else 1]
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / _math.sqrt(fan))


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """N(mean, std) values redrawn until inside [a, b] (rejection: same distribution as torch's
    inverse-CDF method)."""
    from ...ops.elementwise import where
    from ...creation import randn
    out = randn(tensor.shape, dtype=tensor.dtype, device=tensor.device) * std + mean
    for _ in range(64):
        bad = (out < a) | (out > b)
        if not bool(bad.any()):
            break
        out = where(bad, randn(tensor.shape, dtype=tensor.dtype, device=tensor.device) * std
                    + mean, out)
    out = out.clamp(a, b)
    from ...nn.init import _set
    return _set(tensor, out)


def calculate_gain(nonlinearity, param=None):
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return _math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return _math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")
