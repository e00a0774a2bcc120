"""torch's top-level functions whose semantics differ from numr_web's function of the same name
(torch.max(x, dim) gives values and indices), or that numr_web has under another name, and the
process-level switches (default dtype, matmul precision, compile). Each does what torch's does or
raises UnsupportedError saying what differs."""
from __future__ import annotations

import contextlib

from .. import dtypes as dt
from ..backends import get_backend, probe
from ..errors import DTypeError, UnsupportedError
from ..ops.elementwise import where as _where
from ..ops.indexing import embedding as _embedding
from ..ops.torch_functions import nonzero
from ..ops.reductions import max as _nr_max, min as _nr_min
from ..tensor import Tensor

def _extremum(fn, pairwise, input, dim, keepdim, other):  # noqa: A002
    if isinstance(dim, Tensor):
        other, dim = dim, None
    if other is not None:
        return getattr(input, pairwise)(other)
    if dim is None:
        return fn(input)
    return fn(input, dim=dim, keepdim=keepdim)      # the core's (values, indices) for dim=


def max(input, dim=None, keepdim=False, *, other=None):  # noqa: A001,A002
    """torch.max: max(x) the largest element; max(x, dim, keepdim) the pair (values, indices)
    (the first index of the largest); max(x, other) the elementwise maximum."""
    return _extremum(_nr_max, "maximum", input, dim, keepdim, other)


def min(input, dim=None, keepdim=False, *, other=None):  # noqa: A001,A002
    return _extremum(_nr_min, "minimum", input, dim, keepdim, other)


def compile(model=None, **kwargs):  # noqa: A001
    """torch.compile: numr_web has no compiler; the model (or function) runs as it is, computing
    the same values. nr.capture records a training step instead (README)."""
    if model is None:                         # @torch.compile(mode=...) decorator form
        return lambda m: m
    return model


def set_default_dtype(d):
    if dt.get_dtype(d) is not dt.float32:
        raise UnsupportedError(f"set_default_dtype({d!r}): numr_web's default float dtype is "
                               "float32 and cannot be changed; pass dtype= to the constructors")


def get_default_dtype():
    return dt.float32


_PRECISIONS = ("highest", "high", "medium")


def set_float32_matmul_precision(precision):
    """"highest": full float32 GEMMs; "high"/"medium": TF32 tensor cores on cuda (numr's
    NUMR_CUDA_TF32); on cpu and webgpu float32 GEMMs are always full precision."""
    if precision not in _PRECISIONS:
        raise DTypeError(f"set_float32_matmul_precision: expected one of {_PRECISIONS}, got "
                         f"{precision!r}")
    if probe("cuda")[0]:
        get_backend("cuda").tf32 = precision != "highest"


def get_float32_matmul_precision():
    if probe("cuda")[0] and get_backend("cuda").tf32:
        return "high"
    return "highest"


class finfo:
    """torch.finfo(dtype): bits, eps, max, min, tiny (smallest normal), resolution."""

    _TABLE = {"float16": (16, 10, 15), "bfloat16": (16, 7, 127), "float32": (32, 23, 127),
              "float64": (64, 52, 1023)}

    def __init__(self, type=None):  # noqa: A002
        d = dt.get_dtype(dt.float32 if type is None else type)
        if d.name not in self._TABLE:
            raise DTypeError(f"finfo needs a floating dtype, got {d.name}; use iinfo for integers")
        bits, mant, emax = self._TABLE[d.name]
        self.dtype, self.bits = d.name, bits
        self.eps = 2.0 ** -mant
        self.max = (2 - 2.0 ** -mant) * 2.0 ** emax
        self.min = -self.max
        self.tiny = self.smallest_normal = 2.0 ** (1 - emax)
        self.resolution = 10.0 ** -int(mant * 0.30103)

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min:.6e}, max={self.max:.6e}, "
                f"eps={self.eps:.6e}, smallest_normal={self.tiny:.6e}, tiny={self.tiny:.6e}, "
                f"dtype={self.dtype})")


class iinfo:
    """torch.iinfo(dtype): bits, min, max. int64 / long is numr_web's int32 (README), so
    iinfo(torch.long) gives int32's range: the values such a tensor can hold here."""

    def __init__(self, type):  # noqa: A002
        d = dt.get_dtype(type)
        if d.kind == "f":
            raise DTypeError(f"iinfo needs an integer dtype, got {d.name}; use finfo for floats")
        self.dtype = d.name
        self.bits = 8 * d.itemsize
        self.min, self.max = (0, 1) if d.kind == "b" else \
            (-2 ** (self.bits - 1), 2 ** (self.bits - 1) - 1)

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


def autocast(device_type="cuda", dtype=None, enabled=True, cache_enabled=None):
    """torch.autocast: numr_web.autocast (the same op lists and region rules)."""
    from ..amp import autocast as _autocast
    return _autocast(device_type, dtype, enabled, cache_enabled)


def is_floating_point(input):  # noqa: A002
    return input.dtype.is_floating


def is_nonzero(input):  # noqa: A002
    return bool(input)


def where(condition, input=None, other=None):  # noqa: A002
    """torch.where(condition, input, other); torch.where(condition) is
    nonzero(condition, as_tuple=True)."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    return _where(condition, input, other)


def embedding(weight, input, padding_idx=-1, scale_grad_by_freq=False, sparse=False):  # noqa: A002
    """torch.embedding (the weight first, as torch's; F.embedding takes the indices first)."""
    if scale_grad_by_freq:
        raise UnsupportedError("embedding(scale_grad_by_freq=True) is not supported")
    return _embedding(input, weight, None if padding_idx == -1 else padding_idx)
