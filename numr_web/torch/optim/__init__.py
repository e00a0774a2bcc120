"""torch.optim: numr_web.nn.optim's optimizers (torch's update formulas, tested against torch)."""
from ...nn.optim import (LBFGS, SGD, Adadelta, Adagrad, Adam, Adamax, AdamW,  # noqa: F401
                         NAdam, Optimizer, RAdam, RMSprop)
from . import lr_scheduler  # noqa: F401
from .._unsupported import module_getattr as _module_getattr

__getattr__ = _module_getattr("torch.optim", {
    "SparseAdam": "sparse gradients are not supported",
    "ASGD": "not supported; use SGD or Adam",
    "Rprop": "not supported; use SGD or Adam",
    "Muon": "not supported; use AdamW",
})
