"""interpolate (torch.nn.functional.interpolate) and the Upsample modules, for the modes
"nearest", "nearest-exact", "linear" (3-D input) and "bilinear" (4-D), with torch's index and
weight formulas (computed in float32 on the host from the shapes, as torch's kernels do).

Nearest modes gather rows and columns (index_select: exact, the gradient scatter-adds back);
linear modes multiply by interpolation matrices, y = A_h x A_w^T, each row of A holding the two
weights (1 - l, l) of torch's formula, so the result is torch's up to rounding and the gradient
is A^T g. Other modes ("bicubic", "trilinear", "area") and antialias=True raise
UnsupportedError."""
from __future__ import annotations

import math
import struct

from . import _core
from .module import Module
from ..errors import UnsupportedError
from ..ops.indexing import index_select

_MODES = ("nearest", "nearest-exact", "linear", "bilinear")
_SPATIAL = {"linear": 1, "bilinear": 2}


def _f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _scale(n_in, n_out, sf, align_corners, linear):
    """torch's area_pixel_compute_scale (as float32)."""
    if linear and align_corners:
        return _f32((n_in - 1) / (n_out - 1)) if n_out > 1 else 0.0
    return _f32(1.0 / sf) if sf is not None and sf > 0 else _f32(n_in / n_out)


def _nearest_index(n_in, n_out, scale, exact):
    out = []
    for i in range(n_out):
        if exact:
            src = math.floor(_f32(_f32(i + 0.5) * scale))
        elif n_out == n_in:
            src = i
        elif n_out == 2 * n_in:
            src = i >> 1
        else:
            src = math.floor(_f32(_f32(float(i)) * scale))
        out.append(min(src, n_in - 1))
    return out


def _linear_matrix(n_in, n_out, scale, align_corners, like):
    rows = []
    for i in range(n_out):
        src = _f32(scale * i) if align_corners else _f32(_f32(scale * _f32(i + 0.5)) - 0.5)
        src = max(src, 0.0)
        i0 = min(int(math.floor(src)), n_in - 1)
        i1 = i0 + (1 if i0 < n_in - 1 else 0)
        l1 = min(max(_f32(src - i0), 0.0), 1.0)
        l0 = _f32(1.0 - l1)
        row = [0.0] * n_in
        row[i0] += l0
        row[i1] += l1
        rows.append(row)
    return _core.tensor(rows, dtype=like.dtype, device=like.device)


def _out_sizes(x, size, scale_factor, k, recompute):
    spatial = x.shape[-k:]
    if (size is None) == (scale_factor is None):
        raise _core.ShapeError("interpolate: give exactly one of size and scale_factor")
    if size is not None:
        sizes = [size] * k if isinstance(size, int) else list(size)
        if len(sizes) != k or not all(isinstance(s, int) and s > 0 for s in sizes):
            raise _core.ShapeError(f"interpolate: size must be {k} positive int(s) for a "
                                   f"{x.ndim}-D input, got {size!r}")
        return sizes, [None] * k
    sfs = [scale_factor] * k if isinstance(scale_factor, (int, float)) else list(scale_factor)
    if len(sfs) != k or not all(isinstance(s, (int, float)) and s > 0 for s in sfs):
        raise _core.ShapeError(f"interpolate: scale_factor must be {k} positive number(s), got "
                               f"{scale_factor!r}")
    sizes = [int(math.floor(float(n) * float(s))) for n, s in zip(spatial, sfs)]
    if any(s < 1 for s in sizes):
        raise _core.ShapeError(f"interpolate: the output size {sizes} has an empty dim")
    return sizes, ([None] * k if recompute else [float(s) for s in sfs])


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,  # noqa: A002
                recompute_scale_factor=None, antialias=False):
    x = input
    if not isinstance(x, _core.Tensor):
        raise _core.DTypeError(f"interpolate expects a Tensor, got {type(x).__name__}")
    if mode not in _MODES:
        raise UnsupportedError(f"interpolate: mode={mode!r} is not supported; numr_web has "
                               f"{_MODES}")
    if antialias:
        raise UnsupportedError("interpolate: antialias=True is not supported")
    linear = mode in _SPATIAL
    if not linear and align_corners is not None:
        raise _core.ShapeError("align_corners option can only be set with the interpolating "
                               "modes: linear | bilinear | bicubic | trilinear")
    if not x.dtype.is_floating:
        raise _core.DTypeError(f"interpolate needs a floating-point tensor, got {x.dtype.name}")
    k = x.ndim - 2
    if k < 1 or k > 3 or (linear and k != _SPATIAL[mode]):
        want = f"{_SPATIAL[mode] + 2}-D" if linear else "3-D, 4-D or 5-D"
        raise _core.ShapeError(f"interpolate(mode={mode!r}) expects a {want} input (batch, "
                               f"channels, spatial...), got shape {x.shape}")
    sizes, sfs = _out_sizes(x, size, scale_factor, k, recompute_scale_factor)
    align = bool(align_corners)
    out = x
    for j in range(k):                        # the last dim first, as torch's kernels combine
        d = x.ndim - 1 - j
        n_in, n_out, sf = x.shape[d], sizes[-1 - j], sfs[-1 - j]
        scale = _scale(n_in, n_out, sf, align, linear)
        if linear:
            a = _linear_matrix(n_in, n_out, scale, align, x)
            out = _core.matmul(out.movedim(d, -1), a.T).movedim(-1, d)
        else:
            idx = _nearest_index(n_in, n_out, scale, mode == "nearest-exact")
            out = index_select(out, d, _core.tensor(idx, device=x.device))
    return out


class Upsample(Module):
    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, input):  # noqa: A002
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           self.recompute_scale_factor)

    def extra_repr(self):
        what = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else \
            f"size={self.size!r}"
        return f"{what}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
