"""THE op registry. One row per op: forward (backend primitives) next to its VJP (written with tensor
ops, so that with create_graph=True gradients are differentiable again) and a numpy reference used by
the tests. Public functions below validate arguments (shapes, dtypes, devices) and call `apply`.
"""
from __future__ import annotations

import math

from .. import dtypes as dt
from ..autograd import Node, _state
from ..errors import DeviceError, DTypeError, GradientError, NumrError, ShapeError
from .. import shapes as sh
from .activations import ACT, get_act


class Op:
    __slots__ = ("name", "forward", "vjp", "ref", "save_out", "_bname")

    def __init__(self, name, forward, vjp, ref, save_out=False, backward_name=None):
        self.name, self.forward, self.vjp, self.ref, self.save_out = name, forward, vjp, ref, save_out
        self._bname = backward_name or "".join(p.title() for p in name.split("_")) + "Backward"

    @property
    def backward_name(self):
        return self._bname

    def __repr__(self):
        return f"Op({self.name!r})"


OPS: dict = {}


def register(name, forward, vjp, ref, save_out=False, backward_name=None):
    OPS[name] = Op(name, forward, vjp, ref, save_out, backward_name)
    return OPS[name]


Tensor = None  # set by numr_web.tensor once the class exists (the two modules need each other)


def apply(op, /, *args, **attrs):
    """Run op.forward on the args' backend handles; record a Node when a gradient is needed."""
    x0 = args[0]
    be = x0._backend
    out, extra = op.forward(be, *[a._data for a in args], **attrs)
    t = Tensor._wrap(out, be.dtype_of(out), x0.device, be)
    if op.vjp is not None and _state["enabled"]:
        for a in args:
            if a._requires_grad:
                t._requires_grad = True
                t.grad_fn = Node(op, args, out if op.save_out else None, extra, attrs, t.dtype)
                break
    return t


# ------------------------------------------------------------------------------------------------
# helpers shared by VJPs
def sum_to_shape(g, shape):
    """Sum a broadcast gradient back to an operand's shape."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, d in enumerate(shape)
                                      if d == 1 and g.shape[i + lead] != 1)
    if axes:
        g = reduce_op("sum", g, axes, keepdims=True)
    return g.reshape(shape) if g.shape != shape else g


def _is_tensor(x):
    return isinstance(x, Tensor)


# ------------------------------------------------------------------------------------------------
# elementwise unary: forward = one backend primitive; VJP uses x or the output
def _unary_forward(name):
    return lambda be, x: (be.unary(name, x), None)


UNARY_VJP = {
    "neg":  lambda n, g, x: -g,
    "abs":  lambda n, g, x: g * sign(x),
    "exp":  lambda n, g, x: g * n.output(),                 # exp' = exp: reuse the output
    "log":  lambda n, g, x: g / x,
    "sqrt": lambda n, g, x: g / (n.output() * 2),
    "sin":  lambda n, g, x: g * cos(x),
    "cos":  lambda n, g, x: -(g * sin(x)),
    "sign": lambda n, g, x: zeros_like(g),
}
UNARY_REF = {"neg": "negative", "abs": "abs", "exp": "exp", "log": "log", "sqrt": "sqrt",
             "sin": "sin", "cos": "cos", "sign": "sign"}
for _name, _vjp in UNARY_VJP.items():
    register(_name, _unary_forward(_name),
             (lambda f: lambda n, g: (f(n, g, n.args[0]),))(_vjp),
             (lambda r: lambda np, x: getattr(np, r)(x))(UNARY_REF[_name]),
             save_out=_name in ("exp", "sqrt"))


# ------------------------------------------------------------------------------------------------
# elementwise binary, with a Python scalar on either side kept as an attribute (no device buffer)
def _binary_forward(name):
    def fwd(be, *xs, scalar=None, reverse=False):
        if len(xs) == 2:
            return be.binary(name, xs[0], xs[1]), None
        return (be.binary(name, scalar, xs[0]) if reverse else be.binary(name, xs[0], scalar)), None
    return fwd


def _operands(n):
    """(a, b) of a binary node, one of them possibly a Python scalar."""
    if len(n.args) == 2:
        return n.args
    s = n.attrs["scalar"]
    return (s, n.args[0]) if n.attrs["reverse"] else (n.args[0], s)


def _maxmin_grads(g, a, b, is_max):
    wins = ((a > b) if is_max else (a < b)).astype(g.dtype)
    w = wins + (a == b).astype(g.dtype) * 0.5      # ties share the gradient, as in PyTorch
    return g * w, g * (1 - w)


def _pow_exponent_grad(g, a, n):
    """d(a**b)/db = a**b log(a); 0 where a == 0 (PyTorch's convention, instead of 0 * -inf)."""
    if not _is_tensor(a):
        return g * n.output() * (math.log(a) if a > 0 else 0.0)
    return where(a == 0, 0.0, g * n.output() * log(a))


BINARY_VJP = {
    "add": lambda g, a, b, n: (g, g),
    "sub": lambda g, a, b, n: (g, -g),
    "mul": lambda g, a, b, n: (g * b, g * a),
    "div": lambda g, a, b, n: (g / b, -(g * a) / (b * b)),
    "pow": lambda g, a, b, n: (g * b * a ** (b - 1) if _is_tensor(a) else None,
                               _pow_exponent_grad(g, a, n) if _is_tensor(b) else None),
    "maximum": lambda g, a, b, n: _maxmin_grads(g, a, b, True),
    "minimum": lambda g, a, b, n: _maxmin_grads(g, a, b, False),
}
BINARY_REF = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "true_divide",
              "pow": "power", "maximum": "maximum", "minimum": "minimum"}


def _binary_vjp(f):
    def vjp(n, g):
        a, b = _operands(n)
        ga, gb = f(g, a, b, n)
        out = []
        for x, gx in ((a, ga), (b, gb)):
            if _is_tensor(x):
                out.append(None if gx is None else sum_to_shape(gx, x.shape))
        return tuple(out)
    return vjp


for _name, _vjp in BINARY_VJP.items():
    register(_name, _binary_forward(_name), _binary_vjp(_vjp),
             (lambda r: lambda np, a, b: getattr(np, r)(a, b))(BINARY_REF[_name]),
             save_out=_name == "pow")

COMPARE_REF = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
               "gt": "greater", "ge": "greater_equal"}
for _name, _r in COMPARE_REF.items():      # comparisons: bool outputs, no gradient
    register(_name, _binary_forward(_name), None,
             (lambda r: lambda np, a, b: getattr(np, r)(a, b))(_r))

register("where", lambda be, c, a, b: (be.where(c, a, b), None),
         lambda n, g: (None, sum_to_shape(where(n.args[0], g, 0.0), n.args[1].shape),
                       sum_to_shape(where(n.args[0], 0.0, g), n.args[2].shape)),
         lambda np, c, a, b: np.where(c, a, b))

register("astype", lambda be, x, dtype: (be.astype(x, dtype), None),
         lambda n, g: (g.astype(n.args[0].dtype),),
         lambda np, x, dtype: x.astype(dtype.name))


# ------------------------------------------------------------------------------------------------
# activations (unfused): act^(order)(x) from the ACT table; first-order backward is the fused
# act_backward primitive (one pass, reusing the output when the table says so)
def _activation_vjp(n, g):
    x, name, order = n.args[0], n.attrs["name"], n.attrs["order"]
    if order == 0 and not _state["create_graph"]:
        from ..tensor import Tensor
        dz, _ = g._backend.act_backward(name, g._data, n.out_data,
                                        x._data if ACT[name].grad_from == "z" else None, False)
        return (Tensor._wrap(dz, g.dtype, g.device),)
    if order >= 2:
        raise GradientError(f"third and higher derivatives of activation {name!r} are not "
                            "implemented; first and second derivatives are")
    return (g * activation(x, name, order + 1),)


register("activation", lambda be, x, name, order: (be.activation(name, x, order), None),
         _activation_vjp,
         lambda np, x, name, order: _act_ref(np, x, name, order), save_out=True,
         backward_name="ActivationBackward")


def _act_ref(np, x, name, order):
    act = ACT[name]
    if order == 0:
        return act.fwd(np, np.array(x, copy=True))
    return (act.dz if order == 1 else act.d2)(np, x)


# ------------------------------------------------------------------------------------------------
# reductions
def _reduce_vjp(n, g):
    x, axes, keepdims, op = n.args[0], n.attrs["axes"], n.attrs["keepdims"], n.attrs["op"]
    kshape = sh.reduced_shape(x.shape, axes, True)
    gk = g.reshape(kshape)
    if op == "sum":
        return (gk.expand(x.shape),)
    if op == "mean":
        return ((gk / sh.prod(x.shape[a] for a in axes)).expand(x.shape),)
    mask = (x == n.output().reshape(kshape)).astype(g.dtype)    # ties share the gradient
    return (gk * mask / reduce_op("sum", mask, axes, True),)


register("reduce", lambda be, x, op, axes, keepdims: (be.reduce(op, x, axes, keepdims), None),
         _reduce_vjp,
         lambda np, x, op, axes, keepdims: getattr(np, op)(x, axis=axes, keepdims=keepdims),
         save_out=True, backward_name="ReduceBackward")

register("argmax", lambda be, x, axis, keepdims: (be.argmax(x, axis, keepdims), None), None,
         lambda np, x, axis, keepdims: np.argmax(x, axis=axis, keepdims=keepdims))


def _softmax_vjp(n, g):
    y, axis = n.output(), n.attrs["axis"]
    if n.attrs["log"]:                     # d log_softmax: g - softmax * sum(g)
        return (g - exp(y) * g.sum(axis, keepdims=True),)
    return (y * (g - (g * y).sum(axis, keepdims=True)),)


def _softmax_ref(np, x, axis, log):
    s = x - x.max(axis=axis, keepdims=True)
    ls = s - np.log(np.exp(s).sum(axis=axis, keepdims=True))
    return ls if log else np.exp(ls)


register("softmax", lambda be, x, axis, log: (be.softmax(x, axis, log), None), _softmax_vjp,
         _softmax_ref, save_out=True)

register("one_hot", lambda be, x, n, dtype: (be.one_hot(x, n, dtype), None), None,
         lambda np, x, n, dtype: np.eye(n, dtype=dtype.name)[x])


# ------------------------------------------------------------------------------------------------
# linear algebra
def _matmul_vjp(n, g):
    a, b = n.args
    ga = sum_to_shape(matmul(g, b.mT), a.shape) if a.requires_grad else None
    gb = sum_to_shape(matmul(a.mT, g), b.shape) if b.requires_grad else None
    return ga, gb


register("matmul", lambda be, a, b: (be.matmul(a, b), None), _matmul_vjp,
         lambda np, a, b: np.matmul(a, b))


def _mba_forward(be, a, b, *bias, activation):
    y, z = be.gemm_bias_act(a, b, bias[0] if bias else None, activation)
    return y, z


def _mba_vjp(n, g):
    """Fused layer backward. First order: ONE act_backward pass gives dZ (and dbias), then two
    GEMMs. With create_graph: the same math from differentiable ops, with Z recomputed so that its
    dependence on a, b, bias is part of the graph (act'(Z) then differentiates to act''(Z))."""
    from ..tensor import Tensor
    a, b = n.args[0], n.args[1]
    bias = n.args[2] if len(n.args) == 3 else None
    act = ACT[n.attrs["activation"]]
    if _state["create_graph"]:
        z = matmul_bias_activation(a, b, bias, "none")
        dz = g if act.name == "none" else g * activation(z, act.name, 1)
        gbias = sum_to_shape(dz, bias.shape) if bias is not None and bias.requires_grad else None
    else:
        want_db = bias is not None and bias.requires_grad
        dz_h, db_h = g._backend.act_backward(act.name, g._data, n.out_data, n.extra, want_db)
        dz = Tensor._wrap(dz_h, g.dtype, g.device)
        gbias = Tensor._wrap(db_h, g.dtype, g.device) if want_db else None
    ga = matmul(dz, b.mT) if a.requires_grad else None
    if ga is not None and ga.shape != a.shape:
        ga = sum_to_shape(ga, a.shape)
    gb = None
    if b.requires_grad:
        if b.ndim == 2 and a.ndim > 2:   # sum over the batch inside one GEMM: (K, B*M) @ (B*M, N)
            gb = matmul(a.reshape(-1, a.shape[-1]).mT, dz.reshape(-1, dz.shape[-1]))
        else:
            gb = sum_to_shape(matmul(a.mT, dz), b.shape)
    return (ga, gb, gbias) if bias is not None else (ga, gb)


def _mba_ref(np, a, b, bias=None, activation="none"):
    z = np.matmul(a, b)
    if bias is not None:
        z = z + bias
    return _act_ref(np, z, activation, 0)


register("matmul_bias_activation", _mba_forward, _mba_vjp, _mba_ref, save_out=True,
         backward_name="MatmulBiasActivationBackward")


# ------------------------------------------------------------------------------------------------
# shapes and copies (views where the backend can)
register("reshape", lambda be, x, shape: (be.reshape(x, shape), None),
         lambda n, g: (g.reshape(n.args[0].shape),), lambda np, x, shape: x.reshape(shape))
register("permute", lambda be, x, perm: (be.permute(x, perm), None),
         lambda n, g: (g.permute(_inverse(n.attrs["perm"])),),
         lambda np, x, perm: x.transpose(perm))
register("expand", lambda be, x, shape: (be.expand(x, shape), None),
         lambda n, g: (sum_to_shape(g, n.args[0].shape),),
         lambda np, x, shape: np.broadcast_to(x, shape))
register("slice", lambda be, x, index: (be.slice(x, index), None),
         lambda n, g: (apply(OPS["unslice"], g, shape=n.args[0].shape, index=n.attrs["index"]),),
         lambda np, x, index: x[tuple(i if isinstance(i, int) else slice(*i) for i in index)])
register("unslice", lambda be, g, shape, index: (be.unslice(g, shape, index), None),
         lambda n, g: (apply(OPS["slice"], g, index=n.attrs["index"]),),
         lambda np, g, shape, index: _unslice_ref(np, g, shape, index))
register("concat", lambda be, *xs, axis: (be.concat(list(xs), axis), None),
         lambda n, g: _concat_vjp(n, g),
         lambda np, *xs, axis: np.concatenate(xs, axis=axis))


def _unslice_ref(np, g, shape, index):
    out = np.zeros(shape, dtype=g.dtype)
    out[tuple(i if isinstance(i, int) else slice(*i) for i in index)] = g
    return out


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _concat_vjp(n, g):
    axis, start, out = n.attrs["axis"], 0, []
    for x in n.args:
        idx = tuple((0, d, 1) if i != axis else (start, start + x.shape[axis], 1)
                    for i, d in enumerate(g.shape))
        out.append(apply(OPS["slice"], g, index=idx))
        start += x.shape[axis]
    return tuple(out)


# ================================================================================================
# Public functions: validate, promote, call apply
def _check_same_device(*ts):
    dev = ts[0].device
    for t in ts[1:]:
        if t.device != dev:
            raise DeviceError(f"tensors on different devices ({dev!r} and {t.device!r}) can not be "
                              f"combined; move one with .to({dev!r}) or .to({t.device!r})")


def _as_tensor_like(x, like):
    from ..tensor import Tensor, tensor
    if isinstance(x, Tensor):
        return x
    return tensor(x, device=like.device)


ARITH = ("add", "sub", "mul", "div", "pow", "maximum", "minimum")


def binary(name, a, b):
    """Elementwise binary op with broadcasting, dtype promotion and Python scalars."""
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        if a.device != b.device:
            _check_same_device(a, b)
        if a.dtype is not b.dtype:
            d = dt.promote(a.dtype, b.dtype)
            a, b = a.astype(d), b.astype(d)
        if name in ARITH and a.dtype.kind != "f":
            a, b = _arith_dtype(name, a), _arith_dtype(name, b)
        sa, sb = a._data.shape, b._data.shape
        if sa != sb:
            sh.broadcast_shapes(sa, sb)
        if not (a._requires_grad or b._requires_grad) or not _state["enabled"]:
            be = a._backend      # fast path: nothing to record, skip the Op machinery
            out = be.binary(name, a._data, b._data)
            return Tensor._wrap(out, a.dtype if name in ARITH else dt.bool_, a.device, be)
        return apply(OPS[name], a, b)
    reverse = not isinstance(a, Tensor)
    t, s = (b, a) if reverse else (a, b)
    if not isinstance(s, (int, float, bool)):
        if (hasattr(s, "__len__") or hasattr(s, "shape")) and not isinstance(s, (str, bytes)):
            return binary(name, *((_as_tensor_like(a, t), b) if reverse else (a, _as_tensor_like(b, t))))
        raise DTypeError(f"unsupported operand {type(s).__name__} for {name}; expected a Tensor, "
                         "int, float or bool")
    d = dt.promote_scalar(t.dtype, s)
    if d is not t.dtype:
        t = t.astype(d)
    if name in ARITH:
        t = _arith_dtype(name, t)
        if not t.dtype.is_floating:
            if isinstance(s, float) or (name == "pow" and (s < 0 or reverse)):
                t = t.astype(dt.default_float)
    if isinstance(s, bool) or t.dtype.kind == "i":
        s = int(s) if t.dtype.kind != "f" else float(s)
    return apply(OPS[name], t, scalar=s, reverse=reverse)


def _arith_dtype(name, t):
    if t.dtype is dt.bool_:
        return t.astype(dt.int32)
    if name == "div" and not t.dtype.is_floating:
        return t.astype(dt.default_float)
    return t


def where(cond, a, b):
    from ..tensor import Tensor, full
    like = next(x for x in (cond, a, b) if isinstance(x, Tensor))
    if not isinstance(cond, Tensor):
        cond = _as_tensor_like(cond, like)
    if cond.dtype is not dt.bool_:
        cond = cond != 0
    ts = [x for x in (a, b) if isinstance(x, Tensor)]
    d = ts[0].dtype if ts else dt.default_float
    for x in ts[1:]:
        d = dt.promote(d, x.dtype)
    for x in (a, b):
        if not isinstance(x, Tensor):
            d = dt.promote_scalar(d, x) if ts else (dt.default_float if isinstance(x, float) else d)
    a = a.astype(d) if isinstance(a, Tensor) else full((), a, dtype=d, device=like.device)
    b = b.astype(d) if isinstance(b, Tensor) else full((), b, dtype=d, device=like.device)
    _check_same_device(cond, a, b)
    shape = sh.broadcast_shapes(cond.shape, a.shape, b.shape)
    return apply(OPS["where"], cond, a.expand(shape), b.expand(shape))


def unary(name, x):
    if x.dtype is dt.bool_ and name in ("neg", "abs", "sign"):
        raise DTypeError(f"{name} of a bool tensor is not defined; use ~x for logical not, or "
                         "convert with .astype('int32')")
    if not x.dtype.is_floating and name not in ("neg", "abs", "sign"):
        x = x.astype(dt.default_float)
    return apply(OPS[name], x)


def neg(x): return unary("neg", x)
def abs(x): return unary("abs", x)           # noqa: A001
def exp(x): return unary("exp", x)
def log(x): return unary("log", x)
def sqrt(x): return unary("sqrt", x)
def sin(x): return unary("sin", x)
def cos(x): return unary("cos", x)
def sign(x): return unary("sign", x)
def maximum(a, b): return binary("maximum", a, b)
def minimum(a, b): return binary("minimum", a, b)


def activation(x, name, order=0):
    """act^(order)(x) for an ACT row: order 0 the activation, 1 and 2 its derivatives."""
    if name not in ACT:
        get_act(name)
    if x.dtype.kind != "f":
        x = x.astype(dt.default_float)
    return apply(OPS["activation"], x, name=name, order=order)


def relu(x): return activation(x, "relu")
def sigmoid(x): return activation(x, "sigmoid")
def tanh(x): return activation(x, "tanh")
def silu(x): return activation(x, "silu")


def gelu(x, approximate="none"):
    """GELU: exact (erf) by default, the tanh form with approximate="tanh" (PyTorch's names)."""
    if approximate not in ("none", "tanh"):
        raise NumrError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return activation(x, "gelu" if approximate == "none" else "gelu_tanh")


def reduce_op(op, x, axis=None, keepdims=False):
    axes = sh.normalize_axes(axis, x.ndim)
    if op in ("max", "min") and any(x.shape[a] == 0 for a in axes):
        raise ShapeError(f"{op} of an empty dimension is undefined (shape {x.shape})")
    if op == "mean" and not x.dtype.is_floating:
        x = x.astype(dt.default_float)
    if op == "sum" and x.dtype is dt.bool_:
        x = x.astype(dt.int32)
    if not axes:                      # 0-d tensor: nothing to reduce
        return x.reshape(x.shape) if x.requires_grad else x
    return apply(OPS["reduce"], x, op=op, axes=axes, keepdims=bool(keepdims))


def sum(x, axis=None, keepdims=False): return reduce_op("sum", x, axis, keepdims)  # noqa: A001
def mean(x, axis=None, keepdims=False): return reduce_op("mean", x, axis, keepdims)
def max(x, axis=None, keepdims=False): return reduce_op("max", x, axis, keepdims)  # noqa: A001
def min(x, axis=None, keepdims=False): return reduce_op("min", x, axis, keepdims)  # noqa: A001


def argmax(x, axis=None, keepdims=False):
    if axis is not None:
        axis = sh.normalize_axis(axis, x.ndim)
    if x.size == 0:
        raise ShapeError("argmax of an empty tensor is undefined")
    return apply(OPS["argmax"], x, axis=axis, keepdims=bool(keepdims))


def _softmax(x, axis, log):
    if not x.dtype.is_floating:
        x = x.astype(dt.default_float)
    return apply(OPS["softmax"], x, axis=sh.normalize_axis(axis, x.ndim), log=log)


def softmax(x, axis=-1): return _softmax(x, axis, False)
def log_softmax(x, axis=-1): return _softmax(x, axis, True)


def one_hot(labels, num_classes, dtype=dt.float32):
    return apply(OPS["one_hot"], labels, n=num_classes, dtype=dt.get_dtype(dtype))


def cross_entropy(logits, labels):
    """Mean negative log-likelihood of integer `labels` (N,) under `logits` (N, C)."""
    from ..tensor import Tensor
    if not isinstance(labels, Tensor):
        labels = _as_tensor_like(labels, logits)
    if logits.ndim != 2:
        raise ShapeError(f"cross_entropy expects logits of shape (N, C), got {logits.shape}")
    if labels.shape != logits.shape[:1]:
        raise ShapeError(f"cross_entropy: labels must have shape ({logits.shape[0]},) to match "
                         f"logits {logits.shape}, got {labels.shape}")
    if labels.dtype.kind != "i":
        raise DTypeError(f"cross_entropy: labels must be integers (int32), got {labels.dtype.name}")
    _check_same_device(logits, labels)
    n, c = logits.shape
    if n and getattr(labels._backend, "can_sync", True):
        lo, hi = labels.min().item(), labels.max().item()
        if lo < 0 or hi >= c:
            raise ShapeError(f"cross_entropy: labels must be in [0, {c}) for {c} classes, "
                             f"got values in [{lo}, {hi}]")
    picked = log_softmax(logits, -1) * one_hot(labels, c, logits.dtype)
    return -picked.sum() / n


def matmul(a, b):
    """Matrix product with numpy semantics: 1-D operands are promoted, batch dims broadcast."""
    from ..tensor import Tensor
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise DTypeError("matmul expects two Tensors")
    _check_same_device(a, b)
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
    out_shape = sh.matmul_shapes(a2.shape, b2.shape)
    out = apply(OPS["matmul"], a2, b2)
    if a.ndim == 1 or b.ndim == 1:
        out = out.reshape(out_shape[:-2] + ((out_shape[-2],) if a.ndim > 1 else ())
                          + ((out_shape[-1],) if b.ndim > 1 else ()))
    return out


def matmul_bias_activation(a, b, bias=None, activation="none"):
    """out = act(a @ b + bias) as one fused layer. a (..., M, K); b (K, N) or (..., K, N);
    bias (N,) or None; activation in ACT (none relu sigmoid tanh silu gelu gelu_tanh)."""
    from ..tensor import Tensor
    act = get_act(activation)
    for name, t in (("a", a), ("b", b)) + ((("bias", bias),) if bias is not None else ()):
        if not isinstance(t, Tensor):
            raise DTypeError(f"matmul_bias_activation: {name} must be a Tensor, got "
                             f"{type(t).__name__}")
    ts = (a, b) if bias is None else (a, b, bias)
    _check_same_device(*ts)
    for name, t in zip(("a", "b", "bias"), ts):
        if t.dtype is not a.dtype:
            raise DTypeError(f"matmul_bias_activation: all operands must have one dtype; a is "
                             f"{a.dtype.name} but {name} is {t.dtype.name}. Convert with "
                             f".astype({a.dtype.name!r})")
    if not a.dtype.is_floating:
        raise DTypeError(f"matmul_bias_activation needs floating-point operands, got "
                         f"{a.dtype.name}")
    if a.ndim < 2 or b.ndim < 2:
        raise ShapeError(f"matmul_bias_activation: a must be (..., M, K) and b (K, N) or "
                         f"(..., K, N); got shapes {a.shape} and {b.shape}")
    out_shape = sh.matmul_shapes(a.shape, b.shape, "matmul_bias_activation")
    if out_shape[:-2] != a.shape[:-2]:
        a = a.expand(out_shape[:-2] + a.shape[-2:])
    if bias is not None and bias.shape != (b.shape[-1],):
        raise ShapeError(f"matmul_bias_activation: bias must have shape ({b.shape[-1]},) (one "
                         f"value per output column N={b.shape[-1]}), got {bias.shape}")
    return apply(OPS["matmul_bias_activation"], *ts, activation=act.name)


def concat(tensors, axis=0):
    ts = list(tensors)
    if not ts:
        raise ShapeError("concat needs at least one tensor")
    _check_same_device(*ts)
    d = ts[0].dtype
    for t in ts[1:]:
        d = dt.promote(d, t.dtype)
    ts = [t.astype(d) for t in ts]
    axis = sh.normalize_axis(axis, ts[0].ndim)
    for t in ts[1:]:
        if t.ndim != ts[0].ndim or any(x != y for i, (x, y) in enumerate(zip(t.shape, ts[0].shape))
                                       if i != axis):
            raise ShapeError(f"concat: shapes {ts[0].shape} and {t.shape} differ outside axis "
                             f"{axis}; all other dimensions must match")
    return apply(OPS["concat"], *ts, axis=axis)


def stack(tensors, axis=0):
    ts = list(tensors)
    if not ts:
        raise ShapeError("stack needs at least one tensor")
    for t in ts[1:]:
        if t.shape != ts[0].shape:
            raise ShapeError(f"stack: all tensors must have one shape, got {ts[0].shape} and "
                             f"{t.shape}")
    axis = sh.normalize_axis(axis, ts[0].ndim + 1)
    return concat([t.reshape(t.shape[:axis] + (1,) + t.shape[axis:]) for t in ts], axis)


def zeros_like(x, dtype=None):
    from ..tensor import full
    return full(x.shape, 0, dtype=dtype or x.dtype, device=x.device)


def ones_like(x, dtype=None):
    from ..tensor import full
    return full(x.shape, 1, dtype=dtype or x.dtype, device=x.device)
