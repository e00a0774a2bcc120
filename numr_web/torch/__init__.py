"""numr_web.torch: PyTorch's module tree over numr_web, so code written for torch runs with one
changed import:

    import numr_web.torch as torch          # or: numr_web.install_as_torch(); import torch
    import numr_web.torch.nn as nn          # torch.nn, torch.nn.functional, torch.optim,
    from numr_web.torch.utils.data import DataLoader   # torch.utils.data, torch.cuda, ...

Every name here is numr_web's own object where its semantics are torch's (torch.tensor is
numr_web.tensor, torch.Tensor numr_web.Tensor, torch.float32 numr_web.float32), a torch-shaped
wrapper where numr_web's differs (torch.max(x, dim) returns (values, indices)), or, for what is
not provided, raises UnsupportedError (an AttributeError for missing names) saying what differs
and what to use instead. torch.long / torch.int64 are int32, numr_web's widest integer.
The tensors are numr_web tensors on numr_web's devices: "cpu" (numpy), "cuda" (CuPy), "webgpu".
"""
from __future__ import annotations

import math as _math
import types as _types

from .. import *  # noqa: F401,F403  (the engine's torch-shaped API: tensor, zeros, matmul, ...)
from .. import __version__  # noqa: F401

# the star import also brought the engine's internal modules (numr_web.autograd, .backends,
# .serialization, ...); torch's modules of those names follow below
for _name, _value in list(globals().items()):
    if isinstance(_value, _types.ModuleType) and not _name.startswith("_"):
        del globals()[_name]

from ..devices import Device as device  # noqa: E402
from ..dtypes import DType as dtype  # noqa: E402
from ..dtypes import bool_ as bool, bfloat16, float16, float32, float64, int32  # noqa: E402,A004
from ..errors import UnsupportedError  # noqa: E402,F401
from ..tensor import Size, Tensor  # noqa: E402,F401
from ._dtypes import (float8_e4m3fn, float8_e5m2, int8, int16, short,  # noqa: E402,F401
                      uint8, uint16, uint32, uint64)
from ._functions import (autocast, compile, embedding, finfo,  # noqa: E402,F401,A004
                         get_default_dtype, get_float32_matmul_precision, iinfo,
                         is_floating_point, is_nonzero, max, min, set_default_dtype,
                         set_float32_matmul_precision, where)

long = int64 = int = int32  # noqa: A001  (int32 is the widest integer: README)
float = float32  # noqa: A001
double = float64
half = float16

inf, nan, pi, e = _math.inf, _math.nan, _math.pi, _math.e
newaxis = None
from .. import cat as concatenate  # noqa: E402

from . import (accelerator, amp, autograd, backends, cuda, nn, onnx, optim,  # noqa: E402
               random, return_types, serialization, utils)
from ..ops.selection import aminmax, cummax, cummin, mode  # noqa: E402,F401
from .serialization import load, save  # noqa: E402,F401
from ._unsupported import TORCH as _TABLE, module_getattr as _module_getattr  # noqa: E402

__getattr__ = _module_getattr("torch", _TABLE)
