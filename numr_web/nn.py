"""A tiny nn library for the demos: Linear (one fused GEMM + bias + activation op), MLP, SGD, Adam."""
from __future__ import annotations

import math

from .autograd import no_grad
from .ops import cross_entropy, matmul_bias_activation  # noqa: F401  (cross_entropy re-exported)
from .ops.activations import get_act
from .tensor import rand, zeros


class Module:
    def parameters(self):
        out = []
        for v in self.__dict__.values():
            if isinstance(v, Module):
                out.extend(v.parameters())
            elif isinstance(v, (list, tuple)):
                for m in v:
                    out.extend(m.parameters() if isinstance(m, Module) else [])
        return out

    def __call__(self, x):
        return self.forward(x)

    def zero_grad(self):
        for p in self.parameters():
            p.grad = None


class Linear(Module):
    """y = act(x @ W + b) in one fused op. W (in, out) and b are initialised like PyTorch's
    nn.Linear: uniform in +-1/sqrt(in)."""

    def __init__(self, in_features, out_features, activation="none", bias=True, device=None,
                 seed=None, dtype=None):
        get_act(activation)
        bound = 1.0 / math.sqrt(in_features)
        self.activation = activation
        self.weight = rand((in_features, out_features), seed=seed, device=device, dtype=dtype) * (2 * bound) - bound
        self.weight = self.weight.detach().requires_grad_()
        self.bias = None
        if bias:
            b = rand((out_features,), seed=None if seed is None else seed + 1, device=device,
                     dtype=dtype) * (2 * bound) - bound
            self.bias = b.detach().requires_grad_()

    def parameters(self):
        return [self.weight] + ([self.bias] if self.bias is not None else [])

    def forward(self, x):
        return matmul_bias_activation(x, self.weight, self.bias, self.activation)


class MLP(Module):
    """Linear layers with `activation` between them and none after the last."""

    def __init__(self, sizes, activation="relu", device=None, seed=0, dtype=None):
        self.layers = [Linear(a, b, activation if i < len(sizes) - 2 else "none", device=device,
                              seed=None if seed is None else seed + 2 * i, dtype=dtype)
                       for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))]

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Optimizer:
    def __init__(self, params):
        self.params = list(params)

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    @staticmethod
    def _assign(p, value):
        """Update a leaf: rebind its storage to the new values (same shape, dtype, device).
        Tensors made earlier with p.detach() keep the old values (unlike PyTorch's in-place step)."""
        value = value.astype(p.dtype)
        if value.shape != p.shape:
            from .errors import ShapeError
            raise ShapeError(f"optimizer update of shape {value.shape} for a parameter of shape "
                             f"{p.shape}")
        p._data = value._data


class SGD(Optimizer):
    def __init__(self, params, lr=0.01, momentum=0.0):
        super().__init__(params)
        self.lr, self.momentum = lr, momentum
        self.buf = [None] * len(self.params)

    def step(self):
        with no_grad():
            for i, p in enumerate(self.params):
                if p.grad is None:
                    continue
                g = p.grad
                if self.momentum:
                    self.buf[i] = g if self.buf[i] is None else self.buf[i] * self.momentum + g
                    g = self.buf[i]
                self._assign(p, p - g * self.lr)


class Adam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(params)
        self.lr, self.betas, self.eps, self.t = lr, betas, eps, 0
        self.m = [None] * len(self.params)
        self.v = [None] * len(self.params)

    def step(self):
        self.t += 1
        b1, b2 = self.betas
        c1, c2 = 1 - b1 ** self.t, 1 - b2 ** self.t
        with no_grad():
            for i, p in enumerate(self.params):
                g = p.grad
                if g is None:
                    continue
                self.m[i] = g * (1 - b1) if self.m[i] is None else self.m[i] * b1 + g * (1 - b1)
                self.v[i] = g * g * (1 - b2) if self.v[i] is None else self.v[i] * b2 + g * g * (1 - b2)
                step = (self.m[i] / c1) / ((self.v[i] / c2).sqrt() + self.eps)
                self._assign(p, p - step * self.lr)
