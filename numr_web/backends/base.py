"""The backend primitive interface, and the capabilities a backend declares.

A backend owns device memory and runs primitives on *handles* (its own array type). It never sees
autograd; Python scalars arrive as plain numbers; the ops layer has validated shapes, dtypes and
devices before a primitive is called, so backends only check hardware limits.

Every handle exposes `.shape` (a tuple of ints). Dtypes are numr_web.dtypes.DType objects.
Primitives return new handles (views where noted); inputs are never modified.
Elementwise op names come from the op vocabulary (numr_web.vocab.registry.family_names: "unary",
"binary", "compare"); activation names from numr_web.vocab.activations.ACT.
"""
from __future__ import annotations

import math
import time

from ..errors import ShapeError
from ..host import HostArray, buffer_values
from .checks import Check, PendingChecks, call_site, failed_checks, stack_flags


class Backend:
    """Abstract backend. `device` is the public device name ("cpu", "cuda", "webgpu")."""

    device = "?"
    # -- capabilities (declared, never sniffed by the layers above) --------------------------------
    can_block = True              # synchronous readback (t.item(), t.tolist()) works
    dlpack_device_types = ()      # DLPack device types this backend imports (1 CPU, 2 CUDA)
    can_capture = False           # nr.capture records steps (`recording`: cuda, webgpu); else it
                                  # just calls the step
    capturing = False             # a recording that cannot contain a recorded step is open (cuda:
                                  # a step captured inside it runs its ops into the outer graph)
    can_argsort = False           # argsort(h, axis, descending): a stable sort primitive; else
                                  # the ops layer sorts with a bitonic network of other ops
    adam_takes_found = False      # adam_update(..., found=flag): skips a step on the device
    update_list = (1, 0)          # (tensors, elements) the optimizers hand *_update_many at once
                                  # at most (a list's new values exist beside the old ones until
                                  # stored; one tensor always fits)
    fused_cells = False           # lstm_cell / gru_cell (+ _backward): the recurrent cells'
                                  # pointwise work as one primitive each way; else nn composes it

    @classmethod
    def probe(cls):
        """Return (True, description) if usable here, else (False, reason). Must never raise."""
        raise NotImplementedError

    def info(self) -> dict:
        """Details for `numr-web info` (library versions, adapter name, limits...)."""
        return {}

    def adopts(self, obj) -> bool:
        """Whether `obj` (a foreign array) can become a handle of this backend as it is."""
        return False

    # -- checks on values, without a readback (numr_web/backends/checks.py) ---------------------------
    def _pending(self):
        pending = self.__dict__.get("_checks")
        if pending is None:
            pending = self.__dict__["_checks"] = PendingChecks(
                f"numr_checks_{type(self).__name__}_{id(self)}")
        return pending

    def check_later(self, flag, op, text, error=ShapeError):
        """Raise error(text), naming `op` and the user's call, if the 0-d bool handle `flag` is
        true: at this thread's / task's next readback (a GPU backend must not wait for the device
        here), like CUDA's device-side asserts. flag None: nothing to check."""
        if flag is not None:
            self._pending().queue(self, Check(op, text, error, call_site()), flag)

    def take_checks(self):
        """Remove and return this task's pending checks (step capture sets them aside)."""
        return self._pending().take()

    def put_checks(self, checks):
        """Make `checks` (from take_checks) this task's pending checks again."""
        self._pending().set(checks)

    def requeue_checks(self, checks):
        """Queue copies of the flags of `checks` (from take_checks: a captured step's, which each
        replay rewrites), naming the calls recorded with them."""
        for check, flag in checks.items():
            self._pending().queue(self, check, self.copy(flag))

    def raise_failed_checks(self):
        """Called by every synchronous readback before it reads: one readback of the flags."""
        checks = self.take_checks()
        if checks:
            flags = stack_flags(self, list(checks.values()))
            _raise_failed(failed_checks(checks, self.to_bytes_unchecked(flags)))

    async def raise_failed_checks_async(self):
        checks = self.take_checks()
        if checks:
            flags = stack_flags(self, list(checks.values()))
            _raise_failed(failed_checks(checks, await self.read_bytes_unchecked_async(flags)))

    # -- timing (nr.profile) ----------------------------------------------------------------------
    def profile_timer(self):
        """A device timer for nr.profile: `mark()` returns a token placed in the device's work
        queue now, `elapsed_ms(m0, m1)` the device time between two marks, valid after `finish()`
        (which waits for the device), `extra_rows()` device work no single op owns, as (name, ms)
        pairs. The default times on the host: right for a device whose ops run synchronously."""
        return HostTimer()

    def memory_block(self, h):
        """(identity, bytes) of the allocation handle h's values live in (nr.profile's bytes):
        its `storage` (webgpu), else the root of its `base` chain (numpy, CuPy)."""
        st = getattr(h, "storage", None)
        if st is not None:
            return id(st), st.nbytes
        while getattr(h, "base", None) is not None:
            h = h.base
        return id(h), int(getattr(h, "nbytes", 0))

    def to_bytes_unchecked(self, h) -> bytes:
        return self.to_bytes(h)

    async def read_bytes_unchecked_async(self, h) -> bytes:
        return await self.read_bytes_async(h)

    def check_dtype(self, dtype):
        """Raise DTypeError (saying what to use instead) if this device cannot hold `dtype`."""

    def max_elements(self, dtype) -> int:
        """The largest tensor of `dtype` this device can allocate (checked before allocating)."""
        return 2 ** 62

    # -- memory ----------------------------------------------------------------------------------
    def from_host(self, host, dtype):
        """Upload. `host` is a numpy.ndarray (only where numpy exists), an adopted array, or a
        HostArray; its values are already of `dtype` (numr_web.host converts)."""
        raise NotImplementedError

    def from_dlpack(self, obj):
        raise NotImplementedError

    def transfer_from(self, src, h):
        """A handle of this backend with the values of `src`'s handle h (through the host)."""
        h = src.contiguous(h)
        dtype = src.dtype_of(h)
        return self.from_host(HostArray(src.to_bytes(h), h.shape, dtype), dtype)

    def to_bytes(self, h) -> bytes:
        """Download a handle as C-contiguous raw bytes of its dtype (synchronous)."""
        raise NotImplementedError

    def to_numpy(self, h):
        import numpy as np
        dt = self.dtype_of(h)
        np_dt = {"bool": np.bool_, "float16": np.float16}.get(dt.name, dt.name)
        if dt.name == "bfloat16":          # numpy's bfloat16 is ml_dtypes'; else its bits as uint16
            np_dt = _bfloat16_or_bits(np)
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

    def is_view(self, h) -> bool:
        """Whether h may share memory with another handle (a reshape, slice, expand...)."""
        raise NotImplementedError

    def strides(self, h):
        """h's element strides (torch's x.stride(): 0 along a broadcast dim, permuted by a
        transpose, scaled by a slice step)."""
        raise NotImplementedError

    def copy(self, h):
        """A new dense handle with h's values."""
        raise NotImplementedError

    def assign(self, dst, src):
        """dst's elements = src's, on the device (capture.py carries a recorded step's state)."""
        raise NotImplementedError

    def recording(self):
        """Where can_capture: an object with begin() / end() -> graph with launch() / abort() and
        `pool`, that records the device work between begin and end (capture.py)."""
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
        number. Output has the broadcast shape (bool for "compare" ops)."""
        raise NotImplementedError
    def where(self, cond, a, b):
        """cond: bool handle; a, b: handles (or numbers) of one dtype; broadcasting."""
        raise NotImplementedError
    def activation(self, name, z, fn="fwd"):
        """fn(z) elementwise for one ACT row: fn in "fwd" (the activation), "dz" (act'), "d2"
        (act''), "ds" (d/ds of act' written in the saved output; "y" rows)."""
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
        """labels: int32 handle of shape S; out: S + (n,), rows of labels outside [0, n) zero."""
        raise NotImplementedError

    # -- linear algebra ----------------------------------------------------------------------------
    def matmul(self, a, b):
        """a (..., M, K), b (..., K, N), batch dims broadcast; both at least 2-D."""
        raise NotImplementedError
    def gemm_bias_act(self, a, b, bias, act):
        """Fused act(a @ b + bias). a (..., M, K); b (K, N) or (..., K, N); bias (N,) or None.
        Returns (y, z): z is the pre-activation when ACT[act].saves == "z", else None."""
        raise NotImplementedError
    def act_backward(self, act, dy, s, y=None, bias_grad=False):
        """dz = dy * act'(.) in one pass from the saved tensor s (y or z as ACT[act].saves says;
        y may be given as a hint besides z). Returns (dz, dbias): dbias is dz summed over all
        but the last axis when bias_grad, else None."""
        raise NotImplementedError

    # -- indexing ----------------------------------------------------------------------------------
    def gather(self, h, axis, index):
        """out[..., i, ...] = h[..., index[..., i, ...], ...] along `axis` (torch.gather): index is
        int32 of h's ndim (values checked by the ops layer), its other dims at most h's."""
        raise NotImplementedError
    def scatter_add(self, shape, axis, index, src):
        """Zeros of `shape` with src added at `index` along `axis` (the adjoint of gather),
        deterministically (a fixed summation order, no float atomics)."""
        raise NotImplementedError

    # -- normalization, attention, convolution -----------------------------------------------------
    def layer_norm(self, x, weight, bias, k, eps, rms):
        """Normalise x over its last k dims (flattened to one row per leading index):
        (x - mean) * rstd * weight + bias, or x * rstd * weight for RMSNorm (rms=True; no mean).
        weight/bias: handles of the normalised shape, or None. Returns (y, mean or None, rstd)
        with mean/rstd of x's leading shape (the backward reuses them)."""
        raise NotImplementedError
    def layer_norm_backward(self, dy, x, weight, mean, rstd, k, rms):
        """(dx, dweight, dbias) in one pass over dy and x (dweight/dbias None without weight)."""
        raise NotImplementedError
    def cross_entropy(self, x, labels, ignore_index, smoothing):
        """Softmax cross-entropy per row of logits x (R, C), dense, with int32 labels (R,) (in
        [0, C) or ignore_index: the ops layer checks): with m = max_c x_c, e_c = exp(x_c - m),
        S = sum_c e_c, loss = log S - (1 - s)(x_label - m) - (s / C) sum_c (x_c - m) (s: label
        smoothing), 0 where the label is ignore_index. Returns (loss (R,) of x's dtype, stats
        (R, 3): m, S and the others' sum S - e_label, added without it), in one pass."""
        raise NotImplementedError
    def cross_entropy_backward(self, x, labels, stats, g, ignore_index, smoothing):
        """dx (R, C) = g_r (p_c - (1 - s) [c == label] - s / C), p_c = e_c / S, 0 in ignored
        rows; at the label p - 1 = -(S - e_label) / S from the stats, free of cancellation where
        p is near 1. g (R,) may be a broadcast view (a mean's gradient)."""
        raise NotImplementedError
    def attention(self, q, k, v, mask, causal, scale):
        """softmax(q @ k^T * scale + mask) @ v over the last two dims, batch dims alike.
        mask: None, a bool handle (True: attend) or a float handle (added), broadcastable to
        (..., Tq, Tk); causal: mask out k positions after the q position. Returns (out, lse): the
        log-sum-exp of each score row, which the backward uses to recompute the probabilities."""
        raise NotImplementedError
    def attention_backward(self, do, q, k, v, out, lse, mask, causal, scale):
        """(dq, dk, dv)."""
        raise NotImplementedError
    def adam_update(self, p, g, m, v, decay, factor, w, b2, eps, lr, b1, step):
        """(p, m, v) after one Adam / AdamW step in one pass, or None where the backend has no
        fused form (the optimizer then composes it from ops). m, v: None on the first step;
        decay: None, "l2" (g += p * factor) or "decoupled" (p * factor); w = 1 - beta1; step:
        the step count t, a number or (a count kept on the device) a 0-d float handle; the
        step size lr / (1 - beta1^t) and sqrt(1 - beta2^t) come from it. The arithmetic is the
        composed form's (numr_web/nn/optim/optimizer.py, Adam._update), operation for operation
        (with t on the device the bias corrections are computed in float32 in the kernel).
        A backend with `adam_takes_found` also takes found=None or a 0-d float handle,
        GradScaler's flag: where it is not 0 the outputs are the inputs (m, v zeros on the first
        step), the skip happening on the device."""
        return None
    def adam_update_many(self, items, decay, factor, w, b2, eps, lr, b1, step, found=None):
        """adam_update of many parameters of one group in one pass (cuda: one kernel a list of
        tensors): items [(p, g, m, v)], m and v None on a parameter's first step; step one
        count for all, or (capturable) a list of 0-d float handles, one per item. Returns
        [(p, m, v) or None], None for an item the optimizer composes. Here: adam_update of
        each."""
        skip = {} if found is None else {"found": found}
        return [self.adam_update(p, g, m, v, decay, factor, w, b2, eps, lr, b1,
                                 step if isinstance(step, (int, float)) else step[i], **skip)
                for i, (p, g, m, v) in enumerate(items)]
    def sgd_update_many(self, items, weight_decay, momentum, dampening, nesterov, maximize, lr):
        """sgd_update of many parameters in one pass: items [(p, g, buf)]; returns [(p, buf) or
        None], None for an item the optimizer composes. Here: sgd_update of each."""
        return [self.sgd_update(p, g, buf, weight_decay, momentum, dampening, nesterov, maximize,
                                lr) for p, g, buf in items]
    def sgd_update(self, p, g, buf, weight_decay, momentum, dampening, nesterov, maximize, lr):
        """(p, buf) after one SGD step in one pass, or None where the backend has no fused form
        (the optimizer then composes it from ops). buf: the momentum buffer, None on the first
        step (it starts as the decayed gradient); the buf returned is None without momentum.
        The arithmetic is the composed form's (numr_web/nn/optim/optimizer.py, SGD._update),
        operation for operation, the hyperparameters rounded to p's dtype as numpy rounds a
        Python number."""
        return None

    def im2col(self, x, kernel, stride, padding, dilation, pad_value=0.0, cn=False):
        """x (N, C, H, W) -> columns (N, C * kh * kw, OH * OW) (torch's unfold), or with cn
        (C * kh * kw, N * OH * OW); padding reads pad_value (0 for convolution)."""
        raise NotImplementedError
    def col2im(self, cols, x_shape, kernel, stride, padding, dilation, cn=False):
        """The adjoint of im2col: columns summed back into an (N, C, H, W) tensor (torch's fold)."""
        raise NotImplementedError
    def conv2d(self, x, w, bias, stride, padding, dilation, act):
        """act(conv2d(x, w) + bias), NCHW, groups 1 -> (y, s): s what the activation's backward
        reads (y or the pre-activation, as ACT[act].saves says; None for "none")."""
        raise NotImplementedError
    def conv2d_backward(self, dy, x, w, s, act, stride, padding, dilation, need_dx, need_dw,
                        need_db):
        """(dx, dw, dbias), each None unless needed."""
        raise NotImplementedError
    def batch_norm(self, x, weight, bias, running_mean, running_var, momentum, eps, training, act):
        """x (N, C, ...) -> (y, s, mean, rstd, new running mean, new running var): per-channel
        statistics over all dims but 1 (training: the batch's, biased variance; else the
        running ones), y = act((x - mean) * rstd * weight + bias), s as conv2d's; the running
        statistics updated (momentum a number or a 0-d handle; unbiased variance) when training
        with them given, else None."""
        raise NotImplementedError
    def batch_norm_backward(self, dy, x, weight, mean, rstd, s, act, training, need_dw, need_db):
        """(dx, dweight or None, dbias or None), from batch_norm's saved mean, rstd and s."""
        raise NotImplementedError
    def max_pool2d(self, x, kernel, stride, padding, dilation, out_hw):
        """(y, index): each window's maximum and the flat index h * W + w of the element taken
        (int32; torch's choice: the first maximum, the last NaN)."""
        raise NotImplementedError
    def max_pool2d_backward(self, dy, index, x_shape, kernel, stride, padding, dilation):
        """dx: each element's gradient, the sum of dy over the windows whose index it is."""
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
    def joined(self, hs, axis):
        """hs concatenated along axis as a view of their memory, where they lie side by side in
        one buffer (the gradients of a split's pieces written in place: split's backward); None
        where they do not or the backend does not look (concat copies)."""
        return None
    def contiguous(self, h):
        """A handle whose memory is dense row-major (no-op if it already is)."""
        return h


def adam_scalars(lr, b1, b2, step):
    """(step size, sqrt(1 - beta2^t)) of a step count known on the host, in double precision as
    the composed update computes them."""
    return lr / (1 - b1 ** step), math.sqrt(1 - b2 ** step)


def _raise_failed(failed):
    if failed:
        raise failed[0].deferred(failed[1:])


class HostTimer:
    """Wall-clock marks: the device time of a synchronous device (cpu) is its host time."""

    @staticmethod
    def mark():
        return time.perf_counter_ns()

    @staticmethod
    def elapsed_ms(m0, m1):
        return (m1 - m0) / 1e6

    def finish(self):
        pass

    @staticmethod
    def extra_rows():
        return ()


def _bfloat16_or_bits(np):
    try:
        import ml_dtypes
        return ml_dtypes.bfloat16
    except ImportError:
        return np.uint16


def _bytes_to_list(data, dtype, shape):
    return nest(buffer_values(data, dtype), shape)


def nest(flat, shape):
    """Flat list -> nested lists of `shape` (shape () gives the scalar)."""
    if not shape:
        return flat[0]
    if 0 in shape:                     # no values: build the empty nesting from the shape
        def empty(dims):
            return [] if dims[0] == 0 else [empty(dims[1:]) for _ in range(dims[0])]
        return empty(shape)
    for d in reversed(shape[1:]):
        flat = [flat[i:i + d] for i in range(0, len(flat), d)]
    return flat
