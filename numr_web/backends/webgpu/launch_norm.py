"""Launcher of shaders/norm.wgsl: layer norm / RMS norm and softmax cross-entropy, forward and
backward over dense rows, `lanes` invocations per row. The norm's backward writes dx and, with a
weight, gx = dy * xhat, which the backend sums over the rows (its reductions are scheduled within
the loop budget) for the weight gradient."""
from __future__ import annotations

from ...errors import BackendLimitError
from .contract import NORM, WG, f32_word

K = NORM
L = K.layout
_FILE = K.name


def _bind(d, t):
    return d.bind(t, t.offset, t.span())


def lanes(n, budget, cpu, what="layer norm"):
    """Invocations per row: one on CPU adapters (no barriers) while a row fits the loop budget;
    on GPUs 32 for rows up to 1024 elements, else a whole workgroup."""
    for k in ((1, 32, WG) if cpu else (32, WG) if n <= 1024 else (WG,)):
        if not budget or 4 * (-(-n // k)) + 64 <= budget // 2:
            return k
    raise BackendLimitError(f"{what} over rows of {n} elements exceeds this adapter's "
                            f"shader loop limit (Mesa llvmpipe); use a GPU adapter")


def _grid(d, rows, k):
    return d.grid_wg(-(-rows // (WG // k)))


def forward(d, x, weight, bias, y, mean, rstd, rows, n, eps, rms, k):
    """x dense (rows * n); y dense like x; mean (None for RMS) and rstd dense (rows,); k: lanes."""
    w = L.new()
    w[L.ROWS], w[L.N] = rows, n
    w[L.EPS] = f32_word(eps)
    bufs = {}
    bufs["x"], w[L.OFFSET_X] = _bind(d, x)
    bufs["y"], w[L.OFFSET_Y] = _bind(d, y)
    bufs["rstd"], w[L.OFFSET_RSTD] = _bind(d, rstd)
    if mean is not None:
        bufs["mean"], w[L.OFFSET_MEAN] = _bind(d, mean)
    if weight is not None:
        bufs["w"], w[L.OFFSET_W] = _bind(d, weight)
    if bias is not None:
        bufs["b"], w[L.OFFSET_B] = _bind(d, bias)
    consts = {"RMS": int(rms), "HAS_W": int(weight is not None), "HAS_B": int(bias is not None),
              "LANES": k}
    d.launch(_FILE, "layer_norm", x.dtype, consts, w, bufs, _grid(d, rows, k))


def backward(d, dy, x, weight, mean, rstd, dx, gx, rows, n, rms, k):
    """dy, x dense; dx dense like x; gx (float32, rows * n) when weight is not None."""
    w = L.new()
    w[L.ROWS], w[L.N] = rows, n
    bufs = {}
    bufs["x"], w[L.OFFSET_X] = _bind(d, x)
    bufs["dy"], w[L.OFFSET_DY] = _bind(d, dy)
    bufs["y"], w[L.OFFSET_Y] = _bind(d, dx)
    bufs["rstd_in"], w[L.OFFSET_RSTD] = _bind(d, rstd)
    if mean is not None:
        bufs["mean_in"], w[L.OFFSET_MEAN] = _bind(d, mean)
    if weight is not None:
        bufs["w"], w[L.OFFSET_W] = _bind(d, weight)
        bufs["gx"], w[L.OFFSET_GX] = _bind(d, gx)
    consts = {"RMS": int(rms), "HAS_W": int(weight is not None), "LANES": k}
    d.launch(_FILE, "layer_norm_bwd", x.dtype, consts, w, bufs, _grid(d, rows, k))


def _xent_words(d, labels, rows, n, ignore, smoothing, k):
    """The metadata words, the labels' binding and the overrides both entries start from."""
    w = L.new()
    w[L.ROWS], w[L.N] = rows, n
    w[L.IGNORE] = ignore & 0xFFFFFFFF
    w[L.SMOOTH] = f32_word(smoothing)
    bufs = {}
    bufs["labels"], w[L.OFFSET_LABELS] = _bind(d, labels)
    return w, bufs, {"SMOOTHING": int(smoothing != 0), "LANES": k}


def cross_entropy(d, x, labels, loss, stats, rows, n, ignore, smoothing, k):
    """x dense (rows * n) logits, labels (rows,) int32; writes loss (rows,) and stats (rows, 3)
    f32 (Backend.cross_entropy's)."""
    w, bufs, consts = _xent_words(d, labels, rows, n, ignore, smoothing, k)
    bufs["x"], w[L.OFFSET_X] = _bind(d, x)
    bufs["y"], w[L.OFFSET_Y] = _bind(d, loss)
    bufs["gx"], w[L.OFFSET_STATS] = _bind(d, stats)
    d.launch(_FILE, "xent", x.dtype, consts, w, bufs, _grid(d, rows, k))


def cross_entropy_backward(d, x, labels, stats, g, g_stride, dx, rows, n, ignore, smoothing, k):
    """dx dense like x; g: one value per row, g_stride 1 (dense) or 0 (one value for all)."""
    w, bufs, consts = _xent_words(d, labels, rows, n, ignore, smoothing, k)
    bufs["x"], w[L.OFFSET_X] = _bind(d, x)
    bufs["y"], w[L.OFFSET_Y] = _bind(d, dx)
    bufs["coef"], w[L.OFFSET_STATS] = _bind(d, stats)
    bufs["dy"], w[L.OFFSET_DY] = _bind(d, g)
    w[L.G_STRIDE] = g_stride
    d.launch(_FILE, "xent_bwd", x.dtype, consts, w, bufs, _grid(d, rows, k))
