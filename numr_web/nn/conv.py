"""Conv2d (NCHW; bias and activation fused into the convolution's epilogue where the engine
can: dilation 1, groups 1), MaxPool2d, AvgPool2d. Weight layout and initialisation as torch's."""
from __future__ import annotations

import math

from . import _core
from . import functional as F
from .module import Module, Parameter


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class Conv2d(Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, activation="none", device=None, dtype=None, seed=None):
        super().__init__()
        if in_channels % groups or out_channels % groups:
            raise _core.NumrError(f"in_channels ({in_channels}) and out_channels "
                                  f"({out_channels}) must be divisible by groups ({groups})")
        _core.get_act(activation)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = _pair(kernel_size), _pair(stride)
        self.dilation, self.activation = _pair(dilation), activation
        if padding == "valid":
            padding = 0
        elif padding == "same":
            if any(k % 2 == 0 for k in self.kernel_size) or self.stride != (1, 1):
                raise _core.NumrError("padding='same' needs odd kernel sizes and stride 1")
            padding = tuple(d * (k - 1) // 2 for d, k in zip(self.dilation, self.kernel_size))
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
                                            self.stride, self.padding)
        y = F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                     self.groups)
        return y if self.activation == "none" else _core.activation(y, self.activation)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        s += f", padding={self.padding}" if self.padding != (0, 0) else ""
        s += f", dilation={self.dilation}" if self.dilation != (1, 1) else ""
        s += f", groups={self.groups}" if self.groups != 1 else ""
        s += ", bias=False" if self.bias is None else ""
        s += f", activation={self.activation!r}" if self.activation != "none" else ""
        return s


def _uniform(shape, bound, seed, device, dtype):
    return _core.rand(shape, seed=seed, device=device, dtype=dtype) * (2 * bound) - bound


class _Pool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.padding = kernel_size, padding
        self.stride = kernel_size if stride is None else stride

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxPool2d(_Pool2d):
    def forward(self, x):
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding)


class AvgPool2d(_Pool2d):
    def forward(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding)
