"""The engine names numr_web.nn uses, imported in one place."""
from __future__ import annotations

from ..backends import normalize_device  # noqa: F401
from ..creation import full, rand, randn, tensor, zeros, zeros_like  # noqa: F401
from ..dtypes import get_dtype
from ..errors import (DTypeError, IndexOutOfRangeError, NumrError, ShapeError,  # noqa: F401
                      UnsupportedError)
from ..gradmode import enable_grad, no_grad  # noqa: F401
from ..ops.activations import get_act  # noqa: F401
from ..ops.attention import scaled_dot_product_attention  # noqa: F401
from ..ops.convolution import (PADDING_MODES, adaptive_avg_pool2d, avg_pool2d,  # noqa: F401
                               conv2d, conv2d_bias_activation, max_pool2d)
from ..ops.elementwise import (activation, gelu, maximum, minimum,  # noqa: F401
                               relu, sigmoid, silu, tanh, where)
from ..ops.generated import FUNCTIONS as _rows
from ..ops.indexing import embedding  # noqa: F401
from ..ops.linalg import matmul, matmul_bias_activation  # noqa: F401
from ..ops.padding import pad  # noqa: F401
from ..ops.parametric import elu, hardtanh, leaky_relu, relu6, softplus  # noqa: F401
from ..ops.nn_functional import cross_entropy, legacy_reduction, nll_loss, one_hot  # noqa: F401
from ..ops.losses import (binary_cross_entropy, binary_cross_entropy_with_logits,  # noqa: F401
                          huber_loss, kl_div, l1_loss, mse_loss, smooth_l1_loss)
from ..ops.normalization import dropout, layer_norm, rms_norm  # noqa: F401
from ..ops.reductions import log_softmax, softmax  # noqa: F401
from ..ops.shape_ops import concat, stack  # noqa: F401
from ..tensor import Tensor  # noqa: F401

expm1 = _rows["expm1"]                # generated from its elementwise row


def is_floating(dtype):
    return get_dtype(dtype).is_floating


def rebind(t, src):
    """Give the tensor object `t` the storage, dtype and device of `src`, keeping its identity, so
    a module attribute, a tied weight and an optimizer's reference all see the new values (the
    engine has no in-place ops: an update makes new storage and the parameter is re-pointed)."""
    t._data, t.dtype, t.device, t._backend = src._data, src.dtype, src.device, src._backend
