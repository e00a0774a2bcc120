"""numr_web.nn: torch.nn-shaped modules, layers, optimizers (nn.optim) and functional ops
(nn.functional). Layers run on whatever device their parameters are on.

    from numr_web import nn
    model = nn.Sequential(nn.Linear(64, 128, activation="gelu"), nn.Linear(128, 10))
    opt = nn.optim.AdamW(model.parameters(), lr=3e-3)
"""
from . import functional, init, optim, utils  # noqa: F401
from .activation import (CELU, ELU, GELU, SELU, Hardswish, Hardtanh, LeakyReLU,  # noqa: F401
                         LogSoftmax, Mish, ReLU, ReLU6, Sigmoid, SiLU, Softmax, Softplus,
                         Softsign, Tanh, Tanhshrink)
from .attention import MultiheadAttention  # noqa: F401
from .batchnorm import BatchNorm1d, BatchNorm2d  # noqa: F401
from .containers import (ModuleDict, ModuleList, ParameterDict, ParameterList,  # noqa: F401
                         Sequential)
from .conv import AdaptiveAvgPool2d, AvgPool2d, Conv2d, MaxPool2d  # noqa: F401
from .dropout import Dropout  # noqa: F401
from .functional import cross_entropy  # noqa: F401
from .linear import MLP, Flatten, Identity, Linear, Unflatten  # noqa: F401
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss,  # noqa: F401
                   L1Loss, MSELoss, NLLLoss, SmoothL1Loss)
from .module import IncompatibleKeys, Module, Parameter, StateDictError  # noqa: F401
from .normalization import LayerNorm, RMSNorm  # noqa: F401
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell  # noqa: F401
from .transformer import (Transformer, TransformerDecoder,  # noqa: F401
                          TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer)
from .upsample import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401
from .sparse import Embedding  # noqa: F401
from .optim import SGD, Adam, AdamW, clip_grad_norm_  # noqa: F401  (nn.SGD etc. for the demos)
