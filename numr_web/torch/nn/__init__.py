"""torch.nn: numr_web.nn's modules under torch's names, with torch's defaults where numr_web's
differ (MultiheadAttention is sequence-first, batch_first=False, as torch's)."""
from __future__ import annotations

from ...nn import (ELU, GELU, GRU, LSTM, RNN, AdaptiveAvgPool2d, AvgPool2d,  # noqa: F401
                   BatchNorm1d, BatchNorm2d, BCELoss, BCEWithLogitsLoss, Conv2d,
                   CrossEntropyLoss, Dropout, Embedding, Flatten, GRUCell, Hardswish, Hardtanh,
                   HuberLoss, Identity, KLDivLoss, L1Loss, LayerNorm, LeakyReLU, Linear,
                   LogSoftmax, LSTMCell, MaxPool2d, Mish, Module, ModuleDict, ModuleList,
                   MSELoss, NLLLoss, Parameter, ParameterDict, ParameterList, ReLU, ReLU6,
                   RMSNorm, RNNCell, Sequential, Sigmoid, SiLU, SmoothL1Loss, Softmax, Softplus,
                   Tanh, Transformer, TransformerDecoder, TransformerDecoderLayer,
                   TransformerEncoder, TransformerEncoderLayer, Unflatten, Upsample,
                   UpsamplingBilinear2d, UpsamplingNearest2d)
from ...nn import CELU, SELU, Softsign, Tanhshrink  # noqa: F401
from .._unsupported import module_getattr as _module_getattr
from . import functional, init, modules, parameter, utils  # noqa: F401
from .modules.activation import MultiheadAttention  # noqa: F401


_NN = {
    "Conv1d": "1-d convolutions are not supported yet: use Conv2d on (N, C, 1, L)",
    "Conv3d": "3-d convolutions are not supported",
    "ConvTranspose2d": "transposed convolutions are not supported",
    "DataParallel": "use numr_web.distributed's DDP (README)",
    "parallel": "use numr_web.distributed's DDP (README)",
    "SyncBatchNorm": "not supported",
}
__getattr__ = _module_getattr("torch.nn", _NN)
