"""torch.utils: the data-loading package (torch.utils.data)."""
from . import data  # noqa: F401
