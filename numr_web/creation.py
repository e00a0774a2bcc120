"""Making tensors: from host data, filled, ranges, random, DLPack. Every argument is checked here,
before anything is allocated on a device."""
from __future__ import annotations

import math

from . import dtypes as dt
from . import host
from . import shapes as sh
from .backends import backend_for_dlpack, get_backend, normalize_device
from .generator import resolve_seed
from .errors import BackendLimitError, DTypeError, NumrError, ShapeError
from .profiler import call as profiled
from .tensor import Tensor


def tensor(data, dtype=None, device=None, requires_grad=False):
    """Make a tensor from a scalar, nested lists, a numpy/cupy/torch array, array.array,
    memoryview or Tensor. dtype defaults to the data's (Python floats -> float32)."""
    device = normalize_device(device)
    dtype = dt.get_dtype(dtype) if dtype is not None else None
    if isinstance(data, Tensor):
        out = data.detach().to(device, dtype)
        out = out.detach() if out is data else out
    else:
        foreign = backend_for_dlpack(data)
        if foreign is not None and foreign.device != device:    # e.g. a cupy array to cpu
            return tensor(tensor(data, dtype, foreign.device), None, device, requires_grad)
        out = Tensor._from_host(data, dtype, device)
    if requires_grad:
        out.requires_grad = True
    return out


as_tensor = tensor


def _check_alloc(shape, dtype, device):
    n = sh.prod(shape)
    be = get_backend(device)
    be.check_dtype(dtype)
    limit = be.max_elements(dtype)
    if n == 0 and sh.prod(d for d in shape if d) * dtype.itemsize >= 2 ** 63:
        # empty, but its strides overflow 64 bits (numpy refuses such a shape with ValueError)
        raise BackendLimitError(f"a {dtype.name} tensor of shape {shape} has strides beyond 2**63 "
                                "bytes even though it is empty; use smaller dimensions")
    if n > limit:
        raise BackendLimitError(f"a {dtype.name} tensor of shape {shape} ({n} elements) is larger "
                                f"than the {device} device can hold ({limit} elements)")


def _creation_args(shape, dtype, device):
    shape = sh.check_shape(shape)
    dtype = dt.get_dtype(dtype) if dtype is not None else dt.default_float
    device = normalize_device(device)
    _check_alloc(shape, dtype, device)
    return shape, dtype, device


def _finish(t, requires_grad):
    if requires_grad:
        t.requires_grad = True
    return t


def _fill_value(value, dtype):
    if isinstance(value, Tensor):
        value = value.item()
    if not dt.is_scalar(value):
        raise DTypeError(f"fill value must be a number (bool, int or float), got "
                         f"{type(value).__name__} {value!r}")
    value = value.item() if hasattr(value, "item") else value
    if dtype.kind == "i":
        if isinstance(value, float) and not math.isfinite(value):
            raise DTypeError(f"cannot fill an int32 tensor with {value}")
        value = int(value)
        if not host.INT32_MIN <= value <= host.INT32_MAX:
            raise DTypeError(f"fill value {value} does not fit int32 (-2**31..2**31-1)")
    elif dtype.kind == "b":
        value = bool(value)
    else:
        value = float(value)
    return value


def full(shape, fill_value, dtype=None, device=None, requires_grad=False):
    if dtype is None and dt.is_scalar(fill_value):
        dtype = dt.scalar_dtype(fill_value)
    shape, dtype, device = _creation_args(shape, dtype, device)
    value = _fill_value(fill_value, dtype)
    be = get_backend(device)
    out = profiled("full", be, (), be.full, shape, value, dtype)
    return _finish(Tensor._wrap(out, dtype, device, be), requires_grad)


def _size_args(args, dtype, device):
    """zeros((2, 3), dtype, device) as documented, and torch's zeros(2, 3) alike."""
    if args and not isinstance(args[0], int):
        if len(args) > 3:
            raise ShapeError(f"expected (shape, dtype, device), got {len(args)} positional "
                             "arguments")
        extra = list(args[1:]) + [None, None]
        return args[0], dtype or extra[0], device or extra[1]
    return args, dtype, device


def zeros(*size, dtype=None, device=None, requires_grad=False):
    shape, dtype, device = _size_args(size, dtype, device)
    return full(shape, 0, dtype or dt.default_float, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    shape, dtype, device = _size_args(size, dtype, device)
    return full(shape, 1, dtype or dt.default_float, device, requires_grad)


empty = zeros


def full_like(x, fill_value, dtype=None, device=None, requires_grad=False):
    return full(x.shape, fill_value, dtype or x.dtype, device or x.device, requires_grad)


def zeros_like(x, dtype=None, device=None, requires_grad=False):
    return full_like(x, 0, dtype, device, requires_grad)


def ones_like(x, dtype=None, device=None, requires_grad=False):
    return full_like(x, 1, dtype, device, requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    for name, v in (("start", start), ("end", end), ("step", step)):
        if not dt.is_scalar(v) or isinstance(v, bool):
            raise DTypeError(f"arange: {name} must be an int or float, got {v!r}")
        if not math.isfinite(float(v)):
            raise ShapeError(f"arange: {name} must be finite, got {v}")
    if step == 0:
        raise ShapeError("arange: step must not be zero")
    if (end - start) * step < 0:
        raise ShapeError(f"arange: the range [{start}, {end}) cannot be reached with step {step}; "
                         "the step's sign must be that of end - start")
    if dtype is None:
        dtype = dt.default_float if any(isinstance(v, float) for v in (start, end, step)) \
            else dt.int32
    n = max(0, math.ceil((end - start) / step))
    dtype, device = dt.get_dtype(dtype), normalize_device(device)
    if dtype is dt.bool_:
        raise DTypeError("arange cannot make a bool tensor (as in torch); make an int32 range and "
                         "compare it, e.g. nr.arange(n) > 2")
    if dtype.kind == "i" and n and not all(host.INT32_MIN <= v <= host.INT32_MAX
                                           for v in (start, start + (n - 1) * step)):
        raise DTypeError(f"arange({start}, {end}, {step}) has values beyond int32 "
                         "(-2**31..2**31-1), the widest integer dtype; pass dtype='float64'")
    _check_alloc((n,), dtype, device)
    be = get_backend(device)
    out = profiled("arange", be, (), be.arange, start, end, step, dtype)
    return _finish(Tensor._wrap(out, dtype, device, be), requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    """`steps` values from start to end inclusive, evenly spaced (torch.linspace): the first half
    counted up from start and the second down from end, as torch does, so both ends are exact."""
    for name, v in (("start", start), ("end", end)):
        if isinstance(v, Tensor):
            v = v.item()
        if not dt.is_scalar(v) or isinstance(v, bool):
            raise DTypeError(f"linspace: {name} must be an int or float, got {v!r}")
    start, end = float(start), float(end)
    steps = sh.as_int(steps, "linspace: steps")
    if steps < 0:
        raise ShapeError(f"linspace: steps must be non-negative, got {steps}")
    dtype = dt.get_dtype(dtype) if dtype is not None else dt.default_float
    compute = dtype if dtype.is_floating else dt.default_float
    shape, _, device = _creation_args((steps,), compute, device)
    _check_alloc(shape, dtype, device)
    if steps <= 1:
        return _finish(full(shape, start, dtype, device), requires_grad)
    i = arange(steps, dtype=compute, device=device)
    step = (end - start) / (steps - 1)
    out = (i * step + start).where(i < steps // 2, end - (steps - 1 - i) * step)
    return _finish(out.astype(dtype) if out.dtype is not dtype else out, requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    """The n x m identity matrix (m defaults to n)."""
    n = sh.check_shape((n,))[0]
    m = n if m is None else sh.check_shape((m,))[0]
    shape, dtype, device = _creation_args((n, m), dtype, device)
    rows = arange(n, device=device).reshape(n, 1)
    out = (rows == arange(m, device=device).reshape(1, m)).astype(dtype)
    return _finish(out, requires_grad)


def _random(kind, size, seed, dtype, device, requires_grad, generator, size_kw):
    shape, extra = _random_shape(kind, size, size_kw)
    if extra:                     # the positional form rand(shape, seed, dtype, device, rg)
        given = dict(zip(("seed", "dtype", "device", "requires_grad"), extra))
        seed = given.get("seed", seed)
        dtype = given.get("dtype", dtype)
        device = given.get("device", device)
        requires_grad = given.get("requires_grad", requires_grad)
    shape, dtype, device = _creation_args(shape, dtype, device)
    if not dtype.is_floating:
        raise DTypeError(f"random tensors must be floating point, got {dtype.name}")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        raise NumrError(f"seed must be a non-negative int or None, got {seed!r}")
    seed = resolve_seed(seed, generator)
    be = get_backend(device)
    out = profiled(f"random_{kind}", be, (), be.random, shape, dtype, seed, kind)
    return _finish(Tensor._wrap(out, dtype, device, be), requires_grad)


def _random_shape(kind, size, size_kw):
    """torch's rand(2, 3) / rand((2, 3)) / rand(size=(2, 3)); numr's older positional form
    rand((2, 3), seed, dtype, device, requires_grad) is kept when the first argument is a tuple
    or list (torch has no second positional argument there)."""
    name = "rand" if kind == "uniform" else "randn"
    if size_kw is not None:
        if size:
            raise ShapeError(f"{name}: give the shape once, positionally or as size=")
        return size_kw, ()
    if not size:
        raise ShapeError(f"{name} needs a shape: {name}(2, 3) or {name}((2, 3))")
    if isinstance(size[0], (tuple, list)):
        if len(size) > 5:
            raise ShapeError(f"{name}: expected (shape, seed, dtype, device, requires_grad), got "
                             f"{len(size)} positional arguments")
        return size[0], size[1:]
    for d in size:
        if isinstance(d, (str, bool, float)) or not hasattr(d, "__index__"):
            raise ShapeError(f"{name}: sizes must be ints, got {type(d).__name__} {d!r}; pass "
                             "dtype=, device=, seed= by keyword")
    return size, ()


def rand(*size, seed=None, generator=None, dtype=None, device=None, requires_grad=False, **kw):
    """Uniform [0, 1) samples, torch's rand(2, 3) or rand((2, 3)). Without seed= the values come
    from `generator` (default: the default generator that nr.manual_seed seeds); the same seed
    gives the same values on a device."""
    return _random("uniform", size, seed, dtype, device, requires_grad, generator,
                   _size_kw(kw, "rand"))


def randn(*size, seed=None, generator=None, dtype=None, device=None, requires_grad=False, **kw):
    """Standard normal samples, torch's randn(2, 3) or randn((2, 3)); seeds as rand."""
    return _random("normal", size, seed, dtype, device, requires_grad, generator,
                   _size_kw(kw, "randn"))


def _size_kw(kw, name):
    size_kw = kw.pop("size", None)
    if kw:
        raise DTypeError(f"{name}() got unexpected keyword argument(s) {sorted(kw)}")
    return size_kw


def randint(*args, size=None, low=None, high=None, seed=None, generator=None, dtype=None,
            device=None, requires_grad=False):
    """Integers uniform in [low, high) (torch.randint(high, size) / randint(low, high, size));
    int32 by default, the widest integer dtype here."""
    pos = list(args)
    if size is None and pos and isinstance(pos[-1], (tuple, list)):
        size = pos.pop()
    if len(pos) == 2:
        low, high = pos
    elif len(pos) == 1:
        low, high = (0 if low is None else low), pos[0]
    elif pos:
        raise ShapeError(f"randint expects (high, size) or (low, high, size), got {len(args)} "
                         "positional arguments")
    low = 0 if low is None else low
    if high is None or size is None:
        raise ShapeError("randint needs high and size: randint(10, (2, 3)) or "
                         "randint(0, 10, (2, 3))")
    low, high = sh.as_int(low, "randint: low"), sh.as_int(high, "randint: high")
    if not low < high:
        raise ShapeError(f"randint: low must be less than high, got low={low}, high={high}")
    if not (host.INT32_MIN <= low and high - 1 <= host.INT32_MAX):
        raise DTypeError(f"randint: [{low}, {high}) goes beyond int32 (-2**31..2**31-1), the "
                         "widest integer dtype")
    device = normalize_device(device)
    n = high - low
    wide = dt.float32 if device == "webgpu" else dt.float64      # WGSL has no float64
    if n > 2 ** 24 and wide is dt.float32:
        raise BackendLimitError(f"randint on webgpu draws through float32: the range {n} must be "
                                "at most 2**24")
    u = rand(tuple(size), seed=seed, generator=generator, dtype=wide, device=device)
    k = (u * n).clamp(max=n - 1)              # u * n may round up to n
    if n <= host.INT32_MAX:                   # floor(k) by truncation (k >= 0), then + low
        out = k.astype(dt.int32)
        out = out + low if low else out
    else:                                     # k beyond int32 (cpu/cuda, float64): shift first
        out = (k - k % 1 + low).astype(dt.int32)
    out = out.astype(dtype) if dtype is not None else out
    return _finish(out, requires_grad)


def rand_like(x, dtype=None, device=None, requires_grad=False, seed=None, generator=None):
    return rand(x.shape, seed=seed, generator=generator, dtype=dtype or x.dtype,
                device=device or x.device, requires_grad=requires_grad)


def randn_like(x, dtype=None, device=None, requires_grad=False, seed=None, generator=None):
    return randn(x.shape, seed=seed, generator=generator, dtype=dtype or x.dtype,
                 device=device or x.device, requires_grad=requires_grad)


def empty_like(x, dtype=None, device=None, requires_grad=False):
    return full_like(x, 0, dtype, device, requires_grad)


def from_dlpack(x):
    """Zero-copy import from any DLPack producer (torch, cupy, numpy) onto the device holding it."""
    be = backend_for_dlpack(x)
    if be is None:
        raise NumrError(f"from_dlpack: {type(x).__name__} is not a DLPack producer on a device "
                        "numr_web has (cpu, cuda)")
    data = be.from_dlpack(x)
    return Tensor._wrap(data, be.dtype_of(data), be.device, be)


# -- torch's t.new_*: this tensor's dtype and device unless given --------------------------------
def _new_size(size):
    """new_zeros(2, 3) and new_zeros((2, 3)) alike."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(size[0])
    return tuple(size)


def _new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
    size = (size,) if not isinstance(size, (tuple, list)) else size
    return full(_new_size(size), fill_value, dtype or self.dtype, device or self.device,
                requires_grad)


def _new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
    return _new_full(self, size, 0, dtype, device, requires_grad)


def _new_ones(self, *size, dtype=None, device=None, requires_grad=False):
    return _new_full(self, size, 1, dtype, device, requires_grad)


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    return tensor(data, dtype or self.dtype, device or self.device, requires_grad)


Tensor.new_full, Tensor.new_zeros, Tensor.new_ones = _new_full, _new_zeros, _new_ones
Tensor.new_empty, Tensor.new_tensor = _new_zeros, _new_tensor
