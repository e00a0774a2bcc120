"""torch.nn.modules.conv."""
from ....nn import Conv2d  # noqa: F401
