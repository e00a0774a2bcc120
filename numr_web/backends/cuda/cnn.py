"""Launches of cnn.cu's kernels, a mixin of CudaBackend: batch norm forward and backward (per-chunk
partial sums, then one pass per element whose blocks add the partials in a fixed order), max
pooling forward and backward (from the argmax, no scatter), and convolution through cuDNN
(cudnn.py) with the bias and activation in one kernel after it and the activation's backward
and the bias gradient in one kernel before cuDNN's backward. Where a kernel does not apply
(dtypes mixed, more than 2^31 elements) or cuDNN is not there, the array-module forms run
(ArrayCNN, ComposedConv).

Knob: NUMR_CUDA_CONV (or the backend's `conv` attribute): "auto" (cuDNN where it loads and passes
its probe, else im2col + cuBLAS), "cudnn" (an error if it cannot be used) or "im2col"."""
from __future__ import annotations

import os

from ...errors import BackendUnavailableError
from ...vocab.activations import ACT
from .cudnn import Cudnn

CNN_BLOCK = 256                # threads per block of the per-channel kernels (cnn.cu's CNN_BLOCK)
BLOCKS_PER_SM = 4              # per-channel grids aim at this many blocks per multiprocessor
CONV_MODES = ("auto", "cudnn", "im2col")
_LIMIT = 2 ** 31               # elements a kernel indexes with its int arithmetic (the argmax)


def _b(flag):
    return "true" if flag else "false"


def bn_stats(ct, code, bwd, hs):
    return f"bn_stats<{ct}, {code}, {_b(bwd)}, {_b(hs)}>"


def bn_fwd(ct, code, train, hw, hb, wz, upd, devm):
    return f"bn_fwd<{ct}, {code}, {', '.join(_b(f) for f in (train, hw, hb, wz, upd, devm))}>"


def bn_bwd(ct, code, train, hw, hs, dw, db):
    return f"bn_bwd<{ct}, {code}, {', '.join(_b(f) for f in (train, hw, hs, dw, db))}>"


def chan_bias_act(ct, code, hb, wz):
    return f"chan_bias_act<{ct}, {code}, {_b(hb)}, {_b(wz)}>"


def chan_act_bwd(ct, code, hs, wd, db):
    return f"chan_act_bwd<{ct}, {code}, {_b(hs)}, {_b(wd)}, {_b(db)}>"


def maxpool(ct, bwd):
    return f"maxpool_{'bwd' if bwd else 'fwd'}<{ct}>"


class CudaCNN:
    _conv_mode = None
    _cudnn = None                 # a Cudnn once probed (or the reason it cannot be used)

    # -- plumbing ---------------------------------------------------------------------------------
    def _cnn_fn(self, name):
        return self.kernels.function(name, lambda: [name])

    def _chan_plan(self, shape):
        """(nb, nc, hw), the block (tx, ty), chunks and samples per chunk of the per-channel
        kernels for a dense (N, C, ...) tensor."""
        nb, nc = shape[0], shape[1]
        hw = 1
        for d in shape[2:]:
            hw *= d
        tx = 1 if hw == 1 else min(CNN_BLOCK, max(32, 1 << (hw - 1).bit_length()))
        chunks = max(1, min(nb, -(-BLOCKS_PER_SM * self._sms // max(nc, 1)), 65535))
        rpc = -(-nb // chunks)
        return (nb, nc, hw), (tx, CNN_BLOCK // tx), -(-nb // rpc), rpc

    def _cnn_ok(self, x, *others):
        ct = self._ct.get(x.dtype.char)
        if ct is None or x.size == 0 or x.size >= _LIMIT:
            return None
        if any(t is not None and t.dtype != x.dtype for t in others):
            return None
        return ct

    # -- batch norm -------------------------------------------------------------------------------
    def batch_norm(self, x, weight, bias, running_mean, running_var, momentum, eps, training, act):
        ct = self._cnn_ok(x, weight, bias, running_mean, running_var)
        if ct is None or (running_mean is None) != (running_var is None):
            return super().batch_norm(x, weight, bias, running_mean, running_var, momentum, eps,
                                      training, act)
        xp = self.xp
        x = xp.ascontiguousarray(x)
        (nb, nc, hw), block, chunks, rpc = self._chan_plan(x.shape)
        geo = (nb, nc, hw, rpc)
        code = self._code[act]
        part = None
        if training:
            part = xp.empty((nc, chunks, 2), dtype=xp.float64)
            self._cnn_fn(bn_stats(ct, 0, False, False))(
                (nc, chunks), block, (x, 0, 0, 0, 0, part) + geo)
        wz = act != "none" and ACT[act].saves == "z"
        upd = training and running_mean is not None
        devm = upd and not isinstance(momentum, (int, float))
        y = xp.empty_like(x)
        z = xp.empty_like(x) if wz else None
        acc = xp.float64 if ct == "double" else xp.float32
        mean, rstd = xp.empty(nc, dtype=acc), xp.empty(nc, dtype=acc)
        rm_out = xp.empty_like(running_mean) if upd else None
        rv_out = xp.empty_like(running_var) if upd else None
        mom = xp.ascontiguousarray(momentum.astype(x.dtype).reshape(1)) if devm else 0
        stats = () if training and not upd else (running_mean, running_var)
        rm, rv = (xp.ascontiguousarray(t) for t in stats) if stats else (0, 0)
        opt = lambda t: 0 if t is None else xp.ascontiguousarray(t)  # noqa: E731
        self._cnn_fn(bn_fwd(ct, code, training, weight is not None, bias is not None, wz, upd,
                            devm))(
            (nc, chunks), block,
            (x, 0 if part is None else part, chunks, opt(weight), opt(bias), rm, rv, mom, y,
             opt(z), mean, rstd, opt(rm_out), opt(rv_out)) + geo +
            (float(eps), 0.0 if devm else float(momentum)))
        s = None if act == "none" else (z if wz else y)
        return y, s, mean, rstd, rm_out, rv_out

    def batch_norm_backward(self, dy, x, weight, mean, rstd, s, act, training, need_dw, need_db):
        ct = self._cnn_ok(x, dy, weight, s)
        acc = self.xp.float64 if ct == "double" else self.xp.float32
        if ct is None or mean.dtype != acc or rstd.dtype != acc:
            return super().batch_norm_backward(dy, x, weight, mean, rstd, s, act, training,
                                               need_dw, need_db)
        xp = self.xp
        dy, x = xp.ascontiguousarray(dy), xp.ascontiguousarray(x)
        hs = act != "none"
        sv = xp.ascontiguousarray(s) if hs else 0
        mean, rstd = xp.ascontiguousarray(mean), xp.ascontiguousarray(rstd)
        (nb, nc, hw), block, chunks, rpc = self._chan_plan(x.shape)
        geo = (nb, nc, hw, rpc)
        code = self._code[act]
        sums = training or need_dw or need_db
        part = xp.empty((nc, chunks, 2), dtype=xp.float64) if sums else None
        if sums:
            self._cnn_fn(bn_stats(ct, code, True, hs))(
                (nc, chunks), block, (x, dy, sv, mean, rstd, part) + geo)
        dx = xp.empty_like(x)
        dw = xp.empty(nc, dtype=x.dtype) if need_dw else None
        db = xp.empty(nc, dtype=x.dtype) if need_db else None
        self._cnn_fn(bn_bwd(ct, code, training, weight is not None, hs, need_dw, need_db))(
            (nc, chunks), block,
            (dy, x, sv, mean, rstd, 0 if weight is None else xp.ascontiguousarray(weight),
             0 if part is None else part, chunks, dx, 0 if dw is None else dw,
             0 if db is None else db) + geo)
        return dx, dw, db

    # -- max pooling ------------------------------------------------------------------------------
    def _pool_args(self, x_shape, out_hw, kernel, stride, padding, dilation):
        return (x_shape[2], x_shape[3], out_hw[0], out_hw[1]) + tuple(kernel) + tuple(stride) \
            + tuple(padding) + tuple(dilation)

    def _grid1d(self, n):
        return (max(1, min(-(-n // CNN_BLOCK), 32 * self._sms)),)

    def max_pool2d(self, x, kernel, stride, padding, dilation, out_hw):
        ct = self._cnn_ok(x)
        if ct is None:
            return super().max_pool2d(x, kernel, stride, padding, dilation, out_hw)
        xp = self.xp
        x = xp.ascontiguousarray(x)
        shape = tuple(x.shape[:2]) + tuple(out_hw)
        y, idx = xp.empty(shape, dtype=x.dtype), xp.empty(shape, dtype=xp.int32)
        if y.size:
            self._cnn_fn(maxpool(ct, False))(
                self._grid1d(y.size), (CNN_BLOCK,),
                (x, y, idx, y.size) + self._pool_args(x.shape, out_hw, kernel, stride, padding,
                                                      dilation))
        return y, idx

    def max_pool2d_backward(self, dy, index, x_shape, kernel, stride, padding, dilation):
        ct = self._cnn_ok(dy)
        n = 1
        for d in x_shape:
            n *= d
        if ct is None or n >= _LIMIT:
            return super().max_pool2d_backward(dy, index, x_shape, kernel, stride, padding,
                                               dilation)
        xp = self.xp
        dx = xp.empty(tuple(x_shape), dtype=dy.dtype)
        if dx.size:
            self._cnn_fn(maxpool(ct, True))(
                self._grid1d(dx.size), (CNN_BLOCK,),
                (xp.ascontiguousarray(dy), xp.ascontiguousarray(index), dx, dx.size) +
                self._pool_args(x_shape, dy.shape[2:], kernel, stride, padding, dilation))
        return dx

    # -- convolution ------------------------------------------------------------------------------
    @property
    def conv(self):
        """Which convolution runs: "auto", "cudnn" or "im2col" (NUMR_CUDA_CONV)."""
        if self._conv_mode is None:
            self.conv = os.environ.get("NUMR_CUDA_CONV", "auto").strip().lower() or "auto"
        return self._conv_mode

    @conv.setter
    def conv(self, mode):
        if mode not in CONV_MODES:
            raise BackendUnavailableError(f"the cuda convolution (NUMR_CUDA_CONV) must be one of "
                                          f"{CONV_MODES}, got {mode!r}")
        self._conv_mode = mode

    def _dnn(self, x, w):
        """The Cudnn to run this convolution with, or None (im2col + cuBLAS)."""
        mode = self.conv
        if mode == "im2col":
            return None
        if self._cudnn is None:
            if self.capturing:            # the probe reads results back: not while recording
                return None
            self._cudnn = Cudnn.probe(self)
        dnn = self._cudnn
        if isinstance(dnn, str):
            if mode == "cudnn":
                raise BackendUnavailableError(f"NUMR_CUDA_CONV=cudnn, but cuDNN cannot be used: "
                                              f"{dnn}")
            return None
        if not dnn.supports(x, w):
            return None
        return dnn

    def conv_info(self):
        mode = self.conv
        if mode == "im2col":
            return "im2col + cuBLAS (NUMR_CUDA_CONV=im2col)"
        if self._cudnn is None:
            return f"{mode}: cuDNN is probed at the first convolution"
        if isinstance(self._cudnn, str):
            return f"im2col + cuBLAS (cuDNN unavailable: {self._cudnn})"
        return self._cudnn.describe()

    def conv2d(self, x, w, bias, stride, padding, dilation, act):
        dnn = self._dnn(x, w)
        ct = None if dnn is None else self._cnn_ok(x, w, bias)
        if ct is None:
            return super().conv2d(x, w, bias, stride, padding, dilation, act)
        xp = self.xp
        x, w = xp.ascontiguousarray(x), xp.ascontiguousarray(w)
        y = dnn.forward(x, w, stride, padding, dilation)
        if bias is None and act == "none":
            return y, None
        wz = act != "none" and ACT[act].saves == "z"
        out = xp.empty_like(y) if wz else y
        (nb, nc, hw), block, chunks, rpc = self._chan_plan(y.shape)
        self._cnn_fn(chan_bias_act(ct, self._code[act], bias is not None, wz))(
            (nc, chunks), block,
            (y, 0 if bias is None else xp.ascontiguousarray(bias), out, nb, nc, hw, rpc))
        return out, (None if act == "none" else (y if wz else out))

    def conv2d_backward(self, dy, x, w, s, act, stride, padding, dilation, need_dx, need_dw,
                        need_db):
        dnn = self._dnn(x, w)
        ct = None if dnn is None else self._cnn_ok(x, w, dy, s)
        if ct is None:
            return super().conv2d_backward(dy, x, w, s, act, stride, padding, dilation, need_dx,
                                           need_dw, need_db)
        xp = self.xp
        dy, x, w = xp.ascontiguousarray(dy), xp.ascontiguousarray(x), xp.ascontiguousarray(w)
        hs = act != "none"
        dz, db = dy, None
        if hs or need_db:
            (nb, nc, hw), block, chunks, rpc = self._chan_plan(dy.shape)
            dz = xp.empty_like(dy) if hs else dy
            part = xp.empty((nc, chunks), dtype=xp.float64) if need_db else None
            self._cnn_fn(chan_act_bwd(ct, self._code[act], hs, hs, need_db))(
                (nc, chunks), block,
                (dy, xp.ascontiguousarray(s) if hs else 0, dz if hs else 0,
                 0 if part is None else part, nb, nc, hw, rpc))
            if need_db:
                db = part.sum(axis=1).astype(dy.dtype)
        dx = dnn.backward_data(w, dz, x.shape, stride, padding, dilation) if need_dx else None
        dw = dnn.backward_filter(x, dz, w.shape, stride, padding, dilation) if need_dw else None
        return dx, dw, db
