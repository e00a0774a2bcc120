"""torch functions that are compositions of the vocabulary: no row, no kernel, their gradients
follow from the ops they are made of. Shape helpers (movedim, roll, tile, repeat, unbind, ...),
linear-algebra shorthands (mm, bmm, mv, dot, outer, addmm, trace, diag), amax/amin, norm,
var_mean/std_mean, diff. Arguments are checked here, before any device work.
"""
from __future__ import annotations

import math

from .. import dtypes as dt
from .. import shapes as sh
from ..creation import arange, full, zeros
from ..errors import DTypeError, IndexOutOfRangeError, ShapeError
from ..autocast_state import active as amp_active, cast as amp_cast, disabled as amp_disabled
from ..tensor import Tensor
from .common import method_class, need_tensor
from .elementwise import maximum, minimum, where
from .linalg import matmul
from .reductions import axis_args, reduce_op
from .shape_ops import concat, expand, permute, reshape, split, transpose



def _dims(d, name):
    """An int or a sequence of ints, as a tuple."""
    ds = (d,) if not isinstance(d, (tuple, list)) else tuple(d)
    return tuple(sh.as_int(v, f"{name} dim") for v in ds)


# -- shape --------------------------------------------------------------------------------------------
def movedim(x, source, destination):
    """The dims `source` moved to positions `destination`, the others in their order (torch)."""
    x = need_tensor(x, "movedim")
    src = [sh.normalize_axis(d, x.ndim) for d in _dims(source, "movedim")]
    dst = [sh.normalize_axis(d, x.ndim) for d in _dims(destination, "movedim")]
    if len(src) != len(dst):
        raise ShapeError(f"movedim: source {source} and destination {destination} must have "
                         "the same number of dims")
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ShapeError(f"movedim: repeated dim in source {source} or destination {destination}")
    rest = iter(d for d in range(x.ndim) if d not in src)
    where_to = dict(zip(dst, src))
    return permute(x, [where_to[i] if i in where_to else next(rest) for i in range(x.ndim)])


def unbind(x, dim=0):
    """The slices along dim, as a tuple of tensors without that dim."""
    x = need_tensor(x, "unbind")
    if x.ndim == 0:
        raise ShapeError("unbind of a 0-d tensor: there is no dim to split")
    d = sh.normalize_axis(dim, x.ndim)
    # one split: its backward is one concat, where n index ops would each scatter a gradient
    # of x's full size (n^2 work for a sequence taken apart step by step, as an RNN's is)
    shape = x.shape[:d] + x.shape[d + 1:]
    return tuple(reshape(p, shape) for p in split(x, 1, d))


def roll(x, shifts, dims=None):
    """Elements shifted along dims, wrapping around; dims=None rolls the flattened tensor."""
    x = need_tensor(x, "roll")
    if dims is None:
        if isinstance(shifts, (tuple, list)) and len(shifts) != 1:
            raise ShapeError(f"roll: without dims, shifts must be one int, got {shifts}")
        return roll(x.reshape(-1), shifts, 0).reshape(x.shape)
    shifts, dims = _dims(shifts, "roll shift"), _dims(dims, "roll")
    if x.ndim == 0 and dims:
        raise IndexOutOfRangeError(f"roll: dims {dims} given for a 0-d tensor, which has no dims "
                                   "(leave dims=None to roll it)")
    if len(shifts) != len(dims):
        raise ShapeError(f"roll: shifts {shifts} and dims {dims} must have the same length")
    out = x
    for s, d in zip(shifts, dims):
        d = sh.normalize_axis(d, x.ndim)
        n = x.shape[d]
        k = s % n if n else 0
        if k:
            out = concat([out.narrow(d, n - k, k), out.narrow(d, 0, n - k)], d)
    return out if out is not x else x.clone()     # a new tensor, as torch's, for any shift


def tile(x, dims):
    """x repeated `dims` times along each dim (leading ones added to the shorter of the two)."""
    x = need_tensor(x, "tile")
    reps = _dims(dims, "tile")
    if any(r < 0 for r in reps):
        raise ShapeError(f"tile: repetitions must be non-negative, got {reps}")
    n = max(len(reps), x.ndim)
    reps = (1,) * (n - len(reps)) + reps
    shape = (1,) * (n - x.ndim) + x.shape
    inter = [v for s in shape for v in (1, s)]                  # (1, s0, 1, s1, ...)
    big = [v for r, s in zip(reps, shape) for v in (r, s)]      # (r0, s0, r1, s1, ...)
    out = expand(reshape(x, inter), big)
    return reshape(out, [r * s for r, s in zip(reps, shape)])


def _repeat(x, *sizes):
    """Tensor.repeat(*sizes): torch's tile, with at least as many sizes as dims."""
    sizes = sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes
    if len(sizes) < x.ndim:
        raise ShapeError(f"repeat: {len(sizes)} repetitions for a tensor of {x.ndim} dims; give "
                         "at least one per dim")
    return tile(x, sizes)


def repeat_interleave(x, repeats, dim=None):
    """Each element repeated `repeats` (an int) times along dim (flattened when dim is None)."""
    x = need_tensor(x, "repeat_interleave")
    if isinstance(repeats, Tensor) or not isinstance(repeats, int) or isinstance(repeats, bool):
        raise DTypeError("repeat_interleave takes one int of repetitions here (per-element "
                         f"repetitions are not supported), got {type(repeats).__name__}")
    if repeats < 0:
        raise ShapeError(f"repeat_interleave: repeats must be non-negative, got {repeats}")
    if dim is None:
        x, dim = x.reshape(-1), 0
    d = sh.normalize_axis(dim, x.ndim)
    u = x.unsqueeze(d + 1)
    big = list(u.shape)
    big[d + 1] = repeats
    out_shape = list(x.shape)
    out_shape[d] *= repeats
    return expand(u, big).reshape(out_shape)


def _like(name, fn):
    def method(self, other):
        return fn(self, need_tensor(other, name).shape)
    method.__name__ = name
    return method


# -- linear algebra -----------------------------------------------------------------------------------
def _need(t, ndim, name, what):
    if need_tensor(t, name).ndim != ndim:
        raise ShapeError(f"{name}: {what} must be {ndim}-D, got shape {t.shape}")


def mm(input, mat2):  # noqa: A002 (torch's names)
    a, b = input, mat2
    if amp_active() is not None:
        a, b = amp_cast('mm', a, b)
    _need(a, 2, "mm", "input")
    _need(b, 2, "mm", "mat2")
    return matmul(a, b)


def bmm(input, mat2):  # noqa: A002
    a, b = input, mat2
    if amp_active() is not None:
        a, b = amp_cast('bmm', a, b)
    _need(a, 3, "bmm", "input")
    _need(b, 3, "bmm", "mat2")
    if a.shape[0] != b.shape[0]:
        raise ShapeError(f"bmm: batch sizes differ: {a.shape} and {b.shape}")
    return matmul(a, b)


def mv(a, v):
    if amp_active() is not None:
        a, v = amp_cast('mv', a, v)
    _need(a, 2, "mv", "input")
    _need(v, 1, "mv", "vec")
    return matmul(a, v)


def dot(a, b):
    _need(a, 1, "dot", "input")
    _need(b, 1, "dot", "other")
    if a.shape != b.shape:
        raise ShapeError(f"dot: the vectors have {a.shape[0]} and {b.shape[0]} elements")
    if amp_active() is not None:          # autocast: the wider dtype of the two, as torch
        a, b = amp_cast("dot", a, b)
        with amp_disabled():
            return matmul(a, b)
    return matmul(a, b)


def outer(a, b):
    _need(a, 1, "outer", "input")
    _need(b, 1, "outer", "vec2")
    return a.reshape(-1, 1) * b.reshape(1, -1)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):  # noqa: A002
    """beta input + alpha (mat1 @ mat2); input broadcasts to the product (torch.addmm)."""
    if amp_active() is not None:
        input, mat1, mat2 = amp_cast('addmm', input, mat1, mat2)
    prod = mm(mat1, mat2)
    prod = prod if alpha == 1 else prod * alpha
    if beta == 0:                                # torch: input is ignored (NaN in it too)
        return prod
    return prod + (input if beta == 1 else input * beta)


def _diagonal(x, offset=0, dim1=0, dim2=1):
    """The diagonal of the (dim1, dim2) planes, as a last dim (a strided view of a copy)."""
    x = need_tensor(x, "diagonal")
    if x.ndim < 2:
        raise ShapeError(f"diagonal needs a tensor of at least 2 dims, got shape {x.shape}")
    x = movedim(x, (dim1, dim2), (-2, -1))
    r, c = x.shape[-2:]
    lead = x.shape[:-2]
    n = max(0, min(r, c - offset) if offset >= 0 else min(r + offset, c))
    start = offset if offset >= 0 else -offset * c
    flat = x.reshape(lead + (r * c,))
    if n == 0:
        return flat[..., :0]
    return flat[..., start:start + (n - 1) * (c + 1) + 1:c + 1]


def trace(x):
    _need(x, 2, "trace", "input")
    return _diagonal(x).sum()


def diag(x, diagonal=0):  # noqa: A002 (torch's name)
    """1-D -> the 2-D matrix with x on a diagonal; 2-D -> that diagonal (torch.diag)."""
    x = need_tensor(x, "diag")
    k = sh.as_int(diagonal, "diag diagonal")
    if x.ndim == 2:
        return _diagonal(x, k)
    if x.ndim != 1:
        raise ShapeError(f"diag expects a 1-D or 2-D tensor, got shape {x.shape}")
    n = x.shape[0] + abs(k)
    i = arange(n, device=x.device).reshape(n, 1)
    j = arange(n, device=x.device).reshape(1, n)
    on = (j - i) == k                               # the chosen diagonal of an n x n matrix
    vals = concat([x, zeros(abs(k), dtype=x.dtype, device=x.device)], 0) if k else x
    # x[t] sits at (t, t + k) for k >= 0 (indexed by row), at (t - k, t) for k < 0 (by column)
    along = vals.reshape(n, 1) if k >= 0 else vals.reshape(1, n)
    return where(on, along.expand(n, n), _zero(x))


def _zero(x):
    return False if x.dtype is dt.bool_ else 0


# -- reductions ---------------------------------------------------------------------------------------
def amax(x, dim=(), keepdim=False):
    """The maximum over dims (all when dim=()); ties share the gradient (torch.amax)."""
    axis = None if dim in ((), None, []) else _dims(dim, "amax")
    return reduce_op("max", need_tensor(x, "amax"), axis, keepdim)


def amin(x, dim=(), keepdim=False):
    axis = None if dim in ((), None, []) else _dims(dim, "amin")
    return reduce_op("min", need_tensor(x, "amin"), axis, keepdim)


def norm(x, p="fro", dim=None, keepdim=False):
    """The vector p-norm over dims (all by default): p = 2 / "fro", 1, inf, -inf, 0 or any
    positive float. The gradient at a zero vector is 0 (torch's subgradient), never NaN."""
    x = need_tensor(x, "norm")
    if amp_active() is not None:
        x, = amp_cast('norm', x)
    if not x.dtype.is_floating:
        raise DTypeError(f"norm needs a floating-point tensor, got {x.dtype.name}; convert it "
                         "with .float()")
    if x.dtype in dt.NARROW_FLOATS:       # accumulated in float32, as torch (70000 ones: 264.5)
        return norm(x.astype(dt.float32), p, dim, keepdim).astype(x.dtype)
    axis, keep = axis_args(dim, None, keepdim, False)
    if p in ("fro", 2, 2.0):
        s = (x * x).sum(axis, keepdims=keep)
        zero = s == 0
        return where(zero, 0.0, where(zero, 1.0, s).sqrt())
    if p in (math.inf, -math.inf):
        return reduce_op("max" if p > 0 else "min", abs(x), axis, keep)
    if p == 0:
        return (x != 0).astype(x.dtype).sum(axis, keepdims=keep)
    if p == 1:
        return abs(x).sum(axis, keepdims=keep)
    if isinstance(p, str) or not isinstance(p, (int, float)) or p < 0:
        raise DTypeError(f"norm: p must be 'fro', a number >= 0, inf or -inf, got {p!r}")
    s = (abs(x) ** p).sum(axis, keepdims=keep)
    zero = s == 0
    return where(zero, 0.0, where(zero, 1.0, s) ** (1.0 / p))


def var_mean(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(var, mean) with var's arguments (torch.var_mean, its unbiased overloads too)."""
    x = need_tensor(x, "var_mean")
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    return (x.var(dim, unbiased, keepdim, correction=correction), x.mean(dim, keepdim=keepdim))


def std_mean(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    x = need_tensor(x, "std_mean")
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    return (x.std(dim, unbiased, keepdim, correction=correction), x.mean(dim, keepdim=keepdim))


def count_nonzero(x, dim=None):
    x = need_tensor(x, "count_nonzero")
    axis = None if dim is None else _dims(dim, "count_nonzero")
    return (x != 0).astype(dt.int32).sum(axis)


def diff(x, n=1, dim=-1):
    """The n-th forward difference along dim (torch.diff without prepend/append)."""
    x = need_tensor(x, "diff")
    if x.ndim == 0:
        raise ShapeError("diff needs at least a 1-D tensor")
    if not isinstance(n, int) or n < 0:
        raise ShapeError(f"diff: n must be a non-negative int, got {n!r}")
    d = sh.normalize_axis(dim, x.ndim)
    out = x
    for _ in range(n):
        m = out.shape[d]
        if m == 0:
            break
        out = (out.narrow(d, 1, m - 1) != out.narrow(d, 0, m - 1)) if out.dtype is dt.bool_ \
            else out.narrow(d, 1, m - 1) - out.narrow(d, 0, m - 1)
    return out if out is not x else x.clone()      # n = 0 or an empty dim: still a new tensor


# -- scans: log2(n) shifted combines (Hillis-Steele), every step an existing op -----------------------
def _scan(x, dim, combine, identity):
    """The inclusive scan of x along dim under the associative `combine`: after step k each
    element holds the combination of the 2^(k+1) elements ending at it (the shift brings in
    `identity` from the front). O(n log n) work, O(n) memory, on every device; the gradient
    follows from the steps."""
    if x.ndim == 0:
        sh.normalize_axis(dim, 1)                 # a 0-d tensor takes dim 0 or -1, as torch
        return x.clone()
    d = sh.normalize_axis(dim, x.ndim)
    n, k, out = x.shape[d], 1, x
    while k < n:
        shape = list(x.shape)
        shape[d] = k
        front = full(tuple(shape), identity, dtype=x.dtype, device=x.device)
        out = combine(out, concat([front, out.narrow(d, 0, n - k)], d))
        k *= 2
    return out if n > 1 else x.clone()


def _scan_input(x, dtype, name):
    x = need_tensor(x, name)
    if dtype is not None:
        return x.astype(dtype)
    return x.astype(dt.int32) if x.dtype is dt.bool_ else x    # torch: int64, numr's int32


def cumsum(x, dim, *, dtype=None):
    """Running sums along dim (torch.cumsum; bool and int32 sum in int32)."""
    if amp_active() is not None:
        x, = amp_cast('cumsum', x)
    return _scan(_scan_input(x, dtype, "cumsum"), dim, lambda a, b: a + b, 0)


def cumprod(x, dim, *, dtype=None):
    """Running products along dim (torch.cumprod); the gradient is exact where x has zeros."""
    if amp_active() is not None:
        x, = amp_cast('cumprod', x)
    return _scan(_scan_input(x, dtype, "cumprod"), dim, lambda a, b: a * b, 1)


def _logaddexp(a, b):
    hi, lo = maximum(a, b), minimum(a, b)
    finite_hi = where(hi == -math.inf, 0.0, hi)            # -inf with -inf stays -inf, no NaN
    return where(hi == -math.inf, -math.inf, finite_hi + (lo - finite_hi).exp().log1p())


def logcumsumexp(x, dim):
    """log(cumsum(exp(x))) without overflow, combining by log-add-exp (torch.logcumsumexp)."""
    x = need_tensor(x, "logcumsumexp")
    if not x.dtype.is_floating:
        raise DTypeError(f"logcumsumexp needs a floating-point tensor, got {x.dtype.name}")
    return _scan(x, dim, _logaddexp, -math.inf)


diagonal = _diagonal
swapaxes = swapdims = transpose                       # torch's aliases
moveaxis = movedim

CompositesMethods = method_class(
    "CompositesMethods",
    movedim=movedim, moveaxis=movedim, swapaxes=transpose, swapdims=transpose, unbind=unbind,
    roll=roll, tile=tile, repeat=_repeat, repeat_interleave=repeat_interleave,
    view_as=_like("view_as", reshape), reshape_as=_like("reshape_as", reshape),
    expand_as=_like("expand_as", expand), mm=mm, bmm=bmm, mv=mv, dot=dot, outer=outer,
    diagonal=_diagonal, trace=trace, diag=diag, amax=amax, amin=amin, norm=norm,
    count_nonzero=count_nonzero, diff=diff, cumsum=cumsum, cumprod=cumprod,
    logcumsumexp=logcumsumexp,
)
