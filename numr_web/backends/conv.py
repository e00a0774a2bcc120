"""2-D convolution (groups 1) composed from a backend's own primitives: im2col, GEMMs, col2im. A
mixin of the numpy and webgpu backends (the cuda backend calls cuDNN where it can and falls back
to this). Every GEMM is one large 2-D GEMM over the whole batch (a batched GEMM of one image each
is a skinny M = O GEMM per image, several times slower on BLAS): the columns are made in the
(C*kh*kw, N*L) layout and the only transposes are of the outputs, O/(C*kh*kw) times smaller:

  forward   z' (O, N*L) = W (O, CK) @ cols' (CK, N*L);  y = act(z' as NCHW + bias per channel),
            the bias added in the transposing copy
  backward  dz = dy * act'(.) (the saved y or z);  dbias = dz summed per channel
            dW^T (CK, O)     = cols' @ dz'^T            cols' = im2col in (CK, N*L) layout
            dcols' (CK, N*L) = W^T @ dz'                 then col2im from that layout
            (dz' is dz as (O, N*L): one transposing copy); two single large GEMMs, K = N*L for dW

The cpu device runs these GEMMs on blocks of images instead (backends/cpu_cnn.py), each block's
columns made, multiplied and consumed while in cache, one block per core.

The columns are made again in the backward instead of being kept from the forward (the forward
keeps only what the activation's backward reads): a memory-bound pass instead of holding
C*kh*kw/C times the input per layer until the backward."""
from __future__ import annotations

from ..vocab.activations import ACT


class ComposedConv:

    def _channel_bias_act(self, z, bias, act):
        """act(z + bias per channel) for z (N, O, L), a transposed view: dense (y, what the
        activation's backward reads, or None)."""
        if bias is not None:
            z = self.binary("add", z, self.reshape(bias, (1, bias.shape[0], 1)))
        else:
            z = self.contiguous(z)
        if act == "none":
            return z, None
        y = self.activation(act, z, "fwd")
        return y, (y if ACT[act].saves == "y" else z)

    def _channel_sums(self, a):
        """a (N, C, L) summed over N and L."""
        return self.reduce("sum", a, (0, 2), False)

    def conv2d(self, x, w, bias, stride, padding, dilation, act):
        """act(conv2d(x, w) + bias), NCHW, groups 1: (y, s), s what the activation's backward
        reads (y or the pre-activation z), None for "none"."""
        n = x.shape[0]
        o, c, kh, kw = w.shape
        ck = c * kh * kw
        oh, ow = _out_hw(x.shape, (kh, kw), stride, padding, dilation)
        cols = self.im2col(x, (kh, kw), stride, padding, dilation, cn=True)  # (CK, N*L)
        zt = self.matmul(self.reshape(self.contiguous(w), (o, ck)), cols)     # (O, N*L)
        del cols
        z = self.permute(self.reshape(zt, (o, n, oh * ow)), (1, 0, 2))       # (N, O, L) view
        y, s = self._channel_bias_act(z, bias, act)
        shape = (n, o, oh, ow)
        return self.reshape(y, shape), None if s is None else self.reshape(s, shape)

    def conv2d_backward(self, dy, x, w, s, act, stride, padding, dilation, need_dx, need_dw,
                        need_db):
        """(dx, dw, dbias), each None when not needed."""
        n, o, oh, ow = dy.shape
        c, kh, kw = w.shape[1:]
        ck, L = c * kh * kw, oh * ow
        dz = dy if act == "none" else self.act_backward(act, dy, s)[0]
        dz3 = self.reshape(dz, (n, o, L))
        db = self._channel_sums(dz3) if need_db else None
        if not (need_dx or need_dw):
            return None, None, db
        dzt = self.reshape(self.contiguous(self.permute(dz3, (1, 0, 2))), (o, n * L))
        dw = dx = None
        if need_dw:
            cols = self.im2col(x, (kh, kw), stride, padding, dilation, cn=True)  # (CK, N*L)
            # as (CK, O) = cols' @ dz'^T: OpenBLAS runs this orientation of the long-K product
            # 3-4x faster than dz' @ cols'^T (docs/benchmarks.md)
            dwt = self.matmul(cols, self.permute(dzt, (1, 0)))
            dw = self.reshape(self.permute(dwt, (1, 0)), w.shape)
            del cols                      # before dcols, as large, is made
        if need_dx:
            w2t = self.permute(self.reshape(self.contiguous(w), (o, ck)), (1, 0))
            dcols = self.matmul(w2t, dzt)                                     # (CK, N*L)
            dx = self.col2im(dcols, x.shape, (kh, kw), stride, padding, dilation, cn=True)
        return dx, dw, db


def _out_hw(x_shape, kernel, stride, padding, dilation):
    return tuple((x_shape[2 + i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1)
                 // stride[i] + 1 for i in range(2))
