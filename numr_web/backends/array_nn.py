"""The array-module (numpy / cupy) primitives behind the nn ops: gather / scatter_add, layer and
RMS norm, attention, im2col / col2im; batch norm, max pooling and convolution are in
array_cnn.py. Written once against `self.xp`; float16 is computed in float32 and rounded once.
A mixin of ArrayBackend (numr_web/backends/array_backend.py)."""
from __future__ import annotations

from .array_cnn import ArrayCNN


class ArrayNN(ArrayCNN):
    xp = None

    # -- indexing ----------------------------------------------------------------------------------
    def _index_tuple(self, index, axis):
        """Full fancy index: `index` along axis, aranges (broadcast) along the other dims."""
        xp = self.xp
        idx = []
        for d, n in enumerate(index.shape):
            if d == axis:
                idx.append(index.astype(xp.intp))
            else:
                shape = [1] * index.ndim
                shape[d] = n
                idx.append(xp.arange(n).reshape(shape))
        return tuple(idx)

    # Index values are checked by the ops layer: at once on the cpu; on cuda at the next sync,
    # so these may run with an index out of range there: CuPy wraps it (no access leaves the
    # array), and an empty axis, where there is nothing to wrap into, is not indexed at all.
    def gather(self, h, axis, index):
        if h.shape[axis] == 0:
            return self.xp.zeros(index.shape, dtype=h.dtype)
        return h[self._index_tuple(index, axis)]

    def scatter_add(self, shape, axis, index, src):
        xp = self.xp
        one = self.scatter_unique(shape, axis, index, src)
        if one is not None:
            return one
        out = xp.zeros(shape, dtype=xp.float32 if src.dtype in self._narrow else src.dtype)
        if out.size:
            xp.add.at(out, self._index_tuple(index, axis), src)   # sequential: a fixed order
        return out.astype(src.dtype, copy=False)

    def scatter_unique(self, shape, axis, index, src):
        """scatter_add where each target gets one value at most (index 1 long along `axis`: a
        cross-entropy's label gather, max pooling's argmax): a write of 0 + src into zeros, the
        bits add.at would store (0 + -0.0 is +0.0), with no sort and no add.at. None otherwise."""
        if index.ndim == 0 or index.ndim != len(shape) or index.shape[axis] != 1 or \
                shape[axis] == 0:
            return None
        out = self.xp.zeros(shape, dtype=src.dtype)
        if out.size and index.size:
            part = src[tuple(slice(0, k) for k in index.shape)]
            out[self._index_tuple(index, axis)] = part + part.dtype.type(0)
        return out

    # -- softmax cross-entropy ---------------------------------------------------------------------
    def cross_entropy(self, x, labels, ignore_index, smoothing):
        """The elementwise passes in x's precision (float32 for float16 / bfloat16), each row's
        sums and log in float64 (a row's log-sum-exp error is every probability's)."""
        xp = self.xp
        xw = self._widen(x)
        m = xw.max(axis=1, keepdims=True)
        sh = xw - m
        e = xp.exp(sh)
        keep, at = self._label_cells(labels, ignore_index)
        total = e.sum(axis=1, dtype=xp.float64)
        e[at] = 0
        loss = xp.log(total) - (1 - smoothing) * sh[at]
        if smoothing:
            loss = loss - (smoothing / x.shape[1]) * sh.sum(axis=1, dtype=xp.float64)
        stats = xp.stack([m[:, 0].astype(xp.float64), total, e.sum(axis=1, dtype=xp.float64)],
                         axis=1)
        return self._asarray(xp.where(keep, loss, 0), x.dtype), stats

    def cross_entropy_backward(self, x, labels, stats, g, ignore_index, smoothing):
        xp = self.xp
        xw, gw = self._widen(x), self._widen(g)
        d = xp.exp(xw - stats[:, :1].astype(xw.dtype))
        d *= (gw / stats[:, 1]).astype(xw.dtype)[:, None]                # g p
        keep, at = self._label_cells(labels, ignore_index)
        # at the label g (p - 1 + s) = g (s - others / S): no cancellation where p is near 1
        d[at] = (smoothing - stats[:, 2] / stats[:, 1]) * gw
        if smoothing:
            d -= ((smoothing / x.shape[1]) * gw).astype(xw.dtype)[:, None]
        d[~keep] = 0
        return self._asarray(d, x.dtype)

    def _label_cells(self, labels, ignore_index):
        """(rows that count, the (row, label) cells; an ignored row's cell is its column 0)."""
        keep = labels != ignore_index
        return keep, (self.xp.arange(labels.shape[0]), self.xp.where(keep, labels, 0))

    # -- normalization -----------------------------------------------------------------------------
    def layer_norm(self, x, weight, bias, k, eps, rms):
        xp = self.xp
        lead = x.shape[:x.ndim - k]
        n = _prod(x.shape[x.ndim - k:])
        x2 = self._widen(x).reshape(-1, n)
        if rms:
            mean = None
            rstd = 1.0 / xp.sqrt((x2 * x2).mean(axis=1) + eps)
            y = x2 * rstd[:, None]
        else:
            mean = x2.mean(axis=1)
            xc = x2 - mean[:, None]
            rstd = 1.0 / xp.sqrt((xc * xc).mean(axis=1) + eps)
            y = xc * rstd[:, None]
        if weight is not None:
            y = y * self._widen(weight).reshape(1, n)
        if bias is not None:
            y = y + self._widen(bias).reshape(1, n)
        dt = x.dtype
        return (self._asarray(y.reshape(x.shape), dt),
                None if mean is None else self._asarray(mean.reshape(lead), dt),
                self._asarray(rstd.reshape(lead), dt))

    def layer_norm_backward(self, dy, x, weight, mean, rstd, k, rms):
        n = _prod(x.shape[x.ndim - k:])
        g = self._widen(dy).reshape(-1, n)
        x2 = self._widen(x).reshape(-1, n)
        r = self._widen(rstd).reshape(-1, 1)
        xhat = (x2 if rms else x2 - self._widen(mean).reshape(-1, 1)) * r
        dw = db = None
        if weight is not None:
            dw = (g * xhat).sum(axis=0)
            if not rms:
                db = g.sum(axis=0)
            g = g * self._widen(weight).reshape(1, n)
        proj = (g * xhat).mean(axis=1, keepdims=True)
        dx = (g - xhat * proj) if rms else (g - g.mean(axis=1, keepdims=True) - xhat * proj)
        dx *= r
        dt = dy.dtype
        wshape = None if weight is None else weight.shape
        return (self._asarray(dx.reshape(x.shape), dt),
                None if dw is None else self._asarray(self.reshape(dw, wshape), dt),
                None if db is None else self._asarray(self.reshape(db, wshape), dt))

    # -- attention ---------------------------------------------------------------------------------
    def _scores(self, q, k, mask, causal, scale):
        xp = self.xp
        s = self._gemm(q, xp.swapaxes(k, -1, -2)) * scale
        if causal:
            tq, tk = s.shape[-2], s.shape[-1]
            keep = xp.arange(tk)[None, :] <= xp.arange(tq)[:, None]   # torch: tril, top-left aligned
            s = xp.where(keep, s, -xp.inf)
        if mask is not None:
            s = xp.where(mask, s, -xp.inf) if mask.dtype == xp.bool_ else s + self._widen(mask)
        return s

    def attention(self, q, k, v, mask, causal, scale):
        xp = self.xp
        qw, kw, vw = self._widen(q), self._widen(k), self._widen(v)
        s = self._scores(qw, kw, mask, causal, scale)
        if s.shape[-1] == 0:                      # no keys: as a fully masked row
            m = xp.full(s.shape[:-1] + (1,), -xp.inf, dtype=s.dtype)
        else:
            m = s.max(axis=-1, keepdims=True)
        # a row whose keys are all masked (m = -inf) gives 0, as torch 2.x, not exp(-inf + inf)
        p = xp.exp(s - xp.where(m == -xp.inf, 0, m))
        l = p.sum(axis=-1, keepdims=True)
        out = self._gemm(p / xp.where(l == 0, 1, l), vw)
        lse = (m + xp.log(l))[..., 0]             # -inf for such a row
        return self._asarray(out, q.dtype), self._asarray(lse, q.dtype)

    def attention_backward(self, do, q, k, v, out, lse, mask, causal, scale):
        xp = self.xp
        qw, kw, vw, dow = self._widen(q), self._widen(k), self._widen(v), self._widen(do)
        s = self._scores(qw, kw, mask, causal, scale)
        lse = self._widen(lse)[..., None]
        p = xp.exp(s - xp.where(lse == -xp.inf, 0, lse))    # the probabilities, recomputed
                                                             # (0 in a fully masked row)
        dv = self._gemm(xp.swapaxes(p, -1, -2), dow)
        dp = self._gemm(dow, xp.swapaxes(vw, -1, -2))
        delta = (dow * self._widen(out)).sum(axis=-1, keepdims=True)
        ds = p * (dp - delta)
        dq = self._gemm(ds, kw) * scale
        dk = self._gemm(xp.swapaxes(ds, -1, -2), qw) * scale
        return tuple(self._asarray(t, q.dtype) for t in (dq, dk, dv))

    # -- convolution -------------------------------------------------------------------------------
    @staticmethod
    def _out_size(size, k, s, p, d):
        return (size + 2 * p - d * (k - 1) - 1) // s + 1

    def _padded(self, x, padding, fill):
        (ph, pw) = padding
        if ph == 0 and pw == 0:
            return x
        n, c, h, w = x.shape
        xpad = self.xp.full((n, c, h + 2 * ph, w + 2 * pw), fill, dtype=x.dtype)
        xpad[:, :, ph:ph + h, pw:pw + w] = x
        return xpad

    def im2col(self, x, kernel, stride, padding, dilation, pad_value=0.0, cn=False):
        xp = self.xp
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
        n, c, h, w = x.shape
        oh, ow = self._out_size(h, kh, sh, ph, dh), self._out_size(w, kw, sw, pw, dw)
        xpad = self._padded(x, padding, pad_value)
        if cn:                      # (C*kh*kw, N*OH*OW): rows (c, i, j), columns (n, oh, ow)
            cols = xp.empty((c, kh, kw, n, oh, ow), dtype=x.dtype)
            src = xpad.transpose(1, 0, 2, 3)
        else:
            cols = xp.empty((n, c, kh, kw, oh, ow), dtype=x.dtype)
            src = xpad
        for i in range(kh):
            for j in range(kw):
                dst = cols[:, :, i, j] if not cn else cols[:, i, j]
                dst[...] = src[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                               j * dw:j * dw + sw * (ow - 1) + 1:sw]
        return cols.reshape(c * kh * kw, n * oh * ow) if cn else \
            cols.reshape(n, c * kh * kw, oh * ow)

    def col2im(self, cols, x_shape, kernel, stride, padding, dilation, cn=False):
        n, c = x_shape[:2]
        oh, ow = self._conv_out(x_shape, kernel, stride, padding, dilation)
        if cn:                      # (C*kh*kw, N*OH*OW) columns: to the windows' (N, C, ...) view
            c6 = cols.reshape(c, kernel[0], kernel[1], n, oh, ow).transpose(3, 0, 1, 2, 4, 5)
        else:
            c6 = cols.reshape(n, c, kernel[0], kernel[1], oh, ow)
        return self._col2im_sum(c6, x_shape, kernel, stride, padding, dilation)

    def _conv_out(self, x_shape, kernel, stride, padding, dilation):
        return tuple(self._out_size(x_shape[2 + i], kernel[i], stride[i], padding[i], dilation[i])
                     for i in range(2))

    def _im2col_into(self, cols, x, kernel, stride, padding, dilation, pad_value):
        """cols (N, C, kh, kw, OH, OW) = x's windows (x (N, C, H, W), padded by pad_value)."""
        (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
        oh, ow = cols.shape[-2:]
        xpad = self._padded(x, padding, pad_value)
        for i in range(kh):
            for j in range(kw):
                cols[:, :, i, j] = xpad[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                                        j * dw:j * dw + sw * (ow - 1) + 1:sw]

    def _col2im_sum(self, c6, x_shape, kernel, stride, padding, dilation):
        """The windows c6 (N, C, kh, kw, OH, OW) summed back into (N, C, H, W), window by window
        in (i, j) order (a fixed summation order)."""
        xp = self.xp
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
        n, c, h, w = c6.shape[0], c6.shape[1], x_shape[2], x_shape[3]
        oh, ow = c6.shape[-2:]
        acc = xp.float32 if c6.dtype in self._narrow else c6.dtype
        out = xp.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=acc)
        for i in range(kh):
            for j in range(kw):
                out[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                    j * dw:j * dw + sw * (ow - 1) + 1:sw] += c6[:, :, i, j]
        if ph == 0 and pw == 0 and out.dtype == c6.dtype:
            return out
        return xp.ascontiguousarray(out[:, :, ph:ph + h, pw:pw + w]).astype(c6.dtype, copy=False)

def _prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n
