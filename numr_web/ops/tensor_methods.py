"""Tensor's op methods: the op families' method classes become Tensor's bases, in front of
tensor.OpMethods. A family imported later comes first, as its methods are the more specific
(math_ops' __rtruediv__ and logical_not over elementwise's). numr_web/__init__.py imports this
module after the families; tests/test_architecture.py checks that every family's class is here."""
from __future__ import annotations

from ..tensor import OpMethods, Tensor
from .composites import CompositesMethods
from .elementwise import ElementwiseMethods
from .generated import GeneratedMethods
from .indexing import IndexingMethods
from .inplace import InplaceMethods
from .linalg import LinalgMethods
from .math_ops import MathOpsMethods
from .reductions import ReductionsMethods
from .selection import SelectionMethods
from .sampling import SamplingMethods
from .shape_ops import ShapeOpsMethods
from .sorting import SortingMethods
from .torch_aliases import TorchAliasesMethods
from .torch_functions import TorchFunctionsMethods

FAMILIES = (SelectionMethods, TorchAliasesMethods, SamplingMethods, InplaceMethods,
            TorchFunctionsMethods, IndexingMethods, GeneratedMethods, SortingMethods,
            CompositesMethods, ShapeOpsMethods, ReductionsMethods, LinalgMethods, MathOpsMethods,
            ElementwiseMethods)

if Tensor.__bases__ == (OpMethods,):             # once, even if this module is reloaded
    Tensor.__bases__ = FAMILIES + (OpMethods,)
