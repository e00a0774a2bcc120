"""2-D convolution and pooling, NCHW, through im2col: the convolution becomes one GEMM of the
columns with the weight, and runs through the SAME fused layer as matmul_bias_activation (the
bias + activation epilogue, the one-pass fused activation backward); the columns' gradient is
col2im (torch's fold, conv_transpose2d's data movement). Pooling reduces the columns' windows;
max pooling routes the gradient to the first maximum of each window, as torch does."""
from __future__ import annotations

from .. import shapes as sh
from ..autograd import apply
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .common import check_same_device
from .elementwise import activation
from .indexing import gather
from .linalg import matmul, matmul_bias_activation
from .activations import get_act
from .registry import OPS, register

register("im2col", lambda be, x, kernel, stride, padding, dilation, pad_value:
         (be.im2col(x, kernel, stride, padding, dilation, pad_value), None),
         lambda n, g: (apply(OPS["col2im"], g, x_shape=n.args[0].shape,
                             **{k: n.attrs[k] for k in ("kernel", "stride", "padding",
                                                        "dilation")}),),
         vjp_reads_saved=False)
register("col2im", lambda be, cols, x_shape, kernel, stride, padding, dilation:
         (be.col2im(cols, x_shape, kernel, stride, padding, dilation), None),
         lambda n, g: (apply(OPS["im2col"], g, pad_value=0.0,
                             **{k: n.attrs[k] for k in ("kernel", "stride", "padding",
                                                        "dilation")}),),
         vjp_reads_saved=False)


def _pair(v, name):
    if isinstance(v, (list, tuple)):
        if len(v) != 2:
            raise ShapeError(f"{name} must be an int or a pair of ints, got {v!r}")
        return tuple(sh.as_int(x, name) for x in v)
    v = sh.as_int(v, name)
    return (v, v)


def _geometry(x, kernel, stride, padding, dilation, what):
    if not isinstance(x, Tensor) or x.ndim != 4:
        raise ShapeError(f"{what} expects an (N, C, H, W) tensor, got "
                         f"{getattr(x, 'shape', type(x).__name__)}")
    kernel, stride = _pair(kernel, "kernel_size"), _pair(stride, "stride")
    padding, dilation = _pair(padding, "padding"), _pair(dilation, "dilation")
    if min(kernel) < 1 or min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise ShapeError(f"{what}: kernel, stride and dilation must be positive and padding "
                         f"non-negative; got {kernel}, {stride}, {dilation}, {padding}")
    out = tuple((x.shape[2 + i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1)
                // stride[i] + 1 for i in range(2))
    if min(out) < 1:
        raise ShapeError(f"{what}: the input {x.shape[2:]} (padded by {padding}) is smaller "
                         f"than the kernel {kernel} (dilation {dilation})")
    return kernel, stride, padding, dilation, out


def _im2col(x, kernel, stride, padding, dilation, pad_value=0.0):
    return apply(OPS["im2col"], x, kernel=kernel, stride=stride, padding=padding,
                 dilation=dilation, pad_value=float(pad_value))


def conv2d_bias_activation(x, weight, bias=None, activation="none", stride=1, padding=0,
                           dilation=1, groups=1):
    """act(conv2d(x, weight) + bias) with the fused GEMM epilogue and backward.
    x (N, C, H, W); weight (O, C/groups, kh, kw); bias (O,) or None."""
    act = get_act(activation)
    if not isinstance(weight, Tensor) or weight.ndim != 4:
        raise ShapeError(f"conv2d: weight must be (out, in/groups, kh, kw), got "
                         f"{getattr(weight, 'shape', type(weight).__name__)}")
    groups = sh.as_int(groups, "groups")
    kernel, stride, padding, dilation, (oh, ow) = _geometry(x, weight.shape[2:], stride,
                                                            padding, dilation, "conv2d")
    check_same_device(x, weight, *([bias] if bias is not None else []))
    if not x.dtype.is_floating or weight.dtype is not x.dtype:
        raise DTypeError(f"conv2d: x and weight must share one floating dtype, got "
                         f"{x.dtype.name} and {weight.dtype.name}")
    n, c = x.shape[:2]
    o = weight.shape[0]
    if groups < 1 or c % groups or o % groups or weight.shape[1] * groups != c:
        raise ShapeError(f"conv2d: {c} input channels and {o} outputs must split into "
                         f"groups={groups}; weight {weight.shape} needs in/groups = "
                         f"{c // max(groups, 1)}")
    if bias is not None and bias.shape != (o,):
        raise ShapeError(f"conv2d: bias must have shape ({o},), got {bias.shape}")
    cols = _im2col(x, kernel, stride, padding, dilation)           # (N, C*kh*kw, L)
    ck = weight.shape[1] * kernel[0] * kernel[1]
    if groups == 1:
        y = matmul_bias_activation(cols.mT, weight.reshape(o, ck).mT, bias, act.name)  # (N, L, O)
        return y.mT.reshape(n, o, oh, ow)
    g = groups                                                      # (N, G, L, CK/G) @ (G, CK/G, O/G)
    y = matmul(cols.reshape(n, g, ck, oh * ow).mT, weight.reshape(g, o // g, ck).mT)
    y = y.permute(0, 1, 3, 2).reshape(n, o, oh, ow)
    if bias is not None:
        y = y + bias.reshape(1, o, 1, 1)
    return y if act.name == "none" else activation(y, act.name)


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return conv2d_bias_activation(x, weight, bias, "none", stride, padding, dilation, groups)


def _pool(x, kernel_size, stride, padding, dilation, what, pad_value):
    stride = kernel_size if stride is None else stride
    kernel, stride, padding, dilation, (oh, ow) = _geometry(x, kernel_size, stride, padding,
                                                            dilation, what)
    if any(p * 2 > k for p, k in zip(padding, kernel)):
        raise ShapeError(f"{what}: padding {padding} must be at most half the kernel {kernel}")
    n, c = x.shape[:2]
    cols = _im2col(x, kernel, stride, padding, dilation, pad_value)
    return cols.reshape(n, c, kernel[0] * kernel[1], oh * ow), (n, c, oh, ow)


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1):
    windows, shape = _pool(x, kernel_size, stride, padding, dilation, "max_pool2d",
                           float("-inf"))
    first = windows.argmax(dim=2, keepdim=True)                  # torch: the first maximum
    return gather(windows, 2, first).reshape(shape)


def avg_pool2d(x, kernel_size, stride=None, padding=0):
    """count_include_pad=True (torch's default): padded zeros count in the average."""
    windows, shape = _pool(x, kernel_size, stride, padding, 1, "avg_pool2d", 0.0)
    return windows.mean(2).reshape(shape)
