"""Linear (one fused GEMM + bias + activation op), MLP, Identity, Flatten, Unflatten.

Linear stores its weight as torch does, (out_features, in_features), so state_dicts and
safetensors checkpoints load into torch.nn.Linear unchanged and an Embedding's (vocab, dim) table
can be tied to an output layer. The forward passes weight.T to the fused op (a view on cpu/cuda)."""
from __future__ import annotations

import math

from ..amp.autocast_mode import active as amp_active, cast as amp_cast
from . import _core
from .containers import ModuleList
from .module import Module, Parameter


class Linear(Module):
    """y = activation(x @ weight.T + bias). Initialised like torch.nn.Linear: weight and bias
    uniform in +-1/sqrt(in_features). `seed` makes the initialisation reproducible (numr's
    extension; the bias uses seed + 1)."""

    def __init__(self, in_features, out_features, bias=True, activation="none", device=None,
                 dtype=None, seed=None):
        super().__init__()
        if isinstance(bias, str):
            raise _core.NumrError(f"Linear(in, out, bias, activation): bias must be a bool, got "
                                  f"{bias!r}; pass the activation by name: activation={bias!r}")
        _core.get_act(activation)
        for what, v in (("in_features", in_features), ("out_features", out_features)):
            if not hasattr(v, "__index__") or v.__index__() < 0:
                raise _core.ShapeError(f"Linear: {what} must be a non-negative int, got {v!r}")
        self.in_features, self.out_features = in_features, out_features
        self.activation = activation
        bound = 1.0 / math.sqrt(in_features) if in_features else 0.0
        self.weight = Parameter(_uniform((out_features, in_features), bound, seed, device, dtype))
        self.bias = None
        if bias:
            self.bias = Parameter(_uniform((out_features,), bound,
                                           None if seed is None else seed + 1, device, dtype))

    def forward(self, x):
        return linear(x, self.weight, self.bias, self.activation, who=self)

    def extra_repr(self):
        act = f", activation={self.activation!r}" if self.activation != "none" else ""
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}{act}")


def linear(x, weight, bias=None, activation="none", who=None):
    """torch.nn.functional.linear (weight (out, in)) with numr's fused activation. `who`: the
    Linear module calling it (named in a shape error instead of the fused op)."""
    shape = getattr(x, "shape", None)
    wshape = getattr(weight, "shape", None)
    if shape is not None and wshape is not None and len(wshape) == 2 and \
            (len(shape) == 0 or shape[-1] != wshape[1]):
        what = (f"{who!r}: input of shape {shape}" if who is not None else
                f"linear: input of shape {shape} and weight of shape {wshape} (out_features, "
                f"in_features)")
        raise _core.ShapeError(f"{what}: the input's last dimension must be in_features = "
                               f"{wshape[1]}, got {shape[-1] if shape else 'a 0-d tensor'}")
    if amp_active() is not None:          # before the transpose: a parameter's cast is cached
        x, weight, bias = amp_cast("linear", x, weight, bias)
    if x.ndim == 1:
        return linear(x.reshape(1, -1), weight, bias, activation, who).reshape(-1)
    return _core.matmul_bias_activation(x, weight.T, bias, activation)


def _uniform(shape, bound, seed, device, dtype):
    return _core.rand(shape, seed=seed, device=device, dtype=dtype) * (2 * bound) - bound


class MLP(Module):
    """Linear layers sizes[0] -> sizes[1] -> ... with `activation` fused into every layer but the
    last. seed (default 0) makes the initialisation reproducible; layer i uses seed + 2i."""

    def __init__(self, sizes, activation="relu", device=None, seed=0, dtype=None):
        super().__init__()
        n = len(sizes) - 1
        self.layers = ModuleList(
            Linear(a, b, activation=activation if i < n - 1 else "none", device=device,
                   dtype=dtype, seed=None if seed is None else seed + 2 * i)
            for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Identity(Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class Flatten(Module):
    """Flattens dims start_dim..end_dim into one (default: all but the batch dim)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Splits dim `dim` into `unflattened_size` (one entry may be -1), as torch.nn.Unflatten."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if not isinstance(unflattened_size, (list, tuple)) or not all(
                isinstance(s, int) and not isinstance(s, bool) for s in unflattened_size):
            raise _core.DTypeError(f"Unflatten: unflattened_size must be a tuple of ints, got "
                                   f"{unflattened_size!r}")
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x):
        if not -x.ndim <= self.dim < max(x.ndim, 1):
            raise _core.IndexOutOfRangeError(f"Unflatten: dim {self.dim} is out of range for a "
                                             f"tensor with {x.ndim} dimension(s)")
        d = self.dim % x.ndim
        return x.reshape(x.shape[:d] + self.unflattened_size + x.shape[d + 1:])

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
