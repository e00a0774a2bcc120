"""torch's names for things the op families already do: t.t(), t.mH, t.view_as(o), t.mm(o),
nr.bmm, t.clamp_min, t.square, nr.is_tensor, nr.numel ... Each is a composition of existing
ops (so it is differentiable and runs on every device); the argument checks are torch's."""
from __future__ import annotations

from .. import dtypes as dt
from .. import shapes as sh
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .common import attach_methods, need_tensor
from .elementwise import clamp
from .linalg import matmul
from .shape_ops import expand, narrow, reshape, squeeze, transpose


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


def unbind(x, dim=0):
    """The slices along `dim`, that dim removed (torch.unbind)."""
    if x.ndim == 0:
        raise ShapeError("unbind: a 0-d tensor has no dimension to unbind")
    d = sh.normalize_axis(dim, x.ndim)
    return tuple(squeeze(narrow(x, d, i, 1), d) for i in range(x.shape[d]))


def repeat(x, *sizes):
    """Tile x `sizes` times along each dim (torch's Tensor.repeat; numpy's tile):
    at least as many sizes as x has dims, leading new dims allowed."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    sizes = tuple(sh.as_int(r, "repeat size") for r in sizes)
    if len(sizes) < x.ndim or any(r < 0 for r in sizes):
        raise ShapeError(f"repeat: needs at least {x.ndim} non-negative sizes (one per dim of a "
                         f"tensor of shape {x.shape}), got {sizes}")
    shape = (1,) * (len(sizes) - x.ndim) + x.shape
    spread = tuple(v for d in shape for v in (1, d))
    wide = tuple(v for r, d in zip(sizes, shape) for v in (r, d))
    return reshape(expand(reshape(x, spread), wide), tuple(r * d for r, d in zip(sizes, shape)))


def _values_pair(a, b, what):
    need_tensor(a, f"{what}: input")
    need_tensor(b, f"{what}: other")
    return a.detach(), b.detach()


def equal(a, b):
    """True when a and b have the same shape and the same values (torch.equal)."""
    a, b = _values_pair(a, b, "equal")
    return a.shape == b.shape and bool((a == b).all())


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol |b| everywhere, broadcasting (torch.allclose); NaNs are equal
    only with equal_nan=True."""
    a, b = _values_pair(a, b, "allclose")
    if not (a.dtype.is_floating or b.dtype.is_floating):
        return bool((a == b).all())
    if a.dtype is not b.dtype:
        raise DTypeError(f"allclose: dtypes differ ({a.dtype.name} and {b.dtype.name}), as "
                         "torch refuses; convert one with .to(other.dtype)")
    close = ((a - b).abs() <= atol + rtol * b.abs()) | (a == b)      # a == b: equal infinities
    if equal_nan:
        close = close | ((a != a) & (b != b))
    return bool(close.all())


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(x):
    return need_tensor(x, "numel: input").numel()


def get_default_dtype():
    return dt.default_float


attach_methods(unbind=unbind, repeat=repeat, equal=equal, allclose=allclose, t=t, mH=property(_mT), H=property(_H), mm=mm,
               square=square, clamp_min=clamp_min, clamp_max=clamp_max,
               view_as=lambda self, other: reshape(self, need_tensor(other, "other").shape),
               reshape_as=lambda self, other: reshape(self, need_tensor(other, "other").shape),
               expand_as=lambda self, other: expand(self, need_tensor(other, "other").shape))
