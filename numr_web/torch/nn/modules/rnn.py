"""torch.nn.modules.rnn."""
from ....nn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNCell  # noqa: F401
