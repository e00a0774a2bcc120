"""Shape rules in pure Python: broadcasting, axes, matmul shapes, basic indexing."""
from __future__ import annotations

from .errors import IndexOutOfRangeError, ShapeError


def broadcast_shapes(*shapes):
    """numpy broadcasting of several shapes; ShapeError names both shapes on mismatch."""
    out = []
    for shape in shapes:
        shape = tuple(shape)
        if len(shape) > len(out):
            out = [1] * (len(shape) - len(out)) + out
        for i, d in enumerate(shape, len(out) - len(shape)):
            o = out[i]
            if o == 1:
                out[i] = d
            elif d != 1 and d != o:
                raise ShapeError(
                    f"shapes {' and '.join(str(tuple(s)) for s in shapes)} cannot be broadcast "
                    f"together: dimension {i - len(out)} is {o} in one and {d} in the other; "
                    "each dimension must match or be 1")
    return tuple(out)


def as_int(x, what="dimension"):
    """An int from an int or anything with __index__ (numpy integers); bools and floats refused."""
    if isinstance(x, int) and not isinstance(x, bool):
        return x
    if not isinstance(x, (bool, float)) and hasattr(x, "__index__"):
        try:
            return x.__index__()
        except Exception:  # noqa: BLE001  (e.g. a float tensor's __index__)
            pass
    raise ShapeError(f"{what} must be an int, got {type(x).__name__} {x!r}")


def normalize_axis(axis, ndim):
    axis = as_int(axis, "dim")
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        raise IndexOutOfRangeError(
            f"dim {axis} is out of range for a tensor with {ndim} dimension(s); "
            f"expected -{max(ndim, 1)} <= dim < {max(ndim, 1)}")
    return axis % max(ndim, 1)


def normalize_axes(axis, ndim):
    """None -> all axes; int or sequence -> sorted tuple of distinct non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (list, tuple)):
        axes = tuple(axis)
    else:
        axes = (as_int(axis, "dim"),)
    out = tuple(sorted(normalize_axis(a, ndim) for a in axes))
    if ndim == 0:                     # axis 0 / -1 of a 0-d tensor is accepted and reduces nothing
        return ()
    if len(set(out)) != len(out):
        raise ShapeError(f"repeated axis in {axis!r}")
    return out


def reduced_shape(shape, axes, keepdims):
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def matmul_shapes(a, b, what="matmul", given=None):
    """Output shape of a @ b for a, b at least 2-D; ShapeError for inner-dimension mismatch.
    given: the shapes the user passed, when a 1-D operand was promoted to 2-D (the message names those)."""
    if a[-1] != b[-2]:
        ga, gb = given or (a, b)
        b_dim = "first (b is 1-D)" if len(gb) == 1 else "second-to-last"
        raise ShapeError(
            f"{what}: inner dimensions do not match: a has shape {tuple(ga)} (K={a[-1]}) but b has "
            f"shape {tuple(gb)} (K={b[-2]}); a's last dimension must equal b's {b_dim}")
    batch = broadcast_shapes(a[:-2], b[:-2])
    return batch + (a[-2], b[-1])


def check_shape(shape):
    """Normalise a user shape (int or sequence of non-negative ints) to a tuple."""
    if not isinstance(shape, (list, tuple)):
        shape = (shape,)
    shape = tuple(as_int(d, "a shape's dimension") for d in shape)
    for d in shape:
        if d < 0:
            raise ShapeError(f"shape {shape!r} must contain non-negative ints only")
    return shape


def prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def dense_strides(shape):
    """Row-major element strides of `shape`."""
    st, acc = [], 1
    for d in reversed(shape):
        st.append(acc)
        acc *= d
    return tuple(reversed(st))


def matrices_layout(shape, strides):
    """(L0, L1, LR) in elements of a (..., T, n) view with element `strides`: matrix b (b over the
    batch dims) starts at (b / hn) L0 + (b % hn) L1, hn the last batch dim, and its rows are LR
    apart; None where a row's values are not contiguous or the batch dims before the last do not
    merge into one. How the cuda and webgpu attention kernels read their operands in place (the
    heads of a fused qkv projection)."""
    if prod(shape) == 0:                                 # nothing is read or written
        return 0, 0, 0
    if shape[-1] > 1 and strides[-1] != 1:
        return None
    if len(shape) == 2:
        return 0, 0, strides[-2]
    lead = [(n, s) for n, s in zip(shape[:-3], strides[:-3]) if n != 1]
    if any(s != s2 * n2 for (_, s), (n2, s2) in zip(lead, lead[1:])):
        return None
    return (lead[-1][1] if lead else 0), strides[-3], strides[-2]


def disjoint_alike(shape, strides, offsets):
    """Whether views of one buffer with this shape and these (element) strides, starting at
    `offsets`, share no element: there is a stride R that the outer dims' strides are multiples
    of and that the inner dims' extent W fits in, and the views' residues mod R lie W or more
    apart (the q, k and v heads of a fused projection: R = 3C, W = C). False where no such R
    shows it (they may still be disjoint)."""
    if prod(shape) == 0 or len(set(offsets)) < len(offsets):
        return prod(shape) == 0
    dims = [(n, s) for n, s in zip(shape, strides) if n != 1]
    if any(s <= 0 for _, s in dims):
        return False
    whole = max(offsets) + 1 + sum((n - 1) * s for n, s in dims)    # no outer dims at all
    for r in sorted({s for _, s in dims} | {whole}):
        width = 1 + sum((n - 1) * s for n, s in dims if s < r)
        if width > r or any(s % r for _, s in dims if s >= r):
            continue
        starts = sorted(o % r for o in offsets)
        if starts[-1] + width <= r and all(b - a >= width for a, b in zip(starts, starts[1:])):
            return True
    return False


def reshape_target(shape, new):
    """Resolve one -1 in `new`; ShapeError if the sizes differ."""
    new = [as_int(d, "a shape's dimension") for d in new]
    size = prod(shape)
    if new.count(-1) > 1:
        raise ShapeError(f"reshape: only one dimension can be -1, got {tuple(new)}")
    if -1 in new:
        rest = prod(d for d in new if d != -1)
        if rest == 0 or size % rest:
            raise ShapeError(f"cannot reshape a tensor of shape {tuple(shape)} ({size} elements) "
                             f"into {tuple(new)}")
        new[new.index(-1)] = size // rest
    new = check_shape(new)
    if prod(new) != size:
        raise ShapeError(f"cannot reshape a tensor of shape {tuple(shape)} ({size} elements) into "
                         f"{new} ({prod(new)} elements); the number of elements must stay the same")
    return new


def normalize_index(index, shape):
    """Basic indexing -> (backend index with one int-or-(start, stop, step) per dim, the positions
    where None adds an axis in the result, result shape)."""
    if not isinstance(index, tuple):
        index = (index,)
    n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise ShapeError("an index can only have a single ellipsis ('...')")
    if n_real > len(shape):
        raise IndexOutOfRangeError(f"too many indices for a tensor of shape {tuple(shape)}: "
                                   f"{n_real} given, at most {len(shape)}")
    expanded = []
    for i in index:
        if i is Ellipsis:
            expanded.extend([slice(None)] * (len(shape) - n_real))
        else:
            expanded.append(i)
    expanded.extend([slice(None)] * (len(shape) - sum(1 for i in expanded if i is not None)))
    out_index, out_shape, new_axes, dim = [], [], [], 0
    for i in expanded:
        if i is None:
            new_axes.append(len(out_shape))
            out_shape.append(1)
            continue
        size = shape[dim]
        if isinstance(i, bool) or not isinstance(i, (int, slice)):
            if hasattr(i, "__index__") and not isinstance(i, bool):
                i = i.__index__()
            else:
                raise IndexOutOfRangeError(
                    f"only basic indexing (ints, slices, ..., None) and integer or bool tensors "
                    f"are supported, got {type(i).__name__} {i!r}; index with Python ints and "
                    "slices")
        if isinstance(i, int):
            if not -size <= i < size:
                raise IndexOutOfRangeError(f"index {i} is out of bounds for dimension {dim} with "
                                           f"size {size}; expected {-size} <= index < {size}")
            out_index.append(i % size)
        else:
            if i.step is not None and as_int(i.step, "slice step") <= 0:
                raise ShapeError(f"slice step must be positive, got {i.step}")
            for bound in (i.start, i.stop):
                if bound is not None:
                    as_int(bound, "slice bound")
            start, stop, step = i.indices(size)
            stop = max(stop, start)
            out_index.append((start, stop, step))
            out_shape.append(len(range(start, stop, step)))
        dim += 1
    return tuple(out_index), tuple(new_axes), tuple(out_shape)
