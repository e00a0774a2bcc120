"""numr_web: tensors, reverse-mode autograd and fused GEMM + bias + activation layers on numpy (cpu),
CuPy (cuda) and WebGPU (native wgpu or a browser tab through Pyodide).

    import numr_web as nr
    x = nr.randn((64, 32), seed=0, requires_grad=True)
    w = nr.randn((32, 10), seed=1, requires_grad=True)
    y = nr.matmul_bias_activation(x, w, nr.zeros(10), activation="gelu")
    y.sum().backward()

Layers, bottom up: errors, dtypes, shapes, gradmode, host -> backends/ -> autograd -> tensor,
creation -> ops/ (the op vocabulary) -> nn, data, models -> apps/ (cli, demos, training). docs/architecture.md walks a call.
"""
from .dtypes import bool_, bfloat16, float16, float32, float64, int32, DType, get_dtype
from .errors import (BackendLimitError, BackendUnavailableError, DTypeError, DeviceError,
                     IndexOutOfRangeError,
                     GradientError, KernelError, NumrError, ShapeError, StateDictError,
                     UnknownActivationError, UnsupportedError)
from .backends import available_devices, get_backend
from .gradmode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,
                       no_grad, set_grad_enabled)
from .autograd import grad
from .generator import (Generator, default_generator, get_rng_state, initial_seed, manual_seed,
                        seed, set_rng_state)
from .tensor import Size, Tensor
from .creation import (arange, as_tensor, empty, empty_like, eye, from_dlpack, full, full_like,
                       linspace, ones, ones_like, rand, rand_like, randint, randn, randn_like, tensor, zeros,
                       zeros_like)
from .vocab.activations import ACT
from .ops.elementwise import (act_backward, activation, clamp, floor_divide, gelu, maximum,
                              minimum, pow, relu, remainder, sigmoid, silu, tanh, where)
from .ops.math_ops import (  # noqa: A004
    allclose, arccos, arcsin, arctan, arctan2, atan2, eq, equal, fix, fmod, frac, ge, greater,
    greater_equal, gt, isclose, isfinite, isinf, isnan, isneginf, isposinf, le, lerp, less,
    less_equal, logical_and, logical_not, logical_or, logical_xor, lt, nan_to_num, ne, not_equal,
    round, square)
from .ops.composites import (addmm, amax, amin, bmm, count_nonzero, cumprod, cumsum, diag,
                             diagonal, diff, dot, logcumsumexp,
                             mm, moveaxis, movedim, mv, norm, outer, repeat_interleave, roll,
                             std_mean, swapaxes, swapdims, tile, trace, unbind, var_mean)
from .ops.sorting import argsort, kthvalue, median, msort, sort, topk
from .ops.sampling import bernoulli, multinomial, normal, poisson
from .ops.torch_functions import (broadcast_shapes, broadcast_tensors, broadcast_to, cosine_similarity,
                                  cross, einsum, fmax, fmin, from_numpy, hypot, index_add, kron, logaddexp,
                                  masked_select, meshgrid, nonzero, randperm, scatter_add,
                                  take_along_dim, tensordot, unique, bincount)
from .ops.reductions import (all_ as all, any_ as any, argmax, argmin, log_softmax,  # noqa: A004
                             logsumexp, max, mean, min, prod, softmax, std, sum, var)
from .ops.linalg import matmul, matmul_bias_activation
from .ops.shape_ops import (chunk, clone, concat, contiguous, expand, flatten, narrow, permute,
                            reshape, split, squeeze, stack, transpose, unsqueeze)
from .ops.indexing import embedding, flip, gather, index_select, masked_fill, tril, triu
from .ops.nn_functional import cross_entropy, nll_loss, one_hot
from .ops.losses import (binary_cross_entropy, binary_cross_entropy_with_logits, huber_loss, kl_div,
                         l1_loss, mse_loss, smooth_l1_loss)
from .ops.normalization import dropout, layer_norm, rms_norm
from .ops.torch_aliases import (add, clamp_max, clamp_min, div, divide, get_default_dtype, is_tensor, mul,
                                multiply, numel, sub, subtract, t, true_divide)
from .ops.attention import scaled_dot_product_attention
from .ops.convolution import (adaptive_avg_pool2d, avg_pool2d, conv2d, conv2d_bias_activation,
                              max_pool2d)
from .ops import inplace as _inplace  # noqa: F401  (x.add_(), x += y, x[i] = v)
from .ops import tensor_methods as _tensor_methods  # noqa: F401  (t + u, t.sum(), ...)
from .serialization import load, save, save_bytes, save_bytes_async
from .capture import capture
from .profiler import profile, record_function
from .amp import autocast, get_autocast_dtype, is_autocast_enabled
from . import amp  # noqa: F401  (nr.amp.GradScaler)
from .torch_alias import install_as_torch
from . import nn  # noqa: F401

bool = bool_  # noqa: A001  (nr.bool like torch.bool)
float, double, half, int = float32, float64, float16, int32  # noqa: A001  (torch.float ...)
long = int64 = int32          # torch's 64-bit integer names: int32 is the widest integer (README)
cat = concat
clip = clamp

# the module-level functions check their tensor argument first (a typed error naming what came)
from .ops.common import tensor_first as _tensor_first  # noqa: E402
for _name in ("activation", "clamp", "clip", "gelu", "relu", "sigmoid", "silu", "tanh",
              "all", "any", "argmax", "argmin", "log_softmax", "logsumexp", "max", "mean", "min", "prod",
              "softmax", "std", "sum", "var", "matmul", "matmul_bias_activation", "chunk", "clone",
              "contiguous", "expand", "flatten", "narrow", "permute", "reshape", "split", "squeeze",
              "transpose", "unsqueeze", "flip", "gather", "index_select", "masked_fill", "tril",
              "triu", "dropout", "layer_norm", "rms_norm", "full_like", "zeros_like", "ones_like",
              "empty_like", "rand_like", "randn_like", "clamp_min", "clamp_max", "square", "t",
              "unbind",
              "cat", "concat", "stack"):
    globals()[_name] = _tensor_first(globals()[_name], _name)
# the other activations of the ACT table as nr.<name>(x): nr.leaky_relu, nr.elu, nr.softplus, ...
from .ops.elementwise import TABLE_FUNCTIONS as _table_functions  # noqa: E402
for _name, _fn in _table_functions.items():
    globals()[_name] = _tensor_first(_fn, _name)
# the public rows of the elementwise table (numr_web/vocab/elementwise.py) as nr.<name>: abs, exp,
# floor, ..., xlogy (the unary ones check their tensor argument as above)
from .ops.generated import FUNCTIONS as _row_functions, UNARY as _row_unary  # noqa: E402
for _name, _fn in _row_functions.items():
    globals()[_name] = _tensor_first(_fn, _name) if _name in _row_unary else _fn
del _name, _fn, _table_functions, _row_functions, _row_unary

__version__ = "0.1.0"
