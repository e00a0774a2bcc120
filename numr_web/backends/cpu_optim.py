"""The cpu backend's Adam / AdamW update on many cores: a large parameter's update (ArrayOptim's
arithmetic, operation for operation and with the same scalars) in flat blocks over the worker
threads, each block's passes written into its part of the results and two scratch arrays of
its own (no temporary per pass), so its operands stay in cache between passes. Bit-identical to
ArrayOptim's one call (an elementwise formula; blocks never cut numpy's inner loops).
A mixin of NumpyBackend (numr_web/backends/numpy_backend.py)."""
from __future__ import annotations

try:
    import numpy as np
except ImportError:         # no numpy (the browser): NumpyBackend.probe says so
    np = None

from . import cpu_jit
from .array_optim import step_scalars
from .cpu_blocks import big, blocks_or_one, pass_block
from .cpu_threads import blocks, parallel_for


def _flat(a):
    return a.reshape(-1)


class CpuOptim:
    def adam_update(self, p, g, m, v, decay, factor, w, b2, eps, lr, b1, step, found=None):
        arrays = [a for a in (p, g, m, v) if a is not None]
        jit = cpu_jit.kernels()
        if jit is not None and found is None and isinstance(step, (int, float)) and \
                p.dtype in (np.float32, np.float64) and \
                all(a.dtype == p.dtype and a.shape == p.shape and a.flags.c_contiguous
                    for a in arrays):
            return self._adam_jit(jit, p, g, m, v, decay, factor, w, b2, eps, lr, b1, step)
        if found is not None or not big(p) or p.dtype not in (np.float32, np.float64) or \
                any(a.dtype != p.dtype or a.shape != p.shape or not a.flags.c_contiguous
                    for a in arrays):
            return super().adam_update(p, g, m, v, decay, factor, w, b2, eps, lr, b1, step, found)
        ss, bc = step_scalars(np, lr, b1, b2, step)
        n = p.size
        po, mo, vo = (np.empty(n, p.dtype) for _ in range(3))
        pf, gf = _flat(p), _flat(g)
        mf = None if m is None else _flat(m)
        vf = None if v is None else _flat(v)
        parts = blocks(n, pass_block(n))
        lerp_up = abs(w) < 0.5                                 # _lerp's two forms
        decoupled, l2 = decay == "decoupled", decay == "l2"

        def body(i):
            a, b = parts[i]
            k = b - a
            t1, t2 = np.empty(k, p.dtype), np.empty(k, p.dtype)
            pb, gb, mb, vb = pf[a:b], gf[a:b], mo[a:b], vo[a:b]
            if l2:                                             # g = g + p * factor
                np.multiply(pb, factor, out=t1)
                gb = np.add(gf[a:b], t1, out=t1)
            ab = 0.0 if mf is None else mf[a:b]
            np.subtract(gb, ab, out=mb)                        # m = a + (g - a) w
            if lerp_up:                                        #   or g - (g - a)(1 - w)
                mb *= w
                np.add(ab, mb, out=mb)
            else:
                mb *= 1 - w
                np.subtract(gb, mb, out=mb)
            np.multiply(gb, 1 - b2, out=t2)                    # gv = (g (1 - b2)) g
            t2 *= gb
            if vf is None:
                vb[...] = t2
            else:                                              # v = v b2 + gv
                np.multiply(vf[a:b], b2, out=vb)
                vb += t2
            np.sqrt(vb, out=t2)                                # denom = sqrt(v) / bc + eps
            t2 /= bc
            t2 += eps
            np.multiply(mb, ss, out=t1)                        # upd = m ss / denom
            t1 /= t2
            if decoupled:                                      # p (factor) - upd
                np.multiply(pb, factor, out=po[a:b])
                po[a:b] -= t1
            else:
                np.subtract(pb, t1, out=po[a:b])
        parallel_for(len(parts), body)
        return tuple(a.reshape(p.shape) for a in (po, mo, vo))

    def _adam_jit(self, jit, p, g, m, v, decay, factor, w, b2, eps, lr, b1, step):
        """ArrayOptim's update as one compiled loop per block (cpu_jit.py), any size: each
        scalar rounded to p's precision as numpy rounds a Python float against an array, so the
        bits are ArrayOptim's."""
        t = p.dtype.type
        ss, bc = step_scalars(np, lr, b1, b2, step)
        n = p.size
        po, mo, vo = (np.empty(p.shape, p.dtype) for _ in range(3))
        flat = [_flat(a) for a in (p, g, po, mo, vo)]
        mf = jit.none.astype(p.dtype) if m is None else _flat(m)
        vf = jit.none.astype(p.dtype) if v is None else _flat(v)
        mode = {"decoupled": 1, "l2": 2}.get(decay, 0)
        scalars = (t(factor), t(w), t(1 - w), t(b2), t(1 - b2), t(eps), t(ss), t(bc), t(0),
                   abs(w) < 0.5)
        parts = blocks_or_one(n, 1, pass_block(n))

        def run(i):
            a, b = parts[i]
            pb, gb, pob, mob, vob = (x[a:b] for x in flat)
            jit.adam(pb, gb, mf[a:b] if mf.size else mf, vf[a:b] if vf.size else vf,
                     pob, mob, vob, mode, *scalars)
        parallel_for(len(parts), run)
        return po, mo, vo
