"""torch.nn.utils' home of clip_grad_norm_ (the same function as numr_web.nn.optim's)."""
from .optim.optimizer import clip_grad_norm_  # noqa: F401
