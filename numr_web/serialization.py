"""Safetensors files: nr.save(state_dict, path_or_file) / nr.load(path_or_bytes) -> dict.

The format (github.com/huggingface/safetensors): an 8-byte little-endian header length N, N bytes
of JSON {name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, "__metadata__":
{str: str}}, then the tensors' little-endian bytes, offsets relative to the end of the header,
back to back with no holes. Written like the reference library writes it (metadata first, tensors
sorted by dtype then name, header padded with spaces to a multiple of 8), so files are
byte-identical to its output. No numpy: this runs in Pyodide, where bytes travel as bytes.

Dtypes: F32, F64, F16, BF16, I32 and BOOL map to numr's. numr has no 64-bit or 8/16-bit integers,
so loading converts: I64/U64/U32/I16/U16/I8/U8 -> int32 (DTypeError if a value does not fit).
BF16 loads as float32 (exact; every device holds it), or as bfloat16 with load(dtype=bfloat16)
where the device holds that (the cpu). Other dtypes (F8_*, complex) raise DTypeError.

In the browser, reading a tensor back is asynchronous: `await save_bytes_async(state_dict)` gives
the file's bytes there (nr.save and save_bytes block, which needs JSPI in a browser).
"""
from __future__ import annotations

import array
import json
import math
import os
import struct
import sys

from . import dtypes as dt
from .backends import get_backend, normalize_device
from .backends.base import HostArray
from .errors import DTypeError, NumrError, ShapeError
from .tensor import Tensor

# numr dtype -> safetensors code; _RANK: the reference writer's order (its Dtype enum, descending)
_CODE = {"float64": "F64", "float32": "F32", "int32": "I32", "bfloat16": "BF16", "float16": "F16",
         "bool": "BOOL"}
_RANK = {"F64": 5, "F32": 4, "I32": 3, "BF16": 2, "F16": 1, "BOOL": 0}
# safetensors code -> (struct/array typecode, item size, numr dtype it loads as)
_READ = {"F64": ("d", 8, dt.float64), "F32": ("f", 4, dt.float32), "F16": ("e", 2, dt.float16),
         "BF16": ("H", 2, dt.float32), "BOOL": ("?", 1, dt.bool_), "I32": ("i", 4, dt.int32),
         "I64": ("q", 8, dt.int32), "U64": ("Q", 8, dt.int32), "U32": ("I", 4, dt.int32),
         "I16": ("h", 2, dt.int32), "U16": ("H", 2, dt.int32), "I8": ("b", 1, dt.int32),
         "U8": ("B", 1, dt.int32)}
_MAX_HEADER = 100_000_000           # the reference library's limit
_BIG_ENDIAN = sys.byteorder == "big"


# -- the engine's raw bytes in and out -------------------------------------------------------------
def _tensor_bytes(t):
    be = t._backend
    return be.to_bytes(be.contiguous(t._data))


async def _tensor_bytes_async(t):
    be = t._backend
    return await be.read_bytes_async(be.contiguous(t._data))


def _tensor_from_bytes(raw, shape, dtype, device):
    be = get_backend(device)
    be.check_dtype(dtype)
    return Tensor._wrap(be.from_host(HostArray(raw, shape, dtype), dtype), dtype, device)


# -- writing ---------------------------------------------------------------------------------------
def save(state_dict, path_or_file, metadata=None):
    """Write {name: Tensor} as a safetensors file to a path or a binary file object."""
    data = save_bytes(state_dict, metadata)
    if hasattr(path_or_file, "write"):
        path_or_file.write(data)
    else:
        with open(os.fspath(path_or_file), "wb") as f:
            f.write(data)


def save_bytes(state_dict, metadata=None):
    """The safetensors file of {name: Tensor} as bytes (reads every tensor back: blocking)."""
    items = _sorted_items(state_dict, metadata)
    return _assemble(items, [_tensor_bytes(t) for _, t in items], metadata)


async def save_bytes_async(state_dict, metadata=None):
    """save_bytes for the browser without JSPI: awaits each tensor's readback."""
    items = _sorted_items(state_dict, metadata)
    return _assemble(items, [await _tensor_bytes_async(t) for _, t in items], metadata)


def _sorted_items(state_dict, metadata):
    if metadata is not None and not (isinstance(metadata, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise NumrError("safetensors metadata must be a dict of str to str")
    for name, t in state_dict.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise NumrError(f"tensor names must be strings other than '__metadata__', got {name!r}")
        if not isinstance(t, Tensor):
            raise DTypeError(f"{name!r} is a {type(t).__name__}; safetensors files hold Tensors")
    return sorted(state_dict.items(), key=lambda kv: (-_RANK[_CODE[kv[1].dtype.name]], kv[0]))


def _assemble(items, blobs, metadata):
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for (name, t), blob in zip(items, blobs):
        header[name] = {"dtype": _CODE[t.dtype.name], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
    text = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    if _BIG_ENDIAN:
        blobs = [_swap(b, t.dtype.itemsize) for (_, t), b in zip(items, blobs)]
    return b"".join([struct.pack("<Q", len(text)), text, *blobs])


def _swap(raw, itemsize):
    if itemsize == 1:
        return raw
    a = array.array({2: "H", 4: "I", 8: "Q"}[itemsize], raw)
    a.byteswap()
    return a.tobytes()


# -- reading ---------------------------------------------------------------------------------------
def load(path_or_bytes, device=None, dtype=None):
    """{name: Tensor} from a safetensors file: a path, bytes-like data or a binary file object.
    device: where to create the tensors. dtype: convert floating-point tensors to it (e.g.
    "float32" for a float64 file on webgpu, which has no float64)."""
    buf = _read_all(path_or_bytes)
    header, start = _parse_header(buf)
    device = normalize_device(device)
    want = dt.get_dtype(dtype) if dtype is not None else None
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = _decode(name, info, buf[start + b:start + e], device, want)
    return out


def load_metadata(path_or_bytes):
    """The file's "__metadata__" dict ({} when it has none)."""
    header, _ = _parse_header(_read_all(path_or_bytes))
    return dict(header.get("__metadata__") or {})


def _read_all(src):
    if isinstance(src, (bytes, bytearray, memoryview)):
        return memoryview(src).cast("B")
    if hasattr(src, "read"):
        return memoryview(src.read())
    with open(os.fspath(src), "rb") as f:
        return memoryview(f.read())


def _parse_header(buf):
    if len(buf) < 8:
        raise NumrError(f"not a safetensors file: {len(buf)} bytes, shorter than its 8-byte header "
                        "length")
    (n,) = struct.unpack("<Q", buf[:8])
    if n > _MAX_HEADER or 8 + n > len(buf):
        raise NumrError(f"not a safetensors file: header length {n} for a file of {len(buf)} "
                        "bytes")
    try:
        header = json.loads(bytes(buf[8:8 + n]).decode("utf-8"))
    except ValueError as e:
        raise NumrError(f"not a safetensors file: its header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise NumrError("not a safetensors file: its header is not a JSON object")
    _check_layout(header, len(buf) - 8 - n)
    return header, 8 + n


def _check_layout(header, data_len):
    """Offsets must tile the data exactly, each matching its dtype and shape (as the spec asks)."""
    spans = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            code, shape, (b, e) = info["dtype"], info["shape"], info["data_offsets"]
            shape_ok = all(isinstance(s, int) and s >= 0 for s in shape)
        except (KeyError, TypeError, ValueError):
            raise NumrError(f"safetensors entry {name!r} lacks dtype, shape or data_offsets") \
                from None
        if code not in _READ:
            raise DTypeError(f"{name!r} has dtype {code}, which numr cannot load (it reads F32, "
                             "F64, F16, BF16, BOOL and integer tensors)")
        count = 1
        for s in shape:
            count *= s
        if not shape_ok or not 0 <= b <= e or e - b != count * _READ[code][1]:
            raise ShapeError(f"safetensors entry {name!r}: data_offsets {[b, e]} do not hold a "
                             f"{code} tensor of shape {shape}")
        spans.append((b, e, name))
    pos = 0
    for b, e, name in sorted(spans):
        if b != pos:
            raise NumrError(f"safetensors data has a hole or an overlap at byte {pos} ({name!r})")
        pos = e
    if pos != data_len:
        raise NumrError(f"safetensors data is {data_len} bytes but its tensors cover {pos}")


def _decode(name, info, raw, device, want):
    code, shape = info["dtype"], tuple(info["shape"])
    tc, size, dtype = _READ[code]
    if code == "BF16" and want is dt.bfloat16:
        return _tensor_from_bytes(memoryview(_swap(raw, 2)) if _BIG_ENDIAN else raw, shape,
                                  want, device)
    if code == "BF16":                    # bfloat16 is float32's top half: widen by zero bytes
        wide = bytearray(2 * len(raw))
        wide[2::4], wide[3::4] = raw[0::2], raw[1::2]
        raw, size = memoryview(wide), 4
    if _BIG_ENDIAN:
        raw = memoryview(_swap(raw, size))
    if dtype is dt.int32 and code != "I32":
        ints = raw.cast(tc).tolist()
        if ints and (min(ints) < -2 ** 31 or max(ints) >= 2 ** 31):
            raise DTypeError(f"{name!r} ({code}) holds values in [{min(ints)}, {max(ints)}], "
                             "outside int32, numr's integer dtype")
        raw = memoryview(array.array("i", ints)).cast("B")
    if want is not None and dtype.is_floating and want is not dtype:
        raw, dtype = _convert_floats(raw, dtype, want), want
    return _tensor_from_bytes(raw, shape, dtype, device)


def _convert_floats(raw, src, dst):
    if not dst.is_floating:
        raise DTypeError(f"load(dtype=...) converts floating-point tensors; got {dst.name}")
    n = len(raw) // src.itemsize
    vals = struct.unpack(f"={n}{src.typecode}", raw)
    if dst is dt.bfloat16:
        return memoryview(struct.pack(f"={n}H", *[dt.bfloat16_bits(v) for v in vals]))
    if dst is not dt.float16:             # array rounds like a C cast (overflow -> +-inf)
        return memoryview(array.array(dst.typecode, vals)).cast("B")
    # array has no float16; struct refuses what float16 rounds to +-inf
    vals = [v if abs(v) < 65520.0 or v != v else math.copysign(math.inf, v) for v in vals]
    return memoryview(struct.pack(f"={n}e", *vals))
