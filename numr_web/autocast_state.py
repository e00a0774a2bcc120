"""nr.autocast: mixed precision as torch.autocast, op by op.

Inside `with nr.autocast("cuda"):` (or a function decorated with it) each op of the tables below
casts its floating-point tensor arguments on that device before it runs:

  * LOWER ops (GEMMs, convolutions, attention) run in the autocast dtype: float16 (the default
    on every device; torch's cpu default is bfloat16), or bfloat16 where the device holds it
    (the cpu; elsewhere DTypeError when the region opens);
  * FP32 ops (softmax, log_softmax, the losses, layer / RMS norm, exp / log / pow, sum, prod,
    cumulative sums) run in float32 whatever their inputs;
  * PROMOTE ops take the widest floating dtype of their arguments;
  * every other op runs in its inputs' dtype, and mixed inputs promote as without autocast (a
    float16 activation plus a float32 residual gives float32).

The tables are torch's CUDA lists (aten/src/ATen/autocast_mode.cpp), used on every device, so a
model gives the same output dtypes on cpu, cuda and webgpu. float64 tensors are never lowered.
Casts are differentiable: the gradient of a float32 leaf used by a float16 GEMM arrives in float32.
A float32 leaf that requires grad (a parameter) is cast once per autocast region and the float16
copy reused by later ops (torch's cast cache; `cache_enabled=False` turns it off), as long as the
parameter is not rebound or written in between.

The state lives in a context variable: each thread and each asyncio task has its own, and a
backward pass runs with autocast off (its ops take the dtypes the forward recorded), as torch's.
"""
from __future__ import annotations

import contextvars
import functools
import inspect

from . import dtypes as dt
from .errors import DeviceError, DTypeError
from .gradmode import is_grad_enabled

LOWER, FP32, PROMOTE = "lower", "fp32", "promote"

# torch's CUDA lists, restricted to the ops numr has (mean is in none of them: it keeps its
# input's dtype; numr accumulates float16 means in float32 and rounds once)
POLICY = dict.fromkeys((
    "matmul", "mm", "bmm", "mv", "addmm", "baddbmm", "einsum", "linear",
    "matmul_bias_activation", "conv2d", "conv2d_bias_activation", "prelu",
    "scaled_dot_product_attention"), LOWER)
POLICY.update(dict.fromkeys((
    "softmax", "log_softmax", "cross_entropy", "nll_loss", "mse_loss", "l1_loss",
    "smooth_l1_loss", "huber_loss", "kl_div", "binary_cross_entropy_with_logits",
    "layer_norm", "rms_norm", "group_norm",
    "exp", "expm1", "log", "log2", "log10", "log1p", "pow", "reciprocal", "rsqrt",
    "acos", "asin", "cosh", "sinh", "tan", "softplus",
    "sum", "prod", "cumsum", "cumprod", "logsumexp", "norm", "cosine_similarity"), FP32))
POLICY.update(dict.fromkeys(("dot", "tensordot", "atan2", "cross", "addcmul", "addcdiv",
                             "scatter_add", "index_add"), PROMOTE))

DEVICES = ("cpu", "cuda", "webgpu")
DEFAULT_DTYPE = {"cpu": "float16", "cuda": "float16", "webgpu": "float16"}   # (torch: cpu bfloat16)


class _State:
    """One autocast region's settings: the devices it lowers and to which dtype, and the cast
    cache shared by the regions nested in the outermost one."""
    __slots__ = ("dtypes", "cache")

    def __init__(self, dtypes, cache):
        self.dtypes, self.cache = dtypes, cache


_STATE = contextvars.ContextVar("numr_autocast", default=None)
active = _STATE.get         # the ops' fast test: None outside every autocast region


def _check_dtype(device, dtype):
    name = dtype if isinstance(dtype, str) else getattr(dtype, "name", None) or str(dtype)
    if name.startswith("torch."):                   # torch.float16 as a dtype object
        dtype = name = name[6:]
    d = dt.get_dtype(dtype)
    allowed = ["float16", "bfloat16"]
    if d.name not in allowed:
        raise DTypeError(f"autocast({device!r}): dtype must be one of {allowed} (the lower "
                         f"precision the listed ops run in), got {d.name}")
    return d


class autocast:
    """torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None): a context
    manager and a decorator (of functions and of coroutine functions)."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str) or device_type not in DEVICES:
            raise DeviceError(f"autocast: device_type must be one of {list(DEVICES)} (a device "
                              f"type, without an index), got {device_type!r}")
        if not isinstance(enabled, bool):
            raise DTypeError(f"autocast: enabled must be True or False, got {enabled!r}")
        self.device = device_type
        self.fast_dtype = _check_dtype(device_type, DEFAULT_DTYPE[device_type] if dtype is None
                                       else dtype)
        self._enabled = enabled
        self._cache_enabled = True if cache_enabled is None else bool(cache_enabled)
        self._tokens = []

    def _check_device(self):
        """The device can run the dtype: asked when a region opens (not when a decorator is
        made), so that naming a device does not start it."""
        from .backends import get_backend
        if self.fast_dtype is dt.bfloat16:
            try:
                get_backend(self.device).check_dtype(dt.bfloat16)
            except DTypeError as e:
                raise DTypeError(f"autocast({self.device!r}, dtype=bfloat16): {e}; use "
                                 "dtype=float16 (with nr.amp.GradScaler) there") from None
        if self.device == "webgpu" and self.fast_dtype is dt.float16:
            be = get_backend("webgpu")
            if not be.f16:
                raise DTypeError(
                    "autocast('webgpu', dtype=float16) needs the WebGPU feature 'shader-f16', "
                    f"which this adapter ({be.adapter.name}) lacks; run in float32 (no autocast "
                    "or enabled=False) on this adapter")

    def __enter__(self):
        old = _STATE.get()
        dtypes = dict(old.dtypes) if old is not None else {}
        if self._enabled:
            self._check_device()
            dtypes[self.device] = self.fast_dtype
        else:
            dtypes.pop(self.device, None)
        cache = None
        if self._cache_enabled:
            cache = old.cache if old is not None and old.cache is not None else {}
        self._tokens.append(_STATE.set(_State(dtypes, cache)))
        return self

    def __exit__(self, *exc):
        _STATE.reset(self._tokens.pop())       # the outermost exit drops the cast cache
        return False

    def __call__(self, fn):
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def run_async(*args, **kwargs):
                with self._copy():
                    return await fn(*args, **kwargs)
            return run_async

        @functools.wraps(fn)
        def run(*args, **kwargs):
            with self._copy():
                return fn(*args, **kwargs)
        return run

    def _copy(self):
        """A fresh instance per call of a decorated function (calls may nest or overlap)."""
        return autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled)

    def __repr__(self):
        return (f"autocast({self.device!r}, dtype={self.fast_dtype.name}, "
                f"enabled={self._enabled})")


def is_autocast_enabled(device_type="cuda"):
    """Whether an autocast region for device_type is open in this thread / task."""
    st = _STATE.get()
    return st is not None and device_type in st.dtypes


def get_autocast_dtype(device_type):
    """The dtype the open region lowers device_type's ops to, else that device's default."""
    st = _STATE.get()
    if st is not None and device_type in st.dtypes:
        return st.dtypes[device_type]
    if device_type not in DEVICES:
        raise DeviceError(f"unknown device type {device_type!r}; expected one of {list(DEVICES)}")
    return dt.get_dtype(DEFAULT_DTYPE[device_type])


class _Off:
    """Autocast switched off for a block (the backward pass), restored after it."""
    __slots__ = ("token",)

    def __enter__(self):
        self.token = _STATE.set(None) if _STATE.get() is not None else None

    def __exit__(self, *exc):
        if self.token is not None:
            _STATE.reset(self.token)
        return False


def disabled():
    return _Off()


# -- the casts the ops call -----------------------------------------------------------------------
def _is_tensor(x):
    return isinstance(getattr(x, "dtype", None), dt.DType) and hasattr(x, "_backend")


def cast(op, *args):
    """args with the floating tensors on an autocast device cast as op's policy says (the others
    unchanged); args itself when no region covers them. Callers test `active()` first."""
    st = _STATE.get()
    if st is None or not st.dtypes:
        return args
    device = next((a.device for a in args if _is_tensor(a)), None)
    low = st.dtypes.get(device)
    if low is None:
        return args
    policy = POLICY[op]
    if policy is LOWER:
        target = low
    elif policy is FP32:
        target = dt.float32
    else:
        target = None
        for a in args:
            if _is_tensor(a) and a.dtype.is_floating and a.device == device:
                target = a.dtype if target is None else dt.promote(target, a.dtype)
        if target is None:
            return args
    out = []
    for a in args:
        if _is_tensor(a) and a.dtype.is_floating and a.dtype is not target and \
                a.device == device and (policy is PROMOTE or a.dtype is not dt.float64):
            a = _cached(st.cache, a, target) if policy is LOWER else a.astype(target)
        out.append(a)
    return tuple(out)


def lowers(t):
    """Whether t is a floating tensor on a device an open autocast region covers."""
    st = _STATE.get()
    return st is not None and _is_tensor(t) and t.dtype.is_floating and t.device in st.dtypes


def _cached(cache, t, dtype):
    """t.astype(dtype), reused within the region for a leaf that requires grad (a parameter):
    keyed by the tensor, the dtype and the grad mode, valid while its storage and version are
    the ones it was cast from."""
    if cache is None or t.grad_fn is not None or not t.requires_grad:
        return t.astype(dtype)
    grad = is_grad_enabled()
    key = (id(t), dtype, grad)
    hit = cache.get(key)
    if hit is not None and hit[0] is t and hit[1] is t._data and hit[2] == t._version:
        return hit[3]
    out = t.astype(dtype)
    cache[key] = (t, t._data, t._version, out)
    return out
