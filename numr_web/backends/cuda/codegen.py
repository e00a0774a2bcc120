"""The CUDA source of the cuda backend, assembled at kernel-build time: the hand-written bodies of
kernels.cu, with the per-activation code GENERATED from the activation table's `cuda` rows
(numr_web/vocab/activations.py) inserted at its marker line.

For every row (numbered by its position in the table: `Act.code`) the generator writes five device
functions `act_<name>_fwd(z)`, `_dz(z)`, `_d2(z)`, `_d1(dy, s)` and `_ds(s)` (for rows that save
"z", d1 is dy * dz(s) and ds is d2(s), as the table defines them), and one dispatch template per
function, `act_fwd<A>(z)` ..., an `if constexpr` chain on the row number, which the compiler folds
to the one row a kernel is specialised for. Nothing here needs cupy or a GPU: tests compile the
source with NVRTC alone (tests/test_cuda_codegen.py), and `numr-web shaders --language cuda`
prints it (dump()).
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

from ...vocab.activations import ACT

KERNELS_CU = Path(__file__).with_name("kernels.cu")
# appended to kernels.cu in this order (they use its IO<S>; the tiled attention uses attention.cu's
# AttMask, the tensor-core one the tiled one's helpers)
ATTENTION_SOURCES = tuple(Path(__file__).with_name(f) for f in (
    "attention.cu", "attention_tiled.cu", "attention_mma.cu"))
APPENDED_CU = ATTENTION_SOURCES + tuple(Path(__file__).with_name(f)
                                        for f in ("nn.cu", "optim.cu", "cnn.cu"))
MARKER = "//@@ GENERATED ACTIVATIONS @@"
C_TYPES = {"float32": "float", "float64": "double", "float16": "half_t"}
OPTIONS = ("--std=c++17",)
FUNCTIONS = ("fwd", "dz", "d2", "d1", "ds")
MAP_FN = {"fwd": 0, "dz": 1, "d2": 2, "ds": 3}      # MapOp<A, F>
BIN_OPS = {"add": 0, "sub": 1, "mul": 2, "div": 3}   # BinOp<O>: the vocabulary rows with a raw kernel
_PARAMS = {"fwd": "C z", "dz": "C z", "d2": "C z", "d1": "C dy, C s", "ds": "C s"}
_ARGS = {"fwd": "z", "dz": "z", "d2": "z", "d1": "dy, s", "ds": "s"}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def codes():
    """Activation name -> the number the generated CUDA dispatches on (the table's row index)."""
    return {name: act.code for name, act in ACT.items()}


def _body(src):
    """A table string: an expression, or a function body when it contains `return`."""
    src = src.strip()
    return src if "return" in src else f"return {src};"


def _row_functions(act):
    if not _IDENT.match(act.name):
        raise ValueError(f"activation name {act.name!r} is not a C identifier")
    c = act.cuda
    bodies = {"fwd": _body(c.fwd), "dz": _body(c.dz), "d2": _body(c.d2)}
    if act.saves == "y":
        bodies["d1"], bodies["ds"] = _body(c.d1), _body(c.ds)
    else:   # the backward reads z: dy * act'(z), and d/dz of act'(z) is act''(z)
        bodies["d1"] = f"return dy * act_{act.name}_dz(s);"
        bodies["ds"] = f"return act_{act.name}_d2(s);"
    out = [f"// {act.code}: {act.name} (the backward reads {act.saves})"]
    for fn in FUNCTIONS:
        out.append(f"template <typename C> __device__ __forceinline__ C act_{act.name}_{fn}"
                   f"({_PARAMS[fn]}) {{\n    {bodies[fn]}\n}}")
    return out


def _dispatch(fn):
    rows = list(ACT.values())
    lines = [f"template <int A, typename C> __device__ __forceinline__ C act_{fn}({_PARAMS[fn]}) {{"]
    for i, act in enumerate(rows):
        kw = "if constexpr" if i == 0 else "else if constexpr"
        lines.append(f"    {kw} (A == {act.code}) return act_{act.name}_{fn}({_ARGS[fn]});")
    lines.append('    else { static_assert(A >= 0 && A < NUMR_N_ACT, "no such activation row"); '
                 "return C(0); }")
    lines.append("}")
    return "\n".join(lines)


def activation_source():
    """The generated part: the table's rows as device functions, and the dispatch templates."""
    parts = ["// ---- generated from the activation table (numr_web/vocab/activations.py) by",
             "// ---- numr_web/backends/cuda/codegen.py; edit the table, not this text",
             f"#define NUMR_N_ACT {len(ACT)}"]
    for act in ACT.values():
        parts.extend(_row_functions(act))
    for fn in FUNCTIONS:
        parts.append(_dispatch(fn))
    parts.append("// ---- end of the generated part")
    return "\n".join(parts)


@functools.lru_cache(maxsize=1)
def source():
    """The whole CUDA source: kernels.cu with the generated activations at the marker, then
    the attention kernels (attention.cu, attention_tiled.cu, attention_mma.cu), nn.cu,
    optim.cu and cnn.cu."""
    body = KERNELS_CU.read_text()
    if body.count(MARKER) != 1:
        raise RuntimeError(f"{KERNELS_CU.name} must contain the line {MARKER!r} exactly once")
    return "\n".join([body.replace(MARKER, activation_source())] +
                     [f.read_text() for f in APPENDED_CU])


def dump():
    """What `numr-web shaders --language cuda` prints."""
    return source()


# -- names of the template specialisations (NVRTC name expressions) ---------------------------------
def _b(flag):
    return "true" if flag else "false"


def map_op(code, fn):
    return f"MapOp<{code}, {MAP_FN[fn]}>"


def bwd_op(code):
    return f"BwdOp<{code}>"


def bin_op(name):
    return f"BinOp<{BIN_OPS[name]}>"


def ew(ctype, op, nin, v, u):
    return f"ew<{ctype}, {op}, {nin}, {v}, {u}>"


def ews(ctype, op, rev, v, u):
    return f"ews<{ctype}, {op}, {_b(rev)}, {v}, {u}>"


def bias_act(ctype, code, has_bias, write_z, v, u, otype=None):
    return (f"bias_act<{ctype}, {otype or ctype}, {code}, {_b(has_bias)}, {_b(write_z)}, "
            f"{v}, {u}>")


def cast(src, dst, v, u):
    return f"cast<{src}, {dst}, {v}, {u}>"


def bwd_db(ctype, code, v, u):
    return f"bwd_db<{ctype}, {code}, {v}, {u}>"


def seg_sum(ctype):
    return f"seg_sum<{ctype}>"


def sum_small(ctype):
    return f"sum_small<{ctype}>"


def attention(kernel, ctype, row_length, mask_kind):
    """attention.cu's kernels: attn_fwd / attn_bwd_dq / attn_bwd_dkv."""
    return f"{kernel}<{ctype}, {row_length}, {mask_kind}>"


def attention_tiled(kernel, ctype, dm, mask_kind, *tile, dense=False):
    """The tiled attention kernels with their tile: attention_tiled.cu's attn_fwd_t /
    attn_bwd_dq_t / attn_bwd_dkv_t (warps a block, rows a thread, tile columns), attention_mma.cu's
    attn_fwd_tc / attn_bwd_dq_tc / attn_bwd_dkv_tc (warps a block, tile columns); `dense`: the
    variant for dense q, k, v and dout (the kernels' DENSE flag)."""
    return f"{kernel}<{ctype}, {dm}, {mask_kind}, " + ", ".join(str(n) for n in tile) + \
        (", 1>" if dense else ">")
