"""The op vocabulary: one `Op` row per op, registered by the family modules next to its public
function (ops/elementwise.py, reductions.py, linalg.py, shape_ops.py, nn_functional.py).

A row holds the op's forward (backend primitives on handles, returning the output handle(s) and
what the VJP needs saved) and its VJP (written with tensor ops, so that under create_graph the
gradients are differentiable again). Elementwise rows also name their `family` (the backend
primitive that runs them: "unary", "binary", "compare") and their numpy function: backends derive
their op codes and kernel dispatch from `family_names()` (the WGSL `switch` of
shaders/elementwise.wgsl is generated from it), and tests/test_vocabulary.py checks that every
backend covers every row.

This module is a leaf: backends import it without importing the tensor layer.
"""
from __future__ import annotations

KERNEL_FAMILIES = ("unary", "binary", "compare")


class Op:
    __slots__ = ("name", "forward", "vjp", "save_out", "backward_name", "vjp_reads_saved",
                 "family", "numpy")

    def __init__(self, name, forward, vjp, save_out=False, backward_name=None,
                 vjp_reads_saved=True, family=None, numpy=None):
        self.name, self.forward, self.vjp, self.save_out = name, forward, vjp, save_out
        self.backward_name = backward_name or "".join(p.title() for p in name.split("_")) + "Backward"
        self.vjp_reads_saved = vjp_reads_saved   # False: the VJP needs shapes only (add, reshape)
        self.family = family                     # kernel family of elementwise rows, else None
        self.numpy = numpy                       # elementwise rows: the numpy function's name,
                                                 # or f(xp, *arrays) where numpy has none

    def __repr__(self):
        return f"Op({self.name!r})"


OPS: dict = {}


def register(name, forward, vjp, **kw):
    if name in OPS:
        raise ValueError(f"op {name!r} is registered twice")
    OPS[name] = Op(name, forward, vjp, **kw)
    return OPS[name]


def family_names(family):
    """Names of the rows of one kernel family, in registration order (their kernel op codes)."""
    if family not in KERNEL_FAMILIES:
        raise ValueError(f"unknown kernel family {family!r}; expected one of {KERNEL_FAMILIES}")
    return tuple(op.name for op in OPS.values() if op.family == family)


def numpy_function(name, xp):
    """The array-module function an elementwise row maps to (the array backends use it)."""
    f = OPS[name].numpy
    if isinstance(f, str):
        return getattr(xp, f)
    return lambda *arrays: f(xp, *arrays)
