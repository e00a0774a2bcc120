"""torch.amp: GradScaler and autocast, which are numr_web.amp's (torch's signatures)."""
from __future__ import annotations

from ..amp import GradScaler, autocast  # noqa: F401
