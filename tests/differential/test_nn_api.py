"""numr_web.nn's torch-named surface against torch.nn: the activation modules (parametrised ones
included) and their functional forms, values and gradients; Flatten/Unflatten; the containers;
Module's traversal, buffers, gradients switches, repr and load_state_dict(strict=False)."""
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import numr_web as nr
from numr_web import nn
from numr_web.nn import functional as F

from _diff import assert_close_ulps, ulps

# inputs spanning both sides of every kink and threshold, the kinks themselves, and extremes
X = np.array([-1e30, -100.0, -30.0, -6.5, -1.0, -0.5, -1e-3, 0.0, 1e-3, 0.5, 1.0, 3.0, 6.0, 6.5,
              10.5, 21.0, 30.0, 100.0, 1e30], np.float32)

ACTS = [
    ("LeakyReLU", {}, {}), ("LeakyReLU", {"negative_slope": 0.2}, {}),
    ("LeakyReLU", {"negative_slope": -0.5}, {}),
    ("ELU", {}, {}), ("ELU", {"alpha": 0.5}, {}), ("ELU", {"alpha": 2.0}, {}),
    ("Softplus", {}, {}), ("Softplus", {"beta": 2.0}, {}), ("Softplus", {"beta": 0.5,
                                                                      "threshold": 10.0}, {}),
    ("Softplus", {"threshold": 5.0}, {}),
    ("Hardtanh", {}, {}), ("Hardtanh", {"min_val": -2.0, "max_val": 6.0}, {}),
    ("ReLU6", {}, {}), ("SiLU", {}, {}), ("Mish", {}, {}), ("Tanh", {}, {}), ("Sigmoid", {}, {}),
    ("GELU", {}, {}), ("GELU", {"approximate": "tanh"}, {}), ("ReLU", {}, {}),
    ("Hardswish", {}, {}), ("SELU", {}, {}), ("CELU", {}, {}), ("CELU", {"alpha": 0.5}, {}),
    ("CELU", {"alpha": 2.0}, {}), ("Softsign", {}, {}), ("Tanhshrink", {}, {}),
    ("Identity", {}, {}),
]


@pytest.mark.parametrize("name,kw,_", ACTS, ids=[f"{a[0]}{a[1]}" for a in ACTS])
def test_activation_modules_match_torch(device, name, kw, _):
    ours, ref = getattr(nn, name)(**kw), getattr(torch.nn, name)(**kw)
    assert repr(ours) == repr(ref)
    x = nr.tensor(X, device=device, requires_grad=True)
    y = ours(x)
    y.sum().backward()
    got = [y.numpy(), x.grad.numpy()]
    want = []
    for dtype in (torch.float64, torch.float32):
        t = torch.tensor(X, dtype=dtype, requires_grad=True)
        o = ref(t)
        o.sum().backward()
        want.append([o.detach().numpy(), t.grad.numpy()])
    for g, w64, w32, what in zip(got, want[0], want[1], ("value", "grad")):
        assert np.isfinite(g[np.isfinite(w64)]).all(), (what, g, w64)
        # where torch's own float32 result is far off (tanh' = 1 - y^2 as y -> 1 cancels), a
        # device within a small multiple of that error passes: the inputs' rounding dominates
        assert_close_ulps(g, w64, "float32", 8, device, torch_err=8 * ulps(w32, w64, "float32"),
                          what=f"{name}{kw} {what}")


def test_functional_forms_match_modules(device):
    x = nr.tensor(X, device=device)
    t = torch.tensor(X)
    for ours, ref in ((F.leaky_relu(x, 0.2), TF.leaky_relu(t, 0.2)),
                      (F.elu(x, alpha=0.5), TF.elu(t, alpha=0.5)),
                      (F.softplus(x, beta=2.0, threshold=5.0), TF.softplus(t, 2.0, 5.0)),
                      (F.hardtanh(x, -2.0, 2.0), TF.hardtanh(t, -2.0, 2.0)),
                      (F.relu6(x), TF.relu6(t)), (F.mish(x), TF.mish(t)),
                      (F.hardswish(x), TF.hardswish(t)), (F.selu(x), TF.selu(t)),
                      (F.celu(x, 0.5), TF.celu(t, 0.5)), (F.softsign(x), TF.softsign(t))):
        np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=4e-7, atol=1e-30)
    with pytest.raises(nr.ShapeError, match="min_val"):
        nn.Hardtanh(2.0, 1.0)
    with pytest.raises((ValueError, AssertionError)):
        torch.nn.Hardtanh(2.0, 1.0)


def test_softmax_modules_and_implicit_dim(device):
    a = np.random.default_rng(0).normal(size=(2, 3, 4)).astype(np.float32)
    x = nr.tensor(a, device=device)
    for name in ("Softmax", "LogSoftmax"):
        for dim in (0, 1, -1):
            assert repr(getattr(nn, name)(dim)) == repr(getattr(torch.nn, name)(dim))
            np.testing.assert_allclose(getattr(nn, name)(dim=dim)(x).numpy(),
                                       getattr(torch.nn, name)(dim=dim)(torch.tensor(a)).numpy(),
                                       rtol=2e-6, atol=1e-7)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")       # both warn about the implicit dim
            np.testing.assert_allclose(getattr(nn, name)()(x).numpy(),
                                       getattr(torch.nn, name)()(torch.tensor(a)).numpy(),
                                       rtol=2e-6, atol=1e-7)


def test_flatten_unflatten(device):
    a = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    x, t = nr.tensor(a, device=device), torch.tensor(a)
    for kw in ({}, {"start_dim": 0}, {"start_dim": 1, "end_dim": 2}, {"start_dim": -2}):
        assert repr(nn.Flatten(**kw)) == repr(torch.nn.Flatten(**kw))
        np.testing.assert_array_equal(nn.Flatten(**kw)(x).numpy(), torch.nn.Flatten(**kw)(t))
    for dim, size in ((1, (3, 1)), (-1, (5, 1)), (2, (2, -1))):
        assert repr(nn.Unflatten(dim, size)) == repr(torch.nn.Unflatten(dim, size))
        np.testing.assert_array_equal(nn.Unflatten(dim, size)(x).numpy(),
                                      torch.nn.Unflatten(dim, size)(t))
    with pytest.raises(IndexError):
        nn.Unflatten(4, (1, 5))(x)
    with pytest.raises(IndexError):
        nn.Flatten(start_dim=1)(nr.ones(3, device=device))
    with pytest.raises(IndexError):
        torch.nn.Flatten(start_dim=1)(torch.ones(3))


def test_module_dict_and_parameter_containers(device):
    md = nn.ModuleDict({"enc": nn.Linear(2, 3, device=device), "act": nn.ReLU()})
    md["dec"] = nn.Linear(3, 2, device=device)
    ref = torch.nn.ModuleDict({"enc": torch.nn.Linear(2, 3), "act": torch.nn.ReLU()})
    ref["dec"] = torch.nn.Linear(3, 2)
    assert repr(md) == repr(ref)
    assert list(md.state_dict()) == list(ref.state_dict())
    assert list(md.keys()) == list(ref.keys()) and "act" in md and len(md) == 3
    assert isinstance(md.pop("act"), nn.ReLU) and list(md) == ["enc", "dec"]
    with pytest.raises(nr.NumrError):
        md["a.b"] = nn.ReLU()

    pl = nn.ParameterList([nr.ones((2, 3), device=device),
                           nn.Parameter(nr.zeros(3, device=device))])
    pl.append(nr.ones(1, device=device))
    tl = torch.nn.ParameterList([torch.ones(2, 3), torch.zeros(3), torch.ones(1)])
    assert list(pl.state_dict()) == list(tl.state_dict())
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in pl)
    assert [p.shape for p in pl] == [tuple(p.shape) for p in tl] and pl[-1].shape == (1,)
    pd = nn.ParameterDict({"w": nr.ones((2, 2), device=device)})
    pd["b"] = nr.zeros(2, device=device)
    td = torch.nn.ParameterDict({"w": torch.ones(2, 2)})
    td["b"] = torch.zeros(2)
    assert list(pd.state_dict()) == list(td.state_dict()) and isinstance(pd["b"], nn.Parameter)
    if device == "cpu":                  # torch's layout, numr's dtype names
        for ours, ref in ((pl, tl), (nn.ParameterList(), torch.nn.ParameterList())):
            assert repr(ours).replace("numr_web.", "torch.") == repr(ref)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.ps, self.pd = pl, pd

    assert [k for k, _ in Net().named_parameters()] == ["ps.0", "ps.1", "ps.2", "pd.w", "pd.b"]
    opt = nn.optim.SGD(Net().parameters(), lr=0.1)
    assert len(opt.param_groups[0]["params"]) == 5


class _Block(nn.Module):
    def __init__(self, lib):
        super().__init__()
        self.fc = lib.Linear(3, 3)
        self.register_buffer("running", (nr if lib is nn else torch).zeros(3))
        self.register_buffer("tmp", (nr if lib is nn else torch).ones(1), persistent=False)


def _torch_block():
    m = torch.nn.Module()
    m.fc = torch.nn.Linear(3, 3)
    m.register_buffer("running", torch.zeros(3))
    m.register_buffer("tmp", torch.ones(1), persistent=False)
    return m


def test_module_traversal_buffers_and_switches():
    ours = nn.Sequential(_Block(nn), nn.ReLU(), _Block(nn))
    ref = torch.nn.Sequential(_torch_block(), torch.nn.ReLU(), _torch_block())
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in ref.named_modules()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in ref.named_buffers()]
    assert len(list(ours.buffers())) == len(list(ref.buffers())) == 4
    assert list(ours.state_dict()) == list(ref.state_dict())
    seen = []
    ours.apply(lambda m: seen.append(type(m).__name__))
    want = []
    ref.apply(lambda m: want.append(type(m).__name__.replace("Module", "_Block")))
    assert seen == want
    assert ours.get_submodule("2.fc") is ours[2].fc
    ours.requires_grad_(False)
    assert not any(p.requires_grad for p in ours.parameters())
    ours.requires_grad_()
    x = nr.ones((2, 3))
    for m in (ours[0], ours[2]):
        m.fc(x).sum().backward()
    ours.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.numpy().any() for p in ours.parameters())
    ours.zero_grad()
    assert all(p.grad is None for p in ours.parameters())


def test_load_state_dict_strict_false_reports_keys_as_torch():
    ours, ref = nn.Linear(2, 3), torch.nn.Linear(2, 3)
    sd = {"weight": np.ones((3, 2), np.float32), "extra": np.zeros(1, np.float32)}
    got = ours.load_state_dict(sd, strict=False)
    want = ref.load_state_dict({k: torch.tensor(v) for k, v in sd.items()}, strict=False)
    assert got.missing_keys == want.missing_keys and got.unexpected_keys == want.unexpected_keys
    assert ours.weight.numpy().tolist() == ref.weight.detach().numpy().tolist()
    with pytest.raises(nr.StateDictError, match="size mismatch"):
        ours.load_state_dict({"weight": np.ones((2, 2), np.float32)}, strict=False)


def test_repr_layout_matches_torch():
    ours = nn.Sequential(nn.Flatten(), nn.ModuleDict({"a": nn.LeakyReLU(0.2, inplace=True)}),
                         nn.ELU(alpha=0.5), nn.Softplus(beta=2), nn.Identity(), nn.ReLU6())
    ref = torch.nn.Sequential(torch.nn.Flatten(),
                              torch.nn.ModuleDict({"a": torch.nn.LeakyReLU(0.2, inplace=True)}),
                              torch.nn.ELU(alpha=0.5), torch.nn.Softplus(beta=2),
                              torch.nn.Identity(), torch.nn.ReLU6())
    assert repr(ours) == repr(ref)


@pytest.mark.parametrize("fn,kw", [("elu", {"alpha": 0.7}), ("elu", {}),
                                   ("softplus", {"beta": 2.0, "threshold": 3.0}),
                                   ("leaky_relu", {"negative_slope": 0.3}),
                                   ("hardtanh", {"min_val": -0.5, "max_val": 2.0})])
def test_parametrised_second_derivatives_match_torch(fn, kw):
    x = np.array([-40.0, -6.5, -1.0, -0.25, 0.3, 1.0, 1.4, 2.5, 30.0])
    xs, xt = nr.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    g, = nr.grad((getattr(F, fn)(xs, **kw) ** 3).sum(), [xs], create_graph=True)
    g.sum().backward()
    gt, = torch.autograd.grad((getattr(TF, fn)(xt, **kw) ** 3).sum(), [xt], create_graph=True)
    gt.sum().backward()
    np.testing.assert_allclose(g.numpy(), gt.detach().numpy(), rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-300)
