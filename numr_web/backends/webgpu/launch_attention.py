"""Launcher of shaders/attention.wgsl: fused softmax attention forward (online softmax, returns
the log-sum-exp) and backward (probabilities recomputed from it), one invocation per query row
(per key row for dk / dv). Memory O(T) per row: nothing of size Tq x Tk is stored.

Each invocation loops over the keys (queries) of one chunk per dispatch: `chunk` picks the chunk
so that an invocation's loop iterations stay within half the loop budget (Mesa llvmpipe stops an
invocation after 65535); the running state (max, sum, weighted sums) is kept in f32 buffers
between them, and the last chunk writes the output and the log-sum-exp.
"""
from __future__ import annotations

import struct

from ...errors import BackendLimitError
from ...dtypes import float32
from .contract import ATTENTION, ATTN_MAX_D, ATTN_WG, MAXD
from .views import coalesce

K = ATTENTION
L = K.layout
_FILE = K.name


def chunk(n, per_item, fixed, budget):
    """Items (keys or queries) per dispatch: all of them without a budget."""
    if not budget:
        return max(n, 1)
    room = budget // 2 - fixed
    return max(1, min(max(n, 1), room // max(1, per_item)))


def _grid(d, rows):
    """One invocation per row, ATTN_WG per workgroup."""
    return d.grid_wg(-(-rows // ATTN_WG))


def _n4(n):
    return -(-n // 4)


def _f32_bits(v):
    return struct.unpack("<I", struct.pack("<f", float(v)))[0]


def check_dims(D, DV):
    if D > ATTN_MAX_D or DV > ATTN_MAX_D:
        raise BackendLimitError(f"attention with head dims {D} / {DV}: the webgpu kernels hold at "
                                f"most {ATTN_MAX_D} values per row")


def _words(B, TQ, TK, D, DV, scale, mask):
    w = L.new()
    w[L.TQ], w[L.TK], w[L.D], w[L.DV], w[L.SCALE] = TQ, TK, D, DV, _f32_bits(scale)
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


def _common(d, q, k, v, mask, w):
    bufs = {}
    for name, t in (("q", q), ("k", k), ("v", v)):
        bufs[name], rel = _bind(d, t)
        if rel:
            raise BackendLimitError("attention operands must start on a binding boundary")
    if mask is not None:
        bufs["mask"], w[L.OFFSET_MASK] = _bind(d, mask)
    return bufs


def forward(d, q, k, v, mask, causal, scale, out, lse, B, TQ, TK, budget):
    """q (B*TQ, D), k (B*TK, D), v (B*TK, DV) dense from element 0 of fresh buffers; mask: a
    float view of (batch..., TQ, TK) or None. Writes out (B, TQ, DV) and lse (B, TQ)."""
    D, DV = q.shape[-1], v.shape[-1]
    check_dims(D, DV)
    w = _words(B, TQ, TK, D, DV, scale, mask)
    rows = B * TQ
    w[L.ROWS] = rows
    consts = {"HAS_MASK": int(mask is not None), "CAUSAL": int(causal)}
    kc = chunk(TK, _n4(D) + _n4(DV) + 4, 3 * _n4(DV) + _n4(D) + DV + 16, budget)
    state = rows if kc < TK else 1                # the running state, kept between chunks
    acc = d.alloc((state, 4 * _n4(DV)), float32)
    ml = d.alloc((state, 2), float32)
    bufs = _common(d, q, k, v, mask, w)
    bufs["acc"], _ = _bind(d, acc)
    bufs["ml"], _ = _bind(d, ml)
    bufs["out"], _ = _bind(d, out)
    bufs["lse"], _ = _bind(d, lse)
    for j0 in range(0, max(TK, 1), kc):
        wc = list(w)
        wc[L.J0], wc[L.J1], wc[L.FIRST] = j0, min(TK, j0 + kc), int(j0 == 0)
        wc[L.LAST] = int(j0 + kc >= TK)
        d.launch(_FILE, "attn_fwd", q.dtype, consts, wc, bufs, _grid(d, rows))
    return out, lse


def backward(d, do, q, k, v, out, lse, mask, causal, scale, B, TQ, TK, budget):
    """-> (dq / scale, dk / scale, dv) as new float32 arrays (B*TQ, D4), (B*TK, D4), (B*TK, DV4)
    (head dims padded to whole vec4s: the caller slices them); every operand dense from element 0."""
    D, DV = q.shape[-1], v.shape[-1]
    check_dims(D, DV)
    w = _words(B, TQ, TK, D, DV, scale, mask)
    consts = {"HAS_MASK": int(mask is not None), "CAUSAL": int(causal)}
    ld = d.alloc((B * TQ, 2), float32)
    dq = d.alloc((B * TQ, 4 * _n4(D)), float32)
    dk = d.alloc((B * TK, 4 * _n4(D)), float32)
    dv = d.alloc((B * TK, 4 * _n4(DV)), float32)
    w[L.ROWS] = B * TQ
    pb = {}
    pb["dout"], _ = _bind(d, do)
    pb["out_in"], _ = _bind(d, out)
    pb["lse_in"], _ = _bind(d, lse)
    pb["ld"], _ = _bind(d, ld)
    d.launch(_FILE, "attn_bwd_prep", q.dtype, {}, w, pb, _grid(d, B * TQ))
    bufs = _common(d, q, k, v, mask, w)
    bufs["dout"], bufs["ld"] = pb["dout"], pb["ld"]
    qb = dict(bufs)
    qb["dq"], _ = _bind(d, dq)
    kc = chunk(TK, 2 * _n4(D) + _n4(DV) + 4, 3 * _n4(D) + 2 * _n4(DV) + 16, budget)
    for j0 in range(0, max(TK, 1), kc):
        wc = list(w)
        wc[L.J0], wc[L.J1], wc[L.FIRST] = j0, min(TK, j0 + kc), int(j0 == 0)
        d.launch(_FILE, "attn_bwd_dq", q.dtype, consts, wc, qb, _grid(d, B * TQ))
    kb = dict(bufs)
    kb["dk"], _ = _bind(d, dk)
    kb["dv"], _ = _bind(d, dv)
    w[L.ROWS] = B * TK
    qc = chunk(TQ, 2 * _n4(D) + _n4(DV) + 4, 4 * _n4(D) + 4 * _n4(DV) + 16, budget)
    for i0 in range(0, max(TQ, 1), qc):
        wc = list(w)
        wc[L.J0], wc[L.J1], wc[L.FIRST] = i0, min(TQ, i0 + qc), int(i0 == 0)
        d.launch(_FILE, "attn_bwd_dkv", q.dtype, consts, wc, kb, _grid(d, B * TK))
    return dq, dk, dv
