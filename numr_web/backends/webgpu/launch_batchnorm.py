"""Launcher of the batch norm kernels of shaders/norm.wgsl (contract.NORM): per-chunk partial sums
(bn_stats), per-channel coefficients from them in a fixed order (bn_finalize), then one pass per
element (bn_apply forward, bn_bwd_dx backward). The f32 scratch holds the partials and then
BN_COEFS coefficient arrays of C (norm.wgsl says which); x, dy and the saved activation input are
dense (N, C, S)."""
from __future__ import annotations

from .codegen import act_code
from .contract import NORM, WG, f32_word

L = NORM.layout
_FILE = NORM.name
BN_COEFS = 5                  # per-channel coefficient arrays after the partials
CHUNK_GPU = 4096              # elements per chunk on GPUs (a workgroup each)
CHUNK_CPU_MAX = 8192          # elements per chunk on CPU adapters (one invocation each)


def plan(count, c, budget, cpu):
    """(lanes, elements per chunk, chunks) for channels of `count` elements: on GPUs a workgroup
    per chunk, enough chunks to fill the device; on CPU adapters one invocation per chunk, within
    the loop budget (Mesa llvmpipe stops longer loops)."""
    lanes = 1 if cpu else WG
    chunk = min(CHUNK_CPU_MAX, max(64, -(-count * c // 512))) if cpu else CHUNK_GPU
    if budget:
        chunk = min(chunk, max(lanes, (budget // 4) * lanes))
    chunk = max(1, min(chunk, count))
    return lanes, chunk, -(-count // chunk)


def _bind(d, t):
    return d.bind(t, t.offset, t.span())


def _words(shape, chunk, chunks):
    w = L.new()
    n, c = shape[:2]
    s = 1
    for k in shape[2:]:
        s *= k
    w[L.BN_NB], w[L.BN_C], w[L.BN_S], w[L.N] = n, c, s, n * c * s
    w[L.BN_CHUNK], w[L.BN_CHUNKS] = chunk, chunks
    return w


def scratch_size(c, chunks):
    return chunks * c * 2 + BN_COEFS * c


def coefficient(scratch, k, c, chunks):
    """Element offset in the scratch of coefficient array k."""
    return scratch.offset + chunks * c * 2 + k * c


def forward(d, x, weight, bias, rmean, rvar, scratch, y, z, eps, training, act, lanes, chunk,
            chunks):
    """x dense (N, C, ...); scratch f32 (scratch_size); y (and z, or None) dense like x; eval:
    rmean / rvar the running statistics."""
    w = _words(x.shape, chunk, chunks)
    w[L.EPS] = f32_word(eps)
    bufs = {}
    bufs["x"], w[L.OFFSET_X] = _bind(d, x)
    bufs["gx"], w[L.OFFSET_GX] = _bind(d, scratch)
    c = x.shape[1]
    consts = {"LANES": lanes, "TRAIN": int(training)}
    if training:
        d.launch(_FILE, "bn_stats", x.dtype, consts, list(w), dict(bufs),
                 d.grid_wg(-(-chunks * c // (WG // lanes))))
    fin = dict(bufs)
    if weight is not None:
        fin["w"], w[L.OFFSET_W] = _bind(d, weight)
    if bias is not None:
        fin["b"], w[L.OFFSET_B] = _bind(d, bias)
    if not training:
        fin["mean_in"], w[L.OFFSET_MEAN] = _bind(d, rmean)
        fin["rstd_in"], w[L.OFFSET_RSTD] = _bind(d, rvar)
    d.launch(_FILE, "bn_finalize", x.dtype, {"TRAIN": int(training), "HAS_W": int(weight is not None),
                                              "HAS_B": int(bias is not None)},
             list(w), fin, d.grid(c))
    app = dict(bufs)
    app["y"], w[L.OFFSET_Y] = _bind(d, y)
    if z is not None:
        app["zo"], w[L.OFFSET_Z] = _bind(d, z)
    d.launch(_FILE, "bn_apply", x.dtype, {"ACT": act_code(act), "WRITE_Z": int(z is not None)},
             w, app, d.grid(x.size))


def backward(d, dy, x, sv, fwd_scratch, mean_at, rstd_at, weight, scratch, dx, act, training,
             lanes, chunk, chunks):
    """dy, x (and sv, the activation's saved input, or None) dense; fwd_scratch: the forward's
    scratch (mean_at / rstd_at: element offsets of its mean and rstd inside that view's
    storage); scratch: this pass's f32 scratch; dx dense like x."""
    w = _words(x.shape, chunk, chunks)
    bufs = {}
    bufs["x"], w[L.OFFSET_X] = _bind(d, x)
    bufs["gx"], w[L.OFFSET_GX] = _bind(d, scratch)
    bufs["dy"], w[L.OFFSET_DY] = _bind(d, dy)
    bufs["coef"], rel = _bind(d, fwd_scratch)
    w[L.OFFSET_MEAN] = rel + mean_at - fwd_scratch.offset
    w[L.OFFSET_RSTD] = rel + rstd_at - fwd_scratch.offset
    if sv is not None:
        bufs["sv"], w[L.OFFSET_SV] = _bind(d, sv)
    c = x.shape[1]
    code = act_code(act)
    d.launch(_FILE, "bn_stats", x.dtype, {"LANES": lanes, "BWD": 1, "ACT": code}, list(w),
             dict(bufs), d.grid_wg(-(-chunks * c // (WG // lanes))))
    fin = {"x": bufs["x"], "gx": bufs["gx"], "coef": bufs["coef"]}
    if weight is not None:
        fin["w"], w[L.OFFSET_W] = _bind(d, weight)
    d.launch(_FILE, "bn_finalize", x.dtype, {"BWD": 1, "TRAIN": int(training),
                                              "HAS_W": int(weight is not None)},
             list(w), fin, d.grid(c))
    bufs["y"], w[L.OFFSET_Y] = _bind(d, dx)
    d.launch(_FILE, "bn_bwd_dx", x.dtype, {"ACT": code}, w, bufs, d.grid(x.size))

