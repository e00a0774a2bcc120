"""Activation functions as modules (torch.nn.ReLU, ...). Inside a Linear, prefer its
`activation=` argument: the fused layer applies it in the GEMM epilogue and backward."""
from __future__ import annotations

from . import _core
from .module import Module


class _Act(Module):
    fn = None

    def __init__(self, inplace=False):    # inplace: accepted for torch code; ops never are
        super().__init__()

    def forward(self, x):
        return type(self).fn(x)


class ReLU(_Act):
    fn = staticmethod(_core.relu)


class Sigmoid(_Act):
    fn = staticmethod(_core.sigmoid)


class Tanh(_Act):
    fn = staticmethod(_core.tanh)


class SiLU(_Act):
    fn = staticmethod(_core.silu)


class GELU(Module):
    """approximate: "none" (exact erf) or "tanh"."""

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return _core.gelu(x, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Softmax(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return _core.softmax(x, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    def forward(self, x):
        return _core.log_softmax(x, self.dim)
