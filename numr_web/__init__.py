"""numr_web: tensors, reverse-mode autograd and fused GEMM + bias + activation layers on numpy (cpu),
CuPy (cuda) and WebGPU (native wgpu or a browser tab through Pyodide).

    import numr_web as nr
    x = nr.randn((64, 32), seed=0, requires_grad=True)
    w = nr.randn((32, 10), seed=1, requires_grad=True)
    y = nr.matmul_bias_activation(x, w, nr.zeros(10), activation="gelu")
    y.sum().backward()
"""
from .dtypes import bool_, float16, float32, float64, int32, DType, get_dtype
from .errors import (BackendLimitError, BackendUnavailableError, DeviceError, DTypeError,
                     GradientError, KernelError, NumrError, ShapeError)
from .backends import available_devices, get_backend
from .tensor import (Tensor, arange, from_dlpack, full, ones, rand, randn, tensor, zeros)
from .autograd import enable_grad, grad, is_grad_enabled, no_grad
from .ops import (abs, argmax, concat, cos, cross_entropy, exp, gelu, log, log_softmax, matmul,
                  matmul_bias_activation, max, maximum, mean, min, minimum, neg, one_hot, ones_like,
                  relu, sigmoid, silu, sin, softmax, sqrt, stack, sum, tanh, where, zeros_like)
from .ops.activations import ACT
from . import nn  # noqa: F401

bool = bool_  # noqa: A001  (nr.bool like torch.bool)

__version__ = "0.1.0"


def transpose(x, a=-2, b=-1):
    return x.transpose(a, b)


def permute(x, *perm):
    return x.permute(*perm)


def reshape(x, *shape):
    return x.reshape(*shape)
