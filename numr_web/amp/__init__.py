"""Mixed precision (torch.amp's surface): `autocast` runs the GEMM-like ops in float16
and the precision-sensitive ones in float32 (numr_web/autocast_state.py); `GradScaler` scales the loss so
that float16 gradients do not underflow (grad_scaler.py)."""
from .autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled
from .grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "get_autocast_dtype", "is_autocast_enabled"]
