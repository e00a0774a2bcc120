"""DType objects and type promotion.

Promotion rules (PyTorch's, written down):
  * bool < int32 < float16 < float32 < float64: combining two tensors gives the higher one
    (float16 with float32 -> float32; int32 with float16 -> float16).
  * Python scalars are "weak": they never raise a tensor's precision. A float scalar with an
    integer or bool tensor gives the default float (float32); an int scalar with a bool tensor gives
    int32; otherwise the tensor's dtype wins.
  * Comparisons give bool; true division of integers gives float32.
"""
from __future__ import annotations

from .errors import DTypeError


class DType:
    __slots__ = ("name", "itemsize", "kind", "typecode", "rank")

    def __init__(self, name, itemsize, kind, typecode, rank):
        self.name = name          # "float32"
        self.itemsize = itemsize  # bytes per element
        self.kind = kind          # "f" float, "i" signed int, "b" bool
        self.typecode = typecode  # struct / memoryview format character
        self.rank = rank          # position in the promotion lattice

    @property
    def is_floating(self):
        return self.kind == "f"

    def __repr__(self):
        return f"numr_web.{self.name}"

    def __reduce__(self):
        return (get_dtype, (self.name,))


bool_ = DType("bool", 1, "b", "?", 0)
int32 = DType("int32", 4, "i", "i", 1)
float16 = DType("float16", 2, "f", "e", 2)
float32 = DType("float32", 4, "f", "f", 3)
float64 = DType("float64", 8, "f", "d", 4)

ALL = (bool_, int32, float16, float32, float64)
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update({"float": float32, "double": float64, "half": float16, "int": int32, "bool_": bool_})
default_float = float32


def get_dtype(d) -> DType:
    """Accept a DType, its name, or a numpy dtype / type object; raise DTypeError otherwise."""
    if isinstance(d, DType):
        return d
    if isinstance(d, str) and d in _BY_NAME:
        return _BY_NAME[d]
    if d is float:
        return float32
    if d is int:
        return int32
    if d is bool:
        return bool_
    name = getattr(d, "name", None) or getattr(d, "__name__", None)  # numpy dtype or scalar type
    if isinstance(name, str):
        name = {"int64": "int32", "int16": "int32", "int8": "int32", "uint8": "int32"}.get(name, name)
        if name in _BY_NAME:
            return _BY_NAME[name]
    raise DTypeError(f"unknown dtype {d!r}; expected one of {[x.name for x in ALL]}")


def promote(a: DType, b: DType) -> DType:
    """Result dtype of combining two tensors."""
    return a if a.rank >= b.rank else b


def promote_scalar(t: DType, scalar) -> DType:
    """Result dtype of combining a tensor of dtype `t` with a Python scalar (weak typing)."""
    if isinstance(scalar, bool):
        return t
    if isinstance(scalar, int):
        return int32 if t is bool_ else t
    if isinstance(scalar, float):
        return t if t.kind == "f" else default_float
    raise DTypeError(f"cannot combine a tensor with {type(scalar).__name__} {scalar!r}; "
                     "expected a Tensor, int, float or bool")
