"""torch.nn.utils: gradient clipping (clip_grad_norm_ is numr_web.nn.optim's) and the flat
parameter vector."""
from __future__ import annotations

from . import _core
from .optim.optimizer import clip_grad_norm_  # noqa: F401


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient to [-clip_value, clip_value] (torch's clip_grad_value_)."""
    if isinstance(parameters, _core.Tensor):
        parameters = [parameters]
    clip_value = float(clip_value)
    with _core.no_grad():
        for p in parameters:
            if p.grad is not None:
                p.grad = p.grad.clamp(-clip_value, clip_value)


def parameters_to_vector(parameters):
    """The parameters flattened and concatenated into one 1-D tensor."""
    return _core.concat([p.reshape(-1) for p in parameters], 0)


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of the 1-D `vec` into the parameters (in place, no graph)."""
    if not isinstance(vec, _core.Tensor) or vec.ndim != 1:
        raise _core.ShapeError(f"vector_to_parameters expects a 1-D Tensor, got "
                               f"{getattr(vec, 'shape', type(vec).__name__)}")
    params = list(parameters)
    n = sum(p.numel() for p in params)
    if vec.shape[0] != n:
        raise _core.ShapeError(f"vector_to_parameters: the vector has {vec.shape[0]} elements, "
                               f"the parameters {n}")
    start = 0
    with _core.no_grad():
        for p in params:
            k = p.numel()
            _core.rebind(p, vec[start:start + k].reshape(p.shape).to(p.device).astype(p.dtype))
            start += k
