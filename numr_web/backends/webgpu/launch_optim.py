"""Launcher of shaders/optim.wgsl: the Adam / AdamW update, and SGD's, of one float32 parameter
in one dispatch (instead of a dozen elementwise ops, each a Python call)."""
from __future__ import annotations

import math

from ...dtypes import float32
from ..base import adam_scalars
from .contract import OPTIM, f32_word

K = OPTIM
L = K.layout
_FILE = K.name


def _parameter(d, p, g):
    """The metadata words and bindings every update starts from: the size, p and g."""
    n = p.size
    words = L.new()
    words[L.N] = n
    bufs = {}
    bufs["p"], words[L.OFFSET_P] = d.bind(p, p.offset, n)
    bufs["g"], words[L.OFFSET_G] = d.bind(g, g.offset, n)
    return words, bufs


def adam(d, p, g, m, v, outs, decay, factor, w, b2, eps, lr, b1, step):
    """p, g, m, v: float32 GPUArrays of one size (m, v None on the first step); outs: three new
    dense arrays (p, m, v); step: the count t, a number or a 0-d float32 GPUArray (DEV)."""
    n = p.size
    words, bufs = _parameter(d, p, g)
    if m is not None:
        bufs["m"], words[L.OFFSET_M] = d.bind(m, m.offset, n)
        bufs["v"], words[L.OFFSET_V] = d.bind(v, v.offset, n)
    for name, t in zip(("po", "mo", "vo"), outs):
        bufs[name] = d.bind_whole(t)
    dev = not isinstance(step, (int, float))
    if dev:
        bufs["dstep"], words[L.OFFSET_STEP] = d.bind(step, step.offset, 1)
        words[L.LR], words[L.LN_B1], words[L.LN_B2] = f32_word(lr), f32_word(math.log(b1)), \
            f32_word(math.log(b2))
    else:
        step_size, bc2_sqrt = adam_scalars(lr, b1, b2, step)
        words[L.STEP_SIZE], words[L.BC2_SQRT] = f32_word(step_size), f32_word(bc2_sqrt)
    words[L.F], words[L.W], words[L.W1] = f32_word(factor), f32_word(w), f32_word(1 - w)
    words[L.B2], words[L.W2], words[L.EPS] = f32_word(b2), f32_word(1 - b2), f32_word(eps)
    consts = {"DECAY": K.code("DECAY", decay or "none"), "FIRST": int(m is None),
              "DEV": int(dev), "LERP_HI": int(abs(w) >= 0.5)}
    d.launch(_FILE, "adam", float32, consts, words, bufs, d.grid(n))


def sgd(d, p, g, buf, outs, weight_decay, momentum, dampening, nesterov, maximize, lr):
    """p, g (and buf, the momentum buffer, None on the first step): float32 GPUArrays of one
    size; outs: (new p, new buf or None without momentum), dense."""
    n = p.size
    words, bufs = _parameter(d, p, g)
    if momentum and buf is not None:
        bufs["m"], words[L.OFFSET_M] = d.bind(buf, buf.offset, n)
    bufs["po"] = d.bind_whole(outs[0])
    if momentum:
        bufs["mo"] = d.bind_whole(outs[1])
    words[L.F], words[L.MOM], words[L.DAMP1] = f32_word(weight_decay), f32_word(momentum), \
        f32_word(1 - dampening)
    words[L.LR] = f32_word(lr)
    consts = {"FIRST": int(buf is None), "MAXIMIZE": int(bool(maximize)),
              "WD": int(bool(weight_decay)), "MOMENTUM": int(bool(momentum)),
              "DAMP": int(bool(dampening)), "NESTEROV": int(bool(nesterov))}
    d.launch(_FILE, "sgd", float32, consts, words, bufs, d.grid(n))
