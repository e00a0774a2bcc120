"""The op rows autograd runs: one `Op` per op, holding its forward (backend primitives on handles,
returning the output handle(s) and what the VJP needs saved) and its VJP (written with tensor ops,
so that under create_graph the gradients are differentiable again). The op layer registers them
(numr_web/ops/: the elementwise rows of numr_web/vocab/elementwise.py generically, the other
families next to their public functions); the two rows the tensor layer runs (astype, to_device)
are registered here.

Backends never read OPS: their kernel dispatch derives from the declarative rows of this package
(`family_names`, `numpy_function`; numr_web/vocab/elementwise.py), and tests/test_architecture.py
checks that every backend covers every row.
"""
from __future__ import annotations

from .elementwise import KERNEL_FAMILIES, ROWS, rows


class Op:
    __slots__ = ("name", "forward", "vjp", "save_out", "backward_name", "vjp_reads_saved",
                 "keeps_inputs", "family", "numpy")

    def __init__(self, name, forward, vjp, save_out=False, backward_name=None,
                 vjp_reads_saved=True, keeps_inputs=None, family=None, numpy=None):
        # save_out: the node keeps the outputs for the VJP (exp' = exp); a bool, or a function of
        # the call's attributes where that depends on them (a Linear without activation: no)
        self.name, self.forward, self.vjp, self.save_out = name, forward, vjp, save_out
        self.backward_name = backward_name or "".join(p.title() for p in name.split("_")) + "Backward"
        self.vjp_reads_saved = vjp_reads_saved   # False: the VJP needs shapes only (add, reshape)
        # keeps_inputs: the node holds its computed (non-leaf) inputs' data until the backward.
        # False lets a residual add or a reshape free its operands as soon as nothing else holds
        # them (torch saves nothing for those); a bool or a function of the attributes
        self.keeps_inputs = vjp_reads_saved if keeps_inputs is None else keeps_inputs
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


# the rows the tensor layer runs itself (Tensor.astype, Tensor.to), registered with the table:
# tensor.py reads them without depending on an op module having been imported first
register("astype", lambda be, x, dtype: (be.astype(x, dtype), None),
         lambda n, g: (g.astype(n.args[0].dtype),), vjp_reads_saved=False)
register("to_device", None,                     # Tensor.to() moves the data and records it
         lambda n, g: (g.to(n.args[0].device),), vjp_reads_saved=False,
         backward_name="ToDeviceBackward")


def family_names(family):
    """Names of the rows of one kernel family, in table order (their kernel op codes)."""
    if family not in KERNEL_FAMILIES:
        raise ValueError(f"unknown kernel family {family!r}; expected one of {KERNEL_FAMILIES}")
    return tuple(r.name for r in rows(family))


def numpy_function(name, xp):
    """The array-module function an elementwise row maps to (the array backends use it)."""
    f = ROWS[name].numpy
    if isinstance(f, str):
        return getattr(xp, f)
    return lambda *arrays: f(xp, *arrays)
