"""torch.save / torch.load.

A state dict, an optimizer's state dict, or any nesting of dicts, lists and tuples whose leaves
are tensors, numbers, strings, booleans and None (a checkpoint {"model": ..., "optimizer": ...,
"step": 5}) is written as a safetensors file: its tensors under their paths ("model/fc.weight"),
the nesting as JSON in the file's metadata (key "numr_web.torch"), so any safetensors reader can
open it and torch.load gives back the same structure. Any other object (a whole Module, as
`torch.save(model, f)`) is pickled; loading a pickle with weights_only=True (torch's default)
allows only numr_web's tensors, dtypes, devices and containers plus the classes named with
add_safe_globals / safe_globals, as torch's weights-only unpickler does.

These files are numr_web's: torch's own zip format is not read or written (save a state dict:
its safetensors file loads in torch with safetensors.torch.load_file).
"""
from __future__ import annotations

import builtins
import collections
import contextlib
import contextvars
import copyreg
import io
import json
import os
import pickle

from .. import serialization as st
from ..backends import normalize_device
from ..devices import Device
from ..errors import UnsupportedError, WeightsOnlyUnpicklingError
from ..dtypes import get_dtype
from ..tensor import Tensor, _rebuild

TREE_KEY = "numr_web.torch"
_SAFETENSORS_MAX_HEADER = 100_000_000


# -- the tree <-> safetensors ------------------------------------------------------------------
_LEAVES = (str, int, float, bool, type(None))


def _encode(obj, path, tensors):
    """A JSON-able description of obj, its tensors moved into `tensors`; None if obj holds
    something else (then it is pickled)."""
    if isinstance(obj, Tensor):
        name = path or "tensor"
        if name in tensors:
            name = f"{name}#{len(tensors)}"
        tensors[name] = obj.detach()
        return {"t": name}
    if isinstance(obj, _LEAVES):
        return obj if not isinstance(obj, float) or obj == obj and abs(obj) != float("inf") \
            else {"f": repr(obj)}
    if isinstance(obj, (list, tuple)) and type(obj) in (list, tuple):
        items = [_encode(v, f"{path}/{i}" if path else str(i), tensors)
                 for i, v in enumerate(obj)]
        if any(i is _FAIL for i in items):
            return _FAIL
        return {"l" if type(obj) is list else "u": items}
    if isinstance(obj, dict) and type(obj) in (dict, collections.OrderedDict):
        pairs = []
        for k, v in obj.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                return _FAIL
            enc = _encode(v, f"{path}/{k}" if path else str(k), tensors)
            if enc is _FAIL:
                return _FAIL
            pairs.append([k, enc])
        return {"d" if type(obj) is dict else "o": pairs}
    return _FAIL


_FAIL = object()           # _encode's answer for what a safetensors file cannot hold


def _decode(enc, tensors):
    if isinstance(enc, dict):
        (kind, v), = enc.items()
        if kind == "t":
            return tensors[v]
        if kind == "f":
            return float(v)
        if kind in ("l", "u"):
            items = [_decode(x, tensors) for x in v]
            return items if kind == "l" else tuple(items)
        pairs = [(k, _decode(x, tensors)) for k, x in v]
        return dict(pairs) if kind == "d" else collections.OrderedDict(pairs)
    return enc


# -- save ------------------------------------------------------------------------------------------
def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Write obj to a path or a binary file object: a safetensors file for tensors in dicts,
    lists and tuples; a pickle for anything else (see the module)."""
    tensors = {}
    enc = _encode(obj, "", tensors)
    if enc is not _FAIL:
        data = st.save_bytes(tensors, {TREE_KEY: json.dumps(enc, separators=(",", ":"))})
    else:
        data = (pickle_module or pickle).dumps(obj, protocol=max(pickle_protocol, 4))
    if hasattr(f, "write"):
        f.write(data)
    else:
        with open(os.fspath(f), "wb") as out:
            out.write(data)


# -- load ------------------------------------------------------------------------------------------
_safe = contextvars.ContextVar("numr_torch_safe_globals", default=())
_added = []                 # add_safe_globals: process-wide, as torch's


def _name(obj):
    return f"{obj.__module__}.{obj.__qualname__}"


def _default_allowed():
    return {_name(o): o for o in (
        _rebuild, get_dtype, Device, collections.OrderedDict,
        collections.defaultdict, copyreg._reconstructor, copyreg.__newobj__, builtins.object,
        builtins.set, builtins.frozenset, builtins.dict, builtins.list, builtins.tuple,
        builtins.int, builtins.float, builtins.bool, builtins.str, builtins.bytes,
        builtins.slice, builtins.complex, builtins.bytearray)}


class _WeightsOnlyUnpickler(pickle.Unpickler):
    def __init__(self, file, allowed):
        super().__init__(file)
        self.allowed = allowed

    def find_class(self, module, name):
        module = _PY2_NAMES.get(module, module)          # protocols 0-2 name builtins so
        obj = self.allowed.get(f"{module}.{name}")
        if obj is None:
            raise WeightsOnlyUnpicklingError(
                f"Weights only load failed: {module}.{name} is not an allowed global. Load with "
                f"torch.load(..., weights_only=False) if you trust the file, or allow it: "
                f"torch.serialization.add_safe_globals([{name}]) or `with "
                f"torch.serialization.safe_globals([{name}]):`")
        return obj


_PY2_NAMES = {"__builtin__": "builtins", "copy_reg": "copyreg"}


def add_safe_globals(safe_globals):
    _added.extend(safe_globals)


def get_safe_globals():
    return list(_added)


def clear_safe_globals():
    _added.clear()


@contextlib.contextmanager
def safe_globals(safe_globals):
    token = _safe.set(_safe.get() + tuple(safe_globals))
    try:
        yield
    finally:
        _safe.reset(token)


def _allowed():
    out = _default_allowed()
    for g in list(_added) + list(_safe.get()):
        g = g[0] if isinstance(g, tuple) else g
        out[_name(g)] = g
    return out


def _is_safetensors(buf):
    if len(buf) < 10:
        return False
    n = int.from_bytes(bytes(buf[:8]), "little")
    return 2 <= n <= _SAFETENSORS_MAX_HEADER and 8 + n <= len(buf) and bytes(buf[8:9]) == b"{"


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None,
         **pickle_load_args):
    """What save wrote, from a path or a binary file object. map_location: a device (string or
    torch.device) to put every tensor on."""
    if isinstance(f, (bytes, bytearray, memoryview)):
        raise UnsupportedError("torch.load takes a path or a file object; wrap bytes in "
                               "io.BytesIO(data)")
    if hasattr(f, "read"):
        buf = f.read()
    else:
        with open(os.fspath(f), "rb") as src:
            buf = src.read()
    if callable(map_location) or isinstance(map_location, dict):
        raise UnsupportedError("torch.load(map_location=...) takes a device here (a string or a "
                               "torch.device), not a function or a dict")
    device = normalize_device(map_location) if map_location is not None else None
    if bytes(buf[:4]) == b"PK\x03\x04":
        raise UnsupportedError("this is a file written by PyTorch's torch.save (a zip archive), "
                               "which numr_web does not read; in PyTorch, save the state dict as "
                               "safetensors (safetensors.torch.save_file(model.state_dict(), "
                               "path)) and load that here")
    if _is_safetensors(buf):
        tensors = st.load(buf, device=device)
        tree = st.load_metadata(buf).get(TREE_KEY)
        return _decode(json.loads(tree), tensors) if tree is not None else tensors
    if weights_only:
        obj = _WeightsOnlyUnpickler(io.BytesIO(buf), _allowed()).load()
    else:
        obj = (pickle_module or pickle).loads(buf, **pickle_load_args)
    return obj if device is None else _move(obj, device)


def _move(obj, device):
    if isinstance(obj, Tensor):
        return obj.to(device)
    if hasattr(obj, "to") and hasattr(obj, "parameters"):        # a Module: moved in place
        return obj.to(device)
    if isinstance(obj, dict):
        return type(obj)((k, _move(v, device)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)) and type(obj) in (list, tuple):
        return type(obj)(_move(v, device) for v in obj)
    return obj
