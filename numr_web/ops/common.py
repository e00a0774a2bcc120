"""Helpers every op family uses: argument checks and the broadcast-gradient reduction.

VJPs are written with tensor methods and operators (g.sum(), g.reshape(), a * b), so a family
module never imports another: the methods resolve at run time, once ops/tensor_methods.py has made
the families' method classes Tensor's bases.
"""
from __future__ import annotations

import sys

from .. import dtypes as dt
from .. import shapes as sh
from ..errors import BackendLimitError, DeviceError, DTypeError
from ..tensor import Tensor


def check_same_device(*ts):
    dev = ts[0].device
    for t in ts[1:]:
        if t.device != dev:
            raise DeviceError(f"tensors on different devices ({dev!r} and {t.device!r}) can not be "
                              f"combined; move one with .to({dev!r}) or .to({t.device!r})")


def as_tensor(x, like, dtype=None):
    """x as a tensor on like's device: tensors pass, host data (lists, numpy arrays) is uploaded;
    a Python number given a float dtype is filled on the device (no host copy: on cuda an upload
    waits for the GPU's queue)."""
    if isinstance(x, Tensor):
        return x
    if dtype is not None and type(x) in dt.PY_NUMBERS:
        d = dt.get_dtype(dtype)
        if d.kind == "f":      # float16 / bfloat16: rounded once here, as an upload rounds it
            v = dt.round_to(float(x), d)
            be = like._backend
            return like._wrap(be.full((), v, d), d, like.device, be)
    return Tensor._from_host(x, dt.get_dtype(dtype) if dtype is not None else None, like.device)


def check_output_size(like, shape, dtype, what):
    """A result of `shape` must fit the device before the backend allocates it (numpy's
    MemoryError, a CUDA out-of-memory, or a WebGPU buffer past its limit otherwise)."""
    n = sh.prod(shape)
    limit = like._backend.max_elements(dtype)
    if n > limit:
        raise BackendLimitError(f"{what}: the result of shape {tuple(shape)} has {n} elements, "
                                f"more than the {like.device} device can hold ({limit})")


def tensor_first(fn, name):
    """fn with its first argument checked to be a Tensor (a list of Tensors for *many*): the
    module-level functions (nr.sum(x), nr.concat([...])) say what they got instead of failing
    deep inside. The Tensor methods need no check."""
    many = name in ("cat", "concat", "stack")

    def checked(*args, **kwargs):
        x = args[0] if args else next(iter(kwargs.values()), None)
        if many:
            if not isinstance(x, (list, tuple)) or not all(isinstance(t, Tensor) for t in x):
                raise DTypeError(f"{name} expects a list or tuple of Tensors, got "
                                 f"{type(x).__name__}")
        elif not isinstance(x, Tensor):
            raise DTypeError(f"{name} expects a Tensor as its first argument, got "
                             f"{type(x).__name__}; make one with nr.tensor(...)")
        return fn(*args, **kwargs)
    checked.__name__, checked.__qualname__, checked.__doc__ = fn.__name__, fn.__qualname__, \
        fn.__doc__
    checked.__wrapped__ = fn
    return checked


def need_tensor(x, what):
    """x, where it is a Tensor; else the DTypeError every op gives for a non-tensor argument."""
    if not isinstance(x, Tensor):
        raise DTypeError(f"{what} expects a Tensor, got {type(x).__name__}; make one with "
                         "nr.tensor(...)")
    return x


def sum_to_shape(g, shape):
    """Sum a broadcast gradient back to an operand's shape."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, d in enumerate(shape)
                                      if d == 1 and g.shape[i + lead] != 1)
    if axes:
        g = g.sum(axes, keepdims=True)
    return g.reshape(shape) if g.shape != shape else g


def method_class(name, **methods):
    """A family's Tensor methods (t.sum(), t + u) as a class of its own: ops/tensor_methods.py
    makes the families' classes Tensor's bases, so each method is defined once, where its op is,
    and the tensor layer imports no op."""
    return type(name, (), {"__module__": sys._getframe(1).f_globals["__name__"],
                           "__doc__": f"Tensor methods of {name[:-7]}.", **methods})
