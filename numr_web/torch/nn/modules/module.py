"""torch.nn.modules.module."""
from ....nn import Module  # noqa: F401
