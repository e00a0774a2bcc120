"""Every op on every device: forward against an independent float64 reference (numpy closed forms
written here; torch for the activations), gradients against finite differences of that reference.
One table, one helper, every device (tinygrad's test_ops)."""
import math

import numpy as np
import pytest
import torch

import numr_web as nr

from helpers import check_op, fdtype

rng = np.random.default_rng(0)


def R(*shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape)


POS = dict(lo=0.5, hi=2.0)

# torch's float64 functions: the independent reference for every activation of the ACT table
TORCH_ACT = {
    "none": lambda z: z,
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "silu": torch.nn.functional.silu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda z: torch.nn.functional.gelu(z, approximate="tanh"),
    "leaky_relu": lambda z: torch.nn.functional.leaky_relu(z, 0.01),
    "elu": torch.nn.functional.elu,
    "softplus": torch.nn.functional.softplus,
    "mish": torch.nn.functional.mish,
    "hardswish": torch.nn.functional.hardswish,
    "selu": torch.nn.functional.selu,
    "celu": torch.nn.functional.celu,
    "softsign": torch.nn.functional.softsign,
    "tanhshrink": torch.nn.functional.tanhshrink,
}
KINKED = {"relu", "leaky_relu", "elu", "hardswish", "selu", "celu", "softsign"}   # FD avoid the kink


def torch_act(name, order=0):
    """act, act' or act'' of torch's float64 function, as a numpy function."""
    def f(z):
        x = torch.tensor(z, dtype=torch.float64, requires_grad=order > 0)
        y = TORCH_ACT[name](x)
        for _ in range(order):
            (y,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        return y.detach().numpy()
    return f


def away_from_kinks(*shape):
    x = R(*shape, lo=-4, hi=4)
    for k in (0.0, -3.0, 3.0):                   # relu/leaky/elu at 0, hardswish at +-3
        x = np.where(np.abs(x - k) < 0.05, x + 0.1, x)
    return x


CASES = [
    ("add", ["add"], lambda a, b: a + b, np.add, [R(3, 4), R(3, 4)]),
    ("add_bcast", ["add"], lambda a, b: a + b, np.add, [R(2, 3, 4), R(4)]),
    ("add_bcast2", ["add"], lambda a, b: a + b, np.add, [R(3, 1), R(1, 4)]),
    ("sub", ["sub"], lambda a, b: a - b, np.subtract, [R(3, 4), R(1, 4)]),
    ("rsub_scalar", ["sub"], lambda a: 2.5 - a, lambda a: 2.5 - a, [R(3, 4)]),
    ("mul", ["mul"], lambda a, b: a * b, np.multiply, [R(2, 3), R(2, 1)]),
    ("mul_scalar", ["mul"], lambda a: a * 3.0, lambda a: a * 3.0, [R(5)]),
    ("div", ["div"], lambda a, b: a / b, np.divide, [R(3, 4), R(3, 4, **POS)]),
    ("rdiv_scalar", ["div"], lambda a: 1.0 / a, lambda a: 1.0 / a, [R(6, **POS)]),
    ("pow", ["pow"], lambda a, b: a ** b, np.power, [R(3, 4, **POS), R(3, 4)]),
    ("pow_scalar", ["pow"], lambda a: a ** 3, lambda a: a ** 3, [R(3, 4)]),
    ("rpow_scalar", ["pow"], lambda a: 2.0 ** a, lambda a: 2.0 ** a, [R(3, 4)]),
    ("maximum", ["maximum"], nr.maximum, np.maximum, [R(3, 4), R(3, 4)]),
    ("minimum", ["minimum"], nr.minimum, np.minimum, [R(3, 4), R(4)]),
    ("neg", ["neg"], lambda a: -a, np.negative, [R(3, 4)]),
    ("abs", ["abs"], abs, np.abs, [R(3, 4)]),
    ("exp", ["exp"], nr.exp, np.exp, [R(3, 4)]),
    ("log", ["log"], nr.log, np.log, [R(3, 4, **POS)]),
    ("sqrt", ["sqrt"], nr.sqrt, np.sqrt, [R(3, 4, **POS)]),
    ("sin", ["sin"], nr.sin, np.sin, [R(3, 4)]),
    ("cos", ["cos"], nr.cos, np.cos, [R(3, 4)]),
    ("sign", ["sign"], nr.sign, np.sign, [R(3, 4)]),
    ("erf", ["erf"], nr.erf, np.vectorize(math.erf), [R(3, 4)]),
    ("floor", ["floor"], lambda a: nr.floor(a) + a, lambda a: np.floor(a) + a, [R(3, 4, lo=-5, hi=5)]),
    ("ceil", ["ceil"], lambda a: nr.ceil(a) * a, lambda a: np.ceil(a) * a, [R(3, 4, lo=-5, hi=5)]),
    ("round", ["round"], lambda a: nr.round(a) - a, lambda a: np.rint(a) - a, [R(3, 4, lo=-5, hi=5)]),
    ("trunc", ["trunc"], lambda a: nr.trunc(a) + a, lambda a: np.trunc(a) + a, [R(3, 4, lo=-5, hi=5)]),
    ("reciprocal", ["reciprocal"], nr.reciprocal, lambda a: 1 / a, [R(3, 4, **POS)]),
    ("exp2", ["exp2"], nr.exp2, lambda a: 2.0 ** a, [R(3, 4)]),
    ("log2", ["log2"], nr.log2, lambda a: np.log(a) / math.log(2), [R(3, 4, **POS)]),
    ("log10", ["log10"], nr.log10, lambda a: np.log(a) / math.log(10), [R(3, 4, **POS)]),
    ("tan", ["tan"], nr.tan, lambda a: np.sin(a) / np.cos(a), [R(3, 4, lo=-1.2, hi=1.2)]),
    ("sinh", ["sinh"], nr.sinh, lambda a: (np.exp(a) - np.exp(-a)) / 2, [R(3, 4)]),
    ("cosh", ["cosh"], nr.cosh, lambda a: (np.exp(a) + np.exp(-a)) / 2, [R(3, 4)]),
    ("asin", ["asin"], nr.asin, lambda a: np.arctan(a / np.sqrt(1 - a * a)), [R(3, 4, lo=-0.9, hi=0.9)]),
    ("acos", ["acos"], nr.acos, lambda a: np.pi / 2 - np.arctan(a / np.sqrt(1 - a * a)),
     [R(3, 4, lo=-0.9, hi=0.9)]),
    ("atan", ["atan"], nr.atan, lambda a: np.arcsin(a / np.sqrt(1 + a * a)), [R(3, 4, lo=-5, hi=5)]),
    ("cbrt", ["cbrt"], nr.cbrt, lambda a: np.sign(a) * np.abs(a) ** (1 / 3),
     [away_from_kinks(3, 4)]),
    ("cbrt_method", ["cbrt"], lambda a: a.cbrt(), lambda a: np.sign(a) * np.abs(a) ** (1 / 3),
     [R(3, 4, **POS)]),
    ("logit", ["logit"], nr.logit, lambda p: np.log(p) - np.log1p(-p), [R(3, 4, lo=0.05, hi=0.95)]),
    ("sinc", ["sinc"], nr.sinc, lambda a: np.sin(np.pi * a) / (np.pi * a), [R(3, 4, lo=0.1, hi=3)]),
    ("sinc_negative", ["sinc"], lambda a: a.sinc(), lambda a: np.sin(np.pi * a) / (np.pi * a),
     [R(3, 4, lo=-3, hi=-0.1)]),
    ("xlogy", ["xlogy"], nr.xlogy, lambda a, b: a * np.log(b), [R(3, 4), R(3, 4, lo=0.1, hi=3)]),
    ("xlogy_bcast", ["xlogy"], lambda a, b: a.xlogy(b), lambda a, b: a * np.log(b),
     [R(2, 3, 4), R(4, lo=0.1, hi=3)]),
    ("xlogy_scalar", ["xlogy"], lambda b: nr.xlogy(2.5, b), lambda b: 2.5 * np.log(b),
     [R(3, 4, lo=0.1, hi=3)]),
    ("fmod", ["fmod"], nr.fmod, np.fmod, [R(3, 4, lo=-5, hi=5), R(3, 4, **POS)]),
    ("atan2", ["atan2"], nr.atan2, lambda a, b: 2 * np.arctan(a / (np.sqrt(a * a + b * b) + b)),
     [R(3, 4), R(3, 4, **POS)]),
    ("floor_divide", ["floor_divide"], lambda a, b: (a // b) * a, lambda a, b: np.floor_divide(a, b) * a,
     [R(3, 4, lo=-5, hi=5), R(3, 4, **POS)]),
    ("remainder", ["remainder"], lambda a, b: a % b, np.remainder, [R(3, 4, lo=-5, hi=5), R(3, 4, **POS)]),
    ("remainder_scalar", ["remainder"], lambda a: a % 1.5, lambda a: np.remainder(a, 1.5), [R(3, 4, lo=-5, hi=5)]),
    ("where", ["where", "gt"], lambda a, b: nr.where(a > 0, a, b), lambda a, b: np.where(a > 0, a, b),
     [R(3, 4), R(3, 4)]),
    ("sum_all", ["reduce"], lambda a: a.sum(), np.sum, [R(3, 4)]),
    ("sum_axis", ["reduce"], lambda a: a.sum(axis=1), lambda a: a.sum(axis=1), [R(2, 3, 4)]),
    ("sum_axes_keep", ["reduce"], lambda a: a.sum(axis=(0, 2), keepdims=True),
     lambda a: a.sum(axis=(0, 2), keepdims=True), [R(2, 3, 4)]),
    ("mean", ["reduce"], lambda a: a.mean(axis=-1), lambda a: a.mean(axis=-1), [R(3, 5)]),
    ("max", ["reduce"], lambda a: a.max(axis=0), lambda a: a.max(axis=0), [R(4, 3)]),
    ("min_keep", ["reduce"], lambda a: a.min(axis=1, keepdims=True),
     lambda a: a.min(axis=1, keepdims=True), [R(4, 3)]),
    ("max_all", ["reduce"], lambda a: a.max(), np.max, [R(4, 3)]),
    ("softmax", ["softmax"], lambda a: nr.softmax(a, axis=-1),
     lambda a: np.exp(a - a.max(-1, keepdims=True)) / np.exp(a - a.max(-1, keepdims=True)).sum(-1, keepdims=True),
     [R(3, 5)]),
    ("softmax_axis0", ["softmax"], lambda a: nr.softmax(a, axis=0),
     lambda a: np.exp(a) / np.exp(a).sum(0, keepdims=True), [R(4, 3)]),
    ("log_softmax", ["softmax"], lambda a: nr.log_softmax(a),
     lambda a: a - a.max(-1, keepdims=True) - np.log(np.exp(a - a.max(-1, keepdims=True)).sum(-1, keepdims=True)),
     [R(3, 5)]),
    ("matmul", ["matmul"], lambda a, b: a @ b, np.matmul, [R(3, 4), R(4, 5)]),
    ("matmul_batched_bcast", ["matmul"], lambda a, b: a @ b, np.matmul, [R(2, 3, 4), R(4, 2)]),
    ("matmul_batch_bcast2", ["matmul"], lambda a, b: a @ b, np.matmul, [R(2, 1, 3, 4), R(3, 4, 2)]),
    ("matmul_vec", ["matmul"], lambda a, b: a @ b, np.matmul, [R(3, 4), R(4)]),
    ("reshape", ["reshape"], lambda a: a.reshape(4, -1) * 1.5, lambda a: a.reshape(4, -1) * 1.5, [R(2, 6)]),
    ("transpose", ["permute"], lambda a: a.transpose(0, 1) * a.T, lambda a: a.T * a.T, [R(3, 3)]),
    ("permute", ["permute"], lambda a: a.permute(2, 0, 1) * 2, lambda a: a.transpose(2, 0, 1) * 2, [R(2, 3, 4)]),
    ("expand", ["expand"], lambda a: a.expand(3, 2, 4) * 1.0, lambda a: np.broadcast_to(a, (3, 2, 4)) * 1.0, [R(2, 1)]),
    ("slice", ["slice", "unslice"], lambda a: a[1:, ::2] * 2, lambda a: a[1:, ::2] * 2, [R(4, 5)]),
    ("index_int", ["slice"], lambda a: a[1, ..., None], lambda a: a[1, ..., None], [R(3, 4)]),
    ("split", ["split", "concat"], lambda a: (lambda p: p[0] * 2 + p[2])(a.split([2, 1, 2], dim=1)),
     lambda a: a[:, :2] * 2 + a[:, 3:], [R(3, 5)]),          # the unused piece's gradient is 0
    ("chunk", ["split", "concat"], lambda a: (lambda p: p[1] * p[0])(a.chunk(2, dim=0)),
     lambda a: a[2:] * a[:2], [R(4, 3)]),
    ("concat", ["concat"], lambda a, b: nr.concat([a, b], axis=1), lambda a, b: np.concatenate([a, b], 1),
     [R(2, 3), R(2, 2)]),
    ("stack", ["concat", "reshape"], lambda a, b: nr.stack([a, b], axis=0), lambda a, b: np.stack([a, b]),
     [R(2, 3), R(2, 3)]),
    ("astype", ["astype"], lambda a: a.astype("float16").astype(a.dtype) * 1.0,
     lambda a: a.astype(np.float16).astype(np.float64), [R(3, 3)], dict(grad=False)),
    ("astype_grad", ["astype"], lambda a: a.astype("float32") * 2.0, lambda a: a * 2.0, [R(3, 3)],
     dict(fwd_tol=dict(rtol=1.2e-7, atol=0))),                     # one float32 rounding
]
for _name in nr.ACT:
    assert _name in TORCH_ACT, f"add a torch reference for activation {_name}"
    CASES.append((f"act_{_name}", ["activation", "act_backward"],
                  lambda a, n=_name: nr.activation(a, n), torch_act(_name), [away_from_kinks(3, 7)]))
    CASES.append((f"act_dz_{_name}", ["activation"], lambda a, n=_name: nr.activation(a, n, "dz"),
                  torch_act(_name, 1), [away_from_kinks(3, 7)]))
    CASES.append((f"fused_{_name}", ["matmul_bias_activation", "act_backward"],
                  lambda a, b, c, n=_name: nr.matmul_bias_activation(a, b, c, n),
                  lambda a, b, c, n=_name: torch_act(n)(a @ b + c), [R(4, 3), R(3, 5), R(5)]))
CASES += [
    ("fused_batched", ["matmul_bias_activation"], lambda a, b, c: nr.matmul_bias_activation(a, b, c, "gelu"),
     lambda a, b, c: torch_act("gelu")(a @ b + c), [R(2, 3, 4), R(4, 5), R(5)]),
    ("fused_batched_b", ["matmul_bias_activation"], lambda a, b, c: nr.matmul_bias_activation(a, b, c, "silu"),
     lambda a, b, c: torch_act("silu")(a @ b + c), [R(2, 3, 4), R(2, 4, 5), R(5)]),
    ("fused_nobias", ["matmul_bias_activation"], lambda a, b: nr.matmul_bias_activation(a, b, None, "tanh"),
     lambda a, b: np.tanh(a @ b), [R(3, 4), R(4, 2)]),
    ("relu_fn", ["activation"], nr.relu, lambda a: np.maximum(a, 0), [away_from_kinks(4, 4)]),
    ("gelu_tanh_fn", ["activation"], lambda a: nr.gelu(a, approximate="tanh"),
     lambda a: 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3))), [R(4, 4)]),
    ("gelu_fn", ["activation"], nr.gelu,
     lambda a: 0.5 * a * (1 + np.vectorize(math.erf)(a / math.sqrt(2))), [R(4, 4)]),
    ("sigmoid_fn", ["activation"], nr.sigmoid, lambda a: 1 / (1 + np.exp(-a)), [R(4, 4)]),
    ("silu_fn", ["activation"], nr.silu, lambda a: a / (1 + np.exp(-a)), [R(4, 4)]),
    ("cross_entropy", ["softmax", "one_hot", "where"], lambda a: nr.cross_entropy(a, [1, 0, 3]),
     lambda a: -np.mean((a - np.log(np.exp(a).sum(1, keepdims=True)))[np.arange(3), [1, 0, 3]]), [R(3, 4)]),
    ("to_device", ["to_device"], lambda a: a.to("cpu").to(a.device) * 2.0, lambda a: a * 2.0, [R(3)]),
    ("bce", ["binary_cross_entropy"], lambda p, y: nr.binary_cross_entropy(p, y, reduction="none"),
     lambda p, y: -(y * np.log(p) + (1 - y) * np.log1p(-p)), [R(3, 4, lo=0.1, hi=0.9), R(3, 4, lo=0, hi=1)]),
    ("bce_logits", ["binary_cross_entropy_with_logits"],
     lambda x, y: nr.binary_cross_entropy_with_logits(
         x, y, reduction="none", pos_weight=nr.tensor([0.5, 1.0, 2.0, 3.0], dtype=x.dtype, device=x.device)),
     lambda x, y: (1 - y) * x + (1 + (np.array([0.5, 1.0, 2.0, 3.0]) - 1) * y) * np.log1p(np.exp(-x)),
     [R(3, 4, lo=-3, hi=3), R(3, 4, lo=0, hi=1)]),
    ("elu_alpha", ["elu_alpha"], lambda x: nr.nn.functional.elu(x, alpha=0.7),
     lambda x: np.where(x > 0, x, 0.7 * np.expm1(x)), [away_from_kinks(3, 4)]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op(device, case):
    _, _, fn, ref, xs, *opts = case
    check_op(device, fn, ref, xs, **(opts[0] if opts else {}))


NON_DIFFERENTIABLE = {"eq", "ne", "lt", "le", "gt", "ge", "argmax", "argsort", "one_hot", "bitwise_not",
                      "bitwise_and", "bitwise_or", "bitwise_xor"}


def test_every_op_row_is_tested():
    """Every differentiable row of the vocabulary is exercised by CASES; the others by the
    tests below (comparisons, argmax, one_hot, bitwise)."""
    from numr_web.vocab.registry import OPS
    import test_nn_ops     # the model-building ops are tested there, against torch
    covered = {r for c in CASES for r in c[1]} | NON_DIFFERENTIABLE | {"slice", "unslice"} | \
        {"log1p", "expm1", "rsqrt", "clone", "gather", "scatter_add", "layer_norm", "attention",
         "im2col", "col2im", "split", "conv2d", "max_pool2d", "batch_norm", "lstm_cell",
         "gru_cell", "rnn_layer"} | \
        {"max_pool2d_backward"} | \
        {"cross_entropy"}           # (differential/test_losses.py: against torch, every device)
    assert {c[0] for c in test_nn_ops.CASES} >= {"log1p", "expm1", "rsqrt", "clone", "layer_norm",
                                                 "sdpa", "conv2d", "max_pool2d", "split",
                                                 "batch_norm", "lstm_cell", "gru_cell",
                                                 "rnn_layer_lstm", "rnn_layer_gru_reverse",
                                                 "rnn_layer_tanh", "rnn_layer_relu_reverse"}
    for name, op in OPS.items():
        assert (op.vjp is None) == (name in NON_DIFFERENTIABLE), name
        assert name in covered, f"op {name} has no test case"


@pytest.mark.parametrize("op,npop", [("__eq__", np.equal), ("__ne__", np.not_equal), ("__lt__", np.less),
                                     ("__le__", np.less_equal), ("__gt__", np.greater), ("__ge__", np.greater_equal)])
def test_comparisons(device, op, npop):
    a = np.array([[-1.0, 0.0, 1.0], [2.0, 2.0, -3.0]])
    b = np.array([0.0, 0.0, 2.0])
    ta, tb = nr.tensor(a, dtype=fdtype(device), device=device), nr.tensor(b, dtype=fdtype(device), device=device)
    out = getattr(ta, op)(tb)
    assert out.dtype == nr.bool_
    np.testing.assert_array_equal(out.numpy(), npop(a, b))
    out = getattr(ta, op)(1.0)
    np.testing.assert_array_equal(out.numpy(), npop(a, 1.0))


def test_bitwise(device):
    a, b = np.array([5, -3, 12, 0]), np.array([3, 6, -12, 7])
    ta, tb = nr.tensor(a, device=device), nr.tensor(b, device=device)
    assert (ta & tb).tolist() == (a & b).tolist()
    assert (ta | tb).tolist() == (a | b).tolist()
    assert (ta ^ tb).tolist() == (a ^ b).tolist()
    assert (~ta).tolist() == (~a).tolist()
    m, n = nr.tensor([True, False, True], device=device), nr.tensor([True, True, False], device=device)
    assert (m & n).tolist() == [True, False, False] and (~m).tolist() == [False, True, False]
    assert (m | n).dtype == nr.bool_ and (m ^ n).tolist() == [False, True, True]


def test_argmax_one_hot(device):
    a = np.array([[1.0, 5.0, 5.0], [7.0, -1.0, 0.0]])
    t = nr.tensor(a, dtype=fdtype(device), device=device)
    assert t.argmax(axis=1).tolist() == [1, 0]
    assert t.argmax(dim=0, keepdim=True).tolist() == [[1, 0, 0]]
    assert t.argmax().item() == 3
    assert t.argmin(dim=1).tolist() == [0, 1]
    oh = nr.one_hot(nr.tensor([2, 0], device=device), 3)
    assert oh.tolist() == [[0, 0, 1], [1, 0, 0]]


def test_creation(device):
    assert nr.zeros((2, 3), device=device).tolist() == [[0.0] * 3] * 2
    assert nr.ones(2, device=device).tolist() == [1.0, 1.0]
    assert nr.full((2,), 7, device=device).tolist() == [7, 7]
    assert nr.arange(5, device=device).tolist() == [0, 1, 2, 3, 4]
    assert nr.arange(0.0, 1.0, 0.25, device=device).tolist() == [0.0, 0.25, 0.5, 0.75]
    a = nr.rand((1000,), seed=3, device=device).numpy()
    b = nr.rand((1000,), seed=3, device=device).numpy()
    np.testing.assert_array_equal(a, b)
    assert 0 <= a.min() and a.max() < 1 and abs(a.mean() - 0.5) < 0.05
    n = nr.randn((4000,), seed=4, device=device).numpy()
    assert abs(n.mean()) < 0.1 and abs(n.std() - 1) < 0.1
    assert not np.array_equal(nr.randn((10,), seed=1, device=device).numpy(),
                              nr.randn((10,), seed=2, device=device).numpy())


def test_tensor_from_host_types(device):
    import array
    t = nr.tensor(array.array("f", [1, 2, 3]), device=device)
    assert t.dtype == nr.float32 and t.tolist() == [1.0, 2.0, 3.0]
    t = nr.tensor(memoryview(array.array("i", [4, 5])), device=device)
    assert t.dtype == nr.int32 and t.tolist() == [4, 5]
    assert nr.tensor([[True, False]], device=device).dtype == nr.bool_
    assert nr.tensor([1, 2], device=device).dtype == nr.int32
    assert nr.tensor([1, 2.5], device=device).dtype == nr.float32
    assert nr.tensor(np.zeros(2, np.float32), device=device).dtype == nr.float32
    assert nr.tensor(3.5, device=device).item() == 3.5
    t = nr.tensor(np.arange(6.0).reshape(2, 3), dtype="float32", device=device)
    assert t.shape == (2, 3) and t.to("cpu").tolist() == [[0, 1, 2], [3, 4, 5]]


def test_dtype_promotion(device):
    f = nr.tensor([1.0, 2.0], device=device)
    i = nr.tensor([1, 2], device=device)
    assert (f + i).dtype == nr.float32
    assert (i + 1).dtype == nr.int32
    assert (i * 1.5).dtype == nr.float32
    assert (i / 2).dtype == nr.float32
    assert (f > 1).dtype == nr.bool_
    assert (i + 1).tolist() == [2, 3]


def test_relu_grad_at_zero(device):
    x = nr.tensor([-1.0, 0.0, 1.0], device=device, requires_grad=True)
    nr.relu(x).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 1.0]        # PyTorch's convention: relu'(0) = 0
    a = nr.tensor([[0.0]], device=device, requires_grad=True)
    b = nr.tensor([[1.0, -1.0, 2.0]], device=device, requires_grad=True)
    bias = nr.tensor([0.0, 0.0, -2.0], device=device, requires_grad=True)
    nr.matmul_bias_activation(a, b, bias, "relu").sum().backward()   # z is exactly 0 everywhere
    assert bias.grad.tolist() == [0.0, 0.0, 0.0]


# exact limits at |x| = 1e4 and the true values near 0 (y, act'(x))
LIMITS = {"none": ((1e4, 1), (-1e4, 1)), "relu": ((1e4, 1), (0, 0)), "sigmoid": ((1, 0), (0, 0)),
          "tanh": ((1, 0), (-1, 0)), "silu": ((1e4, 1), (0, 0)), "gelu": ((1e4, 1), (0, 0)),
          "gelu_tanh": ((1e4, 1), (0, 0)), "leaky_relu": ((1e4, 1), (-100, 0.01)),
          "elu": ((1e4, 1), (-1, 0)), "softplus": ((1e4, 1), (0, 0)), "mish": ((1e4, 1), (0, 0)),
          "hardswish": ((1e4, 1), (0, 0)), "selu": ((1.0507009873554805e4, 1.0507009873554805),
                                                     (-1.7580993408473766, 0)),
          "celu": ((1e4, 1), (-1, 0)), "softsign": ((1e4 / 10001, 1 / 10001 ** 2), (-1e4 / 10001, 1 / 10001 ** 2)),
          "tanhshrink": ((1e4 - 1, 1), (1 - 1e4, 1))}


@pytest.mark.parametrize("name", list(nr.ACT))
def test_activation_extremes(device, name):
    """|x| up to 1e4 through every activation, its gradient (unfused and fused) and act''."""
    x = nr.tensor([1e4, -1e4, 88.7, -88.7, 1e3, -1e3], dtype="float32", device=device,
                  requires_grad=True)
    y = nr.activation(x, name)
    y.sum().backward()
    yv, gv = y.numpy(), x.grad.numpy()
    d2 = nr.activation(x.detach(), name, "d2").numpy()
    assert np.isfinite(yv).all() and np.isfinite(gv).all() and np.isfinite(d2).all(), (yv, gv, d2)
    (yp, gp), (ym, gm) = LIMITS[name]
    np.testing.assert_allclose([yv[0], yv[1]], [yp, ym], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose([gv[0], gv[1]], [gp, gm], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(d2[:2], [0, 0], atol=1e-6)
    a = nr.tensor([[1e4], [-1e4]], dtype="float32", device=device, requires_grad=True)
    w = nr.tensor([[1.0]], dtype="float32", device=device, requires_grad=True)
    out = nr.matmul_bias_activation(a, w, nr.zeros(1, device=device), name)
    out.sum().backward()
    np.testing.assert_allclose(out.numpy()[:, 0], [yp, ym], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(a.grad.numpy()[:, 0], [gp, gm], rtol=1e-6, atol=1e-6)


def test_log_softmax_extreme_logits(device):
    x = nr.tensor([[1e3, -1e3, 0.0], [-1e3, -1e3, -1e3]], device=device, requires_grad=True)
    y = nr.log_softmax(x)
    np.testing.assert_allclose(y.numpy(), [[0, -2e3, -1e3], [-math.log(3)] * 3], rtol=1e-6)
    y.sum().backward()
    g = x.grad.numpy()
    assert np.isfinite(g).all()
    np.testing.assert_allclose(g, [[-2, 1, 1], [0, 0, 0]], atol=1e-6)
    loss = nr.cross_entropy(nr.tensor([[1e3, -1e3]], device=device), [1])
    np.testing.assert_allclose(loss.item(), 2e3, rtol=1e-6)


@pytest.mark.parametrize("name", [n for n in nr.ACT if n != "none"])
def test_every_activation_is_a_function(device, name):
    """nr.<name>(x) for every row of the ACT table (the five added through the table included):
    the value, act' and act'' (create_graph) against torch's float64 function."""
    x0 = away_from_kinks(9)
    dtype = fdtype(device)
    x = nr.tensor(x0, dtype=dtype, device=device, requires_grad=True)
    y = getattr(nr, name)(x)
    g, = nr.grad(y.sum(), [x], create_graph=True)
    h, = nr.grad(g.sum(), [x])
    xr = x.detach().numpy().astype(np.float64)          # the input as the device holds it
    for got, order in ((y, 0), (g, 1), (h, 2)):
        # float32: act'' is a difference of O(1) terms (tanh'' = -2 y (1 - y^2)), so its absolute
        # error is a few float32 ulps of 1 where act'' itself is small
        tol = dict(rtol=1e-12, atol=1e-13) if dtype is nr.float64 else \
            dict(rtol=2e-6, atol=2e-7 if order < 2 else 6e-7)
        np.testing.assert_allclose(got.numpy(), torch_act(name, order)(xr), **tol, err_msg=str(order))


# the public rows' parity cases (what a parity page runs): on every device, inputs drawn from the
# row's domain, against the float64 cpu result of the same public function
from numr_web.ops.generated import parity_cases  # noqa: E402


@pytest.mark.parametrize("case", parity_cases(), ids=[c[0] for c in parity_cases()])
def test_public_rows_parity_cases(device, case):
    name, domains, fn = case
    xs = [R(4, 5, lo=lo, hi=hi) for lo, hi in domains]
    assert all(((lo <= x) & (x <= hi)).all() for x, (lo, hi) in zip(xs, domains))
    want = fn(nr, *[nr.tensor(x, dtype="float64") for x in xs]).numpy()
    got = fn(nr, *[nr.tensor(x, dtype=fdtype(device), device=device) for x in xs]).numpy()
    assert np.isfinite(want).all(), name
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6, err_msg=name)


def test_xlogy_special_values_follow_torch(device):
    a = [0.0, 0.0, 0.0, 1.5, -2.0, 3.0, 0.0]
    b = [0.0, float("nan"), 2.0, 0.0, 0.5, float("inf"), float("inf")]
    ta, tb = torch.tensor(a), torch.tensor(b)
    x, y = nr.tensor(a, device=device), nr.tensor(b, device=device)
    for got, want in ((nr.xlogy(x, y), torch.special.xlogy(ta, tb)),
                      (nr.xlogy(0.0, y), torch.special.xlogy(0.0, tb)),
                      (nr.xlogy(2.5, y), torch.special.xlogy(2.5, tb)),
                      (nr.xlogy(x, float("nan")), torch.special.xlogy(ta, float("nan"))),
                      (nr.xlogy(x, 0.0), torch.special.xlogy(ta, 0.0))):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, equal_nan=True)
    assert nr.xlogy(nr.tensor([1, 2], device=device), nr.tensor([3, 4], device=device)).dtype \
        == nr.float32                                    # integers computed as float32, as torch
