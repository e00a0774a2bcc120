"""The public surface of the elementwise rows marked `public` (numr_web/vocab/elementwise.py),
generated: the function nr.<name>, the Tensor method x.<name>(...) and the package export
(numr_web/__init__.py reads FUNCTIONS); inplace.py gives x.<name>_() from the same rows. A row
added to the table is therefore an op on every device with no code here."""
from __future__ import annotations

import inspect

from .. import dtypes as dt
from ..errors import DTypeError
from ..vocab.elementwise import rows
from .common import method_class, need_tensor
from .elementwise import binary, unary


def _unary_function(row):
    name = row.name
    if row.options:
        return _unary_with_options(row)

    def fn(input):  # noqa: A002 (torch's name)
        x = need_tensor(input, name)
        if row.dtype == "round" and not x.dtype.is_floating:
            if x.dtype is dt.bool_:
                raise DTypeError(f"{name} of a bool tensor is not defined (as in torch); convert "
                                 "it with .astype('int32') or .float()")
            return x.clone()                    # integers are already whole (torch returns them)
        return unary(name, x)
    return fn


def _unary_with_options(row):
    """fn(input, <option>=<default>, ...): the options bound as Python binds arguments (a wrong
    name or count is Python's TypeError), then the row's prepare(x, **options) runs first."""
    P = inspect.Parameter
    sig = inspect.Signature([P("input", P.POSITIONAL_OR_KEYWORD)] + [
        P(k, P.POSITIONAL_OR_KEYWORD, default=v) for k, v in row.options.items()])

    def fn(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        opts = dict(bound.arguments)
        x = need_tensor(opts.pop("input"), row.name)
        return unary(row.name, row.prepare(x, **opts))
    fn.__signature__ = sig
    return fn


def _binary_function(row):
    name = row.name

    def fn(input, other):  # noqa: A002 (torch's names)
        return binary(name, input, other)
    return fn


def _document(fn, row):
    fn.__name__ = fn.__qualname__ = row.name
    rule = {"float": "; integer and bool tensors are computed as float32",
            "round": "; integer tensors are returned as a copy", "int": "; integer and bool only",
            "any": ""}[row.dtype]
    fn.__doc__ = row.doc or f"torch.{row.name}: elementwise{rule}."
    return fn


FUNCTIONS = {r.name: _document(_unary_function(r) if r.family == "unary" else _binary_function(r),
                               r) for r in rows(public=True)}
UNARY = tuple(r.name for r in rows("unary", public=True))
BINARY = tuple(r.name for r in rows("binary", public=True))

GeneratedMethods = method_class(
    "GeneratedMethods", **FUNCTIONS)


def parity_cases():
    """(name, domains, fn(nr, *inputs)) for every public row: the cases a parity page runs on each
    device, inputs drawn uniformly from the row's domain (one (lo, hi) per operand)."""
    return [(r.name, r.domain, lambda nr, *xs, _n=r.name: getattr(nr, _n)(*xs))
            for r in rows(public=True)]
