"""torch.nn.utils: gradient clipping and the flat parameter vector."""
from ....nn.utils import (clip_grad_norm_, clip_grad_value_,  # noqa: F401
                          parameters_to_vector, vector_to_parameters)
from . import rnn  # noqa: F401

clip_grad_norm = clip_grad_norm_
