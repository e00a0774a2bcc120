"""multinomial, bernoulli, poisson and normal against torch's signatures, shapes and dtypes, and
their distributions against closed forms written here (the draws are random, so frequencies are
held to 5 standard errors; every test seeds the generator, so a run is deterministic)."""
import math

import numpy as np
import pytest
import torch

import numr_web as nr


def _close(freq, p, n, what):
    se = math.sqrt(max(p * (1 - p), 1e-12) / n)
    assert abs(freq - p) <= 5 * se + 1e-12, f"{what}: frequency {freq:.4f}, probability {p:.4f}"


def test_multinomial_with_replacement_frequencies(device):
    nr.manual_seed(0)
    w = [0.2, 0.0, 1.2, 0.6]                           # weights, not normalised
    n = 20000
    x = nr.multinomial(nr.tensor(w, device=device), n, replacement=True)
    tx = torch.multinomial(torch.tensor(w), n, replacement=True)
    assert x.shape == tuple(tx.shape) and x.dtype == nr.long and x.device == device
    counts = np.bincount(x.numpy(), minlength=4)
    assert counts[1] == 0                              # a zero weight is never drawn
    for i, p in enumerate(np.array(w) / sum(w)):
        _close(counts[i] / n, p, n, f"category {i}")


def test_multinomial_rows_and_method_form(device):
    nr.manual_seed(1)
    w = [[1.0, 0.0, 0.0], [0.0, 0.0, 3.0], [1.0, 1.0, 0.0]]
    x = nr.tensor(w, device=device).multinomial(500, replacement=True)
    assert x.shape == tuple(torch.tensor(w).multinomial(500, True).shape) == (3, 500)
    v = x.numpy()
    assert (v[0] == 0).all() and (v[1] == 2).all() and set(v[2]) == {0, 1}
    _close((v[2] == 0).mean(), 0.5, 500, "row 2")


def test_multinomial_without_replacement_order_statistics(device):
    """The first draw is category i with probability p_i; the second is j after i with
    p_j / (1 - p_i): successive sampling without replacement, torch's distribution."""
    nr.manual_seed(2)
    p = np.array([0.5, 0.3, 0.2, 0.0])
    rows = 6000
    x = nr.multinomial(nr.tensor(np.tile(p, (rows, 1)), dtype="float32", device=device), 3)
    assert x.shape[1:] == tuple(torch.multinomial(torch.tensor(np.tile(p, (2, 1))), 3).shape[1:])
    assert x.shape == (rows, 3) and x.dtype == nr.long
    v = x.numpy()
    assert all(len(set(r)) == 3 for r in v) and not (v == 3).any()   # distinct, never weight 0
    for i in range(3):
        _close((v[:, 0] == i).mean(), p[i], rows, f"first = {i}")
    for i, j in ((0, 1), (1, 0), (2, 0)):
        want = p[i] * p[j] / (1 - p[i])
        _close(((v[:, 0] == i) & (v[:, 1] == j)).mean(), want, rows, f"({i}, {j})")


def test_multinomial_is_reproducible_with_a_seed_or_generator(device):
    w = nr.tensor([0.1, 0.2, 0.3, 0.4], device=device)
    nr.manual_seed(7)
    a = nr.multinomial(w, 10, replacement=True).tolist()
    nr.manual_seed(7)
    assert nr.multinomial(w, 10, replacement=True).tolist() == a
    g1, g2 = nr.Generator().manual_seed(3), nr.Generator().manual_seed(3)
    assert nr.multinomial(w, 4, generator=g1).tolist() == nr.multinomial(w, 4, generator=g2).tolist()


@pytest.mark.parametrize("bad, error", [
    (lambda d: nr.multinomial(nr.tensor([1, 2], device=d), 1), nr.DTypeError),
    (lambda d: nr.multinomial(nr.tensor(1.0, device=d), 1), nr.ShapeError),
    (lambda d: nr.multinomial(nr.tensor([0.5, 0.5], device=d), 3), nr.ShapeError),
    (lambda d: nr.multinomial(nr.tensor([0.5, 0.5], device=d), 0), nr.ShapeError),
    (lambda d: nr.multinomial(nr.tensor([0.5, -0.1], device=d), 1).tolist(), nr.ShapeError),
    (lambda d: nr.multinomial(nr.tensor([0.0, 0.0], device=d), 1).tolist(), nr.ShapeError),
    (lambda d: nr.multinomial(nr.tensor([1.0, 0.0, 0.0], device=d), 2).tolist(), nr.ShapeError),
])
def test_multinomial_bad_input_raises_like_torch(device, bad, error):
    with pytest.raises(error):
        bad(device)
        nr.zeros(1, device=device).tolist()       # a GPU reports its checks at the next readback


def test_bernoulli(device):
    nr.manual_seed(3)
    probs = [0.0, 0.25, 1.0, 0.5]
    n = 8000
    x = nr.bernoulli(nr.tensor([probs] * n, device=device))
    tx = torch.bernoulli(torch.tensor([probs] * 2))
    assert x.dtype == nr.float32 and x.shape == (n, 4) and tx.dtype == torch.float32
    v = x.numpy()
    assert set(np.unique(v)) <= {0.0, 1.0}
    for i, p in enumerate(probs):
        _close(v[:, i].mean(), p, n, f"p={p}")
    y = nr.zeros(n, device=device).bernoulli(0.3)          # p as a number
    _close(y.numpy().mean(), 0.3, n, "p=0.3")
    z = nr.zeros(n, device=device)
    assert z.bernoulli_(0.7) is z
    _close(z.numpy().mean(), 0.7, n, "bernoulli_")
    with pytest.raises(nr.ShapeError):
        nr.bernoulli(nr.tensor([1.5], device=device)).tolist()
    with pytest.raises(nr.DTypeError):
        nr.bernoulli(nr.tensor([1], device=device))


def _poisson_pmf(lam, k):
    return math.exp(-lam + k * math.log(lam) - math.lgamma(k + 1)) if lam else float(k == 0)


@pytest.mark.parametrize("lam", [0.0, 0.7, 3.0, 9.9, 10.0, 35.0, 1000.0])
def test_poisson_distribution(device, lam):
    nr.manual_seed(4)
    n = 6000
    x = nr.poisson(nr.full((n,), lam, device=device))
    assert x.dtype == nr.float32 and torch.poisson(torch.full((2,), lam)).dtype == torch.float32
    v = x.numpy().astype(np.float64)
    assert (v == np.round(v)).all() and (v >= 0).all()
    if lam == 0:
        assert (v == 0).all()
        return
    assert abs(v.mean() - lam) <= 5 * math.sqrt(lam / n)
    assert abs(v.var() / lam - 1) <= 5 * math.sqrt(2 / n) * (1 + 1 / lam)
    mode = int(lam)
    for k in (mode - 1, mode, mode + 2):
        if k >= 0:
            _close((v == k).mean(), _poisson_pmf(lam, k), n, f"P(X = {k})")


def test_poisson_mixed_rates_and_errors(device):
    nr.manual_seed(5)
    rates = nr.tensor([[0.5, 50.0], [5.0, 0.0]], device=device)
    x = nr.poisson(rates)
    assert x.shape == (2, 2) and x.tolist()[1][1] == 0.0
    with pytest.raises(nr.ShapeError):
        nr.poisson(nr.tensor([-1.0], device=device))
    with pytest.raises(nr.DTypeError):
        nr.poisson(nr.tensor([1], device=device))


def test_normal_forms_and_gradients(device):
    nr.manual_seed(6)
    mean = nr.tensor([0.0, 10.0], device=device, requires_grad=True)
    std = nr.tensor([[1.0], [3.0]], device=device, requires_grad=True)
    x = nr.normal(mean, std)
    tx = torch.normal(torch.tensor([0.0, 10.0]), torch.tensor([[1.0], [3.0]]))
    assert x.shape == tuple(tx.shape) == (2, 2)
    x.sum().backward()
    z = (x.detach() - mean.detach()) / std.detach()
    np.testing.assert_allclose(mean.grad.numpy(), [2.0, 2.0])
    np.testing.assert_allclose(std.grad.numpy(), z.sum(1, keepdim=True).numpy(), rtol=1e-5)
    y = nr.normal(2.0, 0.5, size=(20000,), device=device)
    assert y.shape == (20000,) and tuple(torch.normal(2.0, 0.5, size=(3,)).shape) == (3,)
    assert abs(y.numpy().mean() - 2.0) < 5 * 0.5 / math.sqrt(20000)
    assert abs(y.numpy().std() - 0.5) < 0.02
    with pytest.raises(nr.ShapeError):
        nr.normal(0.0, 1.0)
