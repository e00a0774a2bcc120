"""torch.nn.modules.normalization."""
from ....nn import LayerNorm, RMSNorm  # noqa: F401
