"""torch.nn.modules.batchnorm."""
from ....nn import BatchNorm1d, BatchNorm2d  # noqa: F401
