"""numr_web.nn.optim: optimizers (torch.optim's formulas), gradient clipping and LR schedules."""
from . import lr_scheduler  # noqa: F401
from .lr_scheduler import (CosineAnnealingLR, CosineWithWarmup, ExponentialLR,  # noqa: F401
                           LambdaLR, LinearLR, LRScheduler, MultiStepLR, StepLR)
from .optimizer import SGD, Adam, AdamW, Optimizer, clip_grad_norm_  # noqa: F401
from .adaptive import Adadelta, Adagrad, Adamax, NAdam, RAdam, RMSprop  # noqa: F401
from .lbfgs import LBFGS  # noqa: F401
from .schedulers import (ConstantLR, CosineAnnealingWarmRestarts, MultiplicativeLR,  # noqa: F401
                         OneCycleLR, PolynomialLR, ReduceLROnPlateau, SequentialLR)
