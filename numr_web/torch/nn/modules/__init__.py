"""torch.nn.modules: the module classes under torch's module paths (torch.nn.modules.rnn.LSTM,
...), as code names them, e.g. in torch.serialization.safe_globals lists."""
from . import (activation, batchnorm, container, conv, dropout, linear, loss, module,  # noqa: F401
               normalization, pooling, rnn, sparse, transformer)
from .activation import MultiheadAttention  # noqa: F401
from .module import Module  # noqa: F401
