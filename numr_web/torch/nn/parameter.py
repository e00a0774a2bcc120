"""torch.nn.parameter."""
from ...nn.module import Parameter  # noqa: F401
