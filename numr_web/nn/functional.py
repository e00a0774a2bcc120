"""numr_web.nn.functional: the functional ops, under torch.nn.functional's names."""
from __future__ import annotations

from ._core import (adaptive_avg_pool2d, avg_pool2d, binary_cross_entropy,  # noqa: F401
                    binary_cross_entropy_with_logits, conv2d, conv2d_bias_activation,
                    cross_entropy, dropout, embedding, gelu, huber_loss, kl_div, l1_loss,
                    layer_norm, log_softmax, max_pool2d, mse_loss, nll_loss, one_hot, pad, relu,
                    rms_norm, scaled_dot_product_attention, sigmoid, silu, smooth_l1_loss,
                    softmax, tanh)
from .activation import (celu, elu, hardswish, hardtanh, leaky_relu, mish,  # noqa: F401
                         relu6, selu, softplus, softsign, tanhshrink)
from .batchnorm import batch_norm  # noqa: F401
from .linear import linear  # noqa: F401
from .upsample import interpolate  # noqa: F401
from ..ops.torch_functions import cosine_similarity  # noqa: F401
