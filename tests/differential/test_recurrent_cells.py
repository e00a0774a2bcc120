"""The LSTM and GRU cells as one op each way (numr_web/ops/recurrent.py; composed of ops where a
backend has no fused primitive): second-order gradients, a gradient through the cell state
alone, float16, and the op counts that make them worth having, against torch."""
import numpy as np
import pytest
import torch

import numr_web as nr
from numr_web import nn
from numr_web.ops import recurrent

from helpers import fdtype


def _pair(device, kind, dtype=None):
    torch.manual_seed(0)
    dt = dtype or fdtype(device)
    tm = getattr(torch.nn, kind)(3, 4).to(torch.float64 if dt is nr.float64 else torch.float32)
    m = getattr(nn, kind)(3, 4)
    m.load_state_dict({k: nr.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return tm, m.to(device, dt)


def _tols(device):
    return dict(rtol=1e-10, atol=1e-12) if fdtype(device) is nr.float64 else \
        dict(rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell"])
def test_cell_second_order_gradients_match_torch(device, kind):
    """d/dx of |dL/dx|^2 through two steps: the VJP under create_graph is differentiable."""
    tm, m = _pair(device, kind)
    x = np.random.default_rng(4).standard_normal((2, 3))
    tx = torch.tensor(x, dtype=next(tm.parameters()).dtype, requires_grad=True)
    nx = nr.tensor(x, device=device, dtype=fdtype(device), requires_grad=True)

    def loss(mod, x, flat):
        s1 = mod(x)
        s2 = mod(x * 0.5, s1)
        return flat(s2)

    tl = loss(tm, tx, lambda s: (torch.cat(s, -1) if isinstance(s, tuple) else s).pow(2).sum())
    nl = loss(m, nx, lambda s: (nr.cat(s, -1) if isinstance(s, tuple) else s).pow(2).sum())
    tg, = torch.autograd.grad(tl, tx, create_graph=True)
    ng, = nr.grad(nl, [nx], create_graph=True)
    np.testing.assert_allclose(ng.detach().numpy(), tg.detach().numpy(), **_tols(device))
    tg2, = torch.autograd.grad((tg * tg).sum(), tx)
    ng2, = nr.grad((ng * ng).sum(), [nx])
    np.testing.assert_allclose(ng2.numpy(), tg2.numpy(), **_tols(device))


def test_lstm_gradient_through_the_cell_state_alone(device):
    tm, m = _pair(device, "LSTMCell")
    x = np.random.default_rng(5).standard_normal((3, 3))
    tx = torch.tensor(x, dtype=next(tm.parameters()).dtype, requires_grad=True)
    nx = nr.tensor(x, device=device, dtype=fdtype(device), requires_grad=True)
    (tm(tx, tm(tx))[1] * 3.0).sum().backward()        # h' of the second step unused
    (m(nx, m(nx))[1] * 3.0).sum().backward()
    np.testing.assert_allclose(nx.grad.numpy(), tx.grad.numpy(), **_tols(device))
    for (name, p), tp in zip(m.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), err_msg=name, **_tols(device))


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_float16_layers_within_half_precision_of_torch_float32(kind):
    torch.manual_seed(0)
    tm = getattr(torch.nn, kind)(6, 8)
    m = getattr(nn, kind)(6, 8)
    m.load_state_dict({k: nr.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    m = m.to("cpu", nr.float16)
    x = np.random.default_rng(6).standard_normal((5, 2, 6)).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    nx = nr.tensor(x, dtype=nr.float16, requires_grad=True)
    tout, _ = tm(tx)
    out, _ = m(nx)
    assert out.dtype is nr.float16
    np.testing.assert_allclose(out.float().detach().numpy(), tout.detach().numpy(), atol=4e-3)
    tout.sum().backward()
    out.sum().backward()
    np.testing.assert_allclose(nx.grad.float().numpy(), tx.grad.numpy(), atol=2e-2, rtol=1e-2)


def test_a_layer_is_one_op_each_way_and_a_cell_step_too_on_cpu():
    lstm, cell = nn.LSTM(3, 4, num_layers=2), nn.LSTMCell(3, 4)
    x = nr.randn((6, 2, 3), seed=0, requires_grad=True)
    with nr.profile() as p:
        out, _ = lstm(x)
        state = None
        for t in range(3):
            state = cell(x[t], state)
        (out.sum() + state[0].sum()).backward()
    calls = {r.name: r.calls for r in p.rows()}
    assert calls["rnn_layer"] == 2 and calls["RnnLayerBackward"] == 2, calls
    assert calls["lstm_cell"] == 3 and calls["LstmCellBackward"] == 3, calls
    assert "activation" not in calls, calls          # no composed gate arithmetic


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_layer_second_order_gradients_match_torch(device, kind):
    """A gradient penalty through a bidirectional two-layer RNN: the layer op's VJP under
    create_graph is differentiable (the steps written with ops)."""
    torch.manual_seed(0)
    tdt = torch.float64 if fdtype(device) is nr.float64 else torch.float32
    tm = getattr(torch.nn, kind)(3, 4, num_layers=2, bidirectional=True).to(tdt)
    m = getattr(nn, kind)(3, 4, num_layers=2, bidirectional=True)
    m.load_state_dict({k: nr.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    m = m.to(device, fdtype(device))
    x = np.random.default_rng(7).standard_normal((5, 2, 3))
    tx = torch.tensor(x, dtype=tdt, requires_grad=True)
    nx = nr.tensor(x, device=device, dtype=fdtype(device), requires_grad=True)
    tg, = torch.autograd.grad((tm(tx)[0] ** 2).sum(), tx, create_graph=True)
    ng, = nr.grad((m(nx)[0] ** 2).sum(), [nx], create_graph=True)
    np.testing.assert_allclose(ng.detach().numpy(), tg.detach().numpy(), **_tols(device))
    (tg * tg).sum().backward()
    (ng * ng).sum().backward()
    np.testing.assert_allclose(nx.grad.numpy(), tx.grad.numpy(), **_tols(device))
    for (name, p), tp in zip(m.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), err_msg=name, **_tols(device))


def test_cell_op_argument_errors():
    a, c = nr.zeros((2, 8)), nr.zeros((2, 2))
    with pytest.raises(nr.ShapeError, match="4 x 2"):
        recurrent.lstm_cell(a, nr.zeros((2, 7)), c)
    with pytest.raises(nr.DTypeError, match="one floating dtype"):
        recurrent.lstm_cell(a, a.double(), c)
    with pytest.raises(nr.ShapeError):
        recurrent.gru_cell(nr.zeros((2, 6)), nr.zeros((2, 6)), nr.zeros((3, 2)))
    h, w = nr.zeros((2, 2)), nr.zeros((8, 2))
    with pytest.raises(nr.ShapeError, match=r"\(T, B, 4 H\)"):
        recurrent.layer("lstm", nr.zeros((5, 2, 6)), h, h, w, None, False)
    with pytest.raises(nr.DTypeError, match="one floating dtype"):
        recurrent.layer("lstm", nr.zeros((5, 2, 8)), h, h, w.double(), None, False)
