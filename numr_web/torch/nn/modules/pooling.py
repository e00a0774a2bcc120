"""torch.nn.modules.pooling."""
from ....nn import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d  # noqa: F401
