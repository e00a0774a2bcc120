"""Conv2d (NCHW; bias and activation fused into the convolution's epilogue where the engine
can: dilation 1, groups 1), MaxPool2d, AvgPool2d, AdaptiveAvgPool2d. Weight layout and
initialisation as torch's."""
from __future__ import annotations

import math

from . import _core
from . import functional as F
from .module import Module, Parameter


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class Conv2d(Module):
    """torch.nn.Conv2d (padding an int, a pair, "valid" or "same"; padding_mode "zeros",
    "reflect", "replicate" or "circular") with numr's fused `activation`."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None, seed=None,
                 activation="none"):
        super().__init__()
        if isinstance(padding_mode, str) and padding_mode not in _core.PADDING_MODES:
            raise _core.ShapeError(f"padding_mode must be one of {_core.PADDING_MODES}, got "
                                   f"{padding_mode!r}")
        for what, v in (("in_channels", in_channels), ("out_channels", out_channels),
                        ("groups", groups)):
            if not hasattr(v, "__index__") or v.__index__() < 0:
                raise _core.ShapeError(f"Conv2d: {what} must be a non-negative int, got {v!r}")
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise _core.ShapeError(f"in_channels ({in_channels}) and out_channels "
                                   f"({out_channels}) must be divisible by groups ({groups})")
        _core.get_act(activation)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = _pair(kernel_size), _pair(stride)
        self.dilation, self.activation = _pair(dilation), activation
        self.padding_mode = padding_mode
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise _core.ShapeError(f"Conv2d: padding must be an int, a pair, 'valid' or "
                                       f"'same'; got {padding!r}")
            if padding == "same" and self.stride != (1, 1):
                raise _core.ShapeError("Conv2d: padding='same' is not supported for strided "
                                       f"convolutions (stride {self.stride})")
            self.padding = padding
        else:
            self.padding = _pair(padding)
        kh, kw = self.kernel_size
        bound = 1.0 / math.sqrt(in_channels // groups * kh * kw)
        self.weight = Parameter(_uniform((out_channels, in_channels // groups, kh, kw), bound,
                                         seed, device, dtype))
        self.bias = Parameter(_uniform((out_channels,), bound, None if seed is None else seed + 1,
                                       device, dtype)) if bias else None

    def forward(self, x):
        if self.dilation == (1, 1) and self.groups == 1:
            return F.conv2d_bias_activation(x, self.weight, self.bias, self.activation,
                                            self.stride, self.padding,
                                            padding_mode=self.padding_mode)
        y = F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                     self.groups, padding_mode=self.padding_mode)
        return y if self.activation == "none" else _core.activation(y, self.activation)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if isinstance(self.padding, str):
            s += f", padding={self.padding}"
        elif self.padding != (0, 0):
            s += f", padding={self.padding}"
        s += f", dilation={self.dilation}" if self.dilation != (1, 1) else ""
        s += f", groups={self.groups}" if self.groups != 1 else ""
        s += ", bias=False" if self.bias is None else ""
        s += f", padding_mode={self.padding_mode}" if self.padding_mode != "zeros" else ""
        s += f", activation={self.activation!r}" if self.activation != "none" else ""
        return s


def _uniform(shape, bound, seed, device, dtype):
    return _core.rand(shape, seed=seed, device=device, dtype=dtype) * (2 * bound) - bound


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size, self.padding, self.dilation = kernel_size, padding, dilation
        self.stride = kernel_size if stride is None else stride
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, x):
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size, self.padding = kernel_size, padding
        self.stride = kernel_size if stride is None else stride
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"
