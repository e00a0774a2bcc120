"""torch.cuda.amp (deprecated in torch for torch.amp): GradScaler and autocast."""
from ..amp import GradScaler as _GradScaler
from .._functions import autocast as _autocast


class GradScaler(_GradScaler):
    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)


def autocast(enabled=True, dtype=None, cache_enabled=True):
    return _autocast("cuda", dtype, enabled, cache_enabled)
