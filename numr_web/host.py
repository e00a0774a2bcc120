"""Host data in, host data out: everything `nr.tensor(data)` accepts, turned into what a backend
uploads, with clear errors for data that does not fit the dtype.

Accepted: Python scalars and nested lists/tuples of them; array.array, memoryview, bytes (buffer
protocol, no numpy needed: the browser has none); numpy arrays and scalars; anything with
`__dlpack__` or `__array__` (torch, jax, cupy on a device whose backend does not adopt it).
A backend that can take an object as it is (numpy arrays on cpu, cupy arrays on cuda) says so with
`Backend.adopts(obj)`; nothing here names a library.
"""
from __future__ import annotations

import array
import contextlib
import math
import struct

from . import dtypes as dt
from .errors import DTypeError, ShapeError

INT32_MIN, INT32_MAX = -2 ** 31, 2 ** 31 - 1


class HostArray:
    """Host data without numpy: a flat buffer (array.array / memoryview / bytes) plus a shape."""

    __slots__ = ("buf", "shape", "dtype")

    def __init__(self, buf, shape, dtype):
        self.buf, self.shape, self.dtype = buf, tuple(shape), dtype


# struct / array typecode -> DType of data arriving through the buffer protocol
_TYPECODE_DTYPE = {"f": dt.float32, "d": dt.float64, "e": dt.float16, "?": dt.bool_, "i": dt.int32}
_WIDE_INT_CODES = "bBhHlLqQI"
_KIND_DTYPE = {"f": dt.float32, "i": dt.int32, "b": dt.bool_}


def _kind(x):
    if isinstance(x, bool):
        return "b"
    if isinstance(x, int):
        return "i"
    if isinstance(x, float):
        return "f"
    item = getattr(x, "item", None)                  # numpy scalar
    if item is not None and hasattr(x, "dtype") and getattr(x, "ndim", 1) == 0:
        return _kind(item())
    raise DTypeError(f"non-numeric value {x!r} ({type(x).__name__}) in tensor data; expected "
                     "numbers (bool, int, float)")


def flatten(data):
    """Nested lists/tuples of numbers -> (flat list, shape, kind "f"|"i"|"b")."""
    if not isinstance(data, (list, tuple)):
        return [data], (), _kind(data)
    shape, level = [], [data]
    while level and isinstance(level[0], (list, tuple)):
        n = len(level[0])
        for x in level:
            if not isinstance(x, (list, tuple)) or len(x) != n:
                lens = sorted({len(y) if isinstance(y, (list, tuple)) else "a number"
                               for y in level}, key=str)
                raise ShapeError(f"ragged nested sequence: at depth {len(shape)} found lengths "
                                 f"{lens}; every row must have the same length")
        shape.append(n)
        level = [y for x in level for y in x]
    if not shape:
        shape = [len(level)]
    kinds = set()
    for x in level:
        if isinstance(x, (list, tuple)):
            raise ShapeError("ragged nested sequence: rows mix numbers and lists")
        kinds.add(_kind(x))
    kind = "f" if "f" in kinds else ("i" if "i" in kinds else ("b" if kinds else "f"))
    return [x.item() if hasattr(x, "item") else x for x in level], tuple(shape), kind


def from_data(data, backend):
    """-> (host object, its dtype). The host object is one of: something `backend` adopts as it
    is, a numpy array, a HostArray, or a (flat list, shape) pair."""
    if backend.adopts(data):
        if data.dtype.kind not in "biuf" and data.dtype.name != "bfloat16":
            raise DTypeError(f"cannot make a tensor from an array of dtype {data.dtype}; "
                             "expected bool, integer or floating-point data")
        return data, dt.get_dtype(data.dtype)
    if isinstance(data, (array.array, memoryview, bytes, bytearray)):
        return _from_buffer(data)
    if isinstance(data, (list, tuple, bool, int, float)) and not _is_numpy_scalar(data):
        flat, shape, kind = flatten(data)
        return (flat, shape), _KIND_DTYPE[kind]
    if hasattr(data, "__dlpack__") or hasattr(data, "__array__") or hasattr(data, "dtype"):
        np = _numpy_or_raise(data)
        arr = np.from_dlpack(data) if dlpack_device_type(data) == DLPACK_CPU else np.asarray(data)
        if arr.dtype.kind not in "biuf" and arr.dtype.name != "bfloat16":      # ml_dtypes'
            raise DTypeError(f"cannot make a tensor from an array of dtype {arr.dtype}; expected "
                             "bool, integer or floating-point data")
        return arr, dt.get_dtype(arr.dtype)
    raise DTypeError(f"cannot make a tensor from {type(data).__name__}; expected a number, nested "
                     "lists, a buffer (array.array, memoryview), or an array (numpy, DLPack)")


DLPACK_CPU = 1          # DLDeviceType kDLCPU


def _is_numpy_scalar(x):
    """np.float64(1.5) is a float, but as data it keeps its dtype (as in torch and numpy)."""
    return hasattr(x, "dtype") and getattr(x, "ndim", None) == 0 and hasattr(x, "__array__")


def dlpack_device_type(x):
    """The DLPack device type of `x` (kDLCPU 1, kDLCUDA 2, ...), or None."""
    dev = getattr(x, "__dlpack_device__", None)
    try:
        return int(dev()[0]) if dev is not None else None
    except Exception:
        return None


def _numpy_or_raise(data):
    try:
        import numpy
    except ImportError:
        raise DTypeError(f"{type(data).__name__} data needs numpy to convert; pass nested lists "
                         "or an array.array instead") from None
    return numpy


def _from_buffer(data):
    mv = memoryview(data)
    code = mv.format.lstrip("@=<")
    if code not in _TYPECODE_DTYPE and code not in _WIDE_INT_CODES:
        raise DTypeError(f"unsupported buffer format {mv.format!r}; expected float32 'f', "
                         "float64 'd', float16 'e', bool '?' or an integer format")
    shape = tuple(mv.shape) if mv.ndim else ()
    raw = mv if mv.c_contiguous else memoryview(mv.tobytes())   # strided views: copy
    if code == "e":                                # memoryview cannot cast to float16: keep bytes
        return HostArray(raw.cast("B"), shape, dt.float16), dt.float16
    values = raw.cast("B").cast(code)
    if code in _WIDE_INT_CODES:
        ints = values.tolist()
        _check_int32(ints)
        return HostArray(array.array("i", ints), shape, dt.int32), dt.int32
    return HostArray(values, shape, _TYPECODE_DTYPE[code]), _TYPECODE_DTYPE[code]


def buffer_values(buf, dtype):
    """The values of a raw buffer of `dtype` as a flat list (float16 through struct: memoryview
    cannot cast to it)."""
    raw = memoryview(buf).cast("B")
    if dtype is dt.float16:
        return list(struct.unpack(f"<{len(raw) // 2}e", raw))
    if dtype is dt.bfloat16:
        return [dt.bfloat16_value(b) for b in struct.unpack(f"<{len(raw) // 2}H", raw)]
    return raw.cast(dtype.typecode).tolist()


def _check_int32(ints):
    if ints and (min(ints) < INT32_MIN or max(ints) > INT32_MAX):
        raise DTypeError(f"integer values in [{min(ints)}, {max(ints)}] do not fit int32 (the "
                         "widest integer dtype, -2**31..2**31-1); convert them to floats first")


def _to_int(x):
    if isinstance(x, float) and not math.isfinite(x):
        raise DTypeError(f"cannot convert {x} to an integer dtype; replace NaN/inf first")
    return int(x)


def convert(host, src, dst):
    """Host data of dtype `src` -> data of dtype `dst` in a form the backend uploads (a HostArray,
    or the numpy / adopted array converted with its own astype)."""
    if isinstance(host, tuple):                           # (flat list, shape)
        flat, shape = host
        if dst.kind == "i":
            flat = [_to_int(x) for x in flat]
            _check_int32(flat)
        elif dst.kind == "b":
            flat = [bool(x) for x in flat]
        else:
            flat = [float(x) for x in flat]
        if dst is dt.float16:                             # values beyond float16 become +-inf
            buf = struct.pack(f"<{len(flat)}e", *[dt.half_range(x) for x in flat])
        elif dst is dt.bfloat16:                          # as uint16 bits
            buf = struct.pack(f"<{len(flat)}H", *[dt.bfloat16_bits(x) for x in flat])
        elif dst is dt.bool_:
            buf = bytes(bytearray(flat))
        else:
            buf = array.array(dst.typecode, flat)
        return HostArray(buf, shape, dst)
    if isinstance(host, HostArray):
        if src is dst:
            return host
        return convert((buffer_values(host.buf, src), host.shape), src, dst)
    if src is dst and host.dtype.kind != "u" and host.dtype.itemsize == dst.itemsize:
        return host
    if dst.kind == "i" and host.size:
        if host.dtype.kind == "f" and not bool((abs(host) < float("inf")).all()):
            raise DTypeError("cannot convert NaN/inf to an integer dtype; replace them first")
        lo, hi = host.min(), host.max()
        if lo < INT32_MIN or hi > INT32_MAX:
            raise DTypeError(f"values in [{lo}, {hi}] do not fit int32 (-2**31..2**31-1); "
                             "convert them to float64 first")
    with _numpy_errstate():
        if dst is dt.bfloat16:        # through float32, as torch rounds (ml_dtypes: in one step)
            import ml_dtypes          # (the device holding bfloat16 has imported it already)
            return host.astype("float32").astype(ml_dtypes.bfloat16)
        return host.astype(dst.name)


def _numpy_errstate():
    """numpy's float -> float16 cast warns on overflow; inf is the right answer (as in torch)."""
    try:
        import numpy
    except ImportError:
        return contextlib.nullcontext()
    return numpy.errstate(over="ignore", invalid="ignore")
