"""2-D convolution and pooling, NCHW. A convolution (groups 1) is one op each way: the backend's
conv2d primitive (cuDNN on cuda where available; elsewhere im2col + GEMMs arranged so that the
result is NCHW without a transpose, backends/conv.py) with the bias and activation fused, and
conv2d_backward (the activation's backward, then dx, dW, dbias). Grouped convolutions compose
im2col, a batched matmul and col2im (torch's fold) as ops. Max pooling is one op each way (the
forward keeps each window's argmax, the backward writes each input element's gradient from it);
average pooling reduces im2col's windows."""
from __future__ import annotations

from .. import shapes as sh
from ..autocast_state import active as amp_active, cast as amp_cast
from ..autograd import apply
from ..creation import full, tensor
from ..dtypes import int32
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .common import check_same_device
from .elementwise import act_backward, activation as _activation
from ..gradmode import is_create_graph
from .indexing import gather
from .padding import pad_dim
from .linalg import matmul
from .shape_ops import concat
from ..vocab.activations import get_act
from ..vocab.registry import OPS, register

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


def _conv_forward(be, x, w, *bias, kernel, stride, padding, dilation, act):
    y, s = be.conv2d(x, w, bias[0] if bias else None, stride, padding, dilation, act)
    return y, {"s": s}


def _conv_vjp(n, g):
    x, w = n.args[0], n.args[1]
    bias = n.args[2] if len(n.args) == 3 else None
    a = n.attrs
    if is_create_graph():
        dx, dw, db = _composed_conv_grads(n, g, x, w, bias)
    else:
        be = g._backend
        hs = be.conv2d_backward(g._data, x._data, w._data, n.saved_handle("s"), a["act"],
                                a["stride"], a["padding"], a["dilation"], x.requires_grad,
                                w.requires_grad, bias is not None and bias.requires_grad)
        dx, dw, db = (None if h is None else g._wrap(h, g.dtype, g.device, be) for h in hs)
    return (dx, dw) + (() if bias is None else (db,))


def _composed_conv_grads(n, g, x, w, bias):
    """The gradients from differentiable ops (create_graph): im2col, GEMMs, col2im."""
    a = n.attrs
    geo = {k: a[k] for k in ("kernel", "stride", "padding", "dilation")}
    o = w.shape[0]
    cols = _im2col(x, **geo)                                       # (N, CK, L)
    w2 = w.reshape(o, cols.shape[1])
    dz = g
    if a["act"] != "none":
        z = matmul(w2, cols).reshape(g.shape)
        z = z if bias is None else z + bias.reshape(1, o, 1, 1)
        y = _activation(z, a["act"])
        saves_y = get_act(a["act"]).saves == "y"
        dz = act_backward(g, y if saves_y else z, a["act"], y=None if saves_y else y)
    dz3 = dz.reshape(g.shape[0], o, g.shape[2] * g.shape[3])
    dw = matmul(dz3, cols.mT).sum(0).reshape(w.shape)
    dx = apply(OPS["col2im"], matmul(w2.mT, dz3), x_shape=x.shape, **geo)
    return dx, dw, (None if bias is None else dz.sum((0, 2, 3)))


register("conv2d", _conv_forward, _conv_vjp, backward_name="ConvolutionBackward")


def conv2d_bias_activation(x, weight, bias=None, activation="none", stride=1, padding=0,
                           dilation=1, groups=1, padding_mode="zeros"):
    """act(conv2d(x, weight) + bias) with the fused GEMM epilogue and backward.
    x (N, C, H, W); weight (O, C/groups, kh, kw); bias (O,) or None."""
    act = get_act(activation)
    if amp_active() is not None:
        x, weight, bias = amp_cast("conv2d", x, weight, bias)
    if not isinstance(weight, Tensor) or weight.ndim != 4:
        raise ShapeError(f"conv2d: weight must be (out, in/groups, kh, kw), got "
                         f"{getattr(weight, 'shape', type(weight).__name__)}")
    groups = sh.as_int(groups, "groups")
    if padding_mode not in PADDING_MODES:
        raise ShapeError(f"conv2d: padding_mode must be one of {PADDING_MODES}, got "
                         f"{padding_mode!r}")
    if isinstance(padding, str) or padding_mode != "zeros":
        if not isinstance(x, Tensor) or x.ndim != 4:
            raise ShapeError(f"conv2d expects an (N, C, H, W) tensor, got "
                             f"{getattr(x, 'shape', type(x).__name__)}")
        before, after = _explicit_padding(padding, weight.shape[2:], stride, dilation)
        if before == after and padding_mode == "zeros":
            padding = before                        # im2col pads symmetrically itself
        else:
            x = _pad(x, before, after, padding_mode)
            padding = 0
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
    if bias is not None and bias.dtype is not x.dtype:
        raise DTypeError(f"conv2d: bias must have the input's dtype {x.dtype.name}, got "
                         f"{bias.dtype.name}")
    if groups == 1:
        return apply(OPS["conv2d"], *((x, weight) if bias is None else (x, weight, bias)),
                     kernel=kernel, stride=stride, padding=padding, dilation=dilation,
                     act=act.name)
    cols = _im2col(x, kernel, stride, padding, dilation)           # (N, C*kh*kw, L)
    ck = weight.shape[1] * kernel[0] * kernel[1]
    g = groups                                                      # (N, G, L, CK/G) @ (G, CK/G, O/G)
    y = matmul(cols.reshape(n, g, ck, oh * ow).mT, weight.reshape(g, o // g, ck).mT)
    y = y.permute(0, 1, 3, 2).reshape(n, o, oh, ow)
    if bias is not None:
        y = y + bias.reshape(1, o, 1, 1)
    return y if act.name == "none" else _activation(y, act.name)


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, padding_mode="zeros"):
    """torch.nn.functional.conv2d; padding also "valid" (none) or "same" (the output keeps the
    input's size: stride 1, and for an even kernel the extra pad goes right/bottom, as torch's).
    padding_mode (torch.nn.Conv2d's): "zeros", "reflect", "replicate" or "circular"."""
    return conv2d_bias_activation(x, weight, bias, "none", stride, padding, dilation, groups,
                                  padding_mode)


PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _explicit_padding(padding, kernel, stride, dilation):
    """(top, left), (bottom, right) of a padding given as "valid", "same", an int or a pair."""
    if not isinstance(padding, str):
        p = _pair(padding, "padding")
        return p, p
    if padding == "valid":
        return (0, 0), (0, 0)
    if padding != "same":
        raise ShapeError(f"conv2d: padding must be an int, a pair, 'valid' or 'same'; got "
                         f"{padding!r}")
    if _pair(stride, "stride") != (1, 1):
        raise ShapeError(f"conv2d: padding='same' is not supported for strided convolutions "
                         f"(stride {stride}); use stride=1 or an explicit padding")
    total = [d * (k - 1) for d, k in zip(_pair(dilation, "dilation"), kernel)]
    return tuple(t // 2 for t in total), tuple(t - t // 2 for t in total)


def _pad(x, before, after, mode):
    """x padded on H and W (padding.py; torch's padding_mode "zeros" is its "constant")."""
    mode = "constant" if mode == "zeros" else mode
    for dim, b, a in ((2, before[0], after[0]), (3, before[1], after[1])):
        x = pad_dim(x, dim, b, a, mode)
    return x


def _pool_size(size, k, s, p, d, ceil_mode):
    """torch's pooling_output_shape: with ceil_mode the last window may run past the input, but
    must start inside it or its left padding."""
    num = size + 2 * p - d * (k - 1) - 1
    out = (-(-num // s) if ceil_mode else num // s) + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _pool(x, kernel_size, stride, padding, dilation, ceil_mode, what, pad_value):
    """The windows (N, C, kh*kw, oh*ow), the output shape and the geometry."""
    if not isinstance(x, Tensor) or x.ndim != 4:
        raise ShapeError(f"{what} expects an (N, C, H, W) tensor, got "
                         f"{getattr(x, 'shape', type(x).__name__)}")
    if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0):
        stride = kernel_size
    kernel, stride = _pair(kernel_size, "kernel_size"), _pair(stride, "stride")
    padding, dilation = _pair(padding, "padding"), _pair(dilation, "dilation")
    if min(kernel) < 1 or min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise ShapeError(f"{what}: kernel, stride and dilation must be positive and padding "
                         f"non-negative; got {kernel}, {stride}, {dilation}, {padding}")
    if any(p * 2 > k for p, k in zip(padding, kernel)):
        raise ShapeError(f"{what}: padding {padding} must be at most half the kernel {kernel}")
    out = tuple(_pool_size(x.shape[2 + i], kernel[i], stride[i], padding[i], dilation[i],
                           ceil_mode) for i in range(2))
    if min(out) < 1:
        raise ShapeError(f"{what}: the input {x.shape[2:]} (padded by {padding}) is smaller "
                         f"than the kernel {kernel} (dilation {dilation})")
    # ceil_mode: the last windows reach past the padded input; pad right/bottom for them
    for i in range(2):
        need = (out[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1
        extra = need - (x.shape[2 + i] + 2 * padding[i])
        if extra > 0:
            shape = list(x.shape)
            shape[2 + i] = extra
            x = concat([x, full(tuple(shape), pad_value, dtype=x.dtype, device=x.device)],
                       dim=2 + i)
    n, c = x.shape[:2]
    cols = _im2col(x, kernel, stride, padding, dilation, pad_value)
    return (cols.reshape(n, c, kernel[0] * kernel[1], out[0] * out[1]), (n, c) + out,
            (kernel, stride, padding, dilation))


def _maxpool_forward(be, x, kernel, stride, padding, dilation, out_hw):
    y, index = be.max_pool2d(x, kernel, stride, padding, dilation, out_hw)
    return (y, index), {"index": index}


def _maxpool_vjp(n, g):
    g = g[0]
    if g is None:
        return (None,)
    x = n.args[0]
    be = x._backend
    index = Tensor._wrap(n.saved_handle("index"), int32, x.device, be)
    return (apply(OPS["max_pool2d_backward"], g, index, x_shape=x.shape,
                  **{k: n.attrs[k] for k in ("kernel", "stride", "padding", "dilation")}),)


def _maxpool_backward_vjp(n, g):
    """The backward is linear in dy: its adjoint reads each window's gradient at the saved
    index (a gather)."""
    index = n.args[1]
    flat = g.reshape(g.shape[0], g.shape[1], -1)
    return (gather(flat, 2, index.reshape(index.shape[0], index.shape[1], -1))
            .reshape(index.shape), None)


register("max_pool2d", _maxpool_forward, _maxpool_vjp, backward_name="MaxPool2DWithIndicesBackward")
register("max_pool2d_backward",
         lambda be, g, index, x_shape, kernel, stride, padding, dilation:
         (be.max_pool2d_backward(g, index, x_shape, kernel, stride, padding, dilation), None),
         _maxpool_backward_vjp, vjp_reads_saved=False)


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """torch.nn.functional.max_pool2d, one op each way: the forward keeps each window's argmax
    (torch's: the first maximum, the last NaN), the backward writes every input element's
    gradient from it (no scatter). return_indices: also that argmax as the flat index
    h * W + w in its input plane (int32)."""
    if not isinstance(x, Tensor) or x.ndim != 4:
        raise ShapeError(f"max_pool2d expects an (N, C, H, W) tensor, got "
                         f"{getattr(x, 'shape', type(x).__name__)}")
    if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0):
        stride = kernel_size
    kernel, stride = _pair(kernel_size, "kernel_size"), _pair(stride, "stride")
    padding, dilation = _pair(padding, "padding"), _pair(dilation, "dilation")
    if min(kernel) < 1 or min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise ShapeError(f"max_pool2d: kernel, stride and dilation must be positive and padding "
                         f"non-negative; got {kernel}, {stride}, {dilation}, {padding}")
    if any(p * 2 > k for p, k in zip(padding, kernel)):
        raise ShapeError(f"max_pool2d: padding {padding} must be at most half the kernel "
                         f"{kernel}")
    out = tuple(_pool_size(x.shape[2 + i], kernel[i], stride[i], padding[i], dilation[i],
                           ceil_mode) for i in range(2))
    if min(out) < 1:
        raise ShapeError(f"max_pool2d: the input {x.shape[2:]} (padded by {padding}) is smaller "
                         f"than the kernel {kernel} (dilation {dilation})")
    if not x.dtype.is_floating:
        raise DTypeError(f"max_pool2d needs a floating-point input, got {x.dtype.name}")
    y, index = apply(OPS["max_pool2d"], x, kernel=kernel, stride=stride, padding=padding,
                     dilation=dilation, out_hw=out)
    return (y, index) if return_indices else y


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """torch.nn.functional.avg_pool2d: each window's sum over its divisor, torch's: the window
    clipped to the padded input (count_include_pad), or to the input itself, or
    divisor_override."""
    if divisor_override is not None and (not isinstance(divisor_override, int) or
                                         isinstance(divisor_override, bool) or
                                         divisor_override == 0):
        raise ShapeError(f"avg_pool2d: divisor_override must be a non-zero int, got "
                         f"{divisor_override!r}")
    windows, shape, (kernel, stride, padding, _) = _pool(
        x, kernel_size, stride, padding, 1, ceil_mode, "avg_pool2d", 0.0)
    H, W = x.shape[2:]
    if divisor_override is not None:
        return (windows.sum(2) / float(divisor_override)).reshape(shape)
    spans = []
    for size, k, s_, p, n_out in ((H, kernel[0], stride[0], padding[0], shape[2]),
                                  (W, kernel[1], stride[1], padding[1], shape[3])):
        row = []
        for o in range(n_out):
            start = o * s_ - p
            end = min(start + k, size + p)
            row.append(end - start if count_include_pad else min(end, size) - max(start, 0))
        spans.append(row)
    div = [a * b for a in spans[0] for b in spans[1]]
    if all(d == kernel[0] * kernel[1] for d in div):
        return windows.mean(2).reshape(shape)
    return (windows.sum(2) / tensor(div, dtype=x.dtype, device=x.device)).reshape(shape)


def adaptive_avg_pool2d(x, output_size):
    """torch.nn.functional.adaptive_avg_pool2d: output cell i averages input rows
    floor(i H / oh) .. ceil((i + 1) H / oh) - 1 (likewise for columns); None keeps a size.
    Divisible sizes reshape and take means; others multiply by averaging matrices."""
    if not isinstance(x, Tensor) or x.ndim not in (3, 4):
        raise ShapeError(f"adaptive_avg_pool2d expects a (N, C, H, W) or (C, H, W) tensor, got "
                         f"{getattr(x, 'shape', type(x).__name__)}")
    size = output_size if isinstance(output_size, (list, tuple)) else (output_size,) * 2
    if len(size) != 2:
        raise ShapeError(f"adaptive_avg_pool2d: output_size must be an int or a pair, got "
                         f"{output_size!r}")
    H, W = x.shape[-2:]
    oh, ow = (H if size[0] is None else sh.as_int(size[0], "output_size"),
              W if size[1] is None else sh.as_int(size[1], "output_size"))
    if oh < 0 or ow < 0 or (H == 0 or W == 0) and (oh or ow):
        raise ShapeError(f"adaptive_avg_pool2d: output size {(oh, ow)} for an input of spatial "
                         f"size {(H, W)}")
    lead = x.shape[:-2]
    if oh and ow and H % oh == 0 and W % ow == 0:
        return x.reshape(lead + (oh, H // oh, ow, W // ow)).mean((-3, -1))
    ah = tensor(_averaging(H, oh), dtype=x.dtype, device=x.device)        # (oh, H)
    aw = tensor(_averaging(W, ow), dtype=x.dtype, device=x.device)        # (ow, W)
    return matmul(matmul(ah, x), aw.mT)


def _averaging(n, m):
    rows = []
    for i in range(m):
        a, b = (i * n) // m, -(-((i + 1) * n) // m)
        rows.append([1.0 / (b - a) if a <= j < b else 0.0 for j in range(n)])
    return rows
