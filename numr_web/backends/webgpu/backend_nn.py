"""The webgpu primitives behind the nn ops (gather / scatter_add, layer, RMS and batch norm,
attention, im2col / col2im, max pooling; convolution is ComposedConv's on these), composed from
their launchers (launch_index, launch_norm, launch_batchnorm, launch_attention, launch_conv) and
the backend's own primitives (copies, casts, reductions). A mixin of WebGPUBackend (backend.py);
semantics are those of the numpy reference (array_nn.py, array_cnn.py)."""
from __future__ import annotations

import functools

from ...dtypes import bool_, float16, float32, int32
from ...vocab.activations import ACT
from ..conv import ComposedConv
from . import launch_attention as attn
from . import launch_batchnorm as bn
from . import launch_conv as conv
from . import launch_index as idx
from . import launch_norm as norm
from . import launch_optim as optim
from .views import GPUArray, prod


class NNPrimitives(ComposedConv):

    @functools.cached_property
    def cpu_adapter(self):
        """Whether the adapter runs shaders on the CPU (llvmpipe, SwiftShader): kernels then
        prefer one invocation per row to workgroup barriers. (The adapter is the backend's for
        its lifetime: read once, not on every reduction.)"""
        name = str(getattr(self.adapter, "name", "")).lower()
        return str(getattr(self.adapter, "adapter_type", "")).lower() == "cpu" or \
            "llvmpipe" in name or "swiftshader" in name

    def _channel_sums(self, a):
        """a (N, C, L) summed over L, then over N: N C reductions of a dense run each, then C of
        N values (one pass over N and L gave only C workgroups, each walking N strided runs)."""
        return self.reduce("sum", self.reduce("sum", a, (2,), False), (0,), False)

    def _placeable(self, h):
        """h as the attention kernels read it: where it lies if launch_attention.placement
        describes it (a head of a fused projection), else a dense copy."""
        return h if attn.placement(h) is not None else self._copy(h)

    def _fresh(self, h):
        """h dense from element 0 of its buffer (a copy unless it already is)."""
        return h if h.is_contiguous and h.offset == 0 else self._copy(h)

    # -- indexing ----------------------------------------------------------------------------------
    def gather(self, h, axis, index):
        if h.shape[axis] == 0:                 # nothing to read (the index was flagged)
            return self.full(index.shape, 0, h.dtype)
        return idx.gather(self.d, h, axis, index, self.d.alloc(index.shape, h.dtype))

    def scatter_add(self, shape, axis, index, src):
        if src.dtype is float16:               # sums in f32, rounded once
            return self.astype(self.scatter_add(shape, axis, index, self.astype(src, float32)),
                               float16)
        out = self.d.alloc(tuple(shape), src.dtype)
        return idx.scatter_add(self.d, out, axis, index, self.contiguous(src),
                               self.loop_budget // 2)

    # -- optimizers ---------------------------------------------------------------------------------
    def adam_update(self, p, g, m, v, decay, factor, w, b2, eps, lr, b1, step):
        arrays = [p, g] + ([] if m is None else [m, v])
        if any(a.dtype is not float32 or a.shape != p.shape for a in arrays) or \
                4 * p.size > self.binding_limit:
            return None                     # the optimizer composes it (in chunks if need be)
        outs = tuple(self.d.alloc(p.shape, float32) for _ in range(3))
        if p.size:
            dense = [self.contiguous(a) for a in arrays] + [None, None][:4 - len(arrays)]
            optim.adam(self.d, *dense, outs, decay, factor, w, b2, eps, lr, b1, step)
        return outs

    def sgd_update(self, p, g, buf, weight_decay, momentum, dampening, nesterov, maximize, lr):
        arrays = [p, g] + ([] if buf is None else [buf])
        if any(a.dtype is not float32 or a.shape != p.shape for a in arrays) or \
                4 * p.size > self.binding_limit:
            return None                     # the optimizer composes it (in chunks if need be)
        outs = (self.d.alloc(p.shape, float32),
                self.d.alloc(p.shape, float32) if momentum else None)
        if p.size:
            optim.sgd(self.d, *(self.contiguous(a) for a in (p, g)),
                      None if buf is None else self.contiguous(buf), outs, weight_decay,
                      momentum, dampening, nesterov, maximize, lr)
        return outs

    # -- normalization -----------------------------------------------------------------------------
    def _norm_lanes(self, n, what="layer norm"):
        return norm.lanes(n, self.loop_budget, self.cpu_adapter, what)

    def cross_entropy(self, x, labels, ignore_index, smoothing):
        rows, n = x.shape
        loss = self.d.alloc((rows,), x.dtype)
        stats = self.d.alloc((rows, 3), float32)       # max, sum, the others' sum
        if rows:
            norm.cross_entropy(self.d, self.contiguous(x), self.contiguous(labels), loss, stats,
                               rows, n, ignore_index, smoothing,
                               self._norm_lanes(n, "cross_entropy"))
        return loss, stats

    def cross_entropy_backward(self, x, labels, stats, g, ignore_index, smoothing):
        rows, n = x.shape
        dx = self.d.alloc(x.shape, x.dtype)
        if rows and n:
            stride = 0 if g.strides[0] == 0 else 1      # a mean's gradient: one value, broadcast
            norm.cross_entropy_backward(self.d, self.contiguous(x), self.contiguous(labels),
                                        self.contiguous(stats), g if stride == 0 else
                                        self.contiguous(g), stride, dx, rows, n, ignore_index,
                                        smoothing, self._norm_lanes(n, "cross_entropy"))
        return dx

    def layer_norm(self, x, weight, bias, k, eps, rms):
        lead = x.shape[:x.ndim - k]
        rows, n = prod(lead), prod(x.shape[x.ndim - k:])
        xc = self.contiguous(x)
        y = self.d.alloc(x.shape, x.dtype)
        mean = None if rms else self.d.alloc(lead, x.dtype)
        rstd = self.d.alloc(lead, x.dtype)
        if rows and n:
            norm.forward(self.d, xc, None if weight is None else self.contiguous(weight),
                         None if bias is None else self.contiguous(bias), y, mean, rstd, rows, n,
                         eps, rms, self._norm_lanes(n))
        return y, mean, rstd

    def layer_norm_backward(self, dy, x, weight, mean, rstd, k, rms):
        lead = x.shape[:x.ndim - k]
        rows, n = prod(lead), prod(x.shape[x.ndim - k:])
        dx = self.d.alloc(x.shape, dy.dtype)
        gx = None if weight is None else self.d.alloc((max(rows, 1), n), float32)
        if rows and n:
            norm.backward(self.d, self.contiguous(dy), self.contiguous(x),
                          None if weight is None else self.contiguous(weight),
                          None if mean is None else self.contiguous(mean), self.contiguous(rstd),
                          dx, gx, rows, n, rms, self._norm_lanes(n))
        dw = db = None
        if weight is not None:
            if rows:
                dw = self.astype(self.reduce("sum", gx, (0,), False), dy.dtype)
                dy2 = self.reshape(dy, (rows, n))
                db = None if rms else self.reduce("sum", dy2, (0,), False)
            else:
                dw = self.full((n,), 0, dy.dtype)
                db = None if rms else dw
            dw = self.reshape(dw, weight.shape)
            db = None if db is None else self.reshape(db, weight.shape)
        return dx, dw, db

    # -- attention ---------------------------------------------------------------------------------
    def _attn_operands(self, q, k, v, mask):
        lead = q.shape[:-2]
        B, TQ, TK = prod(lead), q.shape[-2], k.shape[-2]
        ops = [self._placeable(t) for t in (q, k, v)]
        if mask is not None and mask.dtype is bool_:
            mask = self._bool_mask_as_float(mask, q.dtype)
        return lead, B, TQ, TK, ops, mask

    def _bool_mask_as_float(self, mask, dtype):
        """A bool mask view as 0 / -inf of `dtype`, computed on its broadcast-free part only."""
        index = [(0, 1, 1) if st == 0 and s > 1 else (0, s, 1)
                 for s, st in zip(mask.shape, mask.strides)]
        small = self.slice(mask, index)
        f = self.where(small, self.full(small.shape, 0.0, dtype),
                       self.full(small.shape, float("-inf"), dtype))
        return self.expand(f, mask.shape)

    def _composed(self, q, k, v):
        """Head dims beyond the fused kernels' ATTN_MAX_D: GEMMs and reductions, scores held."""
        return max(q.shape[-1], v.shape[-1]) > attn.ATTN_MAX_D

    def _scores(self, q, k, mask, causal, scale):
        s = self.binary("mul", self.matmul(q, self.permute(k, _swap_last(k.ndim))), float(scale))
        if causal:
            tq, tk = q.shape[-2], k.shape[-2]
            cols = self.reshape(self.arange(0, tk, 1, int32), (1, tk))
            rows = self.reshape(self.arange(0, tq, 1, int32), (tq, 1))   # torch: query i sees keys 0..i
            s = self.where(self.binary("le", cols, rows), s, float("-inf"))
        return s if mask is None else self.binary("add", s, mask)

    def _attention_composed(self, q, k, v, mask, causal, scale):
        s = self._scores(q, k, mask, causal, scale)
        m = self.reduce("max", s, (s.ndim - 1,), True)
        dead = self.binary("eq", m, float("-inf"))         # every key masked: 0 out, as torch
        p = self.unary("exp", self.binary("sub", s, self.where(dead, 0.0, m)))
        l = self.reduce("sum", p, (s.ndim - 1,), True)
        out = self.binary("div", self.matmul(p, v), self.where(dead, 1.0, l))
        lse = self.binary("add", m, self.unary("log", l))
        return out, self.reshape(lse, lse.shape[:-1])

    def _attention_backward_composed(self, do, q, k, v, out, lse, mask, causal, scale):
        last = q.ndim - 1
        lse = self.reshape(lse, lse.shape + (1,))
        lse = self.where(self.binary("eq", lse, float("-inf")), 0.0, lse)   # fully masked: p = 0
        p = self.unary("exp", self.binary("sub", self._scores(q, k, mask, causal, scale), lse))
        dv = self.matmul(self.permute(p, _swap_last(p.ndim)), do)
        dp = self.matmul(do, self.permute(v, _swap_last(v.ndim)))
        delta = self.reduce("sum", self.binary("mul", do, out), (last,), True)
        ds = self.binary("mul", p, self.binary("sub", dp, delta))
        dq = self.binary("mul", self.matmul(ds, k), float(scale))
        dk = self.binary("mul", self.matmul(self.permute(ds, _swap_last(ds.ndim)), q), float(scale))
        return dq, dk, dv

    @property
    def attn_tile(self):
        """The attention kernels' tiles: "auto" (launch_attention.TILES) or a knob value such as
        "16x8x8" / "fwd=16x8x8,dq=16x8x8,dkv=16x8x4" (NUMR_WEBGPU_ATTN_TILE)."""
        return self._attn_tile

    @attn_tile.setter
    def attn_tile(self, spec):
        self._attn_tiles = attn.parse_tiles(spec)
        self._attn_tile = str(spec)

    def attention(self, q, k, v, mask, causal, scale):
        lead, B, TQ, TK, (qc, kc, vc), mask = self._attn_operands(q, k, v, mask)
        if self._composed(q, k, v) and B and TQ and TK:
            return self._attention_composed(q, k, v, mask, causal, scale)
        shape = lead + (TQ, v.shape[-1])
        out = attn.placed(self.d.alloc(shape, q.dtype), shape)   # the heads' merge is a view
        lse = self.d.alloc(lead + (TQ,), float32)          # float32 whatever q's dtype
        if B and TQ:
            if TK == 0:
                return self.full(out.shape, 0.0, q.dtype), \
                    self.full(lse.shape, float("-inf"), float32)
            attn.forward(self.d, qc, kc, vc, mask, causal, scale, out, lse, B, TQ, TK,
                         self.loop_budget, self._attn_tiles)
        return out, lse

    def attention_backward(self, do, q, k, v, out, lse, mask, causal, scale):
        lead, B, TQ, TK, (qc, kc, vc), mask = self._attn_operands(q, k, v, mask)
        if not (B and TQ and TK):
            return tuple(self.full(t.shape, 0, q.dtype) for t in (q, k, v))
        if self._composed(q, k, v):
            return self._attention_backward_composed(do, q, k, v, out, lse, mask, causal, scale)
        return attn.backward(self.d, self._placeable(do), qc, kc, vc, self._placeable(out),
                             self._fresh(lse), mask, causal, scale, B, TQ, TK,
                             self.loop_budget, self._attn_tiles)

    # -- convolution -------------------------------------------------------------------------------
    def im2col(self, x, kernel, stride, padding, dilation, pad_value=0.0, cn=False):
        n, c, h, w = x.shape
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
        oh, ow = conv.out_size(h, kh, sh, ph, dh), conv.out_size(w, kw, sw, pw, dw)
        shape = (c * kh * kw, n * oh * ow) if cn else (n, c * kh * kw, oh * ow)
        return conv.im2col(self.d, self.contiguous(x), self.d.alloc(shape, x.dtype), kernel,
                           stride, padding, dilation, pad_value, cn, not self.cpu_adapter)

    def col2im(self, cols, x_shape, kernel, stride, padding, dilation, cn=False):
        out = self.d.alloc(tuple(x_shape), cols.dtype)
        return conv.col2im(self.d, self.contiguous(cols), out, kernel, stride, padding, dilation,
                           cn, not self.cpu_adapter)

    def max_pool2d(self, x, kernel, stride, padding, dilation, out_hw):
        shape = tuple(x.shape[:2]) + tuple(out_hw)
        y, idx = self.d.alloc(shape, x.dtype), self.d.alloc(shape, int32)
        conv.max_pool(self.d, self.contiguous(x), y, idx, kernel, stride, padding, dilation)
        return y, idx

    def max_pool2d_backward(self, dy, index, x_shape, kernel, stride, padding, dilation):
        dx = self.d.alloc(tuple(x_shape), dy.dtype)
        return conv.max_pool_backward(self.d, self.contiguous(dy), self.contiguous(index), dx,
                                      kernel, stride, padding, dilation)

    # -- batch norm --------------------------------------------------------------------------------
    def _bn_plan(self, x):
        c = x.shape[1]
        count = x.size // c if c else 0
        return count, bn.plan(max(count, 1), c, self.loop_budget, self.cpu_adapter)

    def _bn_coef(self, scratch, k, c, chunks):
        return GPUArray(scratch.storage, (c,), float32, None,
                        bn.coefficient(scratch, k, c, chunks), True)

    def batch_norm(self, x, weight, bias, running_mean, running_var, momentum, eps, training, act):
        c = x.shape[1]
        count, (lanes, chunk, chunks) = self._bn_plan(x)
        scratch = self.d.alloc((bn.scratch_size(c, chunks),), float32)
        y = self.d.alloc(x.shape, x.dtype)
        z = self.d.alloc(x.shape, x.dtype) if act != "none" and ACT[act].saves == "z" else None
        if x.size:
            ops = [None if t is None else self.contiguous(self.astype(t, x.dtype))
                   for t in (weight, bias) + ((None, None) if training else
                                              (running_mean, running_var))]
            bn.forward(self.d, self.contiguous(x), *ops, scratch, y, z, eps, training, act,
                       lanes, chunk, chunks)
        mean, rstd, var = (self._bn_coef(scratch, k, c, chunks) for k in (2, 3, 4))
        s = None if act == "none" else (y if ACT[act].saves == "y" else z)
        new = [None, None]
        if training and count:
            unbiased = self.binary("mul", var, count / max(count - 1, 1))
            for i, (old, stat) in enumerate(((running_mean, mean), (running_var, unbiased))):
                if old is not None:
                    new[i] = self._running(old, stat, momentum)
        return y, s, mean, rstd, new[0], new[1]

    def _running(self, old, stat, m):
        """old * (1 - m) + stat * m in old's dtype; m a number or a 0-d handle."""
        stat = self.astype(stat, old.dtype)
        keep = 1.0 - m if isinstance(m, (int, float)) else \
            self.binary("sub", 1.0, self.astype(m, old.dtype))
        m = m if isinstance(m, (int, float)) else self.astype(m, old.dtype)
        return self.binary("add", self.binary("mul", old, keep), self.binary("mul", stat, m))

    def batch_norm_backward(self, dy, x, weight, mean, rstd, s, act, training, need_dw, need_db):
        c = x.shape[1]
        count, (lanes, chunk, chunks) = self._bn_plan(x)
        dx = self.d.alloc(x.shape, dy.dtype)
        scratch = self.d.alloc((bn.scratch_size(c, chunks),), float32)
        if x.size:
            lo, hi = min(mean.offset, rstd.offset), max(mean.offset, rstd.offset) + c
            fwd = GPUArray(mean.storage, (hi - lo,), float32, None, lo, True)
            w = None if weight is None else self.contiguous(weight)
            bn.backward(self.d, self.contiguous(dy), self.contiguous(x),
                        None if s is None else self.contiguous(s), fwd, mean.offset,
                        rstd.offset, w, scratch, dx, act, training, lanes, chunk, chunks)
        elif need_dw or need_db:
            self._copy(self.full((2 * c,), 0.0, float32),
                       out=GPUArray(scratch.storage, (2 * c,), float32, None,
                                    bn.coefficient(scratch, 3, c, chunks), True))
        wdt = dy.dtype if weight is None else weight.dtype
        grad = lambda k: self.astype(self._bn_coef(scratch, k, c, chunks), wdt)  # noqa: E731
        return dx, grad(3) if need_dw else None, grad(4) if need_db else None


def _swap_last(ndim):
    return tuple(range(ndim - 2)) + (ndim - 1, ndim - 2)
