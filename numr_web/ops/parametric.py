"""The parametrised activations of torch.nn.functional: leaky_relu(x, negative_slope),
elu(x, alpha), softplus(x, beta, threshold), hardtanh(x, min_val, max_val), relu6. With torch's
default parameters leaky_relu, elu and softplus are the ACT table's fused activations; other
parameters compose elementwise ops, written so that no unselected branch overflows into a NaN
gradient.

elu with another alpha is a row of its own: its value is alpha expm1(x) composed without
recording, and its VJP is torch's g alpha exp(x), accurate where y + 1 (the derivative of expm1
from its saved output) cancels: at x = -30, exp(x) = 9.4e-14, not 0."""
from __future__ import annotations

from ..autograd import attach
from ..errors import DTypeError, ShapeError
from ..gradmode import no_grad
from ..tensor import Tensor
from .elementwise import activation, where
from .generated import FUNCTIONS
from ..vocab.registry import OPS, register

exp, expm1 = FUNCTIONS["exp"], FUNCTIONS["expm1"]                  # generated from their rows


def _elu_vjp(n, g):
    x = n.args[0]
    alpha = n.attrs["alpha"]
    return (g * where(x > 0, 1.0, alpha * exp(where(x > 0, 0.0, x))),)


def _attached_only(be, *args, **attrs):
    raise AssertionError("elu attaches its value; this row's forward never runs")


register("elu_alpha", _attached_only, _elu_vjp, backward_name="EluBackward")


def _float_input(x, what):
    if not isinstance(x, Tensor):
        raise DTypeError(f"{what} expects a Tensor, got {type(x).__name__}")
    if not x.dtype.is_floating:
        raise DTypeError(f"{what} needs a floating-point tensor, got {x.dtype.name}")
    return x


def _number(v, what):
    """A real number argument as a float (torch raises TypeError for anything else)."""
    if isinstance(v, Tensor) and v.numel() == 1:
        v = v.item()
    try:
        if isinstance(v, (str, bytes, complex)):
            raise TypeError
        return float(v)
    except (TypeError, ValueError):
        raise DTypeError(f"{what} must be a real number, got {v!r}") from None


def leaky_relu(input, negative_slope=0.01, inplace=False):
    _float_input(input, "leaky_relu")
    negative_slope = _number(negative_slope, "leaky_relu: negative_slope")
    if negative_slope == 0.01:
        return activation(input, "leaky_relu")
    return where(input > 0, input, input * negative_slope)


def elu(input, alpha=1.0, inplace=False):
    _float_input(input, "elu")
    alpha = _number(alpha, "elu: alpha")
    if alpha == 1.0:
        return activation(input, "elu")
    with no_grad():
        value = where(input > 0, input, alpha * expm1(where(input > 0, 0.0, input)))
    return attach(value._data, OPS["elu_alpha"], (input,), {"alpha": alpha}, value)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, and x where beta x > threshold (torch's)."""
    _float_input(input, "softplus")
    beta, threshold = _number(beta, "softplus: beta"), _number(threshold, "softplus: threshold")
    if beta == 1.0 and threshold == 20.0:
        return activation(input, "softplus")
    z = input * beta if beta != 1.0 else input
    sp = activation(z, "softplus")                    # no overflow for any z
    sp = sp / beta if beta != 1.0 else sp
    return where(z > threshold, input, sp)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """x clamped to [min_val, max_val]; the gradient passes strictly inside only (torch's)."""
    _float_input(input, "hardtanh")
    min_val, max_val = _number(min_val, "hardtanh: min_val"), _number(max_val, "hardtanh: max_val")
    if min_val > max_val:
        raise ShapeError(f"hardtanh: min_val ({min_val}) must be at most max_val ({max_val})")
    lo, hi = float(min_val), float(max_val)
    return where(input <= lo, lo, where(input >= hi, hi, input))


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0)
