"""torch.nn.modules.activation."""
from ....nn import (CELU, ELU, GELU, SELU, Hardswish, Hardtanh, LeakyReLU, LogSoftmax,  # noqa: F401
                   Mish, ReLU, ReLU6, Sigmoid, SiLU, Softmax, Softplus, Softsign, Tanh,
                   Tanhshrink)
from ....nn.attention import MultiheadAttention as _MultiheadAttention
from ....errors import UnsupportedError


class MultiheadAttention(_MultiheadAttention):
    """torch.nn.MultiheadAttention: (L, N, E) inputs unless batch_first=True."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        if add_bias_kv or add_zero_attn:
            raise UnsupportedError("MultiheadAttention(add_bias_kv=True / add_zero_attn=True) "
                                   "is not supported")
        if kdim not in (None, embed_dim) or vdim not in (None, embed_dim):
            raise UnsupportedError("MultiheadAttention with kdim / vdim other than embed_dim is "
                                   "not supported: project the keys and values to embed_dim "
                                   "first")
        super().__init__(embed_dim, num_heads, dropout=dropout, bias=bias,
                         batch_first=batch_first, device=device, dtype=dtype)
