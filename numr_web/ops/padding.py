"""torch.nn.functional.pad: `pad` lists (before, after) amounts from the last dim backwards;
mode "constant" (value; a negative amount crops), "reflect", "replicate" or "circular". Composed:
constant pads concatenate filled blocks, the other modes index_select with indices made on the
host from the shape, so every gradient flows back (scatter-added where an element is repeated)."""
from __future__ import annotations

from ..creation import full, tensor
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .indexing import index_select
from .shape_ops import concat, narrow

PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input, pad, mode="constant", value=None):
    if not isinstance(input, Tensor):
        raise DTypeError(f"pad expects a Tensor, got {type(input).__name__}")
    if mode not in PAD_MODES:
        raise ShapeError(f"pad: unknown mode {mode!r}; expected one of {PAD_MODES}")
    pad = tuple(pad)
    if len(pad) % 2 or not all(isinstance(p, int) and not isinstance(p, bool) for p in pad):
        raise ShapeError(f"pad: the padding must be an even number of ints (before, after per "
                         f"dim, last dim first), got {pad!r}")
    if len(pad) // 2 > input.ndim:
        raise ShapeError(f"pad: {len(pad) // 2} dims to pad but the input has {input.ndim}")
    if mode != "constant" and value not in (None, 0, 0.0):
        raise ShapeError(f"pad: value= is for mode='constant' only, got mode={mode!r}")
    if mode != "constant" and input.ndim < len(pad) // 2 + 1:
        raise ShapeError(f"pad: mode={mode!r} pads the last {len(pad) // 2} dim(s) of a tensor "
                         f"with at least {len(pad) // 2 + 1} dims (batch or channels first); "
                         f"got {input.ndim}")
    x = input
    for i in range(len(pad) // 2):
        dim = x.ndim - 1 - i
        x = pad_dim(x, dim, pad[2 * i], pad[2 * i + 1], mode, 0.0 if value is None else value)
    return x if x is not input else input.clone()     # all amounts 0: a new tensor, as torch's


def pad_dim(x, dim, before, after, mode, value=0.0):
    """x padded by `before` and `after` elements on one dim."""
    n = x.shape[dim]
    if mode == "constant":
        if before < 0 or after < 0:                          # negative: crop
            start, stop = max(-before, 0), n - max(-after, 0)
            if stop < start:
                raise ShapeError(f"pad: cropping {-before} and {-after} from a dim of size {n} "
                                 "leaves nothing")
            x = narrow(x, dim, start, stop - start)
            before, after = max(before, 0), max(after, 0)
        parts = []
        for width in (before, after):
            shape = list(x.shape)
            shape[dim] = width
            parts.append(full(tuple(shape), value, dtype=x.dtype, device=x.device)
                         if width else None)
        if parts == [None, None]:
            return x
        return concat([t for t in (parts[0], x, parts[1]) if t is not None], dim=dim)
    if before < 0 or after < 0:
        raise ShapeError(f"pad: mode={mode!r} needs non-negative amounts, got {before} and "
                         f"{after}")
    if not (before or after):
        return x
    if mode == "reflect" and (before >= n or after >= n):
        raise ShapeError(f"pad: padding size should be less than the corresponding input "
                         f"dimension for mode='reflect': {before} and {after} on dim {dim} of "
                         f"size {n}")
    if mode == "circular" and (before > n or after > n):
        raise ShapeError(f"pad: mode='circular' pads at most the dim's size {n} on each side, "
                         f"got {before} and {after} on dim {dim}")
    if mode == "replicate" and n == 0:
        raise ShapeError(f"pad: mode='replicate' needs a non-empty dim {dim}")
    if mode == "reflect":
        idx = list(range(before, 0, -1)) + list(range(n)) + list(range(n - 2, n - 2 - after, -1))
    elif mode == "replicate":
        idx = [0] * before + list(range(n)) + [n - 1] * after
    else:
        idx = list(range(n - before, n)) + list(range(n)) + list(range(after))
    return index_select(x, dim, tensor(idx, dtype="int32", device=x.device))
