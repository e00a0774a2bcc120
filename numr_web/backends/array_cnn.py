"""The array-module (numpy / cupy) primitives of convolutional nets: batch norm forward and
backward, max pooling forward and backward (from the saved argmax, no scatter); convolution is
ComposedConv's (backends/conv.py) on these primitives. Written once
against `self.xp`; float16 is computed in float32 and rounded once; per-channel sums are taken
pairwise along the spatial dims and then over the batch in float64. The cuda backend replaces
them with kernels (backends/cuda/cnn.py) where its kernels apply. A mixin of ArrayNN."""
from __future__ import annotations

from ..vocab.activations import ACT
from .conv import ComposedConv


def _prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


class ArrayCNN(ComposedConv):
    xp = None

    def _channel_bias_act(self, z, bias, act):
        """ComposedConv's, with the bias added by the transposing copy and the activation in
        place."""
        if z.dtype in self._narrow or (bias is not None and bias.dtype != z.dtype):
            return super()._channel_bias_act(z, bias, act)
        out = self.xp.empty(z.shape, dtype=z.dtype)
        if bias is not None:
            self.xp.add(z, bias.reshape(1, -1, 1), out=out)
        else:
            out[...] = z
        z = out
        if act == "none":
            return z, None
        row = ACT[act]
        if row.saves == "z":
            return row.np.fwd(self.xp, z if row.np.keeps_z else z.copy()), z
        y = row.np.fwd(self.xp, z)
        return y, y

    # -- batch norm --------------------------------------------------------------------------------
    def _bn_view(self, x):
        """x (N, C, ...) as (N, C, S), in the compute dtype."""
        return self._widen(x).reshape(x.shape[0], x.shape[1], _prod(x.shape[2:]))

    def _channel_sum(self, a):
        """Per-channel sums of a (N, C, S), float64: pairwise along S, then over N."""
        return a.sum(axis=2).sum(axis=0, dtype=self.xp.float64)

    def _channel_sums(self, a):
        return self._asarray(self._channel_sum(self._widen(a)), a.dtype)

    def batch_norm(self, x, weight, bias, running_mean, running_var, momentum, eps, training, act):
        """(y, s, mean, rstd, new running mean, new running var): s is what the activation's
        backward reads (y or the pre-activation z; None without an activation), mean and rstd
        the per-channel statistics used (compute dtype), the running statistics None unless
        updated (training with them given)."""
        xp = self.xp
        x3 = self._bn_view(x)
        n, c, sz = x3.shape
        ct = x3.dtype
        count = n * sz
        var = None
        if training:
            mean = self._channel_sum(x3) / count if count else xp.zeros(c, xp.float64)
            d = x3 - mean.astype(ct)[:, None]
            var = self._channel_sum(d * d) / count if count else xp.zeros(c, xp.float64)
        else:
            mean = running_mean.astype(xp.float64)
            d = x3 - self._widen(running_mean)[:, None]
        rstd = 1.0 / xp.sqrt((var if training else running_var.astype(xp.float64)) + eps)
        scale = rstd if weight is None else rstd * weight.astype(xp.float64)
        d *= scale.astype(ct)[:, None]
        if bias is not None:
            d += self._widen(bias)[:, None]
        y, s = d, None
        if act != "none":
            row = ACT[act]
            if row.saves == "z":
                s = d
                y = row.np.fwd(xp, d if row.np.keeps_z else d.copy())
            else:
                y = s = row.np.fwd(xp, d)
        new_rm, new_rv = self._bn_running(running_mean, running_var, mean, var, count, momentum) \
            if training and count else (None, None)
        dt = x.dtype
        return (self._asarray(y.reshape(x.shape), dt),
                None if s is None else self._asarray(s.reshape(x.shape), dt),
                self._asarray(mean, ct), self._asarray(rstd, ct), new_rm, new_rv)

    def _bn_running(self, running_mean, running_var, mean, var, count, m):
        """The updated running statistics (None for one not given): float64 mean and biased
        variance of `count` values, momentum m (a number or a 0-d handle)."""
        xp = self.xp
        new_rm = new_rv = None
        if running_mean is not None:
            new_rm = self._asarray(running_mean.astype(xp.float64) * (1 - m) + mean * m,
                                   running_mean.dtype)
        if running_var is not None:
            unbiased = var * (count / max(count - 1, 1))
            new_rv = self._asarray(running_var.astype(xp.float64) * (1 - m) + unbiased * m,
                                   running_var.dtype)
        return new_rm, new_rv

    def batch_norm_backward(self, dy, x, weight, mean, rstd, s, act, training, need_dw, need_db):
        """(dx, dweight or None, dbias or None): g = dy * act'(.) (from s), then
        training: dx = w rstd (g - sum(g) / n - xhat sum(g xhat) / n); eval: dx = w rstd g;
        dweight = sum(g xhat), dbias = sum(g) per channel."""
        xp = self.xp
        g = self._bn_view(dy)
        if act != "none":
            g = ACT[act].np.d1(xp, g, self._bn_view(s), None)
        n, c, sz = g.shape
        ct = g.dtype
        count = max(n * sz, 1)
        xhat = self._bn_view(x) - mean.astype(ct)[:, None]
        xhat *= rstd.astype(ct)[:, None]
        sg = self._channel_sum(g) if training or need_db else None
        sgx = self._channel_sum(g * xhat) if training or need_dw else None
        scale = rstd.astype(xp.float64) if weight is None else \
            rstd.astype(xp.float64) * weight.astype(xp.float64)
        if training:
            xhat *= (sgx / count).astype(ct)[:, None]
            dx = g - xhat
            dx -= (sg / count).astype(ct)[:, None]
            dx *= scale.astype(ct)[:, None]
        else:
            dx = g * scale.astype(ct)[:, None]
        wdt = dy.dtype if weight is None else weight.dtype
        return (self._asarray(dx.reshape(x.shape), dy.dtype),
                self._asarray(sgx, wdt) if need_dw else None,
                self._asarray(sg, wdt) if need_db else None)

    # -- max pooling -------------------------------------------------------------------------------
    def _pool_taps(self, x_shape, kernel, stride, padding, dilation, out_hw):
        """For each kernel tap (i, j): the (rows, cols) slices of the padded input it reads for
        every window, and the flat index h * W + w it reads (-1 where that is padding)."""
        xp = self.xp
        H, W = x_shape[2:]
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
        oh, ow = out_hw
        rows = xp.arange(oh) * sh - ph
        cols = xp.arange(ow) * sw - pw
        taps = []
        for i in range(kh):
            for j in range(kw):
                r, q = rows + i * dh, cols + j * dw
                pos = xp.where(((r >= 0) & (r < H))[:, None] & ((q >= 0) & (q < W))[None, :],
                               r[:, None] * W + q[None, :], -1).astype(xp.int32)
                taps.append((slice(i * dh, i * dh + sh * (oh - 1) + 1, sh),
                             slice(j * dw, j * dw + sw * (ow - 1) + 1, sw), pos))
        return taps

    def _pool_padded(self, x, kernel, stride, padding, dilation, out_hw, fill):
        """x padded to cover every window (padding, and ceil_mode's last windows)."""
        xp = self.xp
        n, c, H, W = x.shape
        hp, wp = self._pool_padded_shape(x.shape, kernel, stride, padding, dilation, out_hw)
        if (hp, wp) == (H, W):
            return x
        out = xp.full((n, c, hp, wp), fill, dtype=x.dtype)
        out[:, :, padding[0]:padding[0] + H, padding[1]:padding[1] + W] = x
        return out

    def max_pool2d(self, x, kernel, stride, padding, dilation, out_hw):
        """(y, index): each window's maximum (NaN if it holds one) and the flat index h * W + w
        of that element in its input plane (int32): torch's choice, the first maximum in
        window order, the last NaN, or the window's first element when all are -inf."""
        xp = self.xp
        xw = self._widen(x)
        shape = x.shape[:2] + tuple(out_hw)
        best, idx = xp.empty(shape, dtype=xw.dtype), xp.empty(shape, dtype=xp.int32)
        taps = self._pool_taps(x.shape, kernel, stride, padding, dilation, out_hw)
        self._max_pool_into(best, idx, xw, taps, kernel, stride, padding, dilation, out_hw)
        return self._asarray(best, x.dtype), idx

    def _max_pool_into(self, best, idx, xw, taps, kernel, stride, padding, dilation, out_hw):
        """max_pool2d of xw (compute dtype) into best and idx, from _pool_taps' taps."""
        xp = self.xp
        xpad = self._pool_padded(xw, kernel, stride, padding, dilation, out_hw, -xp.inf)
        views = [xpad[:, :, rs, cs] for rs, cs, _ in taps]
        xp.copyto(best, views[0])
        for v in views[1:]:
            xp.maximum(best, v, out=best)               # NaN wins, as in torch
        padded = xpad is not xw
        # the first tap inside the input equal to the maximum (all -inf: the first inside):
        # taps in reverse, the last assignment wins
        for v, (_, _, pos) in zip(reversed(views), reversed(taps)):
            hit = v == best
            if padded:
                hit &= pos >= 0
            xp.copyto(idx, xp.broadcast_to(pos, idx.shape), where=hit)
        nan = xp.isnan(best)
        if nan.any():                                    # the last NaN of such windows
            for v, (_, _, pos) in zip(views, taps):
                xp.copyto(idx, xp.broadcast_to(pos, idx.shape), where=nan & xp.isnan(v))

    def _pool_padded_shape(self, x_shape, kernel, stride, padding, dilation, out_hw):
        need = [(out_hw[a] - 1) * stride[a] + dilation[a] * (kernel[a] - 1) + 1 for a in (0, 1)]
        return (max(x_shape[2] + 2 * padding[0], need[0]),
                max(x_shape[3] + 2 * padding[1], need[1]))

    def max_pool2d_backward(self, dy, index, x_shape, kernel, stride, padding, dilation):
        """dx: each input element's gradient is the sum of dy over the windows whose saved
        index is that element (in tap order: deterministic)."""
        xp = self.xp
        g = self._widen(dy)
        n, c, H, W = x_shape
        hp, wp = self._pool_padded_shape(x_shape, kernel, stride, padding, dilation, dy.shape[2:])
        dx = xp.zeros((n, c, hp, wp), dtype=g.dtype)
        taps = self._pool_taps(x_shape, kernel, stride, padding, dilation, dy.shape[2:])
        self._max_pool_grad_into(dx, g, index, taps)
        dx = dx[:, :, padding[0]:padding[0] + H, padding[1]:padding[1] + W]
        return self._asarray(xp.ascontiguousarray(dx), dy.dtype)

    def _max_pool_grad_into(self, dx, g, index, taps):
        """Adds each window's g into the padded dx (zeros) at its saved index, tap by tap."""
        xp = self.xp
        for rs, cs, pos in taps:
            dx[:, :, rs, cs] += xp.where(index == pos, g, 0)
