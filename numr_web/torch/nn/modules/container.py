"""torch.nn.modules.container."""
from ....nn import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential  # noqa: F401
