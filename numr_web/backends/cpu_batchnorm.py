"""The cpu backend's batch norm on many cores: passes over blocks of images that the worker
threads take one at a time (cpu_threads.py): one for the per-(image, channel) row sums, one for
the centred sums of squares, one writing y; the backward one for both sums, one writing dx, each
recomputing its centred values. The same numpy calls on each block as ArrayCNN's one call, so
the same bits (the per-channel sums are row sums, added over the batch once).

Where the compiled loops run (cpu_jit.py), every pass is one compiled loop a block that holds
no GIL (cpu_jit_cnn.py): the forward's sums of x - k and (x - k)^2 in one pass, then y (no
activation or relu); the training backward with relu or none reads g from dy (and relu's
input) in both of its passes, never writing it. Their sums are float64 in any order
(vectorised): within an ulp or two of the numpy path, never much less accurate, the same on
any thread count; the passes writing y and dx are the numpy path's operations in its order.
float16 takes the one-call path. A mixin of NumpyBackend."""
from __future__ import annotations

try:
    import numpy as np
except ImportError:         # no numpy (the browser): NumpyBackend.probe says so
    np = None

from ..vocab.activations import ACT
from . import cpu_jit
from .cpu_blocks import row_blocks
from .cpu_cnn import _INT, _blocked, _pass_block
from .cpu_elementwise import jit_act
from .cpu_threads import parallel_for


def _relu(z):
    """relu in place with act_numpy's bits (0 where z < 0; -0.0 and NaN pass through), as an
    integer product of z's bits with z >= 0-or-NaN: a masked copy costs ~10x more."""
    keep = np.less(z, 0)
    np.logical_not(keep, out=keep)
    bits = z.view(_INT[z.itemsize])
    np.multiply(bits, keep, out=bits)
    return z


def _relu_grad(dy, s, out):
    """relu's d1, where(s <= 0, 0, dy), bit for bit, into out (integer work as in _relu)."""
    keep = np.less_equal(s, 0)
    np.logical_not(keep, out=keep)
    t = _INT[dy.itemsize]
    np.multiply(dy.view(t), keep, out=out.view(t))
    return out


class CpuBatchNorm:
    def batch_norm(self, x, weight, bias, running_mean, running_var, momentum, eps, training, act):
        n, c = x.shape[:2]
        if not _blocked(x) or x.size == 0:
            return super().batch_norm(x, weight, bias, running_mean, running_var, momentum, eps,
                                      training, act)
        x3 = x.reshape(n, c, -1)
        count, ct = x3.shape[0] * x3.shape[2], x.dtype
        parts = row_blocks(n, x3[0].size, _pass_block(x3.size))
        sums = np.empty((n, c), ct)

        def row_sums(fn):               # ArrayCNN._channel_sum: row sums, then over the batch
            def body(i):
                a, b = parts[i]
                sums[a:b] = fn(a, b).sum(axis=2)
            parallel_for(len(parts), body)
            return sums.sum(axis=0, dtype=np.float64)
        var = None
        jk = cpu_jit.kernels()
        if training and jk is not None:  # both sums in one compiled pass, float64
            mean, var = _compiled_moments(jk, x3, parts)
            shift = mean.astype(ct)[:, None]
        elif training:
            mean = row_sums(lambda a, b: x3[a:b]) / count
            shift = mean.astype(ct)[:, None]

            def square(a, b):
                d = x3[a:b] - shift
                return np.multiply(d, d, out=d)
            var = row_sums(square) / count
        else:
            mean = running_mean.astype(np.float64)
            shift = self._widen(running_mean)[:, None]
        rstd = 1.0 / np.sqrt((var if training else running_var.astype(np.float64)) + eps)
        scale = (rstd if weight is None else rstd * weight.astype(np.float64)).astype(ct)[:, None]
        row = None if act == "none" else ACT[act]
        keep_z = row is not None and row.saves == "z"
        y = np.empty(x3.shape, ct)
        s = np.empty(x3.shape, ct) if keep_z else None
        jit = jk if act in ("none", "relu") else None

        def body(i):                    # ArrayCNN.batch_norm's y, for images a:b, in place
            a, b = parts[i]
            if jit is not None:         # the same operations in one compiled pass
                jit.bn_apply(x3[a:b], shift[:, 0], scale[:, 0],
                             jit.none if bias is None else bias, act == "relu", y[a:b])
                return
            d = np.subtract(x3[a:b], shift, out=(s if keep_z else y)[a:b])
            d *= scale
            if bias is not None:
                d += bias[:, None]
            if act == "relu":
                _relu(d)
            elif keep_z:
                y[a:b] = row.np.fwd(np, d if row.np.keeps_z else d.copy())
            elif row is not None:
                got = row.np.fwd(np, d)
                if got is not d:
                    d[...] = got
        parallel_for(len(parts), body)
        new_rm, new_rv = self._bn_running(running_mean, running_var, mean, var, count,
                                          momentum) if training else (None, None)
        return (y.reshape(x.shape), None if row is None else (s if keep_z else y).reshape(
            x.shape), mean.astype(ct), rstd.astype(ct), new_rm, new_rv)

    def batch_norm_backward(self, dy, x, weight, mean, rstd, s, act, training, need_dw, need_db):
        n, c = x.shape[:2]
        if not _blocked(x, dy, s) or x.size == 0:
            return super().batch_norm_backward(dy, x, weight, mean, rstd, s, act, training,
                                               need_dw, need_db)
        g3, x3 = dy.reshape(n, c, -1), x.reshape(n, c, -1)
        s3 = None if s is None else s.reshape(n, c, -1)
        ct, count = dy.dtype, max(n * x3.shape[2], 1)
        m, r = mean.astype(ct)[:, None], rstd.astype(ct)[:, None]
        parts = row_blocks(n, x3[0].size, _pass_block(x3.size))
        dx = np.empty(x3.shape, ct)
        d1 = None if act == "none" else ACT[act].np.d1
        jit = cpu_jit.kernels()
        relu_jit = jit_act(act, ct) if act == "relu" else None

        def grad(a, b):
            """ArrayCNN.batch_norm_backward's g = dy * act'(.), kept in dx (read again)."""
            if d1 is None:
                return g3[a:b]
            if relu_jit is not None:     # relu's compiled d1 (cpu_elementwise.jit_act's row)
                k, _, f, tail, limit = relu_jit
                k.act_d1(f, tail, limit, g3[a:b].reshape(-1), s3[a:b].reshape(-1),
                         dx[a:b].reshape(-1))
                return dx[a:b]
            if act == "relu":
                return _relu_grad(g3[a:b], s3[a:b], dx[a:b])
            dx[a:b] = d1(np, g3[a:b], s3[a:b], None)
            return dx[a:b]

        scale = rstd.astype(np.float64) if weight is None else \
            rstd.astype(np.float64) * weight.astype(np.float64)
        scale = scale.astype(ct)[:, None]
        want_g, want_gx = training or need_db, training or need_dw
        if not (want_g or want_gx):     # eval, no weight gradients: dx = g * scale, one pass
            def scaled(i):
                a, b = parts[i]
                g = grad(a, b)
                np.multiply(g, scale, out=dx[a:b])
            parallel_for(len(parts), scaled)
            return dx.reshape(x.shape), None, None
        # training with relu or no activation: g is never written, each compiled pass takes it
        # from dy (and s)
        fused = jit is not None and training and act in ("none", "relu")
        relu = fused and act == "relu"
        if jit is not None:
            sg, sgx = _compiled_grad_sums(jit, parts, grad, g3, s3 if relu else g3, relu, x3, m,
                                          fused, None if training else (scale, dx))
            sgx *= rstd.astype(np.float64)              # sums of g * xhat
        else:
            sg, sgx = self._grad_sums(parts, grad, x3, m, r, want_g, want_gx,
                                      None if training else (scale, dx))
        if training:
            kx, kg = (sgx / count).astype(ct)[:, None], (sg / count).astype(ct)[:, None]

            def body(i):
                a, b = parts[i]
                g = g3[a:b] if d1 is None or fused else dx[a:b]
                if jit is not None:     # the same operations in one compiled pass
                    jit.bn_dx(g, s3[a:b] if relu else g, relu, ct.type(0), x3[a:b], m[:, 0],
                              r[:, 0], kx[:, 0], kg[:, 0], scale[:, 0], dx[a:b])
                    return
                xhat = x3[a:b] - m
                xhat *= r
                xhat *= kx
                d = np.subtract(g, xhat, out=dx[a:b])
                d -= kg
                d *= scale
            parallel_for(len(parts), body)
        wdt = dy.dtype if weight is None else weight.dtype
        return (dx.reshape(x.shape), sgx.astype(wdt) if need_dw else None,
                sg.astype(wdt) if need_db else None)

    def _grad_sums(self, parts, grad, x3, m, r, want_g, want_gx, eval_scale):
        """numpy's (image, channel) row sums of g and g * xhat, added over the batch in
        float64 (ArrayCNN's); in eval, dx = g * scale written alongside."""
        n, c = x3.shape[:2]
        sg = np.empty((n, c), x3.dtype) if want_g else None
        sgx = np.empty((n, c), x3.dtype) if want_gx else None

        def sums(i):
            a, b = parts[i]
            g = grad(a, b)
            if want_g:
                sg[a:b] = g.sum(axis=2)
            if want_gx:
                xhat = x3[a:b] - m
                xhat *= r
                xhat *= g                       # g * xhat (the product commutes bit for bit)
                sgx[a:b] = xhat.sum(axis=2)
            if eval_scale is not None:
                np.multiply(g, eval_scale[0], out=eval_scale[1][a:b])
        parallel_for(len(parts), sums)
        return (None if sg is None else sg.sum(axis=0, dtype=np.float64),
                None if sgx is None else sgx.sum(axis=0, dtype=np.float64))


def _compiled_moments(jit, x3, parts):
    """Batch norm's (mean, biased variance) per channel of x3 (n, C, L) in float64: the
    compiled per-row sums of x - k and (x - k)^2 (k: the channel's mean over the first
    image where finite, else 0: near the mean, so E[d^2] - E[d]^2 cancels little), added over
    the batch in order."""
    n, c, L = x3.shape
    k = x3[0].mean(axis=1, dtype=np.float64)
    k[~np.isfinite(k)] = 0.0
    s1, s2 = np.empty((n, c)), np.empty((n, c))

    def body(i):
        a, b = parts[i]
        jit.bn_moments(x3[a:b], k, s1[a:b], s2[a:b])
    parallel_for(len(parts), body)
    count = n * L
    d = s1.sum(axis=0) / count                  # mean - k
    return k + d, np.maximum(s2.sum(axis=0) / count - d * d, 0.0)


def _compiled_grad_sums(jit, parts, grad, dy3, s3, relu, x3, m, fused, eval_scale):
    """The compiled (image, channel) row sums of g and g * (x - m) in float64, added over the
    batch in order; g from dy3 (and s3 where relu) where fused, else grad's (numpy's or
    relu's compiled d1, written into dx). In eval, dx = g * scale written alongside."""
    n, c = x3.shape[:2]
    sg, sgx = np.empty((n, c)), np.empty((n, c))
    m64 = m[:, 0].astype(np.float64)

    def body(i):
        a, b = parts[i]
        if fused:
            jit.bn_grad_sums(dy3[a:b], s3[a:b], relu, x3[a:b], m64, sg[a:b], sgx[a:b])
            return
        g = grad(a, b)
        jit.bn_grad_sums(g, g, False, x3[a:b], m64, sg[a:b], sgx[a:b])
        if eval_scale is not None:
            np.multiply(g, eval_scale[0], out=eval_scale[1][a:b])
    parallel_for(len(parts), body)
    return sg.sum(axis=0), sgx.sum(axis=0)
