"""Activation functions as modules (torch.nn.ReLU, LeakyReLU(negative_slope), ...); the
parametrised functions are ops/parametric.py's. Inside a Linear, prefer its `activation=`
argument: the fused layer applies it in the GEMM epilogue and backward.

`inplace=True` is accepted for torch code; the result is a new tensor (tensors are values)."""
from __future__ import annotations

import warnings

from . import _core
from .module import Module


# -- functional forms ----------------------------------------------------------------------------
elu, hardtanh, leaky_relu, relu6, softplus = (_core.elu, _core.hardtanh, _core.leaky_relu,
                                              _core.relu6, _core.softplus)


def mish(input, inplace=False):
    return _core.activation(input, "mish")


def hardswish(input, inplace=False):
    return _core.activation(input, "hardswish")


def selu(input, inplace=False):
    return _core.activation(input, "selu")


def celu(input, alpha=1.0, inplace=False):
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1)): the table's fused row for alpha = 1."""
    if alpha == 1.0:
        return _core.activation(input, "celu")
    if alpha == 0:
        raise _core.ShapeError("celu: alpha must not be 0 (it divides x)")
    pos = input > 0
    neg = _core.where(pos, 0.0, input)      # exp never sees a large x: no inf * 0 in backward
    return _core.where(pos, input, _core.expm1(neg / alpha) * alpha)


def softsign(input):
    return _core.activation(input, "softsign")


def tanhshrink(input):
    return _core.activation(input, "tanhshrink")


def _flag(inplace):
    return "inplace=True" if inplace else ""


# -- modules -------------------------------------------------------------------------------------
class _Act(Module):
    fn = None

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, x):
        return type(self).fn(x)

    def extra_repr(self):
        return _flag(self.inplace)


class ReLU(_Act):
    fn = staticmethod(_core.relu)


class ReLU6(_Act):
    fn = staticmethod(relu6)


class Mish(_Act):
    fn = staticmethod(mish)


class Hardswish(_Act):
    fn = staticmethod(hardswish)


class SiLU(_Act):
    fn = staticmethod(_core.silu)


class Sigmoid(Module):
    def forward(self, x):
        return _core.sigmoid(x)


class Tanh(Module):
    def forward(self, x):
        return _core.tanh(x)


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, x):
        return leaky_relu(x, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class SELU(_Act):
    fn = staticmethod(selu)


class CELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, x):
        return celu(x, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Softsign(Module):
    def forward(self, x):
        return softsign(x)


class Tanhshrink(Module):
    def forward(self, x):
        return tanhshrink(x)


class ELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, x):
        return elu(x, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Softplus(Module):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x):
        return softplus(x, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        if min_val > max_val:
            raise _core.ShapeError(f"Hardtanh: min_val ({min_val}) must be at most max_val "
                                   f"({max_val})")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, x):
        return hardtanh(x, self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + \
            (", inplace=True" if self.inplace else "")


class GELU(Module):
    """approximate: "none" (exact erf) or "tanh"."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise _core.DTypeError(f"GELU: approximate must be 'none' or 'tanh', got "
                                   f"{approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return _core.gelu(x, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return type(self).fn(x, _implicit_dim(x) if self.dim is None else self.dim)

    fn = staticmethod(_core.softmax)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    fn = staticmethod(_core.log_softmax)


def _implicit_dim(x):
    """torch's legacy choice for dim=None: 0 for 0-, 1- and 3-d inputs, else 1 (with its
    warning)."""
    warnings.warn("Implicit dimension choice for softmax has been deprecated (as in torch); "
                  "pass dim=", UserWarning, stacklevel=3)
    return 0 if x.ndim in (0, 1, 3) else 1
