"""Launches of attention.cu's fused attention kernels: one kernel forward (out and the log-sum-exp
per query row), two backward (dq, then dk and dv). None where a case is outside the kernels'
reach (head dims over 128, a mask whose batch dims do not coalesce into 4, a dtype without a
kernel): the caller then takes the composed path (cuBLAS products and elementwise kernels).
"""
from __future__ import annotations

from ...shapes import prod
from . import codegen as G

ATT_ROWS = 64                              # attention.cu's ATT_ROWS: threads (rows) per block
ROW_LENGTHS = (16, 32, 64, 128)            # the kernels' register row lengths (template DM)
MASK_NONE, MASK_BOOL, MASK_ADD = 0, 1, 2   # attention.cu's ATT_MASK_*
MASK_BATCH_DIMS = 4                        # coalesced batch dims a mask view may have
MAX_ROW_BLOCKS = 65535                     # grid.y limit


def _row_length(q, v):
    n = max(q.shape[-1], v.shape[-1])
    return next((m for m in ROW_LENGTHS if m >= n), None)


def _mask_args(mask):
    """(pointer, kind, [nb, shape x4, strides x4, sq, sk]) of a (B..., TQ, TK) mask view, or None
    when its batch dims do not coalesce into MASK_BATCH_DIMS."""
    if mask is None:
        return 0, MASK_NONE, [0] * 11
    item = mask.dtype.itemsize
    st = [s // item for s in mask.strides]
    dims = [(n, s) for n, s in zip(mask.shape[:-2], st[:-2]) if n != 1]
    merged = []
    for n, s in dims:
        if merged and merged[-1][1] == s * n:          # contiguous with the previous dim: one dim
            merged[-1] = (merged[-1][0] * n, s)
        else:
            merged.append((n, s))
    if len(merged) > MASK_BATCH_DIMS:
        return None
    merged += [(1, 0)] * (MASK_BATCH_DIMS - len(merged))
    nb = sum(1 for n, _ in merged if n != 1)
    return (mask.data.ptr, MASK_BOOL if mask.dtype.char == "?" else MASK_ADD,
            [nb] + [n for n, _ in merged] + [s for _, s in merged] + [st[-2], st[-1]])


class Attention:
    def __init__(self, be):
        self.be = be

    def _plan(self, q, k, v, mask):
        be = self.be
        ct = be._ct.get(q.dtype.char)
        dm = _row_length(q, v)
        margs = _mask_args(mask)
        B = prod(q.shape[:-2])
        T = max(q.shape[-2], k.shape[-2])
        if ct is None or dm is None or margs is None or -(-T // ATT_ROWS) > MAX_ROW_BLOCKS:
            return None
        return ct, dm, margs, B, (q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1])

    def _fn(self, kernel, ct, dm, kind):
        family = lambda: (G.attention(n, ct, dm, m) for n in ("attn_fwd", "attn_bwd_dq",   # noqa: E731
                                                                "attn_bwd_dkv")
                          for m in (MASK_NONE, MASK_BOOL, MASK_ADD))
        return self.be.kernels.function(G.attention(kernel, ct, dm, kind), family)

    def _dense(self, *ts):
        return [self.be.xp.ascontiguousarray(t) for t in ts]

    def forward(self, q, k, v, mask, causal, scale):
        plan = self._plan(q, k, v, mask)
        if plan is None:
            return None
        ct, dm, (mp, kind, mw), B, (TQ, TK, D, DV) = plan
        xp = self.be.xp
        out = xp.empty(q.shape[:-1] + (DV,), dtype=q.dtype)
        lse = xp.empty(q.shape[:-1], dtype=q.dtype)
        if B and TQ:
            qc, kc, vc = self._dense(q, k, v)
            self._fn("attn_fwd", ct, dm, kind)(
                (B, -(-TQ // ATT_ROWS)), (ATT_ROWS,),
                (qc, kc, vc, mp, out, lse, TQ, TK, D, DV, int(causal), *mw, float(scale)))
        return out, lse

    def backward(self, do, q, k, v, out, lse, mask, causal, scale):
        plan = self._plan(q, k, v, mask)
        if plan is None:
            return None
        ct, dm, (mp, kind, mw), B, (TQ, TK, D, DV) = plan
        xp = self.be.xp
        dq, dk, dv = (xp.empty(t.shape, dtype=q.dtype) for t in (q, k, v))
        if not (B and TQ and TK):
            for t in (dq, dk, dv):
                t.fill(0)
            return dq, dk, dv
        qc, kc, vc, doc, oc, lc = self._dense(q, k, v, do, out, lse)
        delta = xp.empty(q.shape[:-1], dtype=xp.float64 if ct == "double" else xp.float32)
        self._fn("attn_bwd_dq", ct, dm, kind)(
            (B, -(-TQ // ATT_ROWS)), (ATT_ROWS,),
            (qc, kc, vc, mp, doc, oc, lc, dq, delta, TQ, TK, D, DV, int(causal), *mw,
             float(scale)))
        self._fn("attn_bwd_dkv", ct, dm, kind)(
            (B, -(-TK // ATT_ROWS)), (ATT_ROWS,),
            (qc, kc, vc, mp, doc, lc, delta, dk, dv, TQ, TK, D, DV, int(causal), *mw,
             float(scale)))
        return dq, dk, dv
