"""torch.nn.modules.linear."""
from ....nn import Identity, Linear  # noqa: F401
NonDynamicallyQuantizableLinear = Linear
