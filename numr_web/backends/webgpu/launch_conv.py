"""Launcher of shaders/conv.wgsl: im2col (torch's unfold) and col2im (its adjoint, torch's fold,
as a gather over the columns that read each input pixel: deterministic), columns (N, C*kh*kw, L)
or with cn (C*kh*kw, N*L); max pooling forward (value and argmax) and backward (a gather from the
argmax; where the windows tile the input, one invocation per window). Inputs are dense."""
from __future__ import annotations

from .contract import CONV, CONV_SHAPE_WORDS, f32_word

K = CONV
L = K.layout
_FILE = K.name


def out_size(size, k, s, p, dl):
    return (size + 2 * p - dl * (k - 1) - 1) // s + 1


def _words(x_shape, kernel, stride, padding, dilation):
    n, c, h, w_ = x_shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    w = L.new()
    w[L.C], w[L.H], w[L.W], w[L.KH], w[L.KW] = c, h, w_, kh, kw
    w[L.SH], w[L.SW], w[L.PH], w[L.PW], w[L.DH], w[L.DW] = sh, sw, ph, pw, dh, dw
    w[L.OH], w[L.OW] = out_size(h, kh, sh, ph, dh), out_size(w_, kw, sw, pw, dw)
    return w


def _consts(w, nb, cn, spec):
    """The overrides: CN, and with spec (GPU adapters) the shape words as constants too, one
    pipeline per layer shape (a CPU adapter would compile one per shape for little gain)."""
    c = {"CN": int(cn)} if cn else {}
    if spec:
        c.update({f"K_{n}": w[getattr(L, n)] for n in CONV_SHAPE_WORDS}, SPEC=1, K_NB=nb)
    return c


def _run(d, entry, inp, out, w, cn=False, idx=None, spec=False, n=0, items=None):
    """Launch `entry` over `items` invocations (default: one per output element)."""
    if out.size == 0:
        return out
    items = out.size if items is None else items
    w[L.N] = items
    ibuf, w[L.OFFSET_IN] = d.bind(inp, inp.offset, inp.span())
    obuf, w[L.OFFSET_OUT] = d.bind(out, out.offset, out.span())
    bufs = {"a": ibuf, "out": obuf}
    if idx is not None:
        bufs["idx"], w[L.OFFSET_IDX] = d.bind(idx, idx.offset, idx.span())
    d.launch(_FILE, entry, inp.dtype, _consts(w, n, cn, spec), w, bufs, d.grid(items))
    return out


def im2col(d, x, out, kernel, stride, padding, dilation, pad_value, cn=False, spec=False):
    """x dense (N, C, H, W) -> out dense (N, C*kh*kw, OH*OW), or (C*kh*kw, N*OH*OW) with cn.
    spec: the shape as override constants (launch_conv._consts)."""
    w = _words(x.shape, kernel, stride, padding, dilation)
    w[L.PAD] = f32_word(pad_value)
    return _run(d, "im2col", x, out, w, cn, spec=spec, n=x.shape[0])


def col2im(d, cols, out, kernel, stride, padding, dilation, cn=False, spec=False):
    """cols dense (N, C*kh*kw, OH*OW), or (C*kh*kw, N*OH*OW) with cn -> out dense (N, C, H, W)."""
    return _run(d, "col2im", cols, out, _words(out.shape, kernel, stride, padding, dilation), cn,
                spec=spec, n=out.shape[0])


def max_pool(d, x, out, idx, kernel, stride, padding, dilation):
    """x dense (N, C, H, W) -> out (N, C, OH, OW) and idx (int32, like out), dense."""
    w = _words(x.shape, kernel, stride, padding, dilation)
    w[L.OH], w[L.OW] = out.shape[2:]            # ceil_mode: the caller's output size
    return _run(d, "maxpool", x, out, w, idx=idx)


def max_pool_backward(d, dy, idx, out, kernel, stride, padding, dilation):
    """dy, idx dense (N, C, OH, OW) -> out dense (N, C, H, W)."""
    w = _words(out.shape, kernel, stride, padding, dilation)
    w[L.OH], w[L.OW] = dy.shape[2:]
    (kh, kw), (h, w_) = kernel, out.shape[2:]
    tiles = tuple(stride) == (kh, kw) and tuple(padding) == (0, 0) and tuple(dilation) == (1, 1) \
        and (h, w_) == (dy.shape[2] * kh, dy.shape[3] * kw)
    if tiles:                                  # one invocation per window
        return _run(d, "maxpool_bwd_tiles", dy, out, w, idx=idx, items=dy.size)
    return _run(d, "maxpool_bwd", dy, out, w, idx=idx)
