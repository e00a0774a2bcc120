"""Linear algebra: matmul, and the fused layer act(a @ b + bias).

The fused layer's backward is one fused activation-backward pass (the act_backward op: dz and the
bias gradient together) and two GEMMs. Under create_graph the same ops run with recording on; the
pre-activation z saved by the forward joins the graph as "a @ b + bias" (recorded, not recomputed),
and act_backward's own VJP supplies act''.
"""
from __future__ import annotations

from .. import dtypes as dt
from .. import shapes as sh
from ..autocast_state import active as amp_active, cast as amp_cast
from ..autograd import apply, attach
from ..errors import DTypeError, ShapeError
from ..gradmode import is_grad_enabled
from ..profiler import call as profiled
from ..tensor import Tensor
from ..vocab.activations import ACT, get_act
from .common import method_class, check_output_size, check_same_device, sum_to_shape
from .elementwise import act_backward
from ..vocab.registry import OPS, register


def _read_transposed(b):
    """Whether matrix b is a transpose's view of a dense one (a Linear's weight.T)."""
    return b.ndim == 2 and b.shape[0] > 1 and b._backend.strides(b._data) == (1, b.shape[0])


def _grad_b(a, g, b):
    """a^T g, summed over a's batch dims, for the GEMM's second operand b. When b reads a dense
    matrix transposed, the gradient is computed as (g^T a)^T, in that matrix's layout: the
    transpose's VJP then hands the leaf a dense gradient, not one to copy transposed."""
    if b.ndim != 2:
        return sum_to_shape(matmul(a.mT, g), b.shape)
    if a.ndim > 2:                  # sum over the batch inside one GEMM: (K, B*M) @ (B*M, N)
        a, g = a.reshape(-1, a.shape[-1]), g.reshape(-1, g.shape[-1])
    return matmul(g.mT, a).mT if _read_transposed(b) else matmul(a.mT, g)


def _matmul_vjp(n, g):
    a, b = n.args
    ga = sum_to_shape(matmul(g, b.mT), a.shape) if a.requires_grad else None
    gb = _grad_b(a, g, b) if b.requires_grad else None
    return ga, gb


register("matmul", lambda be, a, b: (be.matmul(a, b), None), _matmul_vjp)


def _mba_forward(be, a, b, *bias, activation):
    y, z = be.gemm_bias_act(a, b, bias[0] if bias else None, activation)
    return y, ({"z": z} if z is not None else None)


def _mba_vjp(n, g):
    a, b = n.args[0], n.args[1]
    bias = n.args[2] if len(n.args) == 3 else None
    act = ACT[n.attrs["activation"]]
    if act.name == "none":           # act' = 1 reads nothing: g itself stands for the output
        s, hint = g.detach(), None
    elif act.saves == "z":
        y = n.output()
        s = attach(n.saved_handle("z"), n.op, n.args, {"activation": "none"}, like=y)
        hint = y
    else:
        s, hint = n.output(), None
    want_db = bias is not None and bias.requires_grad
    out = act_backward(g, s, act.name, y=hint, bias_grad=want_db)
    dz, gbias = out if want_db else (out, None)
    ga = None
    if a.requires_grad:
        ga = matmul(dz, b.mT)
        if ga.shape != a.shape:
            ga = sum_to_shape(ga, a.shape)
    gb = _grad_b(a, dz, b) if b.requires_grad else None
    if gbias is not None and gbias.shape != bias.shape:
        gbias = gbias.reshape(bias.shape)
    return (ga, gb, gbias) if bias is not None else (ga, gb)


# without an activation the output is not kept (torch's addmm saves its inputs only)
register("matmul_bias_activation", _mba_forward, _mba_vjp,
         save_out=lambda attrs: attrs["activation"] != "none",
         backward_name="MatmulBiasActivationBackward")


_SMALL = 1 << 20      # results this size fit any device: no memory check on the fast path


def _small_2d(sa, sb):
    """(M, K) @ (K, N) with a result any device holds: no broadcasting, no size check."""
    return len(sa) == 2 and len(sb) == 2 and sa[1] == sb[0] and sa[0] * sb[1] <= _SMALL


def matmul(a, b):
    """Matrix product with numpy semantics: 1-D operands are promoted, batch dims broadcast."""
    if amp_active() is not None:
        a, b = amp_cast("matmul", a, b)
    if type(a) is Tensor and type(b) is Tensor and a.dtype is b.dtype and a.dtype.kind == "f" \
            and a.device == b.device:
        sa, sb = a._data.shape, b._data.shape
        if _small_2d(sa, sb):
            # the common case, two float matrices: nothing to promote, reshape or broadcast
            if not (a._requires_grad or b._requires_grad) or not is_grad_enabled():
                be = a._backend
                out = profiled("matmul", be, (a, b), be.matmul, a._data, b._data)
                return a._wrap(out, a.dtype, a.device, be)
            return apply(OPS["matmul"], a, b)
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise DTypeError(f"matmul expects two Tensors, got {type(a).__name__} and "
                         f"{type(b).__name__}")
    check_same_device(a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul does not accept 0-d tensors (shapes {a.shape} and {b.shape}); "
                         "use * for scalars")
    if a.dtype is not b.dtype:
        d = dt.promote(a.dtype, b.dtype)
        a, b = a.astype(d), b.astype(d)
    if a.dtype is dt.bool_:
        a, b = a.astype(dt.int32), b.astype(dt.int32)
    a2 = a.reshape(1, a.shape[0]) if a.ndim == 1 else a
    b2 = b.reshape(b.shape[0], 1) if b.ndim == 1 else b
    out_shape = sh.matmul_shapes(a2.shape, b2.shape, given=(a.shape, b.shape))
    check_output_size(a, out_shape, a.dtype, "matmul")
    out = apply(OPS["matmul"], a2, b2)
    if a.ndim == 1 or b.ndim == 1:
        out = out.reshape(out_shape[:-2] + ((out_shape[-2],) if a.ndim > 1 else ())
                          + ((out_shape[-1],) if b.ndim > 1 else ()))
    return out


def matmul_bias_activation(a, b, bias=None, activation="none"):
    """out = act(a @ b + bias) as one fused layer. a (..., M, K); b (K, N) or (..., K, N);
    bias (N,) or None; activation: a name of the ACT table (nr.ACT)."""
    act = get_act(activation)
    if amp_active() is not None:
        a, b, bias = amp_cast("matmul_bias_activation", a, b, bias)
    for name, t in (("a", a), ("b", b)) + ((("bias", bias),) if bias is not None else ()):
        if not isinstance(t, Tensor):
            raise DTypeError(f"matmul_bias_activation: {name} must be a Tensor, got "
                             f"{type(t).__name__}")
    ts = (a, b) if bias is None else (a, b, bias)
    check_same_device(*ts)
    for name, t in zip(("a", "b", "bias"), ts):
        if t.dtype is not a.dtype:
            raise DTypeError(f"matmul_bias_activation: all operands must have one dtype; a is "
                             f"{a.dtype.name} but {name} is {t.dtype.name}. Convert with "
                             f".astype({a.dtype.name!r})")
    if not a.dtype.is_floating:
        raise DTypeError(f"matmul_bias_activation needs floating-point operands, got "
                         f"{a.dtype.name}")
    sa, sb = a._data.shape, b._data.shape
    if len(sa) < 2 or len(sb) < 2:
        raise ShapeError(f"matmul_bias_activation: a must be (..., M, K) and b (K, N) or "
                         f"(..., K, N); got shapes {a.shape} and {b.shape}")
    if not _small_2d(sa, sb):
        out_shape = sh.matmul_shapes(a.shape, b.shape, "matmul_bias_activation")
        check_output_size(a, out_shape, a.dtype, "matmul_bias_activation")
        if out_shape[:-2] != a.shape[:-2]:
            a = a.expand(out_shape[:-2] + a.shape[-2:])
    if bias is not None and (len(bias._data.shape) != 1 or bias._data.shape[0] != sb[-1]):
        raise ShapeError(f"matmul_bias_activation: bias must have shape ({b.shape[-1]},) (one "
                         f"value per output column N={b.shape[-1]}), got {bias.shape}")
    return apply(OPS["matmul_bias_activation"], *((a, b) if bias is None else (a, b, bias)),
                 activation=act.name)


LinalgMethods = method_class(
    "LinalgMethods", __matmul__=lambda self, o: matmul(self, o),
    __rmatmul__=lambda self, o: matmul(o, self), matmul=matmul)
