"""LayerNorm and RMSNorm over the trailing `normalized_shape` dims (torch's parameters: weight
ones, bias zeros)."""
from __future__ import annotations

from . import _core
from . import functional as F
from .module import Module, Parameter


def _shape(s):
    return (s,) if isinstance(s, int) else tuple(s)


def _filled(shape, value, dtype, device):
    return _core.full(shape, value, dtype=dtype, device=device)


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        self.normalized_shape, self.eps = _shape(normalized_shape), eps
        self.elementwise_affine = elementwise_affine
        self.weight = self.bias = None
        if elementwise_affine:
            self.weight = Parameter(_filled(self.normalized_shape, 1.0, dtype, device))
            if bias:
                self.bias = Parameter(_filled(self.normalized_shape, 0.0, dtype, device))

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class RMSNorm(Module):
    """eps=None: the dtype's machine epsilon, as torch."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        self.normalized_shape, self.eps = _shape(normalized_shape), eps
        self.elementwise_affine = elementwise_affine
        self.weight = Parameter(_filled(self.normalized_shape, 1.0, dtype, device)) \
            if elementwise_affine else None

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")
