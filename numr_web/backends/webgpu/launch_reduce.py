"""Launcher of shaders/reduce.wgsl (sum mean max min, argmax, softmax) and the choice of schedule.

An input view is seen as (kept dims) x (reduced dims), each coalesced (`words`). `plan` picks one
of the schedules (pure: it only looks at sizes and the loop budget):
  "wg"        one workgroup per output, tree in workgroup memory: long rows (the lanes read a
              row together), and on GPUs reductions too few to give each output an invocation
              of its own (one invocation would wait on one load after another);
  "thread"    one invocation per output: many short reductions (coalesced loads when the kept
              axis is the dense one, e.g. a bias gradient's column sums);
  "two_pass"  sums and extrema with few outputs and a long reduced axis: pass 1 writes one partial
              result per (chunk, output) from a short chunk (enough invocations to keep a GPU's
              loads in flight), pass 2 combines each output's partials, one workgroup per output
              while there are few outputs (a lone invocation walking hundreds of partials waits
              on one load after another), else one invocation per output;
  "tree"      as two_pass, but so many partials that combining them would pass the loop budget:
              the backend reduces the partials again (a reduction of the (chunks, outputs) array);
  "dense_first"  a reduction over several dims too long for the loop budget: the backend copies
              the reduced dims into one dense trailing axis first, then plans again.
The loop budget is the most loop iterations one invocation may run (Mesa llvmpipe silently stops
an invocation's loops after 65535 in total; 0 = unlimited); "wg", "two_pass" and "tree" keep every
invocation below half of it. argmax and softmax have no chunked schedule: beyond the budget they
raise BackendLimitError. `run` launches the "wg", "thread" and "two_pass" schedules and `partials`
the first pass of "tree"; the composition is the backend's (backend.py).
"""
from __future__ import annotations

from ...dtypes import float32
from ...errors import BackendLimitError
from .contract import MAXD, REDUCE, WG
from .views import coalesce, dense_strides, prod

K = REDUCE
L = K.layout
_FILE = K.name
TWO_PASS_INVOCATIONS = 1 << 19      # pass 1 aims at about this many invocations
MIN_CHUNK = 16                      # ... of at least this many elements each
CPU_MIN_CHUNK = 64                  # (on CPU adapters)
WG_PASS2_OUTPUTS = 1 << 15          # pass 2 runs one workgroup per output below this many outputs
WG_MIN_R = 32                       # ... as does any reduction of this many elements or more
SHORT_SUM = K.constants["BLOCK"][0]  # chunks up to reduce.wgsl's BLOCK are summed by short_sum


def words(h, kept, red, kept_out=None, red_out=None):
    """Metadata of the (kept) x (reduced) view of h: shapes and strides, NK, NR and R."""
    kshape, (kin, kout) = coalesce([h.shape[i] for i in kept],
                                   [[h.strides[i] for i in kept],
                                    kept_out or dense_strides([h.shape[i] for i in kept])])
    rshape, (rin, rout) = coalesce([h.shape[i] for i in red],
                                   [[h.strides[i] for i in red], red_out or [0] * len(red)])
    if not rshape:
        rshape, rin, rout = [1], [0], [0]
    if len(kshape) > MAXD or len(rshape) > MAXD:
        raise BackendLimitError(f"reduction over a view with more than {MAXD} non-mergeable dims")
    w = L.new()
    w[L.NK], w[L.NR], w[L.R] = len(kshape), len(rshape), prod(rshape)
    nk, nr = len(kshape), len(rshape)
    w[L.KEPT_SHAPE:L.KEPT_SHAPE + nk] = kshape
    w[L.KEPT_STRIDES_IN:L.KEPT_STRIDES_IN + nk] = kin
    w[L.KEPT_STRIDES_OUT:L.KEPT_STRIDES_OUT + nk] = kout
    w[L.RED_SHAPE:L.RED_SHAPE + nr] = rshape
    w[L.RED_STRIDES_IN:L.RED_STRIDES_IN + nr] = rin
    w[L.RED_STRIDES_OUT:L.RED_STRIDES_OUT + nr] = rout
    return w


def kept_dense(w):
    """Whether the innermost kept dim has input stride 1 (consecutive outputs, consecutive loads)."""
    nk = w[L.NK]
    return nk > 0 and w[L.KEPT_STRIDES_IN + nk - 1] == 1


def plan(kind, R, n_out, nr, dense_kept, budget, cpu=False):
    """-> (schedule, chunks, elements per chunk). kind: "reduce", "argmax" or "softmax"; R:
    elements per reduction; nr: coalesced reduced dims; budget: loop iterations (0: no limit);
    cpu: the adapter runs shaders on the CPU (llvmpipe, SwiftShader), where a workgroup's
    barriers cost more than the loads they overlap: workgroups only for long rows with few
    outputs, chunks of CPU_MIN_CHUNK."""
    half = budget // 2
    per_elem = 2 + nr                  # loop iterations per element: its own + the offset loop
    too_long = bool(budget) and R * per_elem > half
    if too_long and (kind != "reduce" or nr != 1):
        if kind != "reduce":
            raise BackendLimitError(
                f"{kind} over {R} elements per row exceeds this adapter's shader loop limit "
                f"(~{half // per_elem} elements; Mesa llvmpipe); use a GPU adapter")
        return "dense_first", 1, R
    wg_ok = not budget or (-(-R // WG)) * per_elem + 64 < half
    if R >= 256 and not dense_kept and wg_ok and (not cpu or n_out < 4096):
        return "wg", 1, R           # long rows: the lanes read them together
    if kind == "reduce" and nr == 1 and (R >= 512 and n_out < (1 << 18) or too_long):
        chunks = min(-(-R // (CPU_MIN_CHUNK if cpu else MIN_CHUNK)),
                     max(1, TWO_PASS_INVOCATIONS // n_out))
        if budget:
            chunks = max(chunks, -(-R * per_elem // half))
        rc = -(-R // chunks)
        chunks = -(-R // rc)
        if chunks > 1:
            return ("tree" if budget and chunks * per_elem > half else "two_pass"), chunks, rc
    if R >= WG_MIN_R and n_out < WG_PASS2_OUTPUTS and wg_ok and not cpu:
        return "wg", 1, R           # too few outputs for an invocation each to keep loads in flight
    return "thread", 1, R


def op_consts(kind, op):
    """Override constants of a reduction kind: op is a REDUCE op name, or log (bool) for softmax."""
    if kind == "reduce":
        return {"OP": K.code("REDUCE", op)}
    if kind == "softmax":
        return {"OP": K.code("SOFTMAX", "log" if op else "plain")}
    return {}


def _out_binding(kind):
    return "outi" if kind == "argmax" else "out"


def run(d, schedule, kind, op, h, w, out, n_out, chunks=1, rc=None, cpu=False):
    """Launch schedule "wg", "thread" or "two_pass" of a reduction of view h (metadata w from
    `words`) into view out (cpu: as for `plan`)."""
    R = w[L.R]
    inp, w[L.OFFSET_IN] = d.bind(h, h.offset, h.span())
    obuf, w[L.OFFSET_OUT] = d.bind(out, out.offset, out.span())
    w[L.N], w[L.CHUNK], w[L.CHUNKS], w[L.COUNT] = n_out, R, 1, R
    if schedule == "wg":
        d.launch(_FILE, kind + "_wg", h.dtype, op_consts(kind, op), w,
                 {"a": inp, _out_binding(kind): obuf}, d.grid_wg(n_out))
    elif schedule == "thread":
        d.launch(_FILE, kind + "_thread", h.dtype, op_consts(kind, op), w,
                 {"a": inp, _out_binding(kind): obuf}, d.grid(n_out))
    elif schedule == "two_pass":
        part = partials(d, op, h, w, n_out, chunks, rc, bound=inp)
        pbuf, prel = d.bind(part, 0, part.size)
        w2 = words(part, [1], [0])
        w2[L.N], w2[L.CHUNK], w2[L.CHUNKS], w2[L.COUNT] = n_out, chunks, 1, R
        w2[L.OFFSET_IN], w2[L.OFFSET_OUT] = prel, w[L.OFFSET_OUT]
        if n_out < WG_PASS2_OUTPUTS and not cpu:
            d.launch(_FILE, "reduce_wg", h.dtype, op_consts(kind, op), w2,
                     {"a": pbuf, "out": obuf}, d.grid_wg(n_out))
        else:
            d.launch(_FILE, "reduce_thread", h.dtype, op_consts(kind, op), w2,
                     {"a": pbuf, "out": obuf}, d.grid(n_out))
    else:
        raise ValueError(f"schedule {schedule!r} is composed by the backend, not launched")
    return out


def columns_v4(dtype, op, w, n_out, rc):
    """Whether pass 1 can read four columns as one vec4 (colsum_v4): a float32 sum over one
    reduced dim of a dense kept dim, offsets and row stride multiples of 4, chunks of at most
    BLOCK elements (the order of reduce_thread's additions)."""
    return (dtype == float32 and op in ("sum", "mean") and w[L.NK] == 1 and w[L.NR] == 1
            and w[L.KEPT_STRIDES_IN] == 1 and n_out % 4 == 0 and rc <= SHORT_SUM
            and w[L.RED_STRIDES_IN] % 4 == 0 and w[L.OFFSET_IN] % 4 == 0)


def partials(d, op, h, w, n_out, chunks, rc, bound=None):
    """Pass 1 of the chunked schedules: a new (chunks, n_out) array of partial results (sums for
    a mean). w: the metadata from `words`."""
    part = d.alloc((chunks, n_out), h.dtype)
    if bound is None:
        bound, w[L.OFFSET_IN] = d.bind(h, h.offset, h.span())
    pbuf, prel = d.bind(part, 0, part.size)
    w1 = list(w)
    w1[L.N], w1[L.CHUNK], w1[L.CHUNKS], w1[L.COUNT], w1[L.OFFSET_OUT] = n_out, rc, chunks, w[L.R], prel
    consts = op_consts("reduce", "sum" if op == "mean" else op)
    if columns_v4(h.dtype, op, w1, n_out, rc):
        d.launch(_FILE, "colsum_v4", h.dtype, consts, w1, {"a4": bound, "out": pbuf},
                 d.grid(n_out // 4 * chunks))
    else:
        d.launch(_FILE, "reduce_thread", h.dtype, consts, w1, {"a": bound, "out": pbuf},
                 d.grid(n_out * chunks))
    return part
