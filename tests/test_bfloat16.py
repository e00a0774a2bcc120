"""bfloat16 on the devices that hold it (cpu; cuda through CuPy): its conversions and promotions against torch's, its arithmetic
(computed in float32, rounded once) against float64 truth and torch's bfloat16 results, autograd
and a layer's step, the safetensors code, and the typed errors where a device does not hold it."""
import math
import struct

import ml_dtypes
import numpy as np
import pytest
import torch

import numr_web as nr
from numr_web.errors import DTypeError

BF16 = nr.bfloat16


def _holding_devices():
    """cpu, and cuda where there is one (CuPy holds ml_dtypes' bfloat16); webgpu has no storage
    for it (test_devices_without_bfloat16_refuse_it_with_a_typed_error)."""
    ok, why = nr.backends.probe("cuda")
    return [pytest.param("cpu", id="cpu"),
            pytest.param("cuda", id="cuda", marks=[] if ok else [pytest.mark.skip(reason=f"cuda: {why}")])]


@pytest.fixture(params=_holding_devices())
def dev(request):
    return request.param


def _bits(t):
    """The 16-bit patterns of a numr or torch bfloat16 tensor, as a list of ints."""
    if isinstance(t, torch.Tensor):
        return t.contiguous().view(torch.int16).numpy().astype(np.uint16).tolist()
    return t.numpy().view(np.uint16).tolist()


def _ulp(x):
    """bfloat16's spacing at |x| (8 significant bits), elementwise, in float64."""
    x = np.abs(np.asarray(x, np.float64))
    e = np.floor(np.log2(np.maximum(x, 2.0 ** -126)))
    return 2.0 ** (e - 7)


def _values(n=2000, seed=0):
    """Floats across bfloat16's range: random exponents and fractions, ties and specials."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * 2.0 ** rng.integers(-130, 128, n)
    ties = (1 + (2 * rng.integers(0, 128, 50) + 1) * 2.0 ** -8) * 2.0 ** rng.integers(-20, 20, 50)
    special = [0.0, -0.0, math.inf, -math.inf, 3.3895313892515355e38, 3.3961775292304223e38,
               3.39e38, -3.4e38, 1e39, 2.0 ** -133, 2.0 ** -140, 1.0 + 2.0 ** -8 + 2.0 ** -30]
    return np.concatenate([x, ties, special])


# -- storage and conversion -------------------------------------------------------------------------
def test_values_round_to_bfloat16_as_torch_rounds_them(dev):
    v = _values()
    ref = _bits(torch.tensor(v.tolist(), dtype=torch.bfloat16))
    assert _bits(nr.tensor(v.tolist(), dtype=BF16, device=dev)) == ref     # Python floats
    assert _bits(nr.tensor(v, dtype=BF16, device=dev)) == ref              # a float64 array
    with np.errstate(over="ignore"):
        v32 = v.astype(np.float32)
    assert _bits(nr.tensor(v32, device=dev).astype(BF16)) == \
        _bits(torch.tensor(v32).to(torch.bfloat16))                        # float32 tensor
    assert _bits(nr.tensor(v, dtype=nr.float64, device=dev).astype(BF16)) == \
        _bits(torch.tensor(v).to(torch.bfloat16))                          # float64 tensor
    ints = np.array([0, 1, -7, 257, 2 ** 24 + 1, 2 ** 31 - 1, -2 ** 31 + 3], np.int32)
    assert _bits(nr.tensor(ints, device=dev).astype(BF16)) == \
        _bits(torch.tensor(ints).to(torch.bfloat16))
    nan = nr.tensor([math.nan], dtype=BF16, device=dev).tolist()[0]
    assert nan != nan


def test_read_back_and_widened_exactly(dev):
    v = _values(500, seed=1)
    t = nr.tensor(v, dtype=BF16, device=dev)
    back = np.array(torch.tensor(v.tolist(), dtype=torch.bfloat16).double().numpy())
    same = lambda a, b: np.array_equal(np.asarray(a, np.float64), b, equal_nan=True)  # noqa: E731
    assert same(t.tolist(), back)
    assert same(t.float().numpy(), back) and t.float().dtype is nr.float32
    assert same(t.numpy().astype(np.float64), back) and t.numpy().dtype == ml_dtypes.bfloat16
    assert t.dtype is BF16 and t.element_size() == 2
    assert nr.tensor(np.array([1.5, -2], ml_dtypes.bfloat16), device=dev).dtype is BF16  # ml_dtypes'


def test_promotion_matches_torch(dev):
    kinds = {"bool": (True, False), "int32": (1, 2), "float16": (1.5, 2.0),
             "bfloat16": (1.5, 2.0), "float32": (1.5, 2.0), "float64": (1.5, 2.0)}
    for a in kinds:
        for b in kinds:
            ours = (nr.tensor(kinds[a], dtype=a, device=dev) +
                    nr.tensor(kinds[b], dtype=b, device=dev)).dtype.name
            theirs = torch.promote_types(getattr(torch, a), getattr(torch, b))
            assert ours == str(theirs).removeprefix("torch."), (a, b)
    x = nr.tensor([1.0, 2.0], dtype=BF16, device=dev)
    assert (x + 1).dtype is BF16 and (x * 2.5).dtype is BF16 and (x > 1).dtype is nr.bool_
    assert (x + nr.tensor(1.0, dtype=nr.float32, device=dev)).dtype is BF16     # a 0-d tensor does not decide


# -- arithmetic -------------------------------------------------------------------------------------
def _pair(dev, n=4096, seed=2):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n) * 4
    b = rng.standard_normal(n) * 4 + 0.1
    return (nr.tensor(a, dtype=BF16, device=dev), nr.tensor(b, dtype=BF16, device=dev),
            torch.tensor(a, dtype=torch.bfloat16), torch.tensor(b, dtype=torch.bfloat16))


def test_basic_arithmetic_is_bit_identical_to_torch(dev):
    """+ - * / and the scalar forms are correctly rounded float32 operations rounded once more:
    the same bits as torch's."""
    a, b, ta, tb = _pair(dev)
    for op in ("add", "sub", "mul", "div", "maximum", "minimum"):
        assert _bits(getattr(nr, op)(a, b)) == _bits(getattr(torch, op)(ta, tb)), op
    for s in (0.1, 3.0, 1e10, -2.7):
        assert _bits(a + s) == _bits(ta + s), s        # the scalar rounded to bfloat16 first
        assert _bits(a * s) == _bits(ta * s), s        # ... but not in x * s and x / s
        assert _bits(a / s) == _bits(ta / s), s
        assert _bits(s - a) == _bits(s - ta), s
    assert _bits(-a) == _bits(-ta) and _bits(a.abs()) == _bits(ta.abs())
    assert _bits(a.relu()) == _bits(ta.relu())


@pytest.mark.parametrize("op", ["exp", "log", "sqrt", "tanh", "sigmoid", "sin", "erf", "rsqrt",
                                "reciprocal", "gelu", "silu", "softplus"])
def test_unary_functions_within_an_ulp_of_float64_truth(op, dev):
    """Each is evaluated in float32 and rounded once: at most half a bfloat16 ulp from the truth
    plus float32's error, so within one ulp; and nearly always torch's bits."""
    a, _, ta, _ = _pair(dev, seed=3)
    x = a.float().numpy().astype(np.float64)
    if op in ("log", "sqrt", "rsqrt"):
        a, ta, x = a.abs() + 0.01, ta.abs() + 0.01, np.abs(x)
        x = (torch.tensor(x, dtype=torch.bfloat16) + 0.01).double().numpy()
    truth = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh,
             "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "sin": np.sin,
             "erf": np.vectorize(math.erf), "rsqrt": lambda v: 1 / np.sqrt(v),
             "reciprocal": lambda v: 1 / v,
             "gelu": lambda v: v * 0.5 * (1 + np.vectorize(math.erf)(v / math.sqrt(2))),
             "silu": lambda v: v / (1 + np.exp(-v)),
             "softplus": lambda v: np.log1p(np.exp(v))}[op](x)
    fn = {"gelu": nr.nn.functional.gelu, "silu": nr.nn.functional.silu,
          "softplus": nr.nn.functional.softplus}.get(op) or getattr(nr, op)
    tfn = {"gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu,
           "softplus": torch.nn.functional.softplus}.get(op) or getattr(torch, op)
    y = fn(a)
    assert y.dtype is BF16
    got = y.float().numpy().astype(np.float64)
    # gelu's 1 + erf(x / sqrt 2) cancels in float32 for x << 0: an absolute error of u32 |x|
    slack = 2.0 ** -23 * np.abs(x) if op == "gelu" else 0.0
    assert np.all(np.abs(got - truth) <= _ulp(truth) + slack), op
    kept = np.abs(truth) >= 2.0 ** -8 * np.abs(x) if op == "gelu" else slice(None)
    agree = np.mean((np.array(_bits(y)) == np.array(_bits(tfn(ta))))[kept])
    assert agree >= 0.99, (op, agree)


def test_reductions_accumulate_in_float32(dev):
    rng = np.random.default_rng(4)
    v = rng.random((64, 1000)) + 0.5                        # positive: no cancellation
    t = nr.tensor(v, dtype=BF16, device=dev)
    x = t.float().numpy().astype(np.float64)               # the values bfloat16 holds
    for got, truth in ((t.sum(), x.sum()), (t.sum(1), x.sum(1)), (t.sum(0), x.sum(0)),
                       (t.mean(1), x.mean(1))):
        assert got.dtype is BF16
        g = got.float().numpy().astype(np.float64)
        # half an ulp from the final rounding, a few float32 roundings of the sum before it
        assert np.all(np.abs(g - truth) <= 0.5 * _ulp(truth) + 2.0 ** -20 * np.abs(truth))
    assert t.max().item() == x.max() and t.argmax(1).tolist() == x.argmax(1).tolist()
    sm = t.softmax(1).float().numpy().astype(np.float64)
    e = np.exp(x - x.max(1, keepdims=True))
    truth = e / e.sum(1, keepdims=True)
    assert np.all(np.abs(sm - truth) <= _ulp(truth))


def test_matmul_accumulates_in_float32_and_rounds_once(dev):
    rng = np.random.default_rng(5)
    a = nr.tensor(rng.standard_normal((3, 40, 96)), dtype=BF16, device=dev)
    b = nr.tensor(rng.standard_normal((96, 24)), dtype=BF16, device=dev)
    A, B = (t.float().numpy().astype(np.float64) for t in (a, b))
    truth, mag = A @ B, np.abs(A) @ np.abs(B)
    got = (a @ b)
    assert got.dtype is BF16
    err = np.abs(got.float().numpy() - truth)
    # the final rounding (half an ulp) and float32's accumulation (K u32 of the magnitudes)
    assert np.all(err <= 0.5 * _ulp(truth) + 96 * 2.0 ** -24 * mag)


def test_linear_gelu_step_against_torch(dev):
    """A Linear + GELU layer's forward and backward in bfloat16, numr against torch: both round
    the GEMMs' float32 results, the activation and its gradient once to bfloat16. The outputs
    differ by at most an ulp (a float32 sum on the other side of a rounding boundary); a
    gradient by that ulp plus what a differently rounded factor of each of its products (at most
    2 U, U = 2^-8, of the product, z's rounding carried through GELU') adds up to."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((32, 48))
    lin = nr.nn.Linear(48, 40, seed=1).to(dev).bfloat16()
    assert lin.weight.dtype is BF16 and lin.bias.dtype is BF16
    tl = torch.nn.Linear(48, 40).to(torch.bfloat16)
    with torch.no_grad():
        tl.weight.copy_(torch.tensor(lin.weight.float().numpy()).to(torch.bfloat16))
        tl.bias.copy_(torch.tensor(lin.bias.float().numpy()).to(torch.bfloat16))
    xn = nr.tensor(x, dtype=BF16, device=dev).requires_grad_()
    xt = torch.tensor(x, dtype=torch.bfloat16).requires_grad_()
    y = nr.nn.functional.gelu(lin(xn))
    ty = torch.nn.functional.gelu(tl(xt))
    g = rng.standard_normal((32, 40))
    y.backward(nr.tensor(g, dtype=BF16, device=dev))
    ty.backward(torch.tensor(g, dtype=torch.bfloat16))
    U = 2.0 ** -8
    X, W = xt.detach().double().numpy(), tl.weight.detach().double().numpy()
    G = np.abs(torch.tensor(g, dtype=torch.bfloat16).double().numpy())
    dz = G * 1.2                                            # |GELU'| <= 1.13
    mags = [0 * G, dz @ np.abs(W), dz.T @ np.abs(X), dz.sum(0)]
    pairs = [(y, ty), (xn.grad, xt.grad), (lin.weight.grad, tl.weight.grad),
             (lin.bias.grad, tl.bias.grad)]
    for (ours, theirs), mag in zip(pairs, mags):
        assert ours.dtype is BF16
        o, t = ours.float().detach().numpy().astype(np.float64), theirs.detach().double().numpy()
        err = np.abs(o - t)
        assert np.all(err <= _ulp(np.maximum(np.abs(o), np.abs(t))) + 2 * U * mag)


def test_a_model_trains_in_bfloat16(dev):
    """A small MLP held in bfloat16 end to end (parameters, activations, gradients, SGD):
    its loss falls as the float32 model's does."""
    rng = np.random.default_rng(7)
    x = nr.tensor(rng.standard_normal((64, 10)), dtype=BF16, device=dev)
    y = nr.tensor(rng.integers(0, 3, 64).astype(np.int32), device=dev)
    losses = {}
    for dtype in ("float32", "bfloat16"):
        m = nr.nn.MLP([10, 32, 3], activation="relu", seed=2).to(device=dev, dtype=dtype)
        opt = nr.nn.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        out = []
        for _ in range(30):
            loss = nr.cross_entropy(m(x.astype(dtype)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.item())
        assert all(p.dtype.name == dtype for p in m.parameters())
        losses[dtype] = out
    assert losses["bfloat16"][-1] < 0.6 * losses["bfloat16"][0]
    assert abs(losses["bfloat16"][-1] - losses["float32"][-1]) <= 0.1 * losses["float32"][0]


# -- files and devices ------------------------------------------------------------------------------
def test_safetensors_bfloat16_is_the_reference_writers_bytes():
    from safetensors.torch import load as st_load, save as st_save
    v = _values(64, seed=8)
    v[~np.isfinite(v)] = 1.0
    ours = {"b": nr.tensor(v, dtype=BF16), "h": nr.tensor([1.5, 2.5], dtype=nr.float16),
            "i": nr.tensor([3, 4], dtype=nr.int32)}
    theirs = {"b": torch.tensor(v, dtype=torch.bfloat16),
              "h": torch.tensor([1.5, 2.5], dtype=torch.float16),
              "i": torch.tensor([3, 4], dtype=torch.int32)}
    raw = nr.save_bytes(ours)
    assert raw == st_save(theirs)                         # the reference's order and bytes
    assert _bits(st_load(raw)["b"]) == _bits(theirs["b"])
    back = nr.load(raw, dtype=BF16)
    assert back["b"].dtype is BF16 and _bits(back["b"]) == _bits(theirs["b"])
    wide = nr.load(raw)["b"]                              # the default: float32, exactly
    assert wide.dtype is nr.float32 and wide.tolist() == ours["b"].float().tolist()
    f32 = nr.load(st_save({"f": torch.tensor(v, dtype=torch.float32)}), dtype=BF16)["f"]
    assert _bits(f32) == _bits(torch.tensor(v, dtype=torch.float32).to(torch.bfloat16))


def test_devices_without_bfloat16_refuse_it_with_a_typed_error(device):
    if device in ("cpu", "cuda"):                  # these hold it (ml_dtypes is installed here)
        assert nr.zeros(3, dtype=BF16, device=device).dtype is BF16
        assert nr.ones(3, dtype=BF16).to(device).tolist() == [1.0, 1.0, 1.0]
        return
    with pytest.raises(DTypeError, match="bfloat16.*float32"):
        nr.zeros(3, dtype=BF16, device=device)
    with pytest.raises(DTypeError, match="bfloat16"):
        nr.tensor([1.0, 2.0], dtype=BF16, device=device)
    with pytest.raises(DTypeError, match="bfloat16"):
        nr.ones(3, device=device).astype(BF16)
    with pytest.raises(DTypeError, match="bfloat16"):
        nr.ones(3, dtype=BF16).to(device)
    with pytest.raises(DTypeError, match="bfloat16"):
        nr.load(nr.save_bytes({"b": nr.ones(2, dtype=BF16)}), device=device, dtype=BF16)


def test_bfloat16_bits_helpers_round_to_nearest_even():
    """The pure-Python conversion (the browser has no numpy) against struct's float32 and a
    hand-computed tie."""
    one_plus_half_ulp = 1.0 + 2.0 ** -8                    # a tie: to even (1.0)
    three_halves_ulp = 1.0 + 3 * 2.0 ** -8                 # a tie: to even (1 + 2^-6)
    assert nr.tensor([one_plus_half_ulp, three_halves_ulp], dtype=BF16).tolist() == \
        [1.0, 1.0 + 2.0 ** -6]
    assert struct.unpack("<f", struct.pack("<I", _bits(nr.tensor([0.1], dtype=BF16))[0] << 16))[0] \
        == 0.10009765625


def test_cuda_float64_cast_keeps_the_subnormals_cupys_float32_step_flushes():
    """cuda's float64 -> bfloat16 cast without a GPU: its method on numpy, under a parent whose
    cast flushes float32's subnormals to zero as CuPy's kernels (-ftz=true) do; its bits are
    torch's (float64 -> float32 -> bfloat16, nothing flushed) across the subnormal range."""
    from numr_web.backends.cuda.bfloat16 import CudaBfloat16

    class FlushingCast:
        xp = np
        _np_dtype = {BF16: ml_dtypes.bfloat16}

        def astype(self, h, dtype):
            f = h.astype(np.float32)
            tiny = np.abs(f) < np.float32(2.0 ** -126)
            f[tiny] = np.copysign(np.float32(0), f[tiny])       # what -ftz=true does to them
            return f.astype(ml_dtypes.bfloat16)

    class HostCast(CudaBfloat16, FlushingCast):
        pass

    rng = np.random.default_rng(9)
    x = np.concatenate([rng.standard_normal(20000) * 2.0 ** rng.integers(-160, -110, 20000),
                        [2.0 ** -126 * (1 - 2.0 ** -30), 2.0 ** -149, 2.0 ** -150, -2.0 ** -140,
                         2.0 ** -150 * 1.0000001, 0.0, -0.0, math.nan, math.inf, 1.5]])
    got = HostCast().astype(x, BF16)
    assert got.dtype == ml_dtypes.bfloat16
    ok = ~np.isnan(x)                                      # (a NaN is a NaN: its bits may differ)
    ref = np.array(_bits(torch.tensor(x[ok]).to(torch.bfloat16)))
    assert np.isnan(got[~ok].astype(np.float32)).all()
    assert np.array_equal(got[ok].view(np.uint16), ref)
    assert not np.array_equal(FlushingCast().astype(x, BF16)[ok].view(np.uint16), ref)  # flushed
