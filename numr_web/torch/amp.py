"""torch.amp: GradScaler (numr_web.amp's dynamic loss scaling, torch's signature) and autocast
(only disabled: numr_web does not cast ops automatically)."""
from __future__ import annotations

from .. import amp as _amp
from ._functions import autocast  # noqa: F401


class GradScaler(_amp.GradScaler):
    """torch.amp.GradScaler(device="cuda", init_scale, growth_factor, backoff_factor,
    growth_interval, enabled): the same rules on every device (the scale works anywhere)."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        super().__init__(init_scale, growth_factor, backoff_factor, growth_interval, enabled)
