"""torch.optim.lr_scheduler: numr_web.nn.optim's schedules (torch's values, tested against it)."""
from ...nn.optim import (ConstantLR, CosineAnnealingLR,  # noqa: F401
                         CosineAnnealingWarmRestarts, ExponentialLR, LambdaLR, LinearLR,
                         LRScheduler, MultiplicativeLR, MultiStepLR, OneCycleLR, PolynomialLR,
                         ReduceLROnPlateau, SequentialLR, StepLR)
from .._unsupported import module_getattr as _module_getattr

_LRScheduler = LRScheduler

__getattr__ = _module_getattr("torch.optim.lr_scheduler", {
    "ChainedScheduler": "numr_web's schedules set the rate from a closed form, so chaining "
                        "them (each scaling the rate the previous one set) is not supported; "
                        "use LambdaLR with the product of the factors",
    "CyclicLR": "not supported; use OneCycleLR or LambdaLR",
})
