"""torch.nn.functional: numr_web.nn.functional under torch's signatures. Where torch's function
takes `inplace=`, inplace=True writes the result into the input tensor object and returns it (as
torch's); one_hot infers num_classes when it is not given (reading the largest label back, as
torch does) and returns int32, numr_web's torch.long."""
from __future__ import annotations

from ... import dtypes as _dt
from ...errors import UnsupportedError
from ...nn.functional import (adaptive_avg_pool2d, avg_pool2d, batch_norm,  # noqa: F401
                              binary_cross_entropy, binary_cross_entropy_with_logits, conv2d,
                              cosine_similarity, cross_entropy, huber_loss, interpolate, kl_div,
                              l1_loss, layer_norm, linear, max_pool2d, mse_loss, nll_loss, pad,
                              rms_norm, scaled_dot_product_attention, smooth_l1_loss, softplus)
from ...nn import functional as _F
from ...ops.elementwise import activation as _activation
from ...ops.nn_functional import one_hot as _one_hot
from ...ops.indexing import embedding as _embedding


def _maybe_inplace(x, y, inplace):
    return x.copy_(y) if inplace else y


def relu(input, inplace=False):  # noqa: A002
    return _maybe_inplace(input, _F.relu(input), inplace)


def relu6(input, inplace=False):  # noqa: A002
    return _maybe_inplace(input, _F.relu6(input), inplace)


def silu(input, inplace=False):  # noqa: A002
    return _maybe_inplace(input, _F.silu(input), inplace)


def mish(input, inplace=False):  # noqa: A002
    return _maybe_inplace(input, _F.mish(input), inplace)


def hardswish(input, inplace=False):  # noqa: A002
    return _maybe_inplace(input, _F.hardswish(input), inplace)


def selu(input, inplace=False):  # noqa: A002
    return _maybe_inplace(input, _F.selu(input), inplace)


def celu(input, alpha=1.0, inplace=False):  # noqa: A002
    return _maybe_inplace(input, _F.celu(input, alpha), inplace)


softsign, tanhshrink = _F.softsign, _F.tanhshrink


def elu(input, alpha=1.0, inplace=False):  # noqa: A002
    return _maybe_inplace(input, _F.elu(input, alpha), inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):  # noqa: A002
    return _maybe_inplace(input, _F.leaky_relu(input, negative_slope), inplace)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):  # noqa: A002
    return _maybe_inplace(input, _F.hardtanh(input, min_val, max_val), inplace)


def gelu(input, approximate="none"):  # noqa: A002
    return _F.gelu(input, approximate=approximate)


def sigmoid(input):  # noqa: A002
    return _F.sigmoid(input)


def tanh(input):  # noqa: A002
    return _F.tanh(input)


def logsigmoid(input):  # noqa: A002
    return -_activation(-input, "softplus")


def softmax(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    return _F.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    return _F.log_softmax(input, dim, dtype=dtype)


def softmin(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    return _F.softmax(-input, dim, dtype=dtype)


def glu(input, dim=-1):  # noqa: A002
    a, b = input.chunk(2, dim)
    return a * b.sigmoid()


def dropout(input, p=0.5, training=True, inplace=False):  # noqa: A002
    return _maybe_inplace(input, _F.dropout(input, p, training), inplace) if training and p \
        else input


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):  # noqa: A002
    """input / max(||input||_p along dim, eps)."""
    if out is not None:
        raise UnsupportedError("normalize(out=...) is not supported; use the returned tensor")
    return input / input.norm(p, dim, keepdim=True).clamp(min=eps)


def one_hot(tensor, num_classes=-1):
    """Rows of zeros with a 1 at each label: int32 (torch.long here). num_classes=-1 takes the
    largest label + 1, read back from the device (torch reads it back too)."""
    if num_classes == -1:
        num_classes = int(tensor.max().item()) + 1 if tensor.numel() else 0
    return _one_hot(tensor, num_classes, dtype=_dt.int32)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,  # noqa: A002
              scale_grad_by_freq=False, sparse=False):
    if max_norm is not None:
        raise UnsupportedError("embedding(max_norm=...) is not supported: it renormalises the "
                               "weight rows in place during the lookup; clip the weights "
                               "explicitly")
    if scale_grad_by_freq:
        raise UnsupportedError("embedding(scale_grad_by_freq=True) is not supported")
    return _embedding(input, weight, padding_idx)
