"""torch.nn.modules.sparse."""
from ....nn import Embedding  # noqa: F401
