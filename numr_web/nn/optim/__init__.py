"""numr_web.nn.optim: optimizers (torch.optim's formulas), gradient clipping and LR schedules."""
from . import lr_scheduler  # noqa: F401
from .lr_scheduler import (CosineAnnealingLR, CosineWithWarmup, ExponentialLR,  # noqa: F401
                           LambdaLR, LinearLR, LRScheduler, MultiStepLR, StepLR)
from .optimizer import SGD, Adam, AdamW, Optimizer, clip_grad_norm_  # noqa: F401
