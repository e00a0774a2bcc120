"""Recurrent layers with torch's parameters, shapes and formulas: RNN (tanh / relu), LSTM, GRU and
their one-step cells. Composed from the engine's ops, so they run (and differentiate) on every
device: per layer and direction one GEMM projects the whole input sequence, then each time step
is one fused GEMM + bias of the hidden state and the cell (numr_web/ops/recurrent.py: on numpy
and CuPy an LSTM / GRU layer is one op each way; elsewhere a few elementwise ops a step, fused
into one kernel on webgpu). The gate formulas and their order of operations are torch's CPU
cells':

    RNN   h' = act((W_ih x + b_ih) + (W_hh h + b_hh))
    LSTM  i, f, g, o = chunk(4) of (W_hh h + b_hh) + (W_ih x + b_ih)
          c' = f c + i g (sigmoid i, f, o; tanh g);  h' = o tanh(c')
    GRU   r = sigmoid(x_r + h_r), z = sigmoid(x_z + h_z), n = tanh(x_n + h_n r),
          h' = (h - n) z + n          (x_* = W_i* x + b_i*, h_* = W_h* h + b_h*)

Parameters are named and laid out as torch's (weight_ih_l0 (gates * hidden, input), ...,
"_reverse" for the backward direction), initialised uniform in +-1/sqrt(hidden_size), so
state dicts move between the two unchanged. Not supported (UnsupportedError): LSTM's proj_size
and PackedSequence inputs.
"""
from __future__ import annotations

import math

from . import _core
from . import functional as F
from . import init
from ..errors import UnsupportedError
from ..ops import recurrent
from .linear import linear
from .module import Module, Parameter

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _rnn_cell(act):
    def cell(xw, hw, h, c):
        s = xw + hw
        return (s.tanh() if act == "tanh" else s.relu()), None
    return cell


def _lstm_cell(xw, hw, h, c):
    return recurrent.lstm_cell(xw, hw, c)     # one op each way on numpy and CuPy


def _gru_cell(xw, hw, h, c):
    return recurrent.gru_cell(xw, hw, h), None


_LAYER_KINDS = {"LSTM": "lstm", "GRU": "gru", "RNN_TANH": "tanh", "RNN_RELU": "relu"}


def _cell_fn(mode):
    if mode == "LSTM":
        return _lstm_cell
    if mode == "GRU":
        return _gru_cell
    return _rnn_cell("tanh" if mode == "RNN_TANH" else "relu")


def _check_size(name, v):
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise _core.ShapeError(f"{name} must be a positive int, got {v!r}")


class RNNBase(Module):
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        _check_size("input_size", input_size)
        _check_size("hidden_size", hidden_size)
        _check_size("num_layers", num_layers)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or \
                not 0 <= dropout <= 1:
            raise _core.ShapeError("dropout should be a number in range [0, 1] representing the "
                                   f"probability of an element being zeroed, got {dropout!r}")
        if proj_size:
            raise UnsupportedError("LSTM(proj_size=...) is not supported; use proj_size=0 and a "
                                   "Linear layer on the output")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, 0
        gates = _GATES[mode] * hidden_size
        dirs = 2 if bidirectional else 1
        self._flat_weights_names = []
        for layer in range(num_layers):
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                width = input_size if layer == 0 else hidden_size * dirs
                names = [("weight_ih", (gates, width)), ("weight_hh", (gates, hidden_size))]
                if bias:
                    names += [("bias_ih", (gates,)), ("bias_hh", (gates,))]
                for name, shape in names:
                    setattr(self, name + sfx,
                            Parameter(_core.zeros(shape, device=device, dtype=dtype)))
                    self._flat_weights_names.append(name + sfx)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def flatten_parameters(self):
        """A no-op (torch packs the weights for cuDNN; there is no cuDNN here)."""

    @property
    def all_weights(self):
        per = 4 if self.bias else 2
        names = self._flat_weights_names
        return [[getattr(self, n) for n in names[i:i + per]] for i in range(0, len(names), per)]

    def _weights(self, layer, direction):
        sfx = f"_l{layer}" + ("_reverse" if direction else "")
        get = lambda n: getattr(self, n + sfx) if self.bias or "weight" in n else None  # noqa
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh")

    def _check_input(self, x, hx):
        if not isinstance(x, _core.Tensor):
            raise UnsupportedError(f"{type(self).__name__} takes a Tensor input; PackedSequence "
                                   "(nn.utils.rnn.pack_padded_sequence) is not supported")
        if x.ndim not in (2, 3):
            raise _core.ShapeError(f"{type(self).__name__}: expected a 2-D (unbatched) or 3-D "
                                   f"(batched) input, got shape {x.shape}")
        if x.shape[-1] != self.input_size:
            raise _core.ShapeError(f"input.size(-1) must be equal to input_size. Expected "
                                   f"{self.input_size}, got {x.shape[-1]}")

    def _hidden(self, h, batch, batched, x, what):
        dirs = 2 if self.bidirectional else 1
        want = (self.num_layers * dirs, batch, self.hidden_size)
        if h is None:
            return _core.zeros(want, dtype=x.dtype, device=x.device)
        expect = want if batched else (want[0], want[2])
        if not isinstance(h, _core.Tensor) or tuple(h.shape) != expect:
            raise _core.ShapeError(f"Expected {what} size {expect}, got "
                                   f"{tuple(getattr(h, 'shape', ()))}")
        return h if batched else h.unsqueeze(1)

    def forward(self, input, hx=None):  # noqa: A002
        self._check_input(input, hx)
        batched = input.ndim == 3
        x = input if batched else input.unsqueeze(1)
        if batched and self.batch_first:
            x = x.transpose(0, 1)
        batch = x.shape[1]
        lstm = self.mode == "LSTM"
        if lstm:
            if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
                raise _core.ShapeError("LSTM expects hx as a tuple (h_0, c_0)")
            h0 = self._hidden(None if hx is None else hx[0], batch, batched, x, "hidden")
            c0 = self._hidden(None if hx is None else hx[1], batch, batched, x, "cell")
        else:
            h0 = self._hidden(hx, batch, batched, x, "hidden")
            c0 = None
        kind = _LAYER_KINDS[self.mode]
        dirs = 2 if self.bidirectional else 1
        hs, cs = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                out, h, c = self._direction(x, h0[k], None if c0 is None else c0[k],
                                            *self._weights(layer, d), kind, bool(d))
                outs.append(out)
                hs.append(h)
                cs.append(c)
            x = outs[0] if dirs == 1 else _core.concat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        out = x
        h_n = _core.stack(hs, 0)
        c_n = _core.stack(cs, 0) if lstm else None
        if batched and self.batch_first:
            out = out.transpose(0, 1)
        if not batched:
            out, h_n = out.squeeze(1), h_n.squeeze(1)
            c_n = c_n.squeeze(1) if lstm else None
        return out, ((h_n, c_n) if lstm else h_n)

    @staticmethod
    def _direction(x, h, c, w_ih, w_hh, b_ih, b_hh, kind, reverse):
        xw = linear(x, w_ih, b_ih)                      # every step's input projection: one GEMM
        outs = recurrent.layer(kind, xw, h, c, w_hh, b_hh, reverse)   # one op on numpy and CuPy
        return outs[0], outs[1], (outs[2] if kind == "lstm" else None)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout:
            s += f", dropout={self.dropout:g}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise _core.ShapeError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' "
                                   "or 'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)


class LSTM(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device=device, dtype=dtype)


# -- one-step cells --------------------------------------------------------------------------------
class RNNCellBase(Module):
    def __init__(self, mode, input_size, hidden_size, bias, device, dtype):
        super().__init__()
        _check_size("input_size", input_size)
        _check_size("hidden_size", hidden_size)
        self.mode, self.input_size, self.hidden_size, self.bias = mode, input_size, \
            hidden_size, bias
        gates = _GATES[mode] * hidden_size
        kw = dict(device=device, dtype=dtype)
        self.weight_ih = Parameter(_core.zeros((gates, input_size), **kw))
        self.weight_hh = Parameter(_core.zeros((gates, hidden_size), **kw))
        self.bias_ih = Parameter(_core.zeros((gates,), **kw)) if bias else None
        self.bias_hh = Parameter(_core.zeros((gates,), **kw)) if bias else None
        stdv = 1.0 / math.sqrt(hidden_size)
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def forward(self, input, hx=None):  # noqa: A002
        if not isinstance(input, _core.Tensor) or input.ndim not in (1, 2):
            raise _core.ShapeError(f"{type(self).__name__}: expected input to be 1-D or 2-D, "
                                   f"got {getattr(input, 'shape', input)!r}")
        if input.shape[-1] != self.input_size:
            raise _core.ShapeError(f"input has inconsistent input_size: got {input.shape[-1]} "
                                   f"expected {self.input_size}")
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        lstm = self.mode == "LSTM"
        zeros = lambda: _core.zeros((x.shape[0], self.hidden_size), dtype=x.dtype,  # noqa
                                    device=x.device)
        if hx is None:
            h, c = zeros(), (zeros() if lstm else None)
        else:
            h, c = hx if lstm else (hx, None)
            if not batched:
                h, c = h.unsqueeze(0), (c.unsqueeze(0) if lstm else None)
        xw = linear(x, self.weight_ih, self.bias_ih)
        hw = linear(h, self.weight_hh, self.bias_hh)
        h, c = _cell_fn(self.mode)(xw, hw, h, c)
        if not batched:
            h, c = h.squeeze(0), (c.squeeze(0) if lstm else None)
        return (h, c) if lstm else h

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise _core.ShapeError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, bias, device, dtype)


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, bias, device, dtype)


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, bias, device, dtype)
