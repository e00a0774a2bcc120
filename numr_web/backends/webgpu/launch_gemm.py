"""Launcher of shaders/matmul.wgsl and matmul_sg.wgsl: GEMM entry selection and the batched launch.

Entries (all with the fused bias + activation epilogue, strided operands, broadcast batches):
  gemm      64 x 64 output tile, 4 x 4 per invocation            (GEMM tile "64")
  gemm_big  128 x 128 tile, 8 x 8 per invocation, M, N >= 128    (GEMM tile "128")
  gemm_v4   vec4 loads, double-buffered, 128 x 64 (8 x 4) or with V4_WIDE 128 x 128 (8 x 8);
            only for operands row- or column-major with vec4-aligned rows / columns (a
            transposed view is read as it lies), else gemm      (GEMM tiles "v4", "v4w")
  gemm_sg   (matmul_sg.wgsl) subgroup shuffles transpose a's fragments, 128 x 128 (8 x 8), vec4
            loads, double-buffered, k loop unrolled 4x; needs the adapter feature "subgroup" and 32 KiB of
            workgroup memory (SG_WG_BYTES), else the tile falls back to v4w / v4     (GEMM tile "sg")
"auto" takes v4w for GEMMs of at least 256 x 256 where the device grants the workgroup memory
gemm_v4 needs (V4W_WG_BYTES, 32 KiB: WebGPU's default is 16), gemm elsewhere; it does not take sg,
which is slower than v4w on the H200 (docs/benchmarks.md). `select` is pure.
Under a loop budget (launch_reduce.py) a GEMM runs in blocks of at most `k_block(budget)` along K,
summed by the backend (split-K).
"""
from __future__ import annotations

from ...errors import BackendLimitError
from ...vocab.activations import ACT
from .contract import MATMUL, MATMUL_SG, MAX_GROUPS, MAXD
from .views import broadcast_shapes, coalesce, expanded, prod

K = MATMUL
L = K.layout
GEMM_TILES = ("auto", "64", "128", "v4", "v4w", "sg")
V4W_WG_BYTES = (1024 + 1024) * 16   # workgroup memory of gemm_v4 (As4 + Bs4 in matmul.wgsl)
SG_WG_BYTES = (1024 + 1024) * 16    # workgroup memory of gemm_sg (Asg + Bsg in matmul_sg.wgsl)
_FILE = {"gemm": K.name, "gemm_big": K.name, "gemm_v4": K.name, "gemm_sg": MATMUL_SG.name}
LOOP_ITERS_PER_K = 10               # loop iterations per K element in any GEMM entry (an upper bound)
# From this many output elements a float32 GEMM + activation runs the activation as its own pass
# (the bias stays in the epilogue): an activation's code inlined in the epilogue slows the whole
# kernel (H200, 8192 x 4096 x 4096: GELU 8.6 ms fused, 7.5 split; tanh, sigmoid, silu, elu,
# softplus, mish 0.6-0.9 ms: docs/benchmarks.md). The piecewise rows of the ACT table
# (EPILOGUE_ACTS: a few selects) cost nothing there and stay in it. float32 only: there the pass reads the very z the epilogue had
# (float16 storage rounds it first).
ACT_AFTER_MIN = 1 << 22
EPILOGUE_ACTS = frozenset(n for n, a in ACT.items() if a.piecewise)


# An operand that is neither row- nor column-major with vec4-aligned rows / columns keeps a GEMM
# off gemm_v4; for GEMMs of at least this many multiply-adds a dense copy of it (one pass over the
# operand) costs less than the slower entry (docs/benchmarks.md)
DENSE_COPY_MIN_MACS = 1 << 27


def vec4_layout(rows, cols, s_row, s_col):
    """"row" / "col" where a rows x cols operand with these strides can be read a vec4 at a time
    along its rows / columns (unit stride there, the other stride and extent multiples of 4)."""
    if s_col == 1 and cols % 4 == 0 and s_row % 4 == 0:
        return "row"
    if s_row == 1 and rows % 4 == 0 and s_col % 4 == 0:
        return "col"
    return None


def dense_operands(copy, a, b, N, tile, caps):
    """(a, b) with each operand that gemm_v4 (v4w) cannot read a vec4 at a time copied densely (by
    `copy`) where that lets it run a GEMM of at least DENSE_COPY_MIN_MACS multiply-adds."""
    M, K_ = a.shape[-2], a.shape[-1]
    if not ("v4w" in caps and str(tile) in ("auto", "v4w") and M >= 256 and N >= 256
            and K_ % 4 == 0 and N % 4 == 0 and M * N * K_ >= DENSE_COPY_MIN_MACS):
        return a, b
    return tuple(x if vec4_layout(*x.shape[-2:], *x.strides[-2:]) and x.offset % 4 == 0
                 and all(s % 4 == 0 for s in x.strides[:-2]) else copy(x) for x in (a, b))


# A GEMM whose output has few tiles and a long K (a weight gradient x.T @ dz: K = tokens) would
# leave most of a GPU idle, each workgroup looping over all of K: it runs as SPLIT_K batched slices
# of K and one sum over them. Applied when the output has fewer than SPLIT_TILES 128 x 128 tiles
# and K is at least SPLIT_MIN_K per slice.
SPLIT_TILES = 256
SPLIT_MIN_K = 512
SPLIT_MAX = 32


def split_k(M, N, K_, budget):
    """Slices of K for an M x K_ x N GEMM: 1 (no split), or a power of two dividing K_ into slices
    of at least SPLIT_MIN_K, a multiple of 16 long, until the slices' tiles reach SPLIT_TILES."""
    if budget:
        return 1                       # under a loop budget k_block already splits K
    tiles = -(-M // 128) * -(-N // 128)
    s = 1
    while tiles * s < SPLIT_TILES and s < SPLIT_MAX and K_ % (2 * s * 16) == 0 \
            and K_ // (2 * s) >= SPLIT_MIN_K:
        s *= 2
    return s


def k_block(budget):
    """The largest K one GEMM launch may have under a loop budget (a power of two, >= 16)."""
    return max(16, 1 << ((budget // LOOP_ITERS_PER_K).bit_length() - 1)) if budget else None


def caps(adapter):
    """The optional GEMM tiles this adapter can run: "v4w" (workgroup memory), "sg" (subgroups)."""
    wg = adapter.limits.get("maxComputeWorkgroupStorageSize") or 0
    have = set()
    if wg >= V4W_WG_BYTES:
        have.add("v4w")
    if wg >= SG_WG_BYTES and "subgroup" in adapter.features:
        have.add("sg")
    return frozenset(have)


def activation_after(act, dtype, ashape, bshape):
    """True where gemm_bias_act runs `act` as a pass after the GEMM (ACT_AFTER_MIN)."""
    if act in EPILOGUE_ACTS or dtype.name != "float32":
        return False
    batch = prod(broadcast_shapes(ashape[:-2], bshape[:-2]))
    return batch * ashape[-2] * bshape[-1] >= ACT_AFTER_MIN


def select(M, N, K_, sam, sak, sbk, sbn, vec4_words, tile, caps):
    """-> (entry, tile rows, tile columns, override constants) for an M x K_ x N GEMM with a's
    strides (sam, sak), b's (sbk, sbn); vec4_words: the element offsets and batch strides that
    must be multiples of 4 for vec4 loads; caps: the adapter's optional tiles (`caps`)."""
    gt = str(tile)
    if gt == "auto":
        gt = "v4w" if "v4w" in caps and M >= 256 and N >= 256 else "64"
    if gt == "sg" and "sg" not in caps:
        gt = "v4w"
    # each operand row- or column-major with vec4-aligned rows / columns (the vec4 entries)
    a_lay, b_lay = vec4_layout(M, K_, sam, sak), vec4_layout(K_, N, sbk, sbn)
    vec4 = a_lay is not None and b_lay is not None and all(x % 4 == 0 for x in vec4_words)
    lanes = {"A_MLANES": int(a_lay == "col"), "B_KLANES": int(b_lay == "col")}
    if gt == "sg" and vec4:
        return "gemm_sg", 128, 128, {
            "CHECK": int(M % 128 != 0 or N % 128 != 0 or K_ % 16 != 0), **lanes}
    v4 = gt in ("v4", "v4w") and vec4 and K_ % 4 == 0 and N % 4 == 0
    big = M >= 128 and N >= 128 and gt == "128"
    wide = v4 and gt == "v4w"
    tm, tn = (128, 128 if wide else 64) if v4 else ((128, 128) if big else (64, 64))
    consts = {"CHECK": int(M % tm != 0 or N % tn != 0 or K_ % 16 != 0)}
    if v4:
        consts.update(V4_WIDE=int(wide), **lanes)
        return "gemm_v4", tm, tn, consts
    consts["A_MLANES"] = int(sam == 1 and sak != 1)
    consts["B_KLANES"] = int(sbk == 1 and sbn != 1)
    return ("gemm_big" if big else "gemm"), tm, tn, consts


def launch(d, a, b, bias, out, z, act_code, tile, caps):
    """out = act(a @ b + bias) (and z = a @ b + bias when z is given): a (..., M, K), b (..., K, N)
    views whose batch dims broadcast to out's (batch..., M, N); bias (N,) or None."""
    M, K_ = a.shape[-2], a.shape[-1]
    N = b.shape[-1]
    bshape = out.shape[:-2]
    nb = prod(bshape)
    ea = expanded(a, bshape + (M, K_))
    eb = expanded(b, bshape + (K_, N))
    nbd = len(bshape)
    bsh, (sa, sb) = coalesce(list(bshape), [list(ea.strides[:nbd]), list(eb.strides[:nbd])])
    sam, sak = ea.strides[-2], ea.strides[-1]
    sbk, sbn = eb.strides[-2], eb.strides[-1]
    # fold the batch into M when b is shared and a's batch is contiguous with its rows
    if len(bsh) == 1 and sb[0] == 0 and sa[0] == M * sam and sam != 0:
        M, bsh, sa, sb, nb = M * bsh[0], [], [], [], 1
    elif not bsh:
        nb = 1
    if len(bsh) > MAXD:
        raise BackendLimitError(f"matmul with more than {MAXD} non-mergeable batch dims")
    w = L.new()
    w[L.M], w[L.N], w[L.K], w[L.BATCH_NDIM] = M, N, K_, len(bsh)
    w[L.A_STRIDE_M], w[L.A_STRIDE_K], w[L.B_STRIDE_K], w[L.B_STRIDE_N] = sam, sak, sbk, sbn
    w[L.BATCH_SHAPE:L.BATCH_SHAPE + len(bsh)] = bsh
    w[L.A_BATCH_STRIDES:L.A_BATCH_STRIDES + len(sa)] = sa
    w[L.B_BATCH_STRIDES:L.B_BATCH_STRIDES + len(sb)] = sb
    abuf, w[L.OFFSET_A] = d.bind(a, a.offset, ea.span())
    bbuf, w[L.OFFSET_B] = d.bind(b, b.offset, eb.span())
    bufs = {}
    bufs["out"], w[L.OFFSET_OUT] = d.bind(out, 0, out.size)
    if bias is not None:
        bufs["bias"], w[L.OFFSET_BIAS] = d.bind(bias, bias.offset, bias.span())
        w[L.BIAS_STRIDE] = bias.strides[-1] if bias.ndim else 0
    if z is not None:
        bufs["zout"], w[L.OFFSET_Z] = d.bind(z, 0, z.size)
    entry, tm, tn, consts = select(M, N, K_, sam, sak, sbk, sbn,
                                   [w[L.OFFSET_A], w[L.OFFSET_B]] + sa + sb,
                                   tile, caps)
    consts.update(ACT=act_code, HAS_BIAS=int(bias is not None), WRITE_Z=int(z is not None))
    if entry in ("gemm_v4", "gemm_sg"):
        bufs["a4"], bufs["b4"] = abuf, bbuf
    else:
        bufs["a"], bufs["b"] = abuf, bbuf
    gx, gy = -(-N // tn), -(-M // tm)
    if gx > MAX_GROUPS or gy > MAX_GROUPS:
        raise BackendLimitError(f"matmul output {M}x{N} needs more than {MAX_GROUPS} "
                                "workgroups per dimension")
    for b0 in range(0, nb, MAX_GROUPS):
        w[L.BATCH0] = b0
        d.launch(_FILE[entry], entry, a.dtype, consts, w, bufs, (gx, gy, min(MAX_GROUPS, nb - b0)))
    return out, z
