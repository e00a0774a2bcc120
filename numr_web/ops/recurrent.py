"""The LSTM and GRU cells as one op each: the gate activations and the state update in one
backend primitive forward and one backward (`fused_cells` backends: numpy, CuPy), with the
activated gates saved, so the backward recomputes nothing. Under create_graph the VJP is written
with differentiable ops from the inputs (higher-order gradients). nn/rnn.py composes the cells
from ops on backends without the primitive (webgpu, whose elementwise fusion merges them).

    LSTM  i, f, g, o = chunk(4) of hw + xw;  c' = f c + i g;  h' = o tanh(c')
    GRU   r = sigmoid(h_r + x_r), z = sigmoid(h_z + x_z), n = tanh(x_n + h_n r),
          h' = (h - n) z + n          (xw = W_ih x + b_ih, hw = W_hh h + b_hh)
"""
from __future__ import annotations

from ..autograd import apply
from ..errors import DTypeError, ShapeError
from ..gradmode import is_create_graph
from ..tensor import Tensor
from ..vocab.registry import OPS, register
from .common import check_same_device
from .shape_ops import concat


# -- LSTM ----------------------------------------------------------------------------------------
def _lstm_forward(be, xw, hw, c):
    h, c2, gates, tc = be.lstm_cell(xw, hw, c)
    return (h, c2), {"gates": gates, "tc": tc}


def _lstm_vjp(n, gs):
    gh, gc = gs
    xw, hw, c = n.args
    if is_create_graph():
        d, dc = _lstm_composed_grads(gh, gc, xw, hw, c)
    else:
        be = xw._backend
        dh, dch = be.lstm_cell_backward(None if gh is None else gh._data,
                                        None if gc is None else gc._data, c._data,
                                        n.saved_handle("gates"), n.saved_handle("tc"))
        d, dc = (xw._wrap(h, xw.dtype, xw.device, be) for h in (dh, dch))
    return d, d, dc


def _lstm_composed_grads(gh, gc, xw, hw, c):
    i, f, g, o = (hw + xw).chunk(4, -1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    tc = (f * c + i * g).tanh()
    dc = gc if gc is not None else c * 0
    do = None
    if gh is not None:
        dc = dc + gh * o * (1 - tc * tc)
        do = gh * tc * o * (1 - o)
    do = do if do is not None else o * 0
    d = concat([dc * g * i * (1 - i), dc * c * f * (1 - f), dc * i * (1 - g * g), do], -1)
    return d, dc * f


register("lstm_cell", _lstm_forward, _lstm_vjp, backward_name="LstmCellBackward")


# -- GRU -----------------------------------------------------------------------------------------
def _gru_forward(be, xw, hw, h):
    h2, saved = be.gru_cell(xw, hw, h)
    return h2, {"saved": saved}


def _gru_vjp(n, g):
    xw, hw, h = n.args
    if is_create_graph():
        return _gru_composed_grads(g, xw, hw, h)
    be = xw._backend
    dx, dhw, dh = be.gru_cell_backward(g._data, h._data, n.saved_handle("saved"))
    return tuple(xw._wrap(t, xw.dtype, xw.device, be) for t in (dx, dhw, dh))


def _gru_composed_grads(g, xw, hw, h):
    xr, xz, xn = xw.chunk(3, -1)
    hr, hz, hn = hw.chunk(3, -1)
    r, z = (hr + xr).sigmoid(), (hz + xz).sigmoid()
    nn = (xn + hn * r).tanh()
    dn = g * (1 - z) * (1 - nn * nn)
    dr = dn * hn * r * (1 - r)
    dz = g * (h - nn) * z * (1 - z)
    return concat([dr, dz, dn], -1), concat([dr, dz, dn * r], -1), g * z


register("gru_cell", _gru_forward, _gru_vjp, backward_name="GruCellBackward")


# -- the functions nn/rnn.py calls --------------------------------------------------------------------
def _check(name, gates, xw, hw, state):
    for t in (xw, hw, state):
        if not isinstance(t, Tensor):
            raise DTypeError(f"{name}: the projections and the state must be Tensors")
    check_same_device(xw, hw, state)
    m = state.shape[-1]
    if xw.shape != hw.shape or xw.shape[:-1] != state.shape[:-1] or xw.shape[-1] != gates * m:
        raise ShapeError(f"{name}: projections {xw.shape} and {hw.shape} must both be the "
                         f"state's {state.shape} with {gates} x {m} columns")
    if not (xw.dtype is hw.dtype is state.dtype) or not xw.dtype.is_floating:
        raise DTypeError(f"{name}: the projections and the state must share one floating dtype; "
                         f"got {xw.dtype.name}, {hw.dtype.name}, {state.dtype.name}")


def fused(*ts):
    """Whether the fused cells run these tensors (their backend has the primitives and they
    share one floating dtype; otherwise the cell is composed of ops)."""
    d = ts[0].dtype
    return ts[0]._backend.fused_cells and d.is_floating and all(t.dtype is d for t in ts)


def lstm_cell(xw, hw, c):
    """(h', c') of one LSTM step from the two projections (..., 4H) and the cell state (..., H)."""
    _check("lstm_cell", 4, xw, hw, c)
    return apply(OPS["lstm_cell"], xw, hw, c)


def gru_cell(xw, hw, h):
    """h' of one GRU step from the two projections (..., 3H) and the hidden state (..., H)."""
    _check("gru_cell", 3, xw, hw, h)
    return apply(OPS["gru_cell"], xw, hw, h)
