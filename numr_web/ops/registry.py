"""The op rows live in numr_web/vocab/registry.py (the layer backends and tensor.py read); their
names stay importable from here."""
from ..vocab.registry import KERNEL_FAMILIES, OPS, Op, family_names, numpy_function, register  # noqa: F401
