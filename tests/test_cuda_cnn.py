"""cuda-only checks of the convolutional-net kernels (tests/differential/test_batchnorm.py and
test_conv_pool.py run every op on cuda too): cuDNN and im2col + cuBLAS against float64 torch and
against each other, the probe's report, the batch norm kernels at sizes with many chunks per
channel, and a captured CNN training step against the eager one."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import numr_web as nr
from numr_web import nn

OK, WHY = nr.backends.probe("cuda")
pytestmark = pytest.mark.skipif(not OK, reason=f"cuda: {WHY}")


@pytest.fixture
def be():
    b = nr.get_backend("cuda")
    old = b.conv
    yield b
    b.conv = old


def _conv_case(act, geo, seed=0):
    r = np.random.default_rng(seed)
    x, w, b = r.normal(size=(4, 5, 11, 9)), r.normal(size=(6, 5, 3, 3)), r.normal(size=6)
    g = r.normal(size=TF.conv2d(torch.tensor(x), torch.tensor(w), **geo).shape)
    return x, w, b, g


def _run_ours(x, w, b, g, act, geo):
    ts = [nr.tensor(v.astype(np.float32), device="cuda", requires_grad=True) for v in (x, w, b)]
    y = nr.conv2d_bias_activation(*ts, act, **geo)
    (y * nr.tensor(g.astype(np.float32), device="cuda")).sum().backward()
    return [y.numpy()] + [t.grad.numpy() for t in ts]


@pytest.mark.parametrize("mode", ["im2col", "cudnn"])
@pytest.mark.parametrize("act", ["none", "relu", "gelu"])
@pytest.mark.parametrize("geo", [dict(padding=1), dict(stride=2, padding=(2, 1), dilation=2)])
def test_conv_modes_match_torch(be, mode, act, geo):
    be.conv = mode
    x, w, b, g = _conv_case(act, geo)
    try:
        got = _run_ours(x, w, b, g, act, geo)
    except nr.BackendUnavailableError as e:
        pytest.skip(f"cuDNN is not usable on this machine: {e}")
    ts = [torch.tensor(v, requires_grad=True) for v in (x, w, b)]
    f = {"none": lambda v: v, "relu": torch.relu, "gelu": TF.gelu}[act]
    y = f(TF.conv2d(*ts, **geo))
    (y * torch.tensor(g)).sum().backward()
    for o, t, what in zip(got, [y] + [t.grad for t in ts], ("y", "dx", "dw", "db")):
        np.testing.assert_allclose(o, t.detach().numpy(), rtol=2e-5, atol=2e-5, err_msg=what)


def test_cudnn_is_reported(be):
    be.conv = "auto"
    x = nr.ones((1, 1, 4, 4), device="cuda")
    nr.conv2d(x, nr.ones((1, 1, 3, 3), device="cuda"))
    text = be.info()["conv"]
    print("conv:", text)
    assert text.startswith("cuDNN ") or "cuDNN unavailable: " in text


def test_conv_mode_knob_is_checked(be):
    with pytest.raises(nr.BackendUnavailableError, match="NUMR_CUDA_CONV"):
        be.conv = "winograd"


@pytest.mark.parametrize("shape", [(128, 32, 32, 32), (64, 256, 8, 8), (300, 7), (3, 5, 1000)])
def test_batch_norm_kernels_at_size(shape):
    r = np.random.default_rng(1)
    a = (r.normal(size=shape) * 3 + 2).astype(np.float32)
    g = r.normal(size=shape).astype(np.float32)
    bn = nn.BatchNorm2d(shape[1], device="cuda", activation="relu") if len(shape) == 4 else \
        nn.BatchNorm1d(shape[1], device="cuda", activation="relu")
    x = nr.tensor(a, device="cuda", requires_grad=True)
    (bn(x) * nr.tensor(g, device="cuda")).sum().backward()
    ref = (torch.nn.BatchNorm2d if len(shape) == 4 else torch.nn.BatchNorm1d)(shape[1]).double()
    xt = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    (torch.relu(ref(xt)) * torch.tensor(g, dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bn.weight.grad.numpy(), ref.weight.grad.numpy(), rtol=1e-5,
                               atol=1e-3)
    np.testing.assert_allclose(bn.running_mean.numpy(), ref.running_mean.numpy(), rtol=1e-6,
                               atol=1e-7)
    np.testing.assert_allclose(bn.running_var.numpy(), ref.running_var.numpy(), rtol=1e-6)


def _cnn(device):
    layers, c_in = [], 3
    for i, c in enumerate((8, 16)):
        layers += [nn.Conv2d(c_in, c, 3, padding=1, device=device, seed=i),
                   nn.BatchNorm2d(c, device=device, activation="relu"), nn.MaxPool2d(2)]
        c_in = c
    layers += [nn.Flatten(), nn.Linear(16 * 4 * 4, 10, device=device, seed=9)]
    return nn.Sequential(*layers)


@pytest.mark.parametrize("mode", ["im2col", "auto"])
def test_captured_cnn_step_matches_eager(be, mode):
    be.conv = mode
    r = np.random.default_rng(2)
    x = nr.tensor(r.normal(size=(8, 3, 16, 16)).astype(np.float32), device="cuda")
    y = nr.tensor(r.integers(0, 10, 8).astype(np.int32), device="cuda")
    results = []
    for capture in (False, True):
        model = _cnn("cuda")
        opt = nn.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

        def step(x, y):
            loss = nr.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        run = nr.capture(step) if capture else step
        losses = [run(x, y).item() for _ in range(4)]
        results.append((losses, model[1].running_var.numpy(), model[0].weight.numpy()))
    (l0, rv0, w0), (l1, rv1, w1) = results
    np.testing.assert_allclose(l1, l0, rtol=1e-5)
    np.testing.assert_allclose(rv1, rv0, rtol=1e-5)
    np.testing.assert_allclose(w1, w0, rtol=1e-5, atol=1e-6)
