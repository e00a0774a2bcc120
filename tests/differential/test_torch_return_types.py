"""torch's named results against PyTorch: max / min (the functions, the methods with dim=, and
x.max(d) once install_as_torch() is in effect), sort / topk / kthvalue / median, and mode /
aminmax / cummax / cummin (functions and methods), with their gradients; torch.return_types."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import numr_web as nr
import numr_web.torch as ntorch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAN = float("nan")


def _same(got, want):
    assert type(got).__name__ == type(want).__name__
    assert got._fields == tuple(f for f in ("values", "indices", "min", "max") if hasattr(want, f))
    for g, w in zip(got, want):
        assert g.shape == tuple(w.shape)
        np.testing.assert_array_equal(g.detach().numpy(), w.detach().numpy())


@pytest.mark.parametrize("name, args, kw", [
    ("max", (1,), {}), ("min", (0, True), {}), ("max", (), {"dim": -1, "keepdim": True}),
    ("sort", (1,), {"descending": True}), ("topk", (2,), {}), ("kthvalue", (2, 0), {}),
    ("median", (1,), {}), ("mode", (1,), {}), ("mode", (), {"dim": 0, "keepdim": True}),
    ("cummax", (1,), {}), ("cummin", (0,), {}), ("aminmax", (), {"dim": 1}),
    ("aminmax", (), {}),
])
def test_named_results_match_torch(device, name, args, kw):
    data = [[3.0, 1.0, 3.0, -2.0], [0.0, 5.0, 5.0, 1.0], [2.0, 4.0, -1.0, 6.0]]
    x, tx = ntorch.tensor(data, device=device), torch.tensor(data)
    _same(getattr(ntorch, name)(x, *args, **kw), getattr(torch, name)(tx, *args, **kw))
    if name not in ("max", "min"):                # methods; x.max(d) is checked below
        _same(getattr(x, name)(*args, **kw), getattr(tx, name)(*args, **kw))


def test_tensor_max_min_with_dim_keyword_give_torchs_pair(device):
    data = [[1.0, 5.0, 5.0, -2.0], [7.0, 2.0, 7.0, 7.0]]
    x, tx = ntorch.tensor(data, device=device, requires_grad=True), \
        torch.tensor(data, requires_grad=True)
    for kw in (dict(dim=1), dict(dim=0, keepdim=True), dict(dim=-1, keepdims=True)):
        tkw = {"keepdim" if k == "keepdims" else k: v for k, v in kw.items()}
        _same(x.max(**kw), tx.max(**tkw))
        _same(x.min(**kw), tx.min(**tkw))
    x.max(dim=1).values.sum().backward()
    tx.max(dim=1).values.sum().backward()
    assert x.grad.tolist() == tx.grad.tolist()        # to the index returned
    assert x.max(1).tolist() == [5.0, 7.0]            # positional / axis=: numr's values
    assert x.max(axis=1, keepdims=True).shape == (2, 1)
    assert x.max().item() == 7.0 and x.max(x * 0).tolist() == tx.max(tx * 0).tolist()
    with pytest.raises(nr.IndexOutOfRangeError):
        x[:, :0].max(dim=1)
    with pytest.raises(IndexError):
        tx[:, :0].max(dim=1)


def test_cumulative_extremes_with_nans_and_integers(device):
    for data in ([1.0, 3.0, 3.0, 2.0, NAN, 5.0, NAN, 1.0], [[2, 2, 1, 1], [3, 1, 4, 1]],
                 [[True, False, True]]):
        x, tx = ntorch.tensor(data, device=device), torch.tensor(data)
        for name in ("cummax", "cummin"):
            got, want = getattr(ntorch, name)(x, -1), getattr(torch, name)(tx, -1)
            np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
            assert got.indices.tolist() == want.indices.tolist(), (name, data)


def test_cummax_and_mode_gradients_go_to_the_indices(device):
    data = [[1.0, 3.0, 3.0, 2.0], [4.0, 0.0, 5.0, 5.0]]
    w = [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]
    # torch before 2.12 has no derivative for aminmax: its reference is amax (the columns'
    # maxima are unique here, so both send the gradient to the one index)
    for fn, tfn in ((lambda m, t: m.cummax(t, 1).values, None),
                    (lambda m, t: m.cummin(t, 0).values, None),
                    (lambda m, t: m.mode(t, 1).values.unsqueeze(1), None),
                    (lambda m, t: m.aminmax(t, dim=0).max.unsqueeze(0),
                     lambda m, t: m.amax(t, dim=0).unsqueeze(0))):
        x = ntorch.tensor(data, device=device, requires_grad=True)
        tx = torch.tensor(data, requires_grad=True)
        (fn(ntorch, x) * ntorch.tensor(w, device=device)).sum().backward()
        ((tfn or fn)(torch, tx) * torch.tensor(w)).sum().backward()
        assert x.grad.tolist() == tx.grad.tolist()


def test_return_types_module():
    for name in ("max", "min", "sort", "topk", "kthvalue", "median", "mode", "cummax", "cummin"):
        assert getattr(ntorch.return_types, name)._fields == ("values", "indices"), name
    assert ntorch.return_types.aminmax._fields == ("min", "max")
    assert isinstance(ntorch.max(ntorch.ones(2, 2), 1), ntorch.return_types.max)


def test_tensor_max_positional_dim_follows_torch_under_install_as_torch():
    """After install_as_torch(), torch.Tensor is numr_web's Tensor for the whole process: its
    x.max(d) is torch's (values, indices), so `x.max(1)[1]` is the indices, as in torch."""
    code = """
        import numr_web
        numr_web.install_as_torch()
        import torch
        x = torch.tensor([[1.0, 3.0, 2.0], [6.0, 4.0, 5.0]])
        values, indices = x.max(1)
        assert x.max(1)[1].tolist() == [1, 0] and x.min(0, True).values.tolist() == [[1., 3., 2.]]
        assert torch.max(x, 1).indices.tolist() == [1, 0]
        assert x.max(axis=1).indices.tolist() == [1, 0]       # as torch's axis= alias
        assert torch.logsumexp(x, 1).shape == (2,)             # the library's own calls unchanged
        print(values.tolist(), indices.tolist())
    """
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[3.0, 6.0] [1, 0]"
