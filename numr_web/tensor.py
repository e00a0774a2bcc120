"""Tensor: a backend handle + dtype + device, plus autograd fields. Operators call numr_web.ops."""
from __future__ import annotations

import array as _array
import os

from . import dtypes as dt
from . import shapes as sh
from .backends import get_backend, normalize_device
from .backends.base import HostArray
from .errors import DeviceError, DTypeError, GradientError, NumrError, ShapeError


class Tensor:
    # no __slots__: instance dicts with class-level defaults make creation cheaper (per-op overhead)
    _requires_grad = False
    _grad = None
    grad_fn = None
    __array_priority__ = 1000  # numpy scalars/arrays on the left defer to our operators

    @classmethod
    def _wrap(cls, data, dtype, device, backend=None):
        t = object.__new__(cls)
        t._data, t.dtype, t.device = data, dtype, device
        t._backend = backend or get_backend(device)
        return t

    def __init__(self, *args, **kwargs):
        raise NumrError("create tensors with nr.tensor(data, dtype=..., device=...)")

    # -- metadata ----------------------------------------------------------------------------------
    @property
    def shape(self):
        return tuple(self._data.shape)

    @property
    def ndim(self):
        return len(self._data.shape)

    @property
    def size(self):
        return sh.prod(self._data.shape)

    def __len__(self):
        if not self.ndim:
            raise ShapeError("len() of a 0-d tensor")
        return self.shape[0]

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        if value and not self.dtype.is_floating:
            raise GradientError(f"only floating-point tensors can require gradients; this tensor "
                                f"is {self.dtype.name}. Convert it with .astype('float32') first")
        self._requires_grad = bool(value)

    @property
    def grad(self):
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise GradientError("t.grad must be a Tensor or None")
            if (value.shape, value.dtype, value.device) != (self.shape, self.dtype, self.device):
                raise GradientError(
                    f"t.grad must match the tensor: shape {self.shape}, dtype {self.dtype.name}, "
                    f"device {self.device!r}; got shape {value.shape}, dtype {value.dtype.name}, "
                    f"device {value.device!r}")
        self._grad = value

    def requires_grad_(self, flag=True):
        self.requires_grad = flag
        return self

    # -- host transfer -----------------------------------------------------------------------------
    def numpy(self):
        """A numpy array with this tensor's values (native Python only)."""
        return self._backend.to_numpy(self._data)

    def tolist(self):
        return self._backend.to_list(self._data)

    def item(self):
        if self.size != 1:
            raise ShapeError(f"item() needs a tensor with one element, this one has shape "
                             f"{self.shape}")
        v = self.tolist()
        while isinstance(v, list):
            v = v[0]
        return v

    async def read(self):
        """Awaitable readback (the browser's path; works natively too): nested lists."""
        return await self._backend.to_list_async(self._data)

    def __float__(self): return float(self.item())
    def __int__(self): return int(self.item())
    def __bool__(self): return bool(self.item())
    def __index__(self):
        if self.dtype.kind == "f":
            raise DTypeError("only integer tensors can be used as an index")
        return int(self.item())

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a.astype(dtype) if dtype is not None else a

    def __dlpack__(self, *args, **kwargs):
        return self._backend.contiguous(self._data).__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    def __repr__(self):
        try:
            body = repr(self.tolist())
        except Exception as e:  # e.g. browser without synchronous readback
            body = f"<{type(e).__name__}>"
        extra = f", requires_grad=True" if self.requires_grad else ""
        if self.grad_fn is not None:
            extra = f", grad_fn=<{self.grad_fn.name}>"
        return f"tensor({body}, dtype={self.dtype.name}, device={self.device!r}{extra})"

    # -- device / dtype ----------------------------------------------------------------------------
    def to(self, device=None, dtype=None):
        out = self
        if dtype is not None:
            out = out.astype(dtype)
        if device is not None:
            device = normalize_device(device)
            if device != out.device:
                out = _transfer(out, device)
        return out

    def cpu(self): return self.to("cpu")

    def astype(self, dtype):
        dtype = dt.get_dtype(dtype)
        if dtype is self.dtype:
            return self
        from .ops import OPS, apply
        if not dtype.is_floating and self.requires_grad:
            from .autograd import no_grad
            with no_grad():
                return apply(OPS["astype"], self, dtype=dtype)
        return apply(OPS["astype"], self, dtype=dtype)

    def float(self): return self.astype(dt.float32)

    def detach(self):
        return Tensor._wrap(self._data, self.dtype, self.device)

    # -- autograd ----------------------------------------------------------------------------------
    def backward(self, grad=None, create_graph=False):
        """Accumulate d(self)/d(leaf) into every leaf's .grad."""
        from .autograd import _check_grad_output, run_backward
        g = _check_grad_output(self, grad)
        run_backward([self], [g], None, create_graph)

    def zero_grad(self):
        self.grad = None

    # -- arithmetic --------------------------------------------------------------------------------
    def __add__(self, o): return _ops.binary("add", self, o)
    def __radd__(self, o): return _ops.binary("add", o, self)
    def __sub__(self, o): return _ops.binary("sub", self, o)
    def __rsub__(self, o): return _ops.binary("sub", o, self)
    def __mul__(self, o): return _ops.binary("mul", self, o)
    def __rmul__(self, o): return _ops.binary("mul", o, self)
    def __truediv__(self, o): return _ops.binary("div", self, o)
    def __rtruediv__(self, o): return _ops.binary("div", o, self)
    def __pow__(self, o): return _ops.binary("pow", self, o)
    def __rpow__(self, o): return _ops.binary("pow", o, self)
    def __matmul__(self, o): return _ops.matmul(self, o)
    def __rmatmul__(self, o): return _ops.matmul(o, self)
    def __neg__(self): return _ops.unary("neg", self)
    def __pos__(self): return self
    def __abs__(self): return _ops.unary("abs", self)
    def __eq__(self, o): return _ops.binary("eq", self, o)
    def __ne__(self, o): return _ops.binary("ne", self, o)
    def __lt__(self, o): return _ops.binary("lt", self, o)
    def __le__(self, o): return _ops.binary("le", self, o)
    def __gt__(self, o): return _ops.binary("gt", self, o)
    def __ge__(self, o): return _ops.binary("ge", self, o)
    __hash__ = object.__hash__

    def __invert__(self):
        if self.dtype is not dt.bool_:
            raise DTypeError("~ is logical not and needs a bool tensor")
        return _ops.binary("eq", self, False)

    def exp(self): return _ops.exp(self)
    def log(self): return _ops.log(self)
    def sqrt(self): return _ops.sqrt(self)
    def abs(self): return _ops.abs(self)
    def neg(self): return _ops.neg(self)
    def sin(self): return _ops.sin(self)
    def cos(self): return _ops.cos(self)
    def relu(self): return _ops.relu(self)
    def sigmoid(self): return _ops.sigmoid(self)
    def tanh(self): return _ops.tanh(self)
    def sum(self, axis=None, keepdims=False): return _ops.sum(self, axis, keepdims)
    def mean(self, axis=None, keepdims=False): return _ops.mean(self, axis, keepdims)
    def max(self, axis=None, keepdims=False): return _ops.max(self, axis, keepdims)
    def min(self, axis=None, keepdims=False): return _ops.min(self, axis, keepdims)
    def argmax(self, axis=None, keepdims=False): return _ops.argmax(self, axis, keepdims)
    def softmax(self, axis=-1): return _ops.softmax(self, axis)
    def log_softmax(self, axis=-1): return _ops.log_softmax(self, axis)

    # -- shapes ------------------------------------------------------------------------------------
    def reshape(self, *shape):
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        new = sh.reshape_target(self.shape, shape)
        if new == self.shape and not self.requires_grad:
            return self
        return _ops.apply(_ops.OPS["reshape"], self, shape=new)

    view = reshape

    def flatten(self):
        return self.reshape(-1)

    def permute(self, *perm):
        if len(perm) == 1 and not isinstance(perm[0], int):
            perm = tuple(perm[0])
        perm = tuple(sh.normalize_axis(p, self.ndim) for p in perm)
        if sorted(perm) != list(range(self.ndim)):
            raise ShapeError(f"permute: {perm} is not a permutation of the {self.ndim} axes of a "
                             f"tensor of shape {self.shape}")
        return _ops.apply(_ops.OPS["permute"], self, perm=perm)

    def transpose(self, a=-2, b=-1):
        if self.ndim < 2:
            return self
        a, b = sh.normalize_axis(a, self.ndim), sh.normalize_axis(b, self.ndim)
        perm = list(range(self.ndim))
        perm[a], perm[b] = perm[b], perm[a]
        return self.permute(perm)

    @property
    def T(self):
        return self.permute(tuple(reversed(range(self.ndim))))

    @property
    def mT(self):
        return self.transpose(-2, -1)

    def expand(self, *shape):
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        lead = len(shape) - self.ndim
        if any(s == -1 for s in shape[:max(lead, 0)]):
            raise ShapeError(f"expand: -1 (keep the size) is only allowed for existing dimensions, "
                             f"not for the {lead} new leading one(s) in {shape}")
        shape = tuple(s if s != -1 else self.shape[i - lead] for i, s in enumerate(shape))
        ok = len(shape) >= self.ndim and all(
            d == s or d == 1 for d, s in zip(self.shape, shape[len(shape) - self.ndim:]))
        if not ok:
            raise ShapeError(f"cannot expand a tensor of shape {self.shape} to {shape}; each "
                             "dimension must match or be 1 in the tensor")
        if shape == self.shape:
            return self
        return _ops.apply(_ops.OPS["expand"], self, shape=shape)

    broadcast_to = expand

    def __getitem__(self, index):
        idx, new_axes, out_shape = sh.normalize_index(index, self.shape)
        out = _ops.apply(_ops.OPS["slice"], self, index=idx)
        if new_axes:
            out = out.reshape(out_shape)
        return out

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]


def _transfer(t, device):
    """Copy to another device through the host; differentiable (the gradient is moved back)."""
    src, dst = t._backend, get_backend(device)
    h = src.contiguous(t._data)
    host = src.to_numpy(h) if _has_numpy() else HostArray(src.to_bytes(h), t.shape, t.dtype)
    out = Tensor._wrap(dst.from_host(host, t.dtype), t.dtype, device)
    from .autograd import _state
    if t.requires_grad and _state["enabled"]:
        out = _attach_transfer(t, out)
    return out


def _attach_transfer(src, out):
    from .autograd import Node
    from .ops import OPS
    out.requires_grad = True
    out.grad_fn = Node(OPS["to_device"], (src,), None, None, {"device": out.device}, out.dtype)
    return out


def _has_numpy():
    try:
        import numpy  # noqa: F401
        return True
    except ImportError:
        return False


# ------------------------------------------------------------------------------------------------
# creation
_TYPECODE_DTYPE = {"f": dt.float32, "d": dt.float64, "e": dt.float16, "?": dt.bool_}
for _c in "bBhHiIlLqQ":
    _TYPECODE_DTYPE[_c] = dt.int32


def _flatten(data):
    """Nested lists/tuples of numbers -> (flat list, shape, kind) with clear errors."""
    if isinstance(data, (bool, int, float)):
        return [data], (), _kind(data)
    shape, level, flat = [], [data], None
    while True:
        first = level[0] if level else None
        if level and isinstance(first, (list, tuple)):
            n = len(first)
            for x in level:
                if not isinstance(x, (list, tuple)) or len(x) != n:
                    raise ShapeError(f"ragged nested sequence: at depth {len(shape)} found "
                                     f"lengths {sorted({len(y) if isinstance(y, (list, tuple)) else 'scalar' for y in level}, key=str)}; "
                                     "every row must have the same length")
            shape.append(n)
            level = [y for x in level for y in x]
            continue
        shape.append(len(level)) if not shape else None
        flat = level
        break
    if not isinstance(data, (list, tuple)):
        raise DTypeError(f"cannot make a tensor from {type(data).__name__}")
    kinds = set()
    for x in flat:
        if isinstance(x, (list, tuple)):
            raise ShapeError("ragged nested sequence: rows mix numbers and lists")
        kinds.add(_kind(x))
    kind = "f" if "f" in kinds else ("i" if "i" in kinds else ("b" if kinds else "f"))
    return flat, tuple(shape), kind


def _kind(x):
    if isinstance(x, bool):
        return "b"
    if isinstance(x, int):
        return "i"
    if isinstance(x, float):
        return "f"
    if hasattr(x, "dtype") and hasattr(x, "item"):  # numpy scalar
        return _kind(x.item())
    raise DTypeError(f"non-numeric value {x!r} ({type(x).__name__}) in tensor data; expected "
                     "numbers (bool, int, float)")


_KIND_DTYPE = {"f": dt.float32, "i": dt.int32, "b": dt.bool_}


def tensor(data, dtype=None, device=None, requires_grad=False):
    """Make a tensor from a scalar, nested lists, a numpy/cupy array, array.array, memoryview or
    Tensor. dtype defaults to the data's (float data -> float32 unless the array is float64)."""
    device = normalize_device(device)
    if dtype is not None:
        dtype = dt.get_dtype(dtype)
    if isinstance(data, Tensor):
        out = data.detach().to(device, dtype)
        if out is data:
            out = data.detach()
    else:
        be = get_backend(device)
        host, src_dtype = _host_from(data, be)
        dtype = dtype or src_dtype
        out = Tensor._wrap(be.from_host(_convert(host, src_dtype, dtype), dtype), dtype, device)
    if requires_grad:
        out.requires_grad = True
    return out


def _host_from(data, be):
    """-> (host object the backend accepts, its dtype)."""
    mod = type(data).__module__.split(".")[0]
    if mod in ("numpy", "cupy", "torch", "jax", "jaxlib"):
        if mod == "cupy" and be.device == "cuda":
            return data, dt.get_dtype(data.dtype)
        if mod != "numpy":
            import numpy as np
            data = data.get() if mod == "cupy" else np.asarray(data)
        if data.dtype.kind not in "biuf":
            raise DTypeError(f"cannot make a tensor from a numpy array of dtype {data.dtype}")
        return data, dt.get_dtype(data.dtype)
    if isinstance(data, (_array.array, memoryview, bytes, bytearray)):
        mv = memoryview(data)
        code = mv.format.lstrip("@=<")
        if code not in _TYPECODE_DTYPE:
            raise DTypeError(f"unsupported buffer format {mv.format!r}")
        src = _TYPECODE_DTYPE[code]
        shape = tuple(mv.shape) if mv.ndim else ()
        raw = mv if mv.c_contiguous else memoryview(mv.tobytes())   # strided views: copy
        values = raw.cast("B").cast(code)
        if code not in ("f", "d", "e", "?", "i"):
            ints = values.tolist()
            if ints and (min(ints) < -2**31 or max(ints) >= 2**31):
                raise DTypeError(f"integer values in [{min(ints)}, {max(ints)}] do not fit int32, "
                                 "the widest integer dtype; convert them to floats first")
            values = _array.array("i", ints)
        return HostArray(values, shape, src), src
    flat, shape, kind = _flatten(data)
    return (flat, shape), _KIND_DTYPE[kind]


def _convert(host, src, dst):
    """Host data of dtype src -> something backends accept, with values of dtype dst."""
    if isinstance(host, tuple):  # (flat list, shape)
        flat, shape = host
        if dst.kind == "f" and src is dt.bool_:
            flat = [float(x) for x in flat]
        if dst.kind == "i":
            if src.kind == "f":
                flat = [int(x) for x in flat]
            else:
                flat = [int(x) for x in flat]
        if dst.kind == "b":
            flat = [bool(x) for x in flat]
        if dst is dt.float16:
            buf = memoryview(_array.array("f", flat).tobytes())  # via struct below
            import struct
            buf = struct.pack(f"<{len(flat)}e", *flat)
        else:
            code = {"?": "b"}.get(dst.typecode, dst.typecode)
            try:
                buf = _array.array(code, flat) if code != "b" else bytes(bytearray(flat))
            except OverflowError:
                raise DTypeError(f"values do not fit {dst.name} (int32 holds -2**31..2**31-1); "
                                 "pass dtype='float64' or smaller numbers") from None
        return HostArray(buf, shape, dst)
    if isinstance(host, HostArray):
        if src is dst:
            return host
        vals = memoryview(host.buf).cast("B").cast(src.typecode).tolist()
        return _convert((vals, host.shape), src, dst)
    # numpy / cupy array
    if src is dst and host.dtype.kind != "u" and host.dtype.itemsize == dst.itemsize:
        return host
    if dst is dt.int32 and host.dtype.kind in "iu" and host.size and (
            host.min() < -2**31 or host.max() >= 2**31):
        raise DTypeError(f"integer values in [{int(host.min())}, {int(host.max())}] do not fit "
                         "int32, the widest integer dtype; convert them to float64 first")
    return host.astype({"bool": "bool"}.get(dst.name, dst.name))


def _creation_args(shape, dtype, device):
    return sh.check_shape(shape), dt.get_dtype(dtype) if dtype is not None else dt.default_float, \
        normalize_device(device)


def full(shape, fill_value, dtype=None, device=None, requires_grad=False):
    if dtype is None:
        dtype = dt.default_float if isinstance(fill_value, float) else (
            dt.bool_ if isinstance(fill_value, bool) else dt.int32 if isinstance(fill_value, int)
            else dt.default_float)
    shape, dtype, device = _creation_args(shape, dtype, device)
    t = Tensor._wrap(get_backend(device).full(shape, fill_value, dtype), dtype, device)
    if requires_grad:
        t.requires_grad = True
    return t


def zeros(shape, dtype=None, device=None, requires_grad=False):
    return full(shape, 0.0, dtype or dt.default_float, device, requires_grad)


def ones(shape, dtype=None, device=None, requires_grad=False):
    return full(shape, 1.0, dtype or dt.default_float, device, requires_grad)


def arange(start, stop=None, step=1, dtype=None, device=None, requires_grad=False):
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise NumrError("arange: step must not be zero")
    if dtype is None:
        dtype = dt.default_float if any(isinstance(v, float) for v in (start, stop, step)) \
            else dt.int32
    dtype, device = dt.get_dtype(dtype), normalize_device(device)
    t = Tensor._wrap(get_backend(device).arange(start, stop, step, dtype), dtype, device)
    if requires_grad:
        t.requires_grad = True
    return t


def _random(kind, shape, seed, dtype, device, requires_grad):
    shape, dtype, device = _creation_args(shape, dtype, device)
    if not dtype.is_floating:
        raise DTypeError(f"random tensors must be floating point, got {dtype.name}")
    if seed is not None and (not isinstance(seed, int) or seed < 0):
        raise NumrError(f"seed must be a non-negative int or None, got {seed!r}")
    t = Tensor._wrap(get_backend(device).random(shape, dtype, seed, kind), dtype, device)
    if requires_grad:
        t.requires_grad = True
    return t


def rand(shape, seed=None, dtype=None, device=None, requires_grad=False):
    """Uniform [0, 1) samples; the same seed gives the same values on a device."""
    return _random("uniform", shape, seed, dtype, device, requires_grad)


def randn(shape, seed=None, dtype=None, device=None, requires_grad=False):
    """Standard normal samples; the same seed gives the same values on a device."""
    return _random("normal", shape, seed, dtype, device, requires_grad)


def from_dlpack(x):
    """Zero-copy import from any DLPack producer (torch, cupy, numpy)."""
    dev_type = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else 1
    if dev_type == 2:  # kDLCUDA
        be = get_backend("cuda")
        data = be.xp.from_dlpack(x)
        return Tensor._wrap(data, be.dtype_of(data), "cuda")
    be = get_backend("cpu")
    data = be.xp.from_dlpack(x)
    return Tensor._wrap(data, be.dtype_of(data), "cpu")


from . import ops as _ops  # noqa: E402  (ops needs Tensor defined first)
_ops.Tensor = Tensor


def _to_device_vjp(n, g):
    return (g.to(n.args[0].device),)


_ops.register("to_device", lambda be, x, device: (x, None), _to_device_vjp, lambda np, x, device: x,
              backward_name="ToDeviceBackward")
