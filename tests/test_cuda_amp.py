"""cuda mixed precision: float16 GEMMs through cublasGemmEx (tensor cores, float32 accumulation)
against float64 products of the same float16 operands, in every layout the backend passes to
cuBLAS (dense, transposed views, batched); an autocast training step recorded by nr.capture (the
direct cuBLAS path is what makes GEMMs capturable) and replayed with the eager step's results.
(The autocast tests of tests/test_autocast.py and tests/test_amp.py also run on cuda.) Skipped
where there is no usable CUDA device."""
import warnings

import numpy as np
import pytest

import numr_web as nr
from numr_web import nn

OK, WHY = nr.backends.probe("cuda")
pytestmark = pytest.mark.skipif(not OK, reason=f"cuda: {WHY}")
U16 = 2.0 ** -11


def _check_product(got, a, b):
    """got within float16's rounding of the exact product: the result rounded once (U16 |c|)
    plus, as cuBLAS may reduce split-K partial sums in the output type (torch's default allows
    it), one more rounding of the products' magnitude; float32's accumulation is far below."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    exact, mag = a @ b, np.abs(a) @ np.abs(b)
    err = np.abs(got.astype(np.float64) - exact)
    assert np.all(err <= U16 * np.abs(exact) + U16 * mag + 1e-7), float((err / mag).max())


@pytest.mark.parametrize("shape", [(64, 96, 80), (33, 70, 17), (1024, 256, 512)])
@pytest.mark.parametrize("layout", ["nn", "tn", "nt"])
def test_float16_matmul_on_tensor_cores(shape, layout):
    m, k, n = shape
    rng = np.random.default_rng(0)
    a = rng.standard_normal((k, m) if layout[0] == "t" else (m, k)).astype(np.float16)
    b = rng.standard_normal((n, k) if layout[1] == "t" else (k, n)).astype(np.float16)
    ta, tb = nr.tensor(a, device="cuda"), nr.tensor(b, device="cuda")
    ta = ta.T if layout[0] == "t" else ta
    tb = tb.T if layout[1] == "t" else tb
    c = nr.matmul(ta, tb)
    assert c.dtype is nr.float16 and c.shape == (m, n)
    _check_product(c.numpy(), a.T if layout[0] == "t" else a, b.T if layout[1] == "t" else b)


def test_float16_batched_matmul():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 3, 40, 24)).astype(np.float16)
    b = rng.standard_normal((4, 3, 24, 56)).astype(np.float16)
    c = nr.matmul(nr.tensor(a, device="cuda"), nr.tensor(b, device="cuda"))
    assert c.dtype is nr.float16
    _check_product(c.numpy(), a, b)
    bt = nr.tensor(np.ascontiguousarray(np.swapaxes(b, -1, -2)), device="cuda").transpose(-1, -2)
    _check_product(nr.matmul(nr.tensor(a, device="cuda"), bt).numpy(), a, b)


def test_autocast_step_is_captured_and_replays_the_eager_step():
    def make():
        model = nn.MLP([32, 64, 10], activation="gelu", device="cuda", seed=0)
        return model, nn.optim.SGD(model.parameters(), lr=0.1)

    rng = np.random.default_rng(2)
    x = nr.tensor(rng.standard_normal((128, 32)).astype(np.float32), device="cuda")
    y = nr.tensor(rng.integers(0, 10, 128).astype(np.int32), device="cuda")

    def step_of(model, opt):
        def step(x, y):
            with nr.autocast("cuda"):
                loss = nr.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        return step

    m1, o1 = make()
    m2, o2 = make()
    eager = step_of(m1, o1)
    captured = nr.capture(step_of(m2, o2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # a fallback to eager would warn
        for _ in range(4):
            l1, l2 = eager(x, y), captured(x, y)
            assert l1.item() == l2.item()
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy())


def test_gradscaler_step_with_a_capturable_adamw_is_captured():
    """scaler.scale(loss).backward(); scaler.step(opt); scaler.update() with AdamW(capturable=
    True) is recorded by nr.capture (nothing is read back: a skipped step is undone on the
    device) and replays the eager step bit for bit, through a step whose gradients overflow
    float16 (skipped, scale halved) and finite ones."""
    def make():
        model = nn.MLP([32, 64, 10], activation="gelu", device="cuda", seed=0)
        opt = nn.optim.AdamW(model.parameters(), lr=1e-2, capturable=True)
        return model, opt, nr.amp.GradScaler(init_scale=2.0 ** 16, growth_interval=2)

    rng = np.random.default_rng(5)
    x = nr.tensor(rng.standard_normal((128, 32)).astype(np.float32), device="cuda")
    y = nr.tensor(rng.integers(0, 10, 128).astype(np.int32), device="cuda")

    def step_of(model, opt, scaler):
        def step(x, y, k):
            with nr.autocast("cuda"):
                loss = nr.cross_entropy(model(x * k), y)
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            return loss
        return step

    m1, o1, s1 = make()
    m2, o2, s2 = make()
    eager, captured = step_of(m1, o1, s1), nr.capture(step_of(m2, o2, s2))
    big = nr.tensor(np.float32(6e4), device="cuda")        # float16 activations overflow
    one = nr.tensor(np.float32(1.0), device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # a fallback to eager would warn
        for k in (one, one, one, big, one, one):
            l1, l2 = eager(x, y, k), captured(x, y, k)
            np.testing.assert_array_equal(l1.numpy(), l2.numpy())
            assert s1.get_scale() == s2.get_scale()
    assert s1.get_scale() == 2.0 ** 17        # doubled after steps 2 and 6, halved at step 4
    for p, q in zip(m1.parameters(), m2.parameters()):
        assert np.isfinite(q.numpy()).all()
        np.testing.assert_array_equal(p.numpy(), q.numpy())


@pytest.mark.parametrize("n", [1, 7, 4096 * 33 + 5])
def test_float32_float16_casts_bit_for_bit(n):
    """autocast's casts (the vectorised cast kernel: float32 -> float16 rounds once, to nearest
    even; float16 -> float32 is exact) give numpy's bits, subnormals, infinities, overflow and
    the odd tail included, from an aligned array and from an offset view (scalar accesses)."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(n) * rng.choice([1e-7, 1e-3, 1.0, 1e3, 1e5], n)).astype(np.float32)
    x[:min(n, 6)] = np.array([np.inf, -np.inf, 65520.0, 6e-8, -3e-8, 2.0 ** -25], np.float32)[:min(n, 6)]
    for arr in (x, x[1:]):
        t = nr.tensor(x, device="cuda")
        t = t if arr is x else t[1:]
        h = t.to(nr.float16)
        assert np.array_equal(h.numpy().view(np.uint16), arr.astype(np.float16).view(np.uint16))
        back = h.to(nr.float32)
        assert np.array_equal(back.numpy().view(np.uint32),
                              arr.astype(np.float16).astype(np.float32).view(np.uint32))
