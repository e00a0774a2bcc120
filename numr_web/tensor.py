"""Tensor: a backend handle + dtype + device, plus the autograd fields.

This class holds what is not an op: metadata, host transfer, device moves, autograd entry points.
Arithmetic, math and shape methods (`t + u`, `t.sum()`, `t.reshape()`, ...) are ops: each op
family module (numr_web/ops/*.py) defines them in a class of its own next to the op's row
(ElementwiseMethods, ...), and numr_web/ops/tensor_methods.py makes those classes Tensor's bases,
so an op has one home and this module imports no op.
"""
from __future__ import annotations

import itertools

from . import dtypes as dt
from . import host
from . import shapes as sh
from .autograd import apply, attach, backward
from .backends import get_backend, normalize_device
from .errors import DTypeError, GradientError, IndexOutOfRangeError, NumrError, ShapeError
from .formatting import format_tensor
from .gradmode import no_grad
from .profiler import scope as profiler_scope
from .vocab.registry import OPS


class OpMethods:
    """The place of Tensor's op methods in its bases: numr_web/ops/tensor_methods.py puts the op
    families' method classes (ops/elementwise.py: ElementwiseMethods, ...) in front of it."""


class Tensor(OpMethods):
    # no __slots__: instance dicts with class-level defaults make creation cheap (per-op overhead)
    _requires_grad = False
    _grad = None
    _out_index = 0
    _version = 0                  # bumped by each in-place write (ops/inplace.py)
    _hooks = None
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
        """The element count (an int, as numpy's .size); called, torch's size(): t.size() is the
        shape as an nr.Size, t.size(dim) one dimension."""
        return _SizeCount(self._data.shape)

    def numel(self):
        return sh.prod(self._data.shape)

    nelement = numel

    def dim(self):
        return self.ndim

    ndimension = dim

    def element_size(self):
        """Bytes per element (torch's element_size)."""
        return self.dtype.itemsize

    def is_floating_point(self):
        return self.dtype.is_floating

    @property
    def is_cuda(self):
        return self.device == "cuda"

    # -- copy / pickle (torch's protocol: leaves only for deepcopy; values, dtype, device and
    # requires_grad travel, a deepcopy also copies .grad) ---------------------------------------
    def __reduce_ex__(self, protocol):
        be = self._backend
        raw = be.to_bytes(be.contiguous(self._data))
        extra = {k: v for k, v in self.__dict__.items() if k not in _OWN_FIELDS}
        return (_rebuild, (raw, self.shape, self.dtype.name, self.device, self.requires_grad,
                           None, extra))

    def __deepcopy__(self, memo):
        if self.grad_fn is not None:
            raise GradientError("only leaf tensors (made by you, not by an op) support deepcopy, "
                                "as in torch; deepcopy t.detach() instead")
        if id(self) in memo:
            return memo[id(self)]
        import copy
        fn, args = self.__reduce_ex__(4)
        args = args[:5] + (copy.deepcopy(self._grad, memo), copy.deepcopy(args[6], memo))
        out = fn(*args)
        memo[id(self)] = out
        return out

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
        if not isinstance(value, bool):
            raise GradientError(f"requires_grad must be True or False, got {value!r}")
        if self.grad_fn is not None:
            if value:                  # a non-leaf requires grad already (torch: a no-op)
                return
            raise GradientError("requires_grad can only be changed on leaf tensors; use "
                                "t.detach() to get a tensor outside the graph")
        if value and not self.dtype.is_floating:
            raise GradientError(f"only floating-point tensors can require gradients; this tensor "
                                f"is {self.dtype.name}. Convert it with .astype('float32') first")
        self._requires_grad = value

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = requires_grad
        return self

    @property
    def grad(self):
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise GradientError(f"t.grad must be a Tensor or None, got {type(value).__name__}")
            if (value.shape, value.dtype, value.device) != (self.shape, self.dtype, self.device):
                raise GradientError(
                    f"t.grad must match the tensor: shape {self.shape}, dtype {self.dtype.name}, "
                    f"device {self.device!r}; got shape {value.shape}, dtype {value.dtype.name}, "
                    f"device {value.device!r}")
        self._grad = value

    # -- host transfer -----------------------------------------------------------------------------
    def numpy(self):
        """A numpy array with this tensor's values (native Python only)."""
        with profiler_scope("readback"):
            return self._backend.to_numpy(self._data)

    def tolist(self):
        with profiler_scope("readback"):
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
        with profiler_scope("readback"):
            return await self._backend.to_list_async(self._data)

    def __float__(self): return float(self.item())
    def __int__(self): return int(self.item())

    def __bool__(self):
        if self.size != 1:
            raise ShapeError(f"the truth value of a tensor with {self.size} elements is "
                             "ambiguous; use .any() or .all()")
        return bool(self.item())

    def __index__(self):
        if self.dtype.kind == "f" or self.size != 1:
            raise DTypeError("only integer tensors of a single element can be used as an index")
        return int(self.item())

    def __array__(self, dtype=None, copy=None):
        a = self._backend.to_numpy(self._data)
        return a.astype(dtype) if dtype is not None else a

    def __dlpack__(self, *args, **kwargs):
        return self._backend.contiguous(self._data).__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    def __repr__(self):
        extra = ""
        if self.grad_fn is not None:
            extra = f", grad_fn=<{self.grad_fn.name}>"
        elif self.requires_grad:
            extra = ", requires_grad=True"
        return format_tensor(self, extra)

    # -- device / dtype ----------------------------------------------------------------------------
    def to(self, device=None, dtype=None, non_blocking=False, copy=False):
        """t.to(device), t.to(dtype), t.to(device, dtype), t.to(other) (other's device and
        dtype), as torch's."""
        if isinstance(device, Tensor):
            device, dtype = device.device, device.dtype
        if isinstance(device, (dt.DType, type)) or (isinstance(device, str) and dtype is None
                                                     and dt.is_dtype_name(device)):
            device, dtype = None, device
        out = self
        if dtype is not None:
            out = out.astype(dtype)
        if device is not None:
            device = normalize_device(device)
            if device != out.device:
                dst = get_backend(device)
                dst.check_dtype(out.dtype)
                moved = Tensor._wrap(dst.transfer_from(out._backend, out._data), out.dtype,
                                     device, dst)
                out = attach(moved._data, OPS["to_device"], (out,), {"device": device}, moved)
        if copy and out is self:
            out = out.clone()                  # a fresh buffer, still in the graph
        return out

    def cpu(self): return self.to("cpu")
    def cuda(self): return self.to("cuda")

    def astype(self, dtype):
        dtype = dt.get_dtype(dtype)
        if dtype is self.dtype:
            return self
        self._backend.check_dtype(dtype)
        if not dtype.is_floating and self.requires_grad:
            with no_grad():
                return apply(OPS["astype"], self, dtype=dtype)
        return apply(OPS["astype"], self, dtype=dtype)

    type = astype
    def float(self): return self.astype(dt.float32)
    def double(self): return self.astype(dt.float64)
    def half(self): return self.astype(dt.float16)
    def bfloat16(self): return self.astype(dt.bfloat16)
    def int(self): return self.astype(dt.int32)
    # int32 is the widest integer dtype (README): torch's 64-bit .long() gives int32 here
    def long(self): return self.astype(dt.int32)
    def bool(self): return self.astype(dt.bool_)

    def type_as(self, other):
        return self.astype(other.dtype)

    @property
    def data(self):
        """The values without the graph (torch's .data): a detached tensor sharing storage; an
        in-place write to it (t.data.add_(g), t.data.uniform_()) writes this tensor too, as in
        torch. Assigning a tensor of the same dtype and device rebinds this tensor's storage."""
        alias = self.detach()
        alias._data_of = self
        return alias

    @data.setter
    def data(self, value):
        if not isinstance(value, Tensor):
            raise DTypeError(f"t.data must be assigned a Tensor, got {type(value).__name__}")
        if (value.dtype, value.device) != (self.dtype, self.device):
            raise DTypeError(f"t.data = v needs v of this tensor's dtype and device "
                             f"({self.dtype.name}, {self.device!r}); got ({value.dtype.name}, "
                             f"{value.device!r}): convert it with v.to(t) first")
        self._data = value._data

    def detach(self):
        return Tensor._wrap(self._data, self.dtype, self.device, self._backend)

    def detach_(self):
        self.grad_fn, self._requires_grad = None, False
        return self

    def _copy(self):
        """A fresh buffer with this tensor's values (no graph)."""
        return Tensor._wrap(self._backend.copy(self._data), self.dtype, self.device, self._backend)

    def _new_full(self, shape, value):
        return Tensor._wrap(self._backend.full(tuple(shape), value, self.dtype), self.dtype,
                            self.device, self._backend)

    def _like_tensor(self, x):
        """x as a tensor on this tensor's device (scalars and lists take this tensor's dtype)."""
        if isinstance(x, Tensor):
            return x
        return Tensor._from_host(x, self.dtype, self.device)

    @classmethod
    def _from_host(cls, data, dtype, device):
        """Upload host data (see numr_web.host) as a tensor of `dtype` (None: the data's own)."""
        be = get_backend(device)
        src_host, src_dtype = host.from_data(data, be)
        dtype = dtype or src_dtype
        be.check_dtype(dtype)
        return cls._wrap(be.from_host(host.convert(src_host, src_dtype, dtype), dtype), dtype,
                         device, be)

    # -- autograd ----------------------------------------------------------------------------------
    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate d(self)/d(leaf) into every leaf's .grad (torch's signature). inputs=[...]
        limits that to the tensors listed (leaves or not; others' .grad stay as they are)."""
        backward([self], [gradient], retain_graph, create_graph, inputs)

    def register_hook(self, hook):
        """hook(grad) runs when the gradient with respect to this tensor has been computed (for
        a leaf: its total of the pass, before it is accumulated into .grad); it may return a
        tensor to use instead. Returns a handle whose .remove() unregisters it."""
        if not self.requires_grad:
            raise GradientError("cannot register a hook on a tensor that does not require grad; "
                                "call .requires_grad_() on the leaf first")
        if not callable(hook):
            raise NumrError(f"hook must be callable, got {type(hook).__name__}")
        if self.grad_fn is None:
            if self.__dict__.get("_grad_hooks") is None:
                self._grad_hooks = {}
            return _HookHandle(self._grad_hooks, hook)
        node = self.grad_fn
        if node.hooks is None:
            node.hooks = {}
        return _HookHandle(node.hooks.setdefault(self._out_index, {}), hook)

    def retain_grad(self):
        """Keep the gradient of this non-leaf tensor in .grad after backward (accumulating, as a
        leaf's); a no-op on leaves."""
        if self.grad_fn is None:
            if not self.requires_grad:
                raise GradientError("can't retain_grad on a tensor that does not require grad")
            return
        if self.retains_grad:
            return
        node = self.grad_fn
        if node.retained is None:
            node.retained = {}
        node.retained.setdefault(self._out_index, []).append(self)
        self._retains_grad = True

    @property
    def retains_grad(self):
        return self.grad_fn is not None and self.__dict__.get("_retains_grad", False)

    def register_post_accumulate_grad_hook(self, hook):
        """hook(tensor) runs each time backward has accumulated this leaf's .grad (when that
        gradient is final for the pass). Returns a handle whose .remove() unregisters it."""
        if self.grad_fn is not None:
            raise GradientError("post-accumulate-grad hooks can only be registered on leaf tensors")
        if not callable(hook):
            raise NumrError(f"hook must be callable, got {type(hook).__name__}")
        if self._hooks is None:
            self._hooks = {}
        return _HookHandle(self._hooks, hook)

    def _post_accumulate_hooks(self):
        return list(self._hooks.values()) if self._hooks else ()

    def zero_grad(self):
        self.grad = None

    __hash__ = object.__hash__


_OWN_FIELDS = frozenset(("_data", "dtype", "device", "_backend", "_requires_grad", "_grad",
                         "grad_fn", "_out_index", "_hooks", "_grad_hooks", "_retains_grad",
                         "_version", "_data_of"))


def _rebuild(raw, shape, dtype_name, device, requires_grad, grad=None, extra=None):
    """Unpickle / deepcopy: a fresh leaf with the same values, dtype, device and requires_grad."""
    dtype = dt.get_dtype(dtype_name)
    be = get_backend(device)
    t = Tensor._wrap(be.from_host(host.HostArray(raw, shape, dtype), dtype), dtype, device, be)
    if extra:
        t.__dict__.update(extra)
    t._requires_grad = bool(requires_grad)
    if grad is not None:
        t._grad = grad
    return t


class Size(tuple):
    """torch.Size: the shape as a tuple (t.size()); numel() is the product of its entries."""

    def numel(self):
        return sh.prod(self)

    def __repr__(self):
        return f"nr.Size({list(self)})"


class _SizeCount(int):
    """t.size: the element count, an int; t.size() / t.size(dim) as torch's method."""

    def __new__(cls, shape):
        self = super().__new__(cls, sh.prod(shape))
        self._shape = tuple(shape)
        return self

    def __reduce__(self):
        return (int, (int(self),))

    def __call__(self, dim=None):
        if dim is None:
            return Size(self._shape)
        if not self._shape:
            raise IndexOutOfRangeError(f"size({dim}): a 0-d tensor has no dimensions; use size()")
        return self._shape[sh.normalize_axis(dim, len(self._shape))]


class _HookHandle:
    """What register_*hook returns: .remove() unregisters the hook. Keys come from a counter
    (an id() of a handle the caller dropped could be reused by the next one)."""
    _next = itertools.count()

    def __init__(self, hooks, hook):
        self._hooks, self._key = hooks, next(_HookHandle._next)
        hooks[self._key] = hook

    def remove(self):
        self._hooks.pop(self._key, None)
