"""numr_web.nn.functional: the functional ops, under torch.nn.functional's names."""
from __future__ import annotations

from ._core import (avg_pool2d, conv2d, conv2d_bias_activation, cross_entropy,  # noqa: F401
                    dropout, embedding, gelu, layer_norm, log_softmax, max_pool2d, one_hot, relu,
                    rms_norm, scaled_dot_product_attention, sigmoid, silu, softmax, tanh)
from .linear import linear  # noqa: F401
