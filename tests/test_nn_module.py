"""numr_web.nn's Module system against torch.nn (a dev-only reference): names, shapes, repr,
state_dict round trips both ways, and Linear's forward/backward."""
import math

import numpy as np
import pytest

import numr_web as nr
from numr_web import nn

from helpers import fdtype, tol

import torch


def _pair(dev_dtype=torch.float64):
    """The same small model in numr and torch (same module names, so the same state_dict keys)."""
    ours = nn.Sequential(nn.Linear(4, 8, activation="gelu"), nn.Linear(8, 8, bias=False),
                         nn.ReLU(), nn.Flatten(), nn.Linear(8, 3))
    ref = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU()),
                              torch.nn.Linear(8, 8, bias=False), torch.nn.ReLU(),
                              torch.nn.Flatten(), torch.nn.Linear(8, 3)).to(dev_dtype)
    return ours, ref


def _torch_sd(ref):
    # torch's first block is Sequential(Linear, GELU) where ours fuses the GELU into the Linear
    return {k.replace("0.0.", "0."): v for k, v in ref.state_dict().items()}


def test_names_shapes_and_order_match_torch():
    ours, ref = _pair()
    want = [(k, tuple(v.shape)) for k, v in _torch_sd(ref).items()]
    assert [(k, v.shape) for k, v in ours.state_dict().items()] == want
    assert [k for k, _ in ours.named_parameters()] == [k for k, _ in want]
    assert all(p.is_leaf and p.requires_grad for p in ours.parameters())
    assert [type(m).__name__ for m in ours.children()] == ["Linear", "Linear", "ReLU", "Flatten",
                                                           "Linear"]
    assert len(list(ours.modules())) == 6 and len(ours) == 5 and ours[-1] is ours[4]


def test_repr_matches_torch():
    m = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.ModuleList([nn.ReLU(), nn.Linear(2, 3)]))
    t = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(),
                            torch.nn.ModuleList([torch.nn.ReLU(), torch.nn.Linear(2, 3)]))
    assert repr(m) == repr(t)
    assert repr(nn.Linear(3, 2, activation="silu")) == \
        "Linear(in_features=3, out_features=2, bias=True, activation='silu')"


@pytest.mark.parametrize("activation", ["none", "relu", "gelu", "gelu_tanh", "silu", "tanh"])
def test_linear_matches_torch(device, activation):
    torch_act = {"none": lambda z: z, "relu": torch.relu, "tanh": torch.tanh,
                 "gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu,
                 "gelu_tanh": lambda z: torch.nn.functional.gelu(z, approximate="tanh")}[activation]
    dtype = fdtype(device)
    lin = nn.Linear(5, 3, activation=activation, device=device, dtype=dtype, seed=3)
    w, b = torch.tensor(lin.weight.numpy(), dtype=torch.float64, requires_grad=True), \
        torch.tensor(lin.bias.numpy(), dtype=torch.float64, requires_grad=True)
    x = np.random.default_rng(0).standard_normal((2, 4, 5))
    g = np.random.default_rng(1).standard_normal((2, 4, 3))
    xt = nr.tensor(x, dtype=dtype, device=device, requires_grad=True)
    y = lin(xt)
    y.backward(nr.tensor(g, dtype=dtype, device=device))
    tx = torch.tensor(x, requires_grad=True)
    ty = torch_act(torch.nn.functional.linear(tx, w, b))
    ty.backward(torch.tensor(g))
    t = tol(device)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), **t)
    for ours, ref in [(xt, tx), (lin.weight, w), (lin.bias, b)]:
        np.testing.assert_allclose(ours.grad.numpy(), ref.grad.numpy(), **t)


def test_linear_init_and_seed():
    a, b = nn.Linear(100, 30, seed=1), nn.Linear(100, 30, seed=1)
    w = a.weight.numpy()
    assert np.array_equal(w, b.weight.numpy()) and w.shape == (30, 100)
    assert np.abs(w).max() <= 0.1 and np.abs(w).max() > 0.09 and abs(w.mean()) < 0.01
    assert a.bias.shape == (30,) and np.abs(a.bias.numpy()).max() <= 0.1
    with pytest.raises(nr.NumrError, match="activation='relu'"):
        nn.Linear(3, 2, "relu")
    y = nn.Linear(3, 2)(nr.ones(3))          # a 1-D input gives a 1-D output, as in torch
    assert y.shape == (2,)


def test_state_dict_loads_into_torch_and_back(device):
    ours, ref = _pair()
    ours.to(device, fdtype(device))
    x = np.random.default_rng(0).standard_normal((6, 4))
    ref.load_state_dict({(k.replace("0.", "0.0.", 1) if k.startswith("0.") else k):
                         torch.from_numpy(v.numpy()).double()
                         for k, v in ours.state_dict().items()})
    np.testing.assert_allclose(ours(nr.tensor(x, dtype=fdtype(device), device=device)).numpy(),
                               ref(torch.tensor(x)).detach().numpy(), **tol(device))
    ref2 = _pair()[1]                   # fresh torch weights -> ours (torch tensors as values)
    res = ours.load_state_dict(_torch_sd(ref2))
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert all(p.device == device and p.dtype == fdtype(device) and p.is_leaf and p.requires_grad
               for p in ours.parameters())
    np.testing.assert_allclose(ours(nr.tensor(x, dtype=fdtype(device), device=device)).numpy(),
                               ref2(torch.tensor(x)).detach().numpy(), **tol(device))


def test_load_state_dict_errors_name_the_keys_and_change_nothing():
    m = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    sd = m.state_dict()
    before = m[0].weight.numpy()
    bad = dict(sd)
    del bad["1.bias"]
    bad["extra.weight"] = nr.zeros(1)
    bad["0.weight"] = nr.zeros((2, 3))
    with pytest.raises(nn.StateDictError) as e:
        m.load_state_dict(bad)
    msg = str(e.value)
    assert '"1.bias"' in msg and '"extra.weight"' in msg and "size mismatch for 0.weight" in msg
    assert e.value.missing_keys == ["1.bias"] and e.value.unexpected_keys == ["extra.weight"]
    assert e.value.mismatched == [("0.weight", (3, 2), (2, 3))]
    assert isinstance(e.value, nr.NumrError)
    np.testing.assert_array_equal(m[0].weight.numpy(), before)
    bad["0.weight"] = nr.ones((3, 2))
    res = m.load_state_dict(bad, strict=False)            # missing/unexpected allowed
    assert res == (["1.bias"], ["extra.weight"])
    np.testing.assert_array_equal(m[0].weight.numpy(), np.ones((3, 2), np.float32))


def test_registration_buffers_and_tied_weights():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Linear(4, 6, bias=False)
            self.head = nn.Linear(4, 6, bias=False)
            self.head.weight = self.emb.weight           # weight tying
            self.register_buffer("mask", nr.ones(3))
            self.register_buffer("cache", nr.zeros(2), persistent=False)
            self.plain = nr.zeros(1)                     # a plain tensor attribute: not state

        def forward(self, x):
            return self.head(x)

    n = Net()
    assert [k for k, _ in n.named_parameters()] == ["emb.weight"]       # once, as torch
    assert list(n.state_dict()) == ["mask", "emb.weight", "head.weight"]
    assert [k for k, _ in n.named_buffers()] == ["mask", "cache"]
    n.load_state_dict({"mask": nr.zeros(3), "emb.weight": nr.ones((6, 4)),
                       "head.weight": nr.full((6, 4), 2.0)})
    assert n.emb.weight is n.head.weight and n.head.weight.numpy()[0, 0] == 2.0
    with pytest.raises(nr.NumrError, match="Parameter or None"):
        n.emb.weight = nr.ones((6, 4))
    n.emb.weight = nn.Parameter(nr.ones((6, 4)))
    assert n.emb.weight is not n.head.weight
    del n.head
    assert "head" not in dict(n.named_children())
    assert n.train().training and not n.eval().training and not n.emb.training
    assert n.train(True).emb.training


def test_to_device_keeps_identity_and_optimizer_references(device):
    m = nn.MLP([3, 4, 2], activation="relu", dtype="float32")
    m.register_buffer("scale", nr.ones(2))
    params = list(m.parameters())
    opt = nn.optim.SGD(m.parameters(), lr=0.1)
    w0 = m.layers[0].weight.numpy()
    m.layers[0].weight.grad = nr.ones((4, 3))
    assert m.to(device) is m
    assert [id(p) for p in m.parameters()] == [id(p) for p in params]
    assert all(p.device == device and p.is_leaf and p.requires_grad for p in params)
    assert m.scale.device == device and m.layers[0].weight.grad.device == device
    opt.step()
    np.testing.assert_allclose(m.layers[0].weight.numpy(), w0 - 0.1, rtol=1e-6)
    loss = m(nr.ones((5, 3), device=device)).sum()
    m.zero_grad()
    loss.backward()
    assert m.layers[1].bias.grad.device == device
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    m.double() if device == "cpu" else None
    assert device != "cpu" or m.layers[0].weight.dtype == nr.float64


def test_sequential_and_modulelist_editing():
    s = nn.Sequential(nn.ReLU(), nn.Tanh(), nn.Identity())
    s[1] = nn.Sigmoid()
    assert [type(m).__name__ for m in s] == ["ReLU", "Sigmoid", "Identity"]
    assert isinstance(s[1:], nn.Sequential) and len(s[1:]) == 2
    ml = nn.ModuleList([nn.Linear(1, 1)]).append(nn.Linear(1, 2))
    assert [k for k, _ in ml.named_parameters()] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    with pytest.raises(IndexError):
        ml[2]
    np.testing.assert_allclose(s(nr.tensor([-1.0, 2.0])).numpy(),
                               [0.5, 1 / (1 + np.exp(-2.0))], rtol=1e-6)


def test_init_functions_keep_identity_and_follow_torch_bounds():
    w = nn.Parameter(nr.zeros((64, 48)))
    assert nn.init.normal_(w, 1.0, 0.5, seed=3) is w and w.is_leaf and w.requires_grad
    a = w.numpy()
    assert abs(a.mean() - 1.0) < 0.02 and abs(a.std() - 0.5) < 0.02
    assert np.array_equal(nn.init.normal_(nr.zeros((64, 48)), 1.0, 0.5, seed=3).numpy(), a)
    bound = math.sqrt(6 / (48 + 64))                   # torch's xavier_uniform_ formula
    x = nn.init.xavier_uniform_(w, seed=1).numpy()
    assert bound * 0.95 < np.abs(x).max() <= bound
    k = nn.init.kaiming_uniform_(w, a=math.sqrt(5), seed=2).numpy()
    assert 0.95 / math.sqrt(48) < np.abs(k).max() <= 1 / math.sqrt(48)   # = Linear's default
    assert nn.init.zeros_(w).numpy().max() == 0 and nn.init.ones_(w).numpy().min() == 1
    u = nn.init.uniform_(nr.zeros(1000, dtype="float64"), -2, 3, seed=0).numpy()
    assert u.dtype == np.float64 and -2 <= u.min() and u.max() < 3
