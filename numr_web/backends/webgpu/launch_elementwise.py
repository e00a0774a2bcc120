"""Launcher of shaders/elementwise.wgsl: strided one-pass kernels, their vec4 path, chunking above
the storage-binding limit, and the creation kernels (fill, arange, random, one_hot, bool upload).

`strided` runs one entry point (unary, binary, compare, where_, astype) over an output view and up
to three input views of the output's shape (operands a, b, cond; None for a scalar or absent one).
Dims are coalesced; a FLAT run (every operand dense, same shape) of unary / binary goes through the
vec4 entries (unary4 / binary4) with the scalar tail after it; an iteration space whose bindings
exceed the limit is cut into chunks of rows of its leading coalesced dim.
"""
from __future__ import annotations

import struct

from ...errors import BackendLimitError
from .contract import ELEMENTWISE, MAXD, OPERANDS
from .views import chunk_rows, coalesce, prod

K = ELEMENTWISE
L = K.layout
_FILE = K.name
_OFFSET = tuple(getattr(L, "OFFSET_" + o.upper()) for o in OPERANDS)
_STRIDES = tuple(getattr(L, "STRIDES_" + o.upper()) for o in OPERANDS)
# binding of each operand (out, a, b, cond) per entry point, and of the vec4 entries
_BINDINGS = {"unary": ("out", "a"), "binary": ("out", "a", "b"), "compare": ("outb", "a", "b"),
             "where_": ("out", "a", "b", "cnd"), "astype": ("outo", "a")}
_VEC4 = {"unary": ("unary4", ("out4", "a4")), "binary": ("binary4", ("out4", "a4", "b4"))}


def scalar_bits(value, dtype):
    """A Python number as the u32 word a kernel reads as C (f32 bits, or i32 two's complement)."""
    if dtype.kind == "f":
        value = float(value)
        try:
            return struct.unpack("<I", struct.pack("<f", value))[0]
        except OverflowError:          # beyond float32's range: rounds to +-inf (as torch does)
            return 0xFF800000 if value < 0 else 0x7F800000
    return int(value) & 0xFFFFFFFF


def strided(d, entry, dtype, out, ins, consts, scalars=(), out_dtype=None):
    """Run `entry` of elementwise.wgsl writing view `out` from views `ins` (a, b, cond: of out's
    shape, already expanded, or None). consts: override constants; scalars: (word, u32) pairs."""
    n = out.size
    if n == 0:
        return out
    slots = [0] + [i + 1 for i, v in enumerate(ins) if v is not None]
    views = [out] + [v for v in ins if v is not None]
    shape, strides = coalesce(out.shape, [v.strides for v in views])
    if len(shape) > MAXD:
        raise BackendLimitError(f"tensor with {len(shape)} non-mergeable dims; at most {MAXD}")
    if not shape:
        shape, strides = [1], [[1] for _ in views]
    flat = len(shape) == 1 and all(s[0] == 1 for s in strides)
    consts = dict(consts, FLAT=int(flat))
    rows = chunk_rows(shape, strides, [v.itemsize for v in views], d.binding_limit - d.align)
    if rows is None:
        raise BackendLimitError(
            f"a {views[0].dtype.name} tensor of shape {out.shape} needs more than "
            f"maxStorageBufferBindingSize ({d.binding_limit} bytes) per row of its leading "
            f"dimension; this view cannot be processed in chunks (make it contiguous or smaller)")
    names = _BINDINGS[entry]
    inner = [1 + sum((dd - 1) * st for dd, st in zip(shape[1:], s[1:])) for s in strides]
    ecnt = prod(shape[1:])
    nd = len(shape)
    vec4 = _VEC4.get(entry) if flat else None
    for r0 in range(0, shape[0], rows):
        r = min(rows, shape[0] - r0)
        w = L.new()
        for word, value in scalars:
            w[word] = value
        w[L.N] = r * ecnt
        w[L.NDIM] = nd
        w[L.SHAPE:L.SHAPE + nd] = [r] + shape[1:]
        bufs = {}
        for v, slot, s, inn in zip(views, slots, strides, inner):
            bufs[names[slot]], w[_OFFSET[slot]] = d.bind(v, v.offset + r0 * s[0], (r - 1) * s[0] + inn)
            w[_STRIDES[slot]:_STRIDES[slot] + nd] = s
        cnt = r * ecnt
        if vec4 and cnt >= 4 and all(w[_OFFSET[slot]] % 4 == 0 for slot in slots):
            cnt = _launch_vec4(d, vec4, dtype, consts, w, bufs, names, slots, cnt)
            if not cnt:
                continue
        d.launch(_FILE, entry, dtype, consts, w, bufs, d.grid(cnt), out_dtype)
    return out


def _launch_vec4(d, vec4, dtype, consts, w, bufs, names, slots, cnt):
    """The dense part of a FLAT unary / binary run with vec4 loads (offsets in vec4 units);
    returns the count of the scalar tail, for which w is updated."""
    entry4, names4 = vec4
    n4 = cnt // 4
    w4 = list(w)
    w4[L.N] = n4
    b4 = {}
    for slot in slots:
        w4[_OFFSET[slot]] = w[_OFFSET[slot]] // 4
        b4[names4[slot]] = bufs[names[slot]]
    d.launch(_FILE, entry4, dtype, {k: v for k, v in consts.items() if k != "FLAT"}, w4, b4,
             d.grid(n4))
    tail = cnt - 4 * n4
    if tail:
        w[L.N] = tail
        w[L.SHAPE] = tail
        for slot in slots:
            w[_OFFSET[slot]] += 4 * n4
    return tail


# -- creation kernels: a dense output written from element 0 --------------------------------------
def fill(d, out, value):
    n = out.size
    if n:
        w = L.new()
        w[L.N], w[L.SCALAR_A] = n, scalar_bits(value, out.dtype)
        d.launch(_FILE, "fill", out.dtype, {}, w, {"out": d.bind_whole(out)}, d.grid(n))
    return out


def arange(d, out, start, step):
    n = out.size
    if n:
        w = L.new()
        w[L.N] = n
        w[L.SCALAR_A], w[L.SCALAR_B] = scalar_bits(start, out.dtype), scalar_bits(step, out.dtype)
        d.launch(_FILE, "arange", out.dtype, {}, w, {"out": d.bind_whole(out)}, d.grid(n))
    return out


def random(d, out, seed, kind):
    """kind: one of contract.ELEMENTWISE.codes["RANDOM"]; seed: a 64-bit int."""
    n = out.size
    if n:
        w = L.new()
        w[L.N] = n
        w[L.SEED_LO], w[L.SEED_HI] = seed & 0xFFFFFFFF, seed >> 32
        w[L.RANDOM_F16] = int(out.dtype.name == "float16")
        d.launch(_FILE, "random", out.dtype, {"OP": K.code("RANDOM", kind)}, w,
                 {"out": d.bind_whole(out)}, d.grid(n))
    return out


def one_hot(d, out, labels, depth):
    total = out.size
    if total:
        shape, (st,) = coalesce(labels.shape, [labels.strides])
        if not shape:
            shape, st = [1], [0]
        lab, rel = d.bind(labels, labels.offset, labels.span())
        w = L.new()
        w[L.N], w[L.NDIM], w[L.DEPTH], w[L.OFFSET_A] = total, len(shape), depth, rel
        w[L.SHAPE:L.SHAPE + len(shape)] = shape
        w[L.STRIDES_A:L.STRIDES_A + len(st)] = st
        d.launch(_FILE, "one_hot", out.dtype, {}, w, {"out": d.bind_whole(out), "lab": lab},
                 d.grid(total))
    return out


def bool_unpack(d, out, packed):
    """out (bool, one u32 each) from `packed`, a Storage holding one byte per element."""
    n = out.size
    w = L.new()
    w[L.N] = n
    d.launch(_FILE, "bool_unpack", out.dtype, {}, w,
             {"out": d.bind_whole(out), "raw": (packed.raw, 0, packed.nbytes)}, d.grid(n))
    return out
