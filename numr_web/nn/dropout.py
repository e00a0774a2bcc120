"""Dropout (the engine's dropout op draws the mask on the device, seeded per device)."""
from __future__ import annotations

from . import _core
from . import functional as F
from .module import Module


class Dropout(Module):
    """Zeroes each element with probability p and scales the rest by 1 / (1 - p) in training
    mode; the identity in eval mode (and for p = 0, without an op)."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0 <= p <= 1:
            raise _core.NumrError(f"dropout probability must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        return F.dropout(x, self.p, True)

    def extra_repr(self):
        return f"p={self.p}, inplace=False"
