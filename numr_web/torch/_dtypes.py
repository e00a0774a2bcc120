"""torch's dtype objects numr_web has no storage for. The ones it stores are its own DTypes under
torch's names (torch.long and torch.int64 are int32, the widest integer here: README; bfloat16 is
held on the cpu device); these exist so that code naming them imports, and using one raises
DTypeError saying what to use instead."""
from __future__ import annotations

from ..dtypes import UnsupportedDType

_NARROW_INT = ("numr_web has no 8/16-bit integers: values wrap around differently; use "
               "torch.int32 (torch.long) or torch.bool")

uint8 = UnsupportedDType("uint8", 1, "i", _NARROW_INT)
int8 = UnsupportedDType("int8", 1, "i", _NARROW_INT)
int16 = UnsupportedDType("int16", 2, "i", _NARROW_INT)
uint16 = UnsupportedDType("uint16", 2, "i", _NARROW_INT)
uint32 = UnsupportedDType("uint32", 4, "i", "numr_web has no unsigned integers: use torch.int32")
uint64 = UnsupportedDType("uint64", 8, "i", "numr_web has no unsigned integers: use torch.int32")
float8_e4m3fn = UnsupportedDType("float8_e4m3fn", 1, "f", "use torch.float16 or torch.float32")
float8_e5m2 = UnsupportedDType("float8_e5m2", 1, "f", "use torch.float16 or torch.float32")

# torch's aliases of those
short = int16
