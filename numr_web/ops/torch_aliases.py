"""torch's names for things the op families already do: t.t(), t.mH, t.clamp_min, nr.is_tensor,
nr.numel, nr.get_default_dtype. Each is a composition of existing ops (so it is differentiable
and runs on every device); the argument checks are torch's. (mm, bmm, unbind, repeat, view_as
... are composites.py's; allclose, equal, square math_ops.py's.)"""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .common import method_class, need_tensor
from .elementwise import clamp
from .shape_ops import transpose
from .torch_functions import add_alpha, div_rounded, sub_alpha


def t(x):
    """Transpose of a matrix; 0-d and 1-d tensors come back as they are (torch.t)."""
    if x.ndim > 2:
        raise ShapeError(f"t() expects a tensor with <= 2 dimensions, got {x.ndim}; use "
                         "transpose(dim0, dim1) or .mT for batches of matrices")
    return transpose(x, 0, 1) if x.ndim == 2 else x


def _mT(x):
    if x.ndim < 2:
        raise ShapeError(f"mT/mH need a tensor with at least 2 dimensions, got {x.ndim}")
    return transpose(x, -2, -1)


def _H(x):
    if x.ndim != 2:
        raise ShapeError(f"H is the conjugate transpose of a matrix: 2 dimensions, got {x.ndim}")
    return transpose(x, 0, 1)


def clamp_min(x, min):  # noqa: A002
    return clamp(x, min=min)


def clamp_max(x, max):  # noqa: A002
    return clamp(x, max=max)


def _operand(name, x, other):
    if not isinstance(x, Tensor) and not isinstance(other, Tensor):
        raise DTypeError(f"{name} needs at least one Tensor operand, got {type(x).__name__} and "
                         f"{type(other).__name__}")
    return x


def add(input, other, *, alpha=1):  # noqa: A002
    """input + alpha other (torch.add)."""
    return add_alpha(_operand("add", input, other), other, alpha=alpha)


def sub(input, other, *, alpha=1):  # noqa: A002
    """input - alpha other (torch.sub / torch.subtract)."""
    return sub_alpha(_operand("sub", input, other), other, alpha=alpha)


def mul(input, other):  # noqa: A002
    return _operand("mul", input, other) * other


def div(input, other, *, rounding_mode=None):  # noqa: A002
    """input / other, optionally rounded ('floor' or 'trunc') (torch.div / torch.divide)."""
    return div_rounded(_operand("div", input, other), other, rounding_mode=rounding_mode)


def true_divide(input, other):  # noqa: A002
    return _operand("true_divide", input, other) / other


subtract, multiply, divide = sub, mul, div


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(x):
    return need_tensor(x, "numel: input").numel()


def get_default_dtype():
    return dt.default_float


TorchAliasesMethods = method_class(
    "TorchAliasesMethods", t=t, mH=property(_mT), H=property(_H), clamp_min=clamp_min,
    clamp_max=clamp_max)
