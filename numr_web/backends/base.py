"""The backend primitive interface.

A backend owns device memory and runs primitives on *handles* (its own array type). It never sees
autograd, Python scalars are passed as plain numbers, and the engine has already validated shapes and
dtypes (see numr_web.ops) before a primitive is called, so backends only check hardware limits.

Every handle exposes `.shape` (a tuple of ints). Dtypes are numr_web.dtypes.DType objects.
Primitives return new handles; inputs are never modified.

Names of the elementwise operations:
  UNARY   neg abs exp log sqrt sin cos sign
  BINARY  add sub mul div pow maximum minimum           (out dtype = input dtype)
  COMPARE eq ne lt le gt ge                             (out dtype = bool)
  REDUCE  sum mean max min
  ACTIVATIONS: see numr_web.ops.activations.ACT (none relu sigmoid tanh silu gelu gelu_tanh)
"""
from __future__ import annotations

import array

UNARY = ("neg", "abs", "exp", "log", "sqrt", "sin", "cos", "sign")
BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "minimum")
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
REDUCE = ("sum", "mean", "max", "min")


class HostArray:
    """Host data without numpy: a flat buffer (array.array / memoryview / bytes) plus a shape."""

    __slots__ = ("buf", "shape", "dtype")

    def __init__(self, buf, shape, dtype):
        self.buf, self.shape, self.dtype = buf, tuple(shape), dtype


class Backend:
    """Abstract backend. `device` is the public device name ("cpu", "cuda", "webgpu")."""

    device = "?"

    # -- availability --------------------------------------------------------------------------
    @classmethod
    def probe(cls):
        """Return (True, description) if usable here, else (False, reason). Must never raise."""
        raise NotImplementedError

    def info(self) -> dict:
        """Details for `numr-web info` (library versions, adapter name, limits...)."""
        return {}

    # -- memory ----------------------------------------------------------------------------------
    def from_host(self, host, dtype):
        """Upload. `host` is a numpy.ndarray (only where numpy exists) or a HostArray; its values
        are already of `dtype` (the engine converts)."""
        raise NotImplementedError

    def to_bytes(self, h) -> bytes:
        """Download a handle as C-contiguous raw bytes of its dtype (synchronous)."""
        raise NotImplementedError

    def to_numpy(self, h):
        import numpy as np
        dt = self.dtype_of(h)
        np_dt = {"bool": np.bool_, "float16": np.float16}.get(dt.name, dt.name)
        return np.frombuffer(self.to_bytes(h), dtype=np_dt).reshape(h.shape).copy()

    def to_list(self, h):
        return _bytes_to_list(self.to_bytes(h), self.dtype_of(h), h.shape)

    async def read_bytes_async(self, h) -> bytes:
        """to_bytes that awaits the device instead of blocking (the browser's readback)."""
        return self.to_bytes(h)

    async def to_list_async(self, h):
        return _bytes_to_list(await self.read_bytes_async(h), self.dtype_of(h), h.shape)

    def dtype_of(self, h):
        """The DType of a handle."""
        raise NotImplementedError

    # -- creation ----------------------------------------------------------------------------------
    def full(self, shape, value, dtype): raise NotImplementedError
    def arange(self, start, stop, step, dtype): raise NotImplementedError
    def random(self, shape, dtype, seed, kind):
        """kind: "uniform" in [0, 1) or "normal" (mean 0, std 1). seed: int or None."""
        raise NotImplementedError

    # -- elementwise ---------------------------------------------------------------------------------
    def astype(self, h, dtype): raise NotImplementedError
    def unary(self, op, h): raise NotImplementedError
    def binary(self, op, a, b):
        """a, b: handles of one dtype with broadcast-compatible shapes, or one of them a Python
        number. Output has the broadcast shape."""
        raise NotImplementedError
    def where(self, cond, a, b):
        """cond: bool handle; a, b: handles (or numbers) of one dtype; broadcasting."""
        raise NotImplementedError
    def activation(self, name, z, order=0):
        """act^(order)(z) elementwise for order 0 (the activation), 1 and 2 (its derivatives)."""
        raise NotImplementedError

    # -- reductions ----------------------------------------------------------------------------------
    def reduce(self, op, h, axes, keepdims):
        """axes: a non-empty tuple of distinct non-negative ints (all axes for a full reduction)."""
        raise NotImplementedError
    def argmax(self, h, axis, keepdims):
        """axis: int or None (flattened). Output int32; first index of the maximum."""
        raise NotImplementedError
    def softmax(self, h, axis, log):
        """Numerically stable softmax / log_softmax along one non-negative axis."""
        raise NotImplementedError
    def one_hot(self, labels, n, dtype):
        """labels: int32 handle of shape S (values already checked in [0, n)); out: S + (n,)."""
        raise NotImplementedError

    # -- linear algebra ----------------------------------------------------------------------------
    def matmul(self, a, b):
        """a (..., M, K), b (..., K, N), batch dims broadcast; both at least 2-D."""
        raise NotImplementedError
    def gemm_bias_act(self, a, b, bias, act):
        """Fused act(a @ b + bias). a (..., M, K); b (K, N) or (..., K, N); bias (N,) or None.
        Returns (y, z): z is the pre-activation when ACT[act].grad_from == "z", else None
        (the derivative is then computed from y)."""
        raise NotImplementedError
    def act_backward(self, act, dy, y, z, with_bias_grad):
        """dz = dy * act'(.) in one pass. y: the forward output; z: the pre-activation when
        ACT[act].grad_from == "z" (else None). Derivatives use y where the table says so
        (tanh' = 1 - y²), and gelu reuses Φ(z) = y / z instead of recomputing erf.
        Returns (dz, dbias) where dbias = dz summed over all but the last axis when with_bias_grad,
        else None."""
        raise NotImplementedError

    # -- shapes and copies -------------------------------------------------------------------------
    def reshape(self, h, shape): raise NotImplementedError
    def permute(self, h, perm): raise NotImplementedError
    def expand(self, h, shape):
        """Broadcast to `shape` (same rank or more; numpy rules)."""
        raise NotImplementedError
    def slice(self, h, index):
        """index: tuple with one entry per dim, each an int (dim dropped) or a (start, stop, step)
        triple already normalised (step > 0, 0 <= start, stop <= dim)."""
        raise NotImplementedError
    def unslice(self, g, shape, index):
        """Zeros of `shape` with `g` written at `index` (the adjoint of slice)."""
        raise NotImplementedError
    def concat(self, hs, axis): raise NotImplementedError
    def contiguous(self, h):
        """A handle whose memory is dense row-major (no-op if it already is)."""
        return h


def _bytes_to_list(data, dtype, shape):
    return nest(memoryview(data).cast("B").cast(dtype.typecode).tolist(), shape)


def nest(flat, shape):
    """Flat list -> nested lists of `shape` (shape () gives the scalar)."""
    if not shape:
        return flat[0]
    for d in reversed(shape[1:]):
        flat = [flat[i:i + d] for i in range(0, len(flat), d)]
    return flat
