"""The LSTM and GRU cells, and a whole layer and direction of them, as one op each: the gate
activations and the state update in one backend primitive forward and one backward
(`fused_cells` backends: numpy, CuPy), with the activated gates saved, so the backward
recomputes nothing; a layer runs its time loop in the backend and takes the hidden weights'
gradient as one GEMM over every step. Under create_graph the VJPs are written with
differentiable ops from the inputs (higher-order gradients). On backends without the primitives
(webgpu, whose elementwise fusion merges the gate arithmetic) the same functions compose the
cells from ops.

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
from .linalg import matmul_bias_activation
from .shape_ops import concat, stack


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


def _lstm_composed(xw, hw, c):
    i, f, g, o = (hw + xw).chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


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


def _gru_composed(xw, hw, h):
    xr, xz, xn = xw.chunk(3, -1)
    hr, hz, hn = hw.chunk(3, -1)
    r, z = (hr + xr).sigmoid(), (hz + xz).sigmoid()
    n = (xn + hn * r).tanh()
    return (h - n) * z + n


def _rnn_composed(kind, xw, hw):
    s = xw + hw
    return s.tanh() if kind == "tanh" else s.relu()


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


def lstm_cell(xw, hw, c):
    """(h', c') of one LSTM step from the two projections (..., 4H) and the cell state (..., H)."""
    _check("lstm_cell", 4, xw, hw, c)
    if xw._backend.fused_cells:
        return apply(OPS["lstm_cell"], xw, hw, c)
    return _lstm_composed(xw, hw, c)


def gru_cell(xw, hw, h):
    """h' of one GRU step from the two projections (..., 3H) and the hidden state (..., H)."""
    _check("gru_cell", 3, xw, hw, h)
    if xw._backend.fused_cells:
        return apply(OPS["gru_cell"], xw, hw, h)
    return _gru_composed(xw, hw, h)


# -- a whole layer and direction: one op, the time loop inside the backend ---------------------------
_GATES = {"lstm": 4, "gru": 3, "tanh": 1, "relu": 1}


def _layer_forward(be, xw, h, *rest, kind, bias, reverse):
    c = rest[0] if kind == "lstm" else None
    w, b = rest[-1 - bias], (rest[-1] if bias else None)
    out, hT, cT, saved = be.rnn_layer(kind, xw, h, c, w, b, reverse)
    return ((out, hT, cT) if kind == "lstm" else (out, hT)), {"saved": saved}


def _layer_vjp(n, gs):
    kind, bias, reverse = n.attrs["kind"], n.attrs["bias"], n.attrs["reverse"]
    xw, h = n.args[:2]
    w = n.args[-1 - bias]
    gout, gh = gs[0], gs[1]
    gc = gs[2] if kind == "lstm" else None
    gout = gout if gout is not None else xw.new_zeros(xw.shape[:-1] + (h.shape[-1],))
    if is_create_graph():
        grads = _layer_composed_grads(kind, n.args, bias, reverse, gout, gh, gc)
    else:
        be = xw._backend
        dx, dh, dc, dw, db = be.rnn_layer_backward(
            kind, gout._data, None if gh is None else gh._data, None if gc is None else gc._data,
            w._data, bias, n.saved_handle("saved"), reverse)
        wrap = lambda t: None if t is None else xw._wrap(t, xw.dtype, xw.device, be)  # noqa: E731
        grads = (wrap(dx), wrap(dh)) + ((wrap(dc),) if kind == "lstm" else ()) + \
            (wrap(dw),) + ((wrap(db),) if bias else ())
    return grads


def _layer_composed_grads(kind, args, bias, reverse, gout, gh, gc):
    """The layer's gradients written with differentiable ops (create_graph): the forward's
    states recomputed from the inputs, then the steps in reverse with each cell's gradients."""
    xw, h = args[:2]
    c = args[2] if kind == "lstm" else None
    w, b = args[-1 - bias], (args[-1] if bias else None)
    T = xw.shape[0]
    order = list(range(T - 1, -1, -1) if reverse else range(T))
    steps, saved = xw.unbind(0) if T else (), {}
    for t in order:
        hw = h @ w.T + b if b is not None else h @ w.T
        saved[t] = (h, c, hw)
        if kind == "lstm":
            h, c = _lstm_composed(steps[t], hw, c)
        elif kind == "gru":
            h = _gru_composed(steps[t], hw, h)
        else:
            h = _rnn_composed(kind, steps[t], hw)
        saved[t] += (h,)
    dh = gh if gh is not None else h * 0
    dc = (gc if gc is not None else c * 0) if kind == "lstm" else None
    gsteps = gout.unbind(0) if T else ()
    dxs, dw, db = [None] * T, None, None
    for t in reversed(order):
        hp, cp, hw, y = saved[t]
        g = dh + gsteps[t]
        if kind == "lstm":
            dhw, dc = _lstm_composed_grads(g, dc, steps[t], hw, cp)
            dxs[t], dh = dhw, dhw @ w
        elif kind != "gru":                 # tanh' = 1 - y², relu' = [y > 0], from the output
            dhw = g * (1 - y * y) if kind == "tanh" else g * (y > 0).astype(g.dtype)
            dxs[t], dh = dhw, dhw @ w
        else:
            dxs[t], dhw, direct = _gru_composed_grads(g, steps[t], hw, hp)
            dh = dhw @ w + direct
        dw = dhw.mT @ hp if dw is None else dw + dhw.mT @ hp
        db = dhw.sum(0) if db is None else db + dhw.sum(0)
    dx = stack(dxs, 0) if T else xw * 0
    dw = dw if dw is not None else w * 0
    out = (dx, dh) + ((dc,) if kind == "lstm" else ()) + (dw,)
    return out + ((db if db is not None else b * 0,) if bias else ())


register("rnn_layer", _layer_forward, _layer_vjp, backward_name="RnnLayerBackward")


def layer(kind, xw, h, c, w_hh, b_hh, reverse):
    """One layer and direction of an LSTM ("lstm"), GRU ("gru") or plain RNN ("tanh", "relu")
    over the input projections xw (T, B, G H) from the state h (c: the LSTM's cell state, else
    None): (out (T, B, H), h_T, c_T) for an LSTM, (out, h_T) for the others. The time loop runs inside the backend, and the
    backward takes the hidden weights' gradient as one GEMM over every step."""
    gates = _GATES[kind]
    ts = [xw, h, w_hh] + ([c] if kind == "lstm" else []) + ([b_hh] if b_hh is not None else [])
    for t in ts:
        if not isinstance(t, Tensor):
            raise DTypeError(f"{kind} layer: the projections, states and weights must be Tensors")
    check_same_device(*ts)
    m = h.shape[-1]
    if xw.ndim != 3 or h.shape != xw.shape[1:2] + (m,) or xw.shape[-1] != gates * m or \
            w_hh.shape != (gates * m, m) or (c is not None and c.shape != h.shape) or \
            (b_hh is not None and b_hh.shape != (gates * m,)):
        raise ShapeError(f"{kind} layer: projections {xw.shape} must be (T, B, {gates} H), the "
                         f"states {h.shape} (B, H), the hidden weights {w_hh.shape} "
                         f"({gates} H, H) and their bias ({gates} H,)")
    if any(t.dtype is not xw.dtype for t in ts) or not xw.dtype.is_floating:
        raise DTypeError(f"{kind} layer: the projections, states and weights must share one "
                         f"floating dtype; got {', '.join(t.dtype.name for t in ts)}")
    if not xw._backend.fused_cells or xw.dtype.name == "float16":
        return _layer_composed(kind, xw, h, c, w_hh, b_hh, reverse)
    args = [xw, h] + ([c] if kind == "lstm" else []) + [w_hh] + ([b_hh] if b_hh is not None else [])
    return apply(OPS["rnn_layer"], *args, kind=kind, bias=b_hh is not None, reverse=bool(reverse))


def _layer_composed(kind, xw, h, c, w_hh, b_hh, reverse):
    """The layer step by step: one fused GEMM + bias of the hidden state and one cell a step."""
    T = xw.shape[0]
    w_t = w_hh.T
    outs = [None] * T
    steps = xw.unbind(0) if T else ()                 # one split (backward: one concat)
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        hw = matmul_bias_activation(h, w_t, b_hh)
        if kind == "lstm":
            h, c = lstm_cell(steps[t], hw, c)
        elif kind == "gru":
            h = gru_cell(steps[t], hw, h)
        else:
            h = _rnn_composed(kind, steps[t], hw)
        outs[t] = h
    out = stack(outs, 0) if T else xw.new_zeros((0,) + tuple(h.shape))
    return (out, h, c) if kind == "lstm" else (out, h)
