"""torch.autograd: grad, backward and the grad-mode switches (numr_web.autograd's engine)."""
from __future__ import annotations

from ..autograd import grad  # noqa: F401
from ..errors import UnsupportedError
from ..gradmode import (enable_grad, inference_mode, no_grad,  # noqa: F401
                        set_grad_enabled)
from ..tensor import Tensor


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate the gradients of `tensors` (one or a sequence) into the leaves' .grad."""
    from ..autograd import backward as _backward
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    elif isinstance(grad_tensors, Tensor):
        grad_tensors = [grad_tensors]
    _backward(tensors, list(grad_tensors), retain_graph, create_graph, inputs)


class Function:
    """Custom autograd functions are not supported yet."""

    def __init_subclass__(cls, **kwargs):
        raise UnsupportedError(f"torch.autograd.Function ({cls.__name__}): custom autograd "
                               "functions are not supported; compose the forward from tensor "
                               "ops (their gradients follow)")
