"""nn.cu's softmax cross-entropy kernels checked without a GPU: compiled with g++ against
tests/cuda_emu.h (a warp per row, its lanes as threads) and launched on numpy arrays, against the
loss, log-sum-exp and gradient written here in float64: every row size around a warp's 32 lanes,
label smoothing on and off, an ignored row, a confident row (p near 1 at its label), a dense and
a broadcast (a mean's) gradient."""
from pathlib import Path

import numpy as np
import pytest

from numr_web.backends.cuda import nn as K

from helpers import emu_compile, emu_run

CU = Path(K.__file__).parent
# storage type -> (numpy dtype, the row stats' dtype: the compute type)
TYPES = {"float": (np.float32, np.float32), "double": (np.float64, np.float64),
         "half_t": (np.float16, np.float32)}
UNIT = {np.float16: 2.0 ** -11, np.float32: 2.0 ** -24, np.float64: 2.0 ** -53}
IGNORE = -100


def _source():                                   # (cuda_emu.h has kernels.cu's IO<S>)
    nn = (CU / "nn.cu").read_text()
    head = nn[:nn.index("// -- layer / RMS norm")]
    row = next(ln for ln in nn.splitlines() if ln.startswith("#define ROW_OF_WARP"))
    xent = nn[nn.index("// -- softmax cross-entropy"):nn.index("// -- scatter-add of whole rows")]
    return "\n".join([head, row, xent])


KERNELS = [f"{k}<{ct}, {sm}>" for ct in TYPES for sm in ("false", "true")
           for k in ("xent_fwd", "xent_bwd")]


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return emu_compile(tmp_path_factory.mktemp("xent_emu"), _source(), KERNELS)


def _truth(x, labels, s, g):
    x = x.astype(np.float64)
    m = x.max(1, keepdims=True)
    lse = np.log(np.exp(x - m).sum(1)) + m[:, 0]
    keep = labels != IGNORE
    y = np.where(keep, labels, 0)
    n = x.shape[1]
    loss = np.where(keep, (1 - s) * (lse - x[np.arange(len(x)), y]) +
                    s * (lse - x.mean(1)), 0.0)
    d = np.exp(x - lse[:, None]) - s / n
    d[np.arange(len(x)), y] -= 1 - s
    dx = np.where(keep[:, None], d * g[:, None], 0.0)
    return loss, lse, dx


@pytest.mark.parametrize("ct", list(TYPES))
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("n", [5, 32, 65, 100])
@pytest.mark.parametrize("broadcast", [False, True], ids=["dense_g", "mean_g"])
def test_cross_entropy_kernels_against_float64(lib, ct, smoothing, n, broadcast):
    dt, ct_dt = TYPES[ct]
    rng = np.random.default_rng(n)
    rows = 19                                    # 3 blocks of 8 warps, the last one partly idle
    x = (rng.standard_normal((rows, n)) * 3).astype(dt)
    labels = rng.integers(0, n, rows).astype(np.int32)
    labels[4] = IGNORE
    x[7, labels[7]] = x[7].max() + 12             # p near 1: p - 1 = -others / S, not 1 - 1
    g = np.full(rows, 0.37, dt) if broadcast else rng.standard_normal(rows).astype(dt)
    loss, stats = np.full(rows, np.nan, dt), np.full((rows, 3), np.nan, ct_dt)
    sm = "true" if smoothing else "false"
    blocks = -(-rows // K.WARPS)
    emu_run(lib, KERNELS.index(f"xent_fwd<{ct}, {sm}>"), blocks, 32 * K.WARPS,
            [x, labels, loss, stats, rows, n, IGNORE, smoothing])
    dx = np.full((rows, n), np.nan, dt)
    emu_run(lib, KERNELS.index(f"xent_bwd<{ct}, {sm}>"), blocks, 32 * K.WARPS,
            [x, labels, stats, g, 0 if broadcast else 1, dx, rows, n, IGNORE, smoothing])
    t_loss, t_lse, t_dx = _truth(x, labels, smoothing, g.astype(np.float64))
    assert np.array_equal(stats[:, 0], x.max(1))                 # the row max, exactly
    lse = stats[:, 0].astype(np.float64) + np.log(stats[:, 1].astype(np.float64))
    u, uo = UNIT[ct_dt], UNIT[dt]                # computed in ct_dt, stored in dt (rounded once)
    ax = np.abs(x.astype(np.float64))
    # lse: the max plus a log of a sum of n terms, each rounded; the loss adds x's terms
    lse_tol = 4 * u * (np.abs(t_lse) + np.log(n) + n)
    assert np.all(np.abs(lse - t_lse) <= lse_tol)
    loss_tol = lse_tol + 4 * u * (ax.max(1) + smoothing * ax.sum(1)) + uo * np.abs(t_loss)
    assert np.all(np.abs(loss - t_loss) <= loss_tol)
    assert loss[4] == 0 and not dx[4].any()     # the ignored row
    # dx: exp(x - lse) to a few ulps of 1, times g, rounded once to dt
    gx = np.abs(g.astype(np.float64))[:, None]
    assert np.all(np.abs(dx - t_dx) <= (8 * u + lse_tol[:, None]) * gx + uo * np.abs(t_dx))
    if not smoothing:                            # a few ulps of its own size, not of 1
        import mpmath
        with mpmath.workdps(40):
            e = [mpmath.exp(mpmath.mpf(float(v))) for v in x[7]]
            t7 = float((e[labels[7]] / mpmath.fsum(e) - 1) * mpmath.mpf(float(g[7])))
        d7 = dx[7, labels[7]]
        assert abs(d7 - t7) <= (8 * u + 2 * uo) * abs(t7), (d7, t7)
