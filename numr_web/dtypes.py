"""DType objects and type promotion.

Promotion rules (PyTorch's, written down):
  * bool < int32 < float16, bfloat16 < float32 < float64: combining two tensors gives the higher
    one (float16 with float32 -> float32; int32 with float16 -> float16); float16 with bfloat16
    gives float32 (neither holds the other's values: float16 has the precision, bfloat16 the range).
  * 0-d tensors and Python/numpy scalars are "weak": they decide only when of a higher category
    (bool < integer < floating) than the tensors with dimensions; a float scalar with an integer
    tensor gives the default float (float32), an int scalar with a bool tensor int32.
  * Comparisons give bool; true division of integers gives float32.
"""
from __future__ import annotations

import math
import struct

from .errors import DTypeError

PY_NUMBERS = (float, int)     # exact types of the Python numbers (bool, an int subclass, is not one)


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

    is_floating_point = is_floating      # torch's name

    def __repr__(self):
        return f"numr_web.{self.name}"

    def __reduce__(self):
        return (get_dtype, (self.name,))


bool_ = DType("bool", 1, "b", "?", 0)
int32 = DType("int32", 4, "i", "i", 1)
float16 = DType("float16", 2, "f", "e", 2)
# float32's top 16 bits (8 exponent bits, 7 fraction bits); no struct code: packed as uint16 bits
bfloat16 = DType("bfloat16", 2, "f", "", 2)
float32 = DType("float32", 4, "f", "f", 3)
float64 = DType("float64", 8, "f", "d", 4)

ALL = (bool_, int32, float16, bfloat16, float32, float64)
NARROW_FLOATS = (float16, bfloat16)     # computed in float32 and rounded once
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update({"float": float32, "double": float64, "half": float16, "int": int32, "bool_": bool_,
                 # torch's 64-bit integer names: int32 is the widest integer (README), so
                 # dtype=torch.long stores int32 and a value beyond its range raises DTypeError
                 "long": int32, "int64": int32})
default_float = float32


class UnsupportedDType(DType):
    """A torch dtype numr_web has no storage for (torch.bfloat16, torch.uint8, ...): it exists so
    that code naming it imports, and using it raises DTypeError with `why`."""
    __slots__ = ("why",)

    def __init__(self, name, itemsize, kind, why):
        super().__init__(name, itemsize, kind, "", -1)
        self.why = why


def unsupported(d):
    raise DTypeError(f"dtype {d.name} is not supported by numr_web: {d.why}")


def get_dtype(d) -> DType:
    """Accept a DType, its name, or a numpy dtype / type object; raise DTypeError otherwise."""
    if isinstance(d, DType):
        return d if d.rank >= 0 else unsupported(d)
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
    """Result dtype of combining two tensors of the same category rank (the lattice's join)."""
    if a.rank == b.rank and a is not b:        # float16 with bfloat16
        return float32
    return a if a.rank >= b.rank else b


def scalar_dtype(x):
    """The dtype a Python (or numpy) scalar stands for when it meets a tensor: bool, int32 (the
    widest integer here, torch's int64) or the default float."""
    if isinstance(x, bool) or getattr(getattr(x, "dtype", None), "kind", "") == "b":
        return bool_
    if isinstance(x, int) or getattr(getattr(x, "dtype", None), "kind", "") in ("i", "u"):
        return int32
    if isinstance(x, float) or getattr(getattr(x, "dtype", None), "kind", "") == "f":
        return default_float
    raise DTypeError(f"cannot combine a tensor with {type(x).__name__} {x!r}; expected a Tensor, "
                     "int, float or bool")


def _combine(higher, lower):
    """torch's combine_categories: the higher priority group wins unless the lower one is of a
    higher category (bool < integer < floating)."""
    if higher is None:
        return lower
    if lower is None or higher.kind == "f":
        return higher
    if higher is bool_ or lower.kind == "f":
        return promote(higher, lower)
    return higher


def result_type(*operands):
    """torch's type promotion over tensors and scalars: tensors with dimensions decide, 0-d
    tensors only when of a higher category, Python/numpy scalars ("weak") only when of a higher
    category still — and then as the default dtype of their category."""
    dim = zero = weak = None
    for x in operands:
        d = getattr(x, "dtype", None)
        if isinstance(d, DType):
            if x.ndim:
                dim = d if dim is None else promote(dim, d)
            else:
                zero = d if zero is None else promote(zero, d)
        else:
            s = scalar_dtype(x)
            weak = s if weak is None else promote(weak, s)
    return _combine(dim, _combine(zero, weak))


def half_range(x):
    """x, or +-inf where float16 rounds it to infinity (|x| >= 65520, as torch does): struct's 'e'
    raises OverflowError there instead."""
    if math.isfinite(x) and abs(x) >= 65520.0:
        return math.copysign(math.inf, x)
    return x


def round_half(x):
    """A Python float rounded to float16 (to nearest, ties to even; beyond its range +-inf), as a
    Python float. Pure Python: the browser has no numpy."""
    return struct.unpack("<e", struct.pack("<e", half_range(x)))[0]


_FLOAT32_BEYOND = 3.3961775292304223e38   # bfloat16's largest finite value plus half a step


def bfloat16_bits(x):
    """A Python float as bfloat16's 16 bits: rounded to float32, then to nearest, ties to even
    (torch's and ml_dtypes' conversion through float); beyond bfloat16's range +-inf, NaN quiet."""
    if x != x:
        return 0x7FC0
    if abs(x) >= _FLOAT32_BEYOND:
        return 0xFF80 if x < 0 else 0x7F80
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    return (u + 0x7FFF + ((u >> 16) & 1)) >> 16


def bfloat16_value(bits):
    """bfloat16's 16 bits -> its value as a Python float."""
    return struct.unpack("<f", struct.pack("<I", (bits & 0xFFFF) << 16))[0]


def round_bfloat16(x):
    """A Python float rounded to bfloat16, as a Python float."""
    return bfloat16_value(bfloat16_bits(x))


def round_to(x, dtype):
    """A Python float rounded to a narrow float dtype (float16, bfloat16); other dtypes: x."""
    if dtype is float16:
        return round_half(x)
    return round_bfloat16(x) if dtype is bfloat16 else x


def is_scalar(x):
    """A Python number or numpy scalar (weakly typed in promotion)."""
    if isinstance(x, (bool, int, float)):
        return True
    return hasattr(x, "dtype") and getattr(x, "ndim", None) == 0 and hasattr(x, "item") \
        and not hasattr(x, "_data")


def is_dtype_name(s):
    return s in _BY_NAME
