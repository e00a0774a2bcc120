"""torch's names for things the op families already do: t.t(), t.mH, t.view_as(o), t.mm(o),
nr.bmm, t.clamp_min, t.square, nr.is_tensor, nr.numel ... Each is a composition of existing
ops (so it is differentiable and runs on every device); the argument checks are torch's."""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import ShapeError
from ..tensor import Tensor
from .common import attach_methods, need_tensor
from .elementwise import clamp
from .linalg import matmul
from .shape_ops import expand, reshape, transpose


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


def mm(a, b):
    """Product of two matrices (torch.mm: both 2-d, no broadcasting)."""
    need_tensor(a, "mm: input")
    need_tensor(b, "mm: mat2")
    if a.ndim != 2 or b.ndim != 2:
        raise ShapeError(f"mm expects two 2-d tensors, got shapes {a.shape} and {b.shape}; "
                         "use matmul for other ranks")
    return matmul(a, b)


def bmm(a, b):
    """Batched matrix product (torch.bmm: both 3-d, equal batch sizes, no broadcasting)."""
    need_tensor(a, "bmm: input")
    need_tensor(b, "bmm: mat2")
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0]:
        raise ShapeError(f"bmm expects two 3-d tensors with the same batch size, got shapes "
                         f"{a.shape} and {b.shape}; use matmul to broadcast")
    return matmul(a, b)


def square(x):
    return x * x


def clamp_min(x, min):  # noqa: A002
    return clamp(x, min=min)


def clamp_max(x, max):  # noqa: A002
    return clamp(x, max=max)


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(x):
    return need_tensor(x, "numel: input").numel()


def get_default_dtype():
    return dt.default_float


attach_methods(t=t, mH=property(_mT), H=property(_H), mm=mm,
               square=square, clamp_min=clamp_min, clamp_max=clamp_max,
               view_as=lambda self, other: reshape(self, need_tensor(other, "other").shape),
               reshape_as=lambda self, other: reshape(self, need_tensor(other, "other").shape),
               expand_as=lambda self, other: expand(self, need_tensor(other, "other").shape))
