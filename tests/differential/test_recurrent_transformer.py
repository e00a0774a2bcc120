"""RNN / LSTM / GRU (and their cells), the Transformer layers, interpolate and the nn.utils
helpers against torch.nn with the same weights (torch's state dict loaded), forward and
gradients, on every device (float64 where the device has it)."""
import numpy as np
import pytest
import torch

import numr_web as nr
from numr_web import nn

from helpers import fdtype


def _tols(device):
    return dict(rtol=1e-10, atol=1e-12) if fdtype(device) is nr.float64 else \
        dict(rtol=2e-4, atol=2e-5)


def _np_dtype(device):
    return np.float64 if fdtype(device) is nr.float64 else np.float32


def _twin(device, make_torch, make_ours):
    """torch's module and ours with torch's weights; both in the device's float dtype."""
    torch.manual_seed(0)
    tm = make_torch().to(torch.float64 if fdtype(device) is nr.float64 else torch.float32)
    m = make_ours()
    assert list(m.state_dict()) == list(tm.state_dict())
    m.load_state_dict({k: nr.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return tm, m.to(device, fdtype(device))


def _check(device, out, tout):
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), **_tols(device))


def _flat(x):
    return x if not isinstance(x, tuple) else torch.cat([v.reshape(-1) for v in x]) \
        if isinstance(x[0], torch.Tensor) else nr.cat([v.reshape(-1) for v in x])


RNN_CASES = [
    ("RNN", dict()), ("RNN", dict(nonlinearity="relu", num_layers=2)),
    ("LSTM", dict()), ("LSTM", dict(num_layers=2, bidirectional=True, batch_first=True)),
    ("LSTM", dict(bias=False)), ("GRU", dict()), ("GRU", dict(num_layers=2, bidirectional=True)),
]


@pytest.mark.parametrize("kind, kw", RNN_CASES, ids=[f"{k}-{i}" for i, (k, _) in
                                                     enumerate(RNN_CASES)])
@pytest.mark.parametrize("with_h0", [False, True])
def test_recurrent_layers_match_torch(device, kind, kw, with_h0):
    tm, m = _twin(device, lambda: getattr(torch.nn, kind)(3, 5, **kw),
                  lambda: getattr(nn, kind)(3, 5, **kw))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 2, 3)).astype(_np_dtype(device))
    dirs, layers = 2 if kw.get("bidirectional") else 1, kw.get("num_layers", 1)
    h0 = rng.standard_normal((layers * dirs, 4 if kw.get("batch_first") else 2, 5)).astype(
        _np_dtype(device)) if with_h0 else None
    if h0 is not None and kw.get("batch_first"):
        h0 = h0[:, :, :]                              # (L*D, N, H) whatever batch_first says
    tx = torch.tensor(x, requires_grad=True)
    nx = nr.tensor(x, device=device, requires_grad=True)
    th = None if h0 is None else torch.tensor(h0, requires_grad=True)
    nh = None if h0 is None else nr.tensor(h0, device=device, requires_grad=True)
    if kind == "LSTM" and h0 is not None:
        th, nh = (th, th * 0.5), (nh, nh * 0.5)
    tout, thn = tm(tx, th)
    out, hn = m(nx, nh)
    _check(device, out, tout)
    _check(device, _flat(hn), _flat(thn))
    g = rng.standard_normal(tout.shape)
    ((tout * torch.tensor(g, dtype=tout.dtype)).sum() + _flat(thn).sum()).backward()
    ((out * nr.tensor(g, dtype=out.dtype, device=device)).sum() + _flat(hn).sum()).backward()
    _check(device, nx.grad, tx.grad)
    for (name, p), tp in zip(m.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), err_msg=name,
                                   **_tols(device))


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_unbatched_input_and_repr(device, kind):
    tm, m = _twin(device, lambda: getattr(torch.nn, kind)(3, 4, num_layers=2),
                  lambda: getattr(nn, kind)(3, 4, num_layers=2))
    x = np.random.default_rng(1).standard_normal((5, 3)).astype(_np_dtype(device))
    out, h = m(nr.tensor(x, device=device))
    tout, th = tm(torch.tensor(x))
    _check(device, out, tout)
    _check(device, _flat(h), _flat(th))
    assert repr(m) == repr(tm)


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_match_torch(device, kind):
    tm, m = _twin(device, lambda: getattr(torch.nn, kind)(3, 4), lambda: getattr(nn, kind)(3, 4))
    x = np.random.default_rng(2).standard_normal((2, 3)).astype(_np_dtype(device))
    tx, nx = torch.tensor(x, requires_grad=True), nr.tensor(x, device=device, requires_grad=True)
    t1, n1 = tm(tx), m(nx)
    t2, n2 = tm(tx, t1), m(nx, n1)                     # a second step from the first's state
    _check(device, _flat(n2), _flat(t2))
    _flat(t2).sum().backward()
    _flat(n2).sum().backward()
    _check(device, nx.grad, tx.grad)
    assert repr(m) == repr(tm)


def test_recurrent_argument_errors():
    with pytest.raises(nr.UnsupportedError):
        nn.LSTM(3, 4, proj_size=2)
    with pytest.raises(nr.ShapeError):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(nr.ShapeError):
        nn.GRU(3, 4, dropout=1.5)
    m = nn.LSTM(3, 4)
    with pytest.raises(nr.ShapeError, match="input_size"):
        m(nr.ones((2, 1, 5)))
    with pytest.raises(nr.ShapeError, match="hidden"):
        m(nr.ones((2, 1, 3)), (nr.zeros((1, 2, 4)), nr.zeros((1, 1, 4))))
    m.flatten_parameters()
    assert len(m.all_weights) == 1 and len(m.all_weights[0]) == 4


def test_recurrent_dropout_between_layers_only_in_training():
    m = nn.LSTM(3, 4, num_layers=2, dropout=0.5)
    x = nr.randn(5, 2, 3)
    m.eval()
    a, _ = m(x)
    b, _ = m(x)
    assert a.tolist() == b.tolist()
    m.train()
    nr.manual_seed(0)
    c, _ = m(x)
    assert c.tolist() != a.tolist()


# -- Transformer -----------------------------------------------------------------------------------
TRANSFORMER_CASES = [dict(), dict(norm_first=True, activation="gelu", batch_first=True),
                     dict(activation=torch.nn.functional.relu)]


@pytest.mark.parametrize("kw", TRANSFORMER_CASES, ids=["post-norm", "pre-norm-gelu", "callable"])
def test_transformer_encoder_matches_torch(device, kw):
    ours_kw = dict(kw, activation=nn.functional.relu) if callable(kw.get("activation")) else kw
    tm, m = _twin(device, lambda: torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, **kw), 2,
        enable_nested_tensor=False),
        lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0,
                                                                 **ours_kw), 2))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 5, 8) if kw.get("batch_first") else (5, 3, 8))
    x = x.astype(_np_dtype(device))                   # sequence 5, batch 3
    mask = np.triu(np.full((5, 5), -np.inf), 1).astype(_np_dtype(device))
    kpm = np.zeros((3, 5), bool)
    kpm[0, -2:] = True
    tx, nx = torch.tensor(x, requires_grad=True), nr.tensor(x, device=device, requires_grad=True)
    tout = tm(tx, mask=torch.tensor(mask), src_key_padding_mask=torch.tensor(kpm).float()
              .masked_fill(torch.tensor(kpm), float("-inf")).to(tx.dtype))
    out = m(nx, mask=nr.tensor(mask, device=device),
            src_key_padding_mask=nr.tensor(kpm, device=device))
    _check(device, out, tout)
    tout.sum().backward()
    out.sum().backward()
    _check(device, nx.grad, tx.grad)


def test_transformer_matches_torch(device):
    tm, m = _twin(device, lambda: torch.nn.Transformer(8, 2, 2, 1, 16, dropout=0.0),
                  lambda: nn.Transformer(8, 2, 2, 1, 16, dropout=0.0))
    rng = np.random.default_rng(4)
    src = rng.standard_normal((6, 2, 8)).astype(_np_dtype(device))
    tgt = rng.standard_normal((4, 2, 8)).astype(_np_dtype(device))
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64)
    nmask = nn.Transformer.generate_square_subsequent_mask(4, device=device)
    assert nmask.tolist() == tmask.tolist()
    tout = tm(torch.tensor(src), torch.tensor(tgt), tgt_mask=tmask.to(
        torch.float64 if fdtype(device) is nr.float64 else torch.float32))
    out = m(nr.tensor(src, device=device), nr.tensor(tgt, device=device),
            tgt_mask=nmask.to(dtype=fdtype(device)))
    _check(device, out, tout)


def test_transformer_initialises_matrices_xavier_uniform():
    nr.manual_seed(0)
    m = nn.Transformer(16, 2, 1, 1, 32)
    w = m.encoder.layers[0].linear1.weight.numpy()           # (32, 16)
    bound = np.sqrt(6.0 / (16 + 32))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound


# -- interpolate ----------------------------------------------------------------------------------
INTERP = [((2, 3, 5, 7), dict(size=(9, 4), mode="bilinear")),
          ((2, 3, 5, 7), dict(scale_factor=2, mode="bilinear", align_corners=True)),
          ((1, 2, 6, 6), dict(scale_factor=1.7, mode="bilinear")),
          ((2, 3, 5, 7), dict(scale_factor=1.5, mode="bilinear", recompute_scale_factor=True)),
          ((1, 2, 6), dict(size=11, mode="linear")),
          ((2, 3, 5, 7), dict(size=(9, 4), mode="nearest")),
          ((2, 3, 5, 7), dict(scale_factor=2.5, mode="nearest")),
          ((2, 3, 5, 7), dict(scale_factor=0.6, mode="nearest-exact")),
          ((1, 1, 4, 4, 4), dict(scale_factor=2, mode="nearest")),
          ((1, 2, 5), dict(scale_factor=3, mode="nearest"))]


@pytest.mark.parametrize("shape, kw", INTERP, ids=[f"{k['mode']}-{i}" for i, (_, k) in
                                                    enumerate(INTERP)])
def test_interpolate_matches_torch(device, shape, kw):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(np.float32)
    tx, nx = torch.tensor(x, requires_grad=True), nr.tensor(x, device=device, requires_grad=True)
    ty = torch.nn.functional.interpolate(tx, **kw)
    y = nn.functional.interpolate(nx, **kw)
    assert y.shape == tuple(ty.shape)
    exact = kw["mode"].startswith("nearest")
    t = dict(rtol=0, atol=0) if exact else dict(rtol=0, atol=4 * 2.0 ** -23 * 4)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), **t)
    g = rng.standard_normal(ty.shape).astype(np.float32)
    ty.backward(torch.tensor(g))
    y.backward(nr.tensor(g, device=device))
    np.testing.assert_allclose(nx.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-5)


def test_interpolate_modules_and_errors():
    x = nr.randn(1, 2, 3, 3)
    assert nn.Upsample(scale_factor=2)(x).shape == (1, 2, 6, 6)
    up = nn.UpsamplingBilinear2d(scale_factor=2)(x)
    ref = torch.nn.UpsamplingBilinear2d(scale_factor=2)(torch.tensor(x.numpy()))
    np.testing.assert_allclose(up.numpy(), ref.numpy(), atol=1e-6)
    with pytest.raises(nr.UnsupportedError):
        nn.functional.interpolate(x, scale_factor=2, mode="bicubic")
    with pytest.raises(nr.UnsupportedError):
        nn.functional.interpolate(x, scale_factor=2, mode="bilinear", antialias=True)
    with pytest.raises(nr.ShapeError):
        nn.functional.interpolate(x, scale_factor=2, mode="linear")
    with pytest.raises(nr.ShapeError):
        nn.functional.interpolate(x, size=3, scale_factor=2)
    with pytest.raises(nr.ShapeError):
        nn.functional.interpolate(x, scale_factor=2, align_corners=True)


# -- nn.utils --------------------------------------------------------------------------------------
def test_clip_grad_value_and_parameter_vectors(device):
    ps = [nr.tensor([[0.5, -3.0], [2.0, 0.1]], device=device, requires_grad=True),
          nr.tensor([4.0], device=device, requires_grad=True)]
    tps = [torch.tensor(p.numpy(), requires_grad=True) for p in ps]
    for p, tp in zip(ps, tps):
        p.grad = p * 2.0
        tp.grad = tp.detach() * 2.0
    nn.utils.clip_grad_value_(ps, 1.5)
    torch.nn.utils.clip_grad_value_(tps, 1.5)
    for p, tp in zip(ps, tps):
        assert p.grad.tolist() == tp.grad.tolist()
    v = nn.utils.parameters_to_vector(ps)
    assert v.tolist() == torch.nn.utils.parameters_to_vector(tps).tolist()
    with nr.no_grad():
        nn.utils.vector_to_parameters(v * 10.0, ps)
    assert ps[0].tolist() == [[5.0, -30.0], [20.0, 1.0]] and ps[1].tolist() == [40.0]
    with pytest.raises(nr.ShapeError):
        nn.utils.vector_to_parameters(nr.ones(3), ps)
