"""torch.nn.modules.dropout."""
from ....nn import Dropout  # noqa: F401
