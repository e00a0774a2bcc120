"""Launcher of shaders/attention.wgsl: fused softmax attention, FlashAttention-2 style. Forward:
a workgroup per block of query rows walks the key tiles with an online softmax and writes the
output and each row's log-sum-exp; backward: delta = rowsum(dout * out) (attn_bwd_prep), then one
kernel per block of key rows accumulating dk, dv over the query tiles (attn_bwd_dkv) and one per
block of query rows accumulating dq over the key tiles (attn_bwd_dq), both recomputing the
probabilities from the log-sum-exp (no float atomics in WGSL). Nothing of size Tq x Tk is held.

Tiles. A kernel's tile is (NRG, NL, SK): NRG row groups of 4 rows (a block of 4 NRG rows), NL
invocations per row group, SK columns per invocation in each tile of NL SK columns. `TILES` lists
them per kernel in order of preference; `tiles` takes the first whose outputs fit the registers
(ceil(head dim / 4 / NL) <= 4 groups of 4 dims) and whose workgroup memory (`layout`) fits the
device's maxComputeWorkgroupStorageSize (WebGPU's default 16 KiB; browsers, lavapipe 32 KiB; the
H200's Vulkan driver 48). The knob NUMR_WEBGPU_ATTN_TILE (the backend's `attn_tile`) overrides
the table: "16x8x8" for every kernel, or per kernel "fwd=16x8x8,dq=16x8x8,dkv=16x8x4".

Placement. Each operand and result is B matrices (T, d) of contiguous rows, placed by four
metadata words (`role_words`: element offset, two batch strides, row stride): the heads of a fused
qkv projection (B, H, T, d) with rows 3 H d apart are read where they lie, and the results are
written in (B, T, H, d) memory (`heads_outer`), where the model's merge of the heads is a view
(the forward's output: the backend allocates it so).
`placement` says whether a view can be read so (else the backend copies it first). Where q, k, v
are disjoint views of one buffer placed alike (`in_place`), dq, dk, dv are written in one new
buffer exactly as q, k, v lie in theirs, so that split's backward joins them without a copy.

Loop budget. Each dispatch covers the columns (keys; queries for dk, dv) of one chunk: `chunk`
picks as many whole tiles as keep an invocation's loop iterations within half the loop budget
(Mesa llvmpipe stops an invocation after 65535); the running state (the row max and sum, the
output's or the gradients' running sums) is kept in f32 buffers between the dispatches, and the
last one writes the results.
"""
from __future__ import annotations

from ...errors import BackendLimitError, BackendUnavailableError
from ...dtypes import float32
from ...shapes import disjoint_alike, matrices_layout
from .contract import ATTENTION, ATTN_MAX_D, MAXD, WG, f32_word
from .views import GPUArray, coalesce, dense_strides

K = ATTENTION
L = K.layout
_FILE = K.name
KINDS = ("fwd", "dq", "dkv")
MAX_SK = 16                      # columns per invocation the shader unrolls (`Blk`)
MAX_GROUPS = 4                   # output groups of 4 dims per invocation (4 NL x 4 dims)
VEC4_BYTES = 16
PREP_LANES = 16                  # attn_bwd_prep's invocations a query row (a divisor of WG)
# (NRG, NL, SK) per kernel, in order of preference (see the module docstring; figures in
# docs/benchmarks.md: 16x8x4 ahead of 16x8x8 for the forward and dq on the H100, at 256 and 1024
# keys). 16x8x8 and dkv's 8x8x8 need more than 32 KiB of workgroup memory at head dim 64.
TILES = {
    "fwd": ((16, 8, 4), (16, 8, 8), (16, 4, 8), (8, 8, 4), (8, 4, 8), (8, 8, 2), (4, 8, 2),
            (4, 8, 1)),
    "dq": ((16, 8, 4), (16, 8, 8), (16, 4, 8), (8, 8, 4), (8, 4, 8), (8, 8, 2), (4, 8, 2),
           (4, 8, 1)),
    "dkv": ((16, 8, 4), (8, 8, 8), (16, 4, 4), (8, 8, 4), (8, 4, 4), (8, 8, 2), (4, 8, 2),
            (4, 8, 1)),
}

# first choices from LONG columns (queries for dkv): on the H200 and the H100, 8x16x1024x64 causal
# with dkv 16x4x4 0.5-0.6 ms less than 16x8x4; at 256 queries it loses (docs/benchmarks.md)
LONG = 1024
LONG_TILES = {"dkv": (16, 4, 4)}


def parse_tiles(spec):
    """{kind: (NRG, NL, SK)} of a NUMR_WEBGPU_ATTN_TILE value ({} for "auto")."""
    spec = str(spec).strip()
    if spec in ("", "auto"):
        return {}
    out = {}
    try:
        for part in spec.split(","):
            kind, _, shape = part.rpartition("=")
            dims = tuple(int(x) for x in shape.lower().split("x"))
            if len(dims) != 3 or min(dims) < 1 or dims[2] > MAX_SK or kind not in ("",) + KINDS:
                raise ValueError
            for k in ([kind] if kind else KINDS):
                out[k] = dims
    except ValueError:
        raise BackendUnavailableError(
            f"attention tile {spec!r} (NUMR_WEBGPU_ATTN_TILE): expected 'auto', 'RxLxS' (row "
            f"groups x lanes x columns per lane, S <= {MAX_SK}) or 'fwd=RxLxS,dq=RxLxS,dkv=RxLxS'"
        ) from None
    return out


def _pad(n, distinct):
    """The least stride >= n (in vec4s) at which `distinct` lanes reading rows 0, 1, .. of a
    tile hit different 16-byte bank groups (8 of them)."""
    p = max(n, 1)
    while len({(c * p) % 8 for c in range(distinct)}) < distinct:
        p += 1
    return p


def _pad_p(nrg, nl):
    """The least column stride >= nrg of P at which a quarter warp's stores (invocations 0..7:
    row group li // nl, lane li % nl) hit different bank groups."""
    lanes = [(li // nl, li % nl) for li in range(min(8, nrg * nl))]
    p = nrg
    while len({(c * p + rg) % 8 for rg, c in lanes}) < len(lanes):
        p += 1
    return p


def layout(kind, tile, d4, dv4):
    """The override constants of `kind`'s pipeline at `tile` for rows of d4 / dv4 vec4s, with
    TILE the workgroup memory in vec4s."""
    nrg, nl, sk = tile
    bc = nl * sk
    kp, vp, ps = _pad(d4, min(nl, 8)), _pad(dv4, min(nl, 8)), _pad_p(nrg, nl)
    c = {"NRG": nrg, "NL": nl, "SK": sk, "D4": d4, "DV4": dv4, "KP": kp, "VP": vp, "PS": ps}
    if kind == "dkv":               # dout tile at 0, q tile at B0, P, the columns' (lse, delta)
        c["B0"] = bc * vp
        c["P0"] = c["B0"] + bc * kp
        c["R0"] = c["P0"] + bc * ps
        c["TILE"] = c["R0"] + bc
    else:                           # k, then v, at 0; P; (fwd) the rows' maxima per lane
        c["B0"] = 0
        c["P0"] = bc * max(kp, vp)
        c["R0"] = c["P0"] + bc * ps
        c["TILE"] = c["R0"] + (nrg * nl if kind == "fwd" else 0)
    return c


def misfit(kind, tile, d4, dv4, limits):
    """Why `tile` cannot run `kind` at these head dims on a device with these limits (None: it
    can)."""
    nrg, nl, sk = tile
    outs = {"fwd": (dv4,), "dq": (d4,), "dkv": (d4, dv4)}[kind]
    wg = int(limits.get("maxComputeWorkgroupStorageSize") or 16384)
    inv = min(int(limits.get("maxComputeInvocationsPerWorkgroup") or 256),
              int(limits.get("maxComputeWorkgroupSizeX") or 256))
    need = layout(kind, tile, d4, dv4)["TILE"] * VEC4_BYTES
    if any(-(-n // nl) > MAX_GROUPS for n in outs):
        return f"more than {4 * MAX_GROUPS} output dims per invocation (more lanes needed)"
    if nrg * nl > inv:
        return f"{nrg * nl} invocations per workgroup, more than the device's {inv}"
    if need > wg:
        return f"{need} bytes of workgroup memory, more than the device's {wg}"
    return None


def tiles(kind, d4, dv4, limits, want=None, cols=0):
    """The override constants of `kind`'s tile: `want` ((NRG, NL, SK), from the knob) or the
    first of TILES[kind] that fits (LONG_TILES first for at least LONG columns)."""
    table = TILES[kind]
    if cols >= LONG and kind in LONG_TILES:
        table = (LONG_TILES[kind],) + table
    for tile in ((want,) if want else table):
        why = misfit(kind, tile, d4, dv4, limits)
        if why is None:
            return layout(kind, tile, d4, dv4)
    tail = (f"the tile {'x'.join(map(str, want))} (NUMR_WEBGPU_ATTN_TILE) needs {why}; "
            "use 'auto'" if want else "no tile of launch_attention.TILES fits this device")
    raise BackendLimitError(f"attention ({kind}) with head dims {4 * d4} / {4 * dv4}: {tail}")


def loop_iters(kind, c):
    """(iterations per tile, iterations per row block outside the tile loop): an upper bound of
    the loop iterations of one invocation of `kind`'s entry with constants c (counted from the
    shader's loops: tile loads, score, the row-max exchange, accum)."""
    nt, bc = c["NRG"] * c["NL"], c["NL"] * c["SK"]
    ld_k, ld_v = -(-bc * c["D4"] // nt), -(-bc * c["DV4"] // nt)
    fixed = 8 + MAXD + 2 * c["NL"] + 8 * MAX_GROUPS
    if kind == "fwd":
        return 1 + ld_k + ld_v + c["D4"] + c["NL"] + bc, fixed
    if kind == "dq":
        return 1 + ld_k + ld_v + c["D4"] + c["DV4"] + bc, fixed
    return 1 + ld_k + ld_v + -(-bc // nt) + c["D4"] + c["DV4"] + 2 * bc, fixed


def chunk(n, per_tile, fixed, bc, items_per_group, budget):
    """Columns per dispatch: all of them without a budget, else whole tiles of bc columns within
    half the budget (at least one tile)."""
    if not budget:
        return max(n, 1)
    room = budget // 2 // max(1, items_per_group) - fixed
    return bc * max(1, min(-(-max(n, 1) // bc), room // max(1, per_tile)))


def check_dims(D, DV):
    if D > ATTN_MAX_D or DV > ATTN_MAX_D:
        raise BackendLimitError(f"attention with head dims {D} / {DV}: the webgpu kernels hold at "
                                f"most {ATTN_MAX_D} values per row")


def placement(t):
    """(L0, L1, LR) of a (..., T, d) view (shapes.matrices_layout), or None."""
    return matrices_layout(t.shape, t.strides)


def heads_outer(shape):
    """Strides of a (..., H, T, n) array laid out as (..., T, H, n) in memory: the usual merge of
    the heads afterwards (transpose(-3, -2).reshape(..., T, H n)) is then a view."""
    if len(shape) < 3:
        return dense_strides(shape)
    *lead, h, t, n = shape
    return tuple(dense_strides(tuple(lead) + (t * h * n,)))[:-1] + (n, h * n, 1)


def role_words(w, role, t, rel):
    """Fill role's four placement words for view t bound at element offset rel; -> whether they
    are all multiples of 4 (vec4 reads)."""
    l0, l1, lr = placement(t)
    first = getattr(L, role + "_OFF")
    w[first:first + 4] = rel, l0, l1, lr
    return all(x % 4 == 0 for x in (rel, l0, l1, lr))


def _words(B, TQ, TK, D, DV, scale, mask, hn):
    w = L.new()
    w[L.HN] = max(hn, 1)
    w[L.B], w[L.TQ], w[L.TK], w[L.D], w[L.DV] = B, TQ, TK, D, DV
    w[L.SCALE] = f32_word(scale)
    if mask is not None:
        nb = mask.ndim - 2
        bshape, (bstr,) = coalesce(list(mask.shape[:nb]), [list(mask.strides[:nb])])
        if len(bshape) > MAXD:
            raise BackendLimitError(f"attention mask with {len(bshape)} batch dims; at most {MAXD}")
        w[L.MASK_NB] = len(bshape)
        w[L.MASK_BSHAPE:L.MASK_BSHAPE + len(bshape)] = bshape
        w[L.MASK_BSTRIDES:L.MASK_BSTRIDES + len(bshape)] = bstr
        w[L.MASK_SQ], w[L.MASK_SK] = mask.strides[-2], mask.strides[-1]
    return w


def _bind(d, t):
    return d.bind(t, t.offset, t.span())


def _operands(d, q, k, v, mask, w, do=None):
    """The operands' bindings and placement words; -> (bindings, whether vec4 reads are exact:
    head dims and every operand's placement multiples of 4)."""
    bufs, vec = {}, q.shape[-1] % 4 == 0 and v.shape[-1] % 4 == 0
    for name, role, t in (("q", "Q", q), ("k", "K", k), ("v", "V", v), ("dout", "DO", do)):
        if t is None:
            continue
        bufs[name], rel = _bind(d, t)
        vec = role_words(w, role, t, rel) and vec
    if mask is not None:
        bufs["mask"], w[L.OFFSET_MASK] = _bind(d, mask)
    return bufs, vec


def _result(d, w, role, t):
    buf, rel = _bind(d, t)
    role_words(w, role, t, rel)
    return buf


class _Plan:
    """One kernel's launches: constants, grid, and the column chunks of the loop budget."""

    def __init__(self, d, kind, q, v, mask, causal, rows, cols, B, budget, tile, vec):
        D, DV = q.shape[-1], v.shape[-1]
        c = tiles(kind, -(-D // 4), -(-DV // 4), d.adapter.limits, tile, cols)
        self.consts = dict(c, HAS_MASK=int(mask is not None), CAUSAL=int(causal),
                           VEC=int(vec))
        items = B * -(-rows // (4 * c["NRG"]))
        self.grid = d.grid_wg(items)
        per_group = -(-items // (self.grid[0] * self.grid[1]))
        self.bc = c["NL"] * c["SK"]
        self.step = chunk(cols, *loop_iters(kind, c), self.bc, per_group, budget)
        self.cols = cols

    def chunks(self):
        """(first, end, FIRST, LAST) of each dispatch's columns."""
        n = max(self.cols, 1)
        return [(j0, min(n, j0 + self.step), int(j0 == 0), int(j0 + self.step >= n))
                for j0 in range(0, n, self.step)]

    def launch(self, d, entry, dtype, w, bufs):
        for j0, j1, first, last in self.chunks():
            wc = list(w)
            wc[L.J0], wc[L.J1], wc[L.FIRST], wc[L.LAST] = j0, j1, first, last
            d.launch(_FILE, entry, dtype, self.consts, wc, bufs, self.grid)


def _state(d, plan, rows):
    """The f32 running-state buffer of a chunked kernel (vec4 rows), or None (one dispatch)."""
    if len(plan.chunks()) == 1:
        return None
    return d.alloc((max(rows, 1), 4), float32)


def forward(d, q, k, v, mask, causal, scale, out, lse, B, TQ, TK, budget, tile=None):
    """q (..., TQ, D), k (..., TK, D), v (..., TK, DV) views that `placement` describes; mask: a
    float view of (batch..., TQ, TK) or None. Writes out (..., TQ, DV), any placed view, and lse
    (B, TQ) float32 dense."""
    D, DV = q.shape[-1], v.shape[-1]
    check_dims(D, DV)
    w = _words(B, TQ, TK, D, DV, scale, mask, _hn(q))
    bufs, vec = _operands(d, q, k, v, mask, w)
    plan = _Plan(d, "fwd", q, v, mask, causal, TQ, TK, B, budget, (tile or {}).get("fwd"), vec)
    bufs["res"] = _result(d, w, "RES", out)
    bufs["lse"], _ = _bind(d, lse)
    w[L.ST2] = B * TQ * -(-DV // 4)
    st = _state(d, plan, w[L.ST2] + B * TQ)
    if st is not None:
        bufs["st"], _ = _bind(d, st)
    plan.launch(d, "attn_fwd", q.dtype, w, bufs)
    return out, lse


def _hn(t):
    return t.shape[-3] if t.ndim > 2 else 1


def backward(d, do, q, k, v, out, lse, mask, causal, scale, B, TQ, TK, budget, tile=None):
    """-> (dq, dk, dv) in q's dtype, shaped like q, k, v and laid out as `heads_outer` makes them
    (dk and dv in one buffer); do, q, k, v, out views that `placement` describes, lse float32
    (B, TQ) dense."""
    D, DV = q.shape[-1], v.shape[-1]
    check_dims(D, DV)
    tile = tile or {}
    w = _words(B, TQ, TK, D, DV, scale, mask, _hn(q))
    w[L.ROWS] = B * TQ
    ld = d.alloc((B * TQ, 2), float32)
    bufs, vec = _operands(d, q, k, v, mask, w, do)
    pb = {"dout": bufs["dout"], "out_in": _result(d, w, "OUT", out)}
    pb["lse_in"], _ = _bind(d, lse)
    pb["ld"], _ = _bind(d, ld)
    d.launch(_FILE, "attn_bwd_prep", q.dtype, {"VEC": int(vec), "PREP_LANES": PREP_LANES}, w, pb,
             d.grid_wg(-(-B * TQ * PREP_LANES // WG)))
    bufs["ld"] = pb["ld"]

    shared = in_place(d, q, k, v)
    dq = placed(d.alloc((B * TQ * D,), q.dtype), q.shape) if shared is None else shared[1]
    plan = _Plan(d, "dq", q, v, mask, causal, TQ, TK, B, budget, tile.get("dq"), vec)
    st = _state(d, plan, B * TQ * -(-D // 4))
    qb = dict(bufs, res=_result(d, w, "RES", dq))
    if st is not None:
        qb["st"], _ = _bind(d, st)
    plan.launch(d, "attn_bwd_dq", q.dtype, w, qb)

    plan = _Plan(d, "dkv", q, v, mask, causal, TK, TQ, B, budget, tile.get("dkv"), vec)
    if shared is None:
        nk = B * TK * D
        vo = -(-nk // 128) * 128          # dv from a binding boundary (and a whole vec4)
        g = d.alloc((vo + B * TK * DV,), q.dtype)
        dk, dv = placed(g, k.shape), placed(g, v.shape, vo)
    else:
        g, _, dk, dv = shared
    w[L.ST2] = B * TK * -(-D // 4)
    st = _state(d, plan, w[L.ST2] + B * TK * -(-DV // 4))
    gb, rel = _bind(d, g)                 # one binding holds both (g: from element 0)
    role_words(w, "RES", dk, rel + dk.offset)
    role_words(w, "RESV", dv, rel + dv.offset)
    kb = dict(bufs, res=gb)
    if st is not None:
        kb["st"], _ = _bind(d, st)
    plan.launch(d, "attn_bwd_dkv", q.dtype, w, kb)
    return dq, dk, dv


def in_place(d, q, k, v):
    """(their buffer, dq, dk, dv): the gradients in one new buffer, each laid out as q, k, v lie in
    theirs, where q, k, v are disjoint views of one buffer placed alike (the heads of a fused qkv
    projection): split's backward then joins them without a copy (Backend.joined). None
    otherwise."""
    ts = (q, k, v)
    if not (q.storage is k.storage is v.storage) or not q.shape == k.shape == v.shape or \
            not q.strides == k.strides == v.strides or placement(q) is None or \
            not disjoint_alike(q.shape, q.strides, [t.offset for t in ts]):
        return None
    lo = min(t.offset for t in ts)
    g = d.alloc((max(t.offset + t.span() for t in ts) - lo,), q.dtype)
    return (g,) + tuple(GPUArray(g.storage, t.shape, t.dtype, t.strides, t.offset - lo, True)
                        for t in ts)


def placed(g, shape, offset=0):
    """A (..., H, T, n) view of g's storage from element `offset`, laid out as `heads_outer`."""
    return GPUArray(g.storage, shape, g.dtype, heads_outer(shape), offset, True)
