"""More of torch's functions, each a composition of the vocabulary's ops (gradients follow):
broadcasting helpers, take_along_dim, scatter_add / index_add (the gather row's adjoint),
meshgrid, cross, tensordot, kron, cosine_similarity, logaddexp, hypot, fmax / fmin, randperm,
and the method forms torch code calls (x.add(y, alpha=), x.where(c, y), x.unflatten, ...).
"""
from __future__ import annotations

import builtins
import math
import random

from .. import dtypes as dt
from .. import shapes as sh
from ..autograd import apply
from ..creation import tensor
from ..errors import DTypeError, ShapeError
from ..generator import resolve_seed
from ..autocast_state import active as amp_active, cast as amp_cast, disabled as amp_disabled
from ..tensor import Tensor
from .common import method_class, check_same_device, need_tensor
from .elementwise import maximum, minimum, where
from .indexing import _check_range, _index_tensor
from .linalg import matmul
from ..vocab.registry import OPS
from .shape_ops import expand, reshape


# -- broadcasting ---------------------------------------------------------------------------------------
def broadcast_shapes(*shapes):
    return sh.broadcast_shapes(*(tuple(s) if isinstance(s, (tuple, list)) else (s,)
                                 for s in shapes))


def broadcast_tensors(*tensors):
    shape = sh.broadcast_shapes(*(need_tensor(t, "broadcast_tensors").shape for t in tensors))
    return tuple(expand(t, shape) for t in tensors)


def broadcast_to(x, shape):
    return expand(need_tensor(x, "broadcast_to"), tuple(shape))


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids from 1-D tensors (torch.meshgrid; indexing "ij" or "xy")."""
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    if indexing not in ("ij", "xy"):
        raise ShapeError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    for t in ts:
        if need_tensor(t, "meshgrid").ndim > 1:
            raise ShapeError(f"meshgrid takes 0-D or 1-D tensors, got shape {t.shape}")
    ts = [t.reshape(-1) for t in ts]
    swap = indexing == "xy" and len(ts) >= 2
    order = [1, 0] + list(range(2, len(ts))) if swap else list(range(len(ts)))
    shape = tuple(ts[i].shape[0] for i in order)
    out = []
    for k, t in enumerate(ts):
        pos = order.index(k)
        view = [1] * len(ts)
        view[pos] = t.shape[0]
        out.append(expand(t.reshape(view), shape))
    return tuple(out)


# -- indexing adjoints ----------------------------------------------------------------------------------
def take_along_dim(x, indices, dim=None):
    """x's values at `indices` along dim, indices broadcast against x (torch.take_along_dim)."""
    x = need_tensor(x, "take_along_dim")
    idx = _index_tensor(indices, x, "take_along_dim")
    if dim is None:
        x, idx, d = x.reshape(-1), idx.reshape(-1), 0
    else:
        d = sh.normalize_axis(dim, x.ndim)
        if idx.ndim != x.ndim:
            raise ShapeError(f"take_along_dim: indices must have x's {x.ndim} dims, got {idx.shape}")
        xs, is_ = list(x.shape), list(idx.shape)
        xs[d] = is_[d] = 1
        b = sh.broadcast_shapes(tuple(xs), tuple(is_))
        x = expand(x, b[:d] + (x.shape[d],) + b[d + 1:])
        idx = expand(idx, b[:d] + (idx.shape[d],) + b[d + 1:])
    _check_range(idx, x.shape[d], "take_along_dim", negative_ok=True)
    idx = where(idx < 0, idx + x.shape[d], idx)
    return apply(OPS["gather"], x, idx.contiguous(), axis=d)


def scatter_add(x, dim, index, src):
    """out = x, plus src[i][j] added at out[index[i][j]][j] (dim 0; torch.scatter_add). The
    sums run in a fixed order (deterministic); the gradient of src is gather's."""
    return _scatter_add(x, dim, index, src, "scatter_add")


def _scatter_add(x, dim, index, src, op):
    x = need_tensor(x, "scatter_add")
    d = sh.normalize_axis(dim, x.ndim)
    index = _index_tensor(index, x, "scatter_add")
    src = need_tensor(src, "scatter_add")
    check_same_device(x, index, src)
    if index.ndim != x.ndim or src.ndim != x.ndim:
        raise ShapeError(f"scatter_add: index and src must have x's {x.ndim} dims, got "
                         f"{index.shape} and {src.shape}")
    for k, (i, s, o) in enumerate(zip(index.shape, src.shape, x.shape)):
        if i > s or (k != d and i > o):
            raise ShapeError(f"scatter_add: index {index.shape} must fit src {src.shape} in every "
                             f"dim and x {x.shape} in every dim but {d}")
    _check_range(index, x.shape[d], op)
    src = src[tuple(slice(0, n) for n in index.shape)].astype(x.dtype)
    added = apply(OPS["scatter_add"], index.contiguous(), src.contiguous(), shape=x.shape, axis=d)
    return x + added


def index_add(x, dim, index, source, *, alpha=1):
    """x with alpha * source's slices added at the 1-D `index` along dim (torch.index_add)."""
    x = need_tensor(x, "index_add")
    d = sh.normalize_axis(dim, x.ndim)
    index = _index_tensor(index, x, "index_add")
    if index.ndim != 1:
        raise ShapeError(f"index_add: index must be 1-D, got shape {index.shape}")
    want = x.shape[:d] + (index.shape[0],) + x.shape[d + 1:]
    if need_tensor(source, "index_add").shape != want:
        raise ShapeError(f"index_add: source must have shape {want}, got {source.shape}")
    view = (1,) * d + (index.shape[0],) + (1,) * (x.ndim - d - 1)
    src = source if alpha == 1 else source * alpha
    return _scatter_add(x, d, expand(index.reshape(view), want), src, "index_add")


# -- linear algebra and geometry ------------------------------------------------------------------------
def tensordot(a, b, dims=2):
    """Sum over the last `dims` dims of a and the first of b (or the listed pairs of dims)."""
    a, b = need_tensor(a, "tensordot"), need_tensor(b, "tensordot")
    if amp_active() is not None:          # autocast: the wider dtype of the two, as torch
        a, b = amp_cast("tensordot", a, b)
        with amp_disabled():
            return _tensordot(a, b, dims)
    return _tensordot(a, b, dims)


def _tensordot(a, b, dims):
    if isinstance(dims, int):
        if dims < 0 or dims > min(a.ndim, b.ndim):
            raise ShapeError(f"tensordot: dims={dims} is out of range for shapes {a.shape} "
                             f"and {b.shape}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = ([sh.normalize_axis(v, t.ndim) for v in ([d] if isinstance(d, int) else d)]
                  for d, t in zip(dims, (a, b)))
    if [a.shape[i] for i in da] != [b.shape[i] for i in db]:
        raise ShapeError(f"tensordot: contracted sizes differ: {[a.shape[i] for i in da]} and "
                         f"{[b.shape[i] for i in db]}")
    fa = [i for i in range(a.ndim) if i not in da]
    fb = [i for i in range(b.ndim) if i not in db]
    k = sh.prod(a.shape[i] for i in da)
    a2 = a.permute(fa + da).reshape(sh.prod(a.shape[i] for i in fa), k)
    b2 = b.permute(db + fb).reshape(k, sh.prod(b.shape[i] for i in fb))
    return matmul(a2, b2).reshape(tuple(a.shape[i] for i in fa) + tuple(b.shape[i] for i in fb))


def kron(a, b):
    """The Kronecker product (torch.kron)."""
    a, b = need_tensor(a, "kron"), need_tensor(b, "kron")
    n = max(a.ndim, b.ndim)
    a = a.reshape((1,) * (n - a.ndim) + a.shape)
    b = b.reshape((1,) * (n - b.ndim) + b.shape)
    inter_a = [v for s in a.shape for v in (s, 1)]
    inter_b = [v for s in b.shape for v in (1, s)]
    out = reshape(a, inter_a) * reshape(b, inter_b)
    return out.reshape(tuple(p * q for p, q in zip(a.shape, b.shape)))


def cross(a, b, dim=None):
    """The cross product of 3-vectors along dim (the first dim of size 3 when None)."""
    a, b = need_tensor(a, "cross"), need_tensor(b, "cross")
    shape = sh.broadcast_shapes(a.shape, b.shape)
    a, b = expand(a, shape), expand(b, shape)
    if dim is None:
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise ShapeError(f"cross: no dim of size 3 in shape {shape}")
    d = sh.normalize_axis(dim, len(shape))
    if shape[d] != 3:
        raise ShapeError(f"cross: dim {dim} has size {shape[d]}, expected 3")
    ax, ay, az = (a.narrow(d, i, 1) for i in range(3))
    bx, by, bz = (b.narrow(d, i, 1) for i in range(3))
    from .shape_ops import concat
    return concat([ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx], d)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """x1 . x2 / max(|x1| |x2|, eps) along dim (torch's)."""
    x1, x2 = need_tensor(x1, "cosine_similarity"), need_tensor(x2, "cosine_similarity")
    if amp_active() is not None:
        x1, x2 = amp_cast('cosine_similarity', x1, x2)
    dot = (x1 * x2).sum(dim)
    n = ((x1 * x1).sum(dim) * (x2 * x2).sum(dim)).clamp(min=eps * eps).sqrt()
    return dot / n


def logaddexp(a, b):
    """log(exp(a) + exp(b)) without overflow (torch.logaddexp)."""
    a = need_tensor(a, "logaddexp") if not isinstance(b, Tensor) else a
    hi, lo = maximum(a, b), minimum(a, b)
    finite = where(abs(hi) == math.inf, 0.0, hi)
    both_inf = (hi == lo) & (abs(hi) == math.inf)               # -inf,-inf or inf,inf: itself
    return where(both_inf, hi, finite + (lo - finite).exp().log1p() + (hi - finite))


def hypot(a, b):
    """sqrt(a^2 + b^2) without overflow or underflow in the squares (torch.hypot)."""
    a = need_tensor(a, "hypot") if not isinstance(b, Tensor) else a
    a, b = (x.astype(dt.int32) if isinstance(x, Tensor) and x.dtype is dt.bool_ else x for x in (a, b))
    aa, ab = abs(a), abs(b)
    big, small = maximum(aa, ab), minimum(aa, ab)
    safe = where(big == 0, 1.0, big)
    r = small / safe
    out = big * (r * r + 1).sqrt()
    # an infinite operand wins over a NaN one (C's hypot, torch): fmax skips the NaN
    return where(fmax(aa, ab) == math.inf, math.inf, out)


def fmax(a, b):
    """maximum that ignores a NaN operand (NaN only where both are NaN), as torch.fmax."""
    return where(b != b, a, where(a != a, b, maximum(a, b)))


def fmin(a, b):
    return where(b != b, a, where(a != a, b, minimum(a, b)))


def randperm(n, *, generator=None, dtype="int32", device=None):
    """A random permutation of 0..n-1 (drawn on the host from the generator's seed)."""
    n = sh.as_int(n, "randperm n")
    if n < 0:
        raise ShapeError(f"randperm: n must be non-negative, got {n}")
    if n > 2 ** 31:
        raise DTypeError(f"randperm: n = {n} has values beyond int32, the widest integer dtype")
    rng = random.Random(resolve_seed(None, generator))
    perm = list(range(n))
    rng.shuffle(perm)
    return tensor(perm, dtype=dtype, device=device)


def from_numpy(a):
    return tensor(a)


# -- method forms -----------------------------------------------------------------------------------------
def add_alpha(x, other, *, alpha=1):
    """x + alpha other (torch.add, Tensor.add_)."""
    return x + (other if alpha == 1 else other * alpha)


def sub_alpha(x, other, *, alpha=1):
    """x - alpha other (torch.sub, Tensor.sub_)."""
    return x - (other if alpha == 1 else other * alpha)


def div_rounded(x, other, *, rounding_mode=None):
    """x / other, rounded as rounding_mode says (torch.div, Tensor.div_)."""
    if rounding_mode is None:
        return x / other
    if rounding_mode == "floor":
        return x // other
    if rounding_mode == "trunc":
        return div_trunc(x, other)
    raise DTypeError(f"div: rounding_mode must be None, 'floor' or 'trunc', got {rounding_mode!r}")


def div_trunc(x, other):
    """x / other rounded towards zero (torch's rounding_mode='trunc')."""
    if dt.result_type(x, other).is_floating:
        return (x / other).trunc()
    # integers: the floor quotient moved one towards zero where the division is inexact and the
    # signs differ (exact for every int32; a float32 quotient is not, above 2**24)
    q = x // other
    fix = ((q * other) != x) & ((x < 0) != (other < 0))
    return q + fix.astype(q.dtype)


def _unflatten(x, dim, sizes):
    d = sh.normalize_axis(dim, x.ndim)
    sizes = tuple(sizes)
    known = sh.prod(s for s in sizes if s != -1)
    if sizes.count(-1) > 1 or (sizes.count(-1) == 0 and known != x.shape[d]) or \
            (sizes.count(-1) == 1 and (known == 0 or x.shape[d] % known)):
        raise ShapeError(f"unflatten: sizes {sizes} do not multiply to dim {d}'s size "
                         f"{x.shape[d]}")
    sizes = tuple(x.shape[d] // known if s == -1 else s for s in sizes)
    return x.reshape(x.shape[:d] + sizes + x.shape[d + 1:])


def addcmul(x, t1, t2, *, value=1):
    return x + (t1 * t2 if value == 1 else t1 * t2 * value)


def addcdiv(x, t1, t2, *, value=1):
    return x + (t1 / t2 if value == 1 else t1 / t2 * value)


TorchFunctionsMethods = method_class(
    "TorchFunctionsMethods",
    add=add_alpha, sub=sub_alpha, subtract=sub_alpha, mul=lambda x, o: x * o, multiply=lambda x, o: x * o,
    div=div_rounded, divide=div_rounded, true_divide=lambda x, o: x / o, floor_divide=lambda x, o: x // o,
    remainder=lambda x, o: x % o, negative=lambda x: -x,
    where=lambda x, condition, other: where(condition, x, other), unflatten=_unflatten,
    addcmul=addcmul, addcdiv=addcdiv, take_along_dim=take_along_dim, scatter_add=scatter_add,
    index_add=index_add, cross=cross, kron=kron, logaddexp=logaddexp, hypot=hypot, fmax=fmax,
    fmin=fmin, broadcast_to=broadcast_to,
)


# -- einsum: operands contracted pairwise through matmul (batch, free and summed letters) -----------------
def _einsum_parse(equation, operands):
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ShapeError(f"einsum: the equation {equation!r} names {len(terms)} operands, "
                         f"{len(operands)} were given")
    ell = max((t.ndim - (len(term) - 3) for term, t in zip(terms, operands) if "..." in term),
              default=0)
    spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in eq][:ell]
    fixed = []
    for term, t in zip(terms, operands):
        if "..." in term:
            n = t.ndim - (len(term) - 3)
            term = term.replace("...", "".join(spare[ell - n:]))
        if not term.isalpha() or len(term) != t.ndim:
            raise ShapeError(f"einsum: term {term!r} does not match an operand of shape {t.shape} "
                             "(one letter per dim; '...' for the rest)")
        fixed.append(term)
    if arrow:
        out = rhs.replace("...", "".join(spare))
        if not (out == "" or out.isalpha()) or len(set(out)) != len(out) or \
                any(c not in "".join(fixed) for c in out):
            raise ShapeError(f"einsum: bad output {rhs!r} in {equation!r}")
    else:                                  # implicit output: letters seen once, sorted
        joined = "".join(fixed)
        out = "".join(spare) + "".join(sorted(c for c in set(joined) if joined.count(c) == 1
                                             and c not in spare))
    return fixed, out


def _einsum_one(t, term, keep):
    """Diagonals of repeated letters, then sums over letters not in `keep`."""
    while len(set(term)) != len(term):
        c = next(c for c in term if term.count(c) > 1)
        i, j = term.index(c), term.index(c, term.index(c) + 1)
        t = t.diagonal(0, i, j)                  # the pair becomes the last dim
        term = "".join(x for k, x in enumerate(term) if k not in (i, j)) + c
    drop = tuple(k for k, c in enumerate(term) if c not in keep)
    if drop:
        t = t.sum(drop)
        term = "".join(c for c in term if c in keep)
    return t, term


def _einsum_pair(a, ta, b, tb, keep):
    sizes = {}
    for t, term in ((a, ta), (b, tb)):
        for c, n in zip(term, t.shape):
            if sizes.get(c, 1) not in (1, n) and n != 1:
                raise ShapeError(f"einsum: letter {c!r} has sizes {sizes[c]} and {n}")
            sizes[c] = max(sizes.get(c, 1), n)
    batch = [c for c in ta if c in tb and c in keep]
    summed = [c for c in ta if c in tb and c not in keep]
    fa = [c for c in ta if c not in tb]
    fb = [c for c in tb if c not in ta]

    def arrange(t, term, order):
        t = t.permute([term.index(c) for c in order])
        return expand(t, tuple(sizes[c] for c in order))
    a2 = arrange(a, ta, batch + fa + summed).reshape(
        tuple(sizes[c] for c in batch) + (sh.prod(sizes[c] for c in fa),
                                          sh.prod(sizes[c] for c in summed)))
    b2 = arrange(b, tb, batch + summed + fb).reshape(
        tuple(sizes[c] for c in batch) + (sh.prod(sizes[c] for c in summed),
                                          sh.prod(sizes[c] for c in fb)))
    out = matmul(a2, b2).reshape(tuple(sizes[c] for c in batch + fa + fb))
    return out, "".join(batch + fa + fb)


def einsum(equation, *operands):
    """torch.einsum: 'bij,bjk->bik', 'ii->i', 'i,j->ij', '...ij,...jk', implicit outputs. Two
    operands at a time through one (batched) matmul; repeated letters take diagonals."""
    ops = list(operands[0]) if len(operands) == 1 and isinstance(operands[0], (list, tuple)) \
        else list(operands)
    if not isinstance(equation, str) or not ops:
        raise DTypeError("einsum(equation, *operands): a string and at least one tensor")
    for t in ops:
        need_tensor(t, "einsum")
    if amp_active() is not None:
        ops = list(amp_cast("einsum", *ops))
    check_same_device(*ops)
    terms, out = _einsum_parse(equation, ops)
    later = [set("".join(terms[k + 1:]) + out) for k in range(len(terms))]
    t, term = _einsum_one(ops[0], terms[0], later[0])
    for k in range(1, len(ops)):
        u, uterm = _einsum_one(ops[k], terms[k], set(term) | later[k])
        t, term = _einsum_pair(t, term, u, uterm, later[k])
    t, term = _einsum_one(t, term, set(out))
    return t.permute([term.index(c) for c in out]) if term != out else t


# -- data-dependent shapes: one readback each (as torch synchronises), then the result on the device ----
def nonzero(x, *, as_tuple=False):
    """Indices of the nonzero elements, row-major: (n, ndim) int32, or a tuple of 1-D tensors."""
    x = need_tensor(x, "nonzero")
    flat = (x != 0).reshape(-1).tolist()                    # the readback
    hits = [k for k, v in enumerate(flat) if v]
    coords = []
    for k in hits:
        c = []
        for n in reversed(x.shape):
            c.append(k % n)
            k //= n
        coords.append(c[::-1])
    if as_tuple:
        return tuple(tensor([c[d] for c in coords], dtype="int32", device=x.device)
                     for d in range(max(x.ndim, 1)))
    return tensor(coords, dtype="int32", device=x.device).reshape(len(coords), x.ndim)


def masked_select(x, mask):
    """x's elements where mask (broadcast together) is True, as a 1-D tensor (differentiable)."""
    x = need_tensor(x, "masked_select")
    mask = _index_tensor(mask, x, "masked_select") if not isinstance(mask, Tensor) else mask
    if mask.dtype is not dt.bool_:
        raise DTypeError(f"masked_select needs a bool mask, got {mask.dtype.name}")
    shape = sh.broadcast_shapes(x.shape, mask.shape)
    return expand(x, shape).reshape(-1)[expand(mask, shape).reshape(-1)]


def unique(x, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The distinct values, ascending (torch.unique of the flattened tensor; each NaN is distinct
    and comes last, as torch's sorted unique gives them)."""
    x = need_tensor(x, "unique")
    if dim is not None:
        raise ShapeError("unique(dim=...) is not supported; unique over the flattened tensor is")
    vals = x.reshape(-1).tolist()                          # the readback
    finite = builtins.sorted(set(v for v in vals if v == v))
    n_nan = builtins.sum(1 for v in vals if v != v)
    distinct = finite + [float("nan")] * n_nan
    out = [tensor(distinct, dtype=x.dtype, device=x.device)]
    if return_inverse:
        place, k, inv = {v: i for i, v in enumerate(finite)}, 0, []
        for v in vals:
            if v == v:
                inv.append(place[v])
            else:
                inv.append(len(finite) + k)
                k += 1
        out.append(tensor(inv, dtype="int32", device=x.device).reshape(x.shape))
    if return_counts:
        counts = {}
        for v in vals:
            if v == v:
                counts[v] = counts.get(v, 0) + 1
        out.append(tensor([counts[v] for v in finite] + [1] * n_nan, dtype="int32",
                          device=x.device))
    return out[0] if len(out) == 1 else tuple(out)


def bincount(x, weights=None, minlength=0):
    """Counts of each value of a 1-D non-negative int tensor (weighted sums with weights)."""
    x = need_tensor(x, "bincount")
    if x.ndim != 1 or x.dtype.is_floating or x.dtype is dt.bool_:
        raise DTypeError(f"bincount needs a 1-D int32 tensor, got {x.dtype.name} of shape {x.shape}")
    vals = x.tolist()                                     # the readback
    if any(v < 0 for v in vals):
        raise ShapeError("bincount: the values must be non-negative")
    n = max([minlength] + [v + 1 for v in vals])
    if weights is not None and need_tensor(weights, "bincount").shape != x.shape:
        raise ShapeError(f"bincount: weights must have x's shape {x.shape}, got {weights.shape}")
    src = weights if weights is not None else (x * 0 + 1)
    dtype = src.dtype if weights is not None else dt.int32
    if weights is not None and not dtype.is_floating:
        dtype = dt.default_float
    return scatter_add(tensor([0] * n, dtype=dtype, device=x.device), 0, x, src.astype(dtype))
