"""Parity cases: one definition used twice.

* natively, by scripts/make_golden.py, on the cpu (numpy) backend -> web/public/golden/parity.json
  (inputs, output weights and reference outputs/gradients);
* in the browser, by the parity page (web/src/parity.js), on the webgpu backend, with the inputs read
  from that JSON, comparing against the stored references.

Pure Python (no numpy): it runs in Pyodide. Only the public numr_web API is used.
Every differentiable case also checks the gradients of all float inputs of
loss = sum(y * w) for a fixed random w.
"""
from __future__ import annotations

import array
import math

from numr_web.ops.activations import ACT
from numr_web.ops.generated import parity_cases as row_cases

ATOL, RTOL = 1e-4, 1e-3          # float32 on different hardware / summation orders


class Case:
    def __init__(self, name, inputs, fn, grad=True, atol=ATOL, rtol=RTOL, group=""):
        self.name, self.inputs, self.fn, self.grad = name, inputs, fn, grad
        self.atol, self.rtol, self.group = atol, rtol, group


CASES: list[Case] = []


def case(name, *inputs, grad=True, group="", **tol):
    """inputs: (name, kind, shape); kind: n normal, p positive in [0.5, 2), u uniform [-1, 1),
    w wide normal*4, x extreme uniform [-100, 100), r<lo>:<hi> uniform in [lo, hi) (an elementwise
    row's domain), i<k> int32 labels in [0, k)."""
    def deco(fn):
        CASES.append(Case(name, inputs, fn, grad, group=group, **tol))
        return fn
    return deco


# -- elementwise ---------------------------------------------------------------------------------
def _row_case(fn, names):
    return lambda nr, **ts: fn(nr, *(ts[n] for n in names))


# every public row of the elementwise table (numr_web/vocab/elementwise.py) as nr.<name>, its
# inputs drawn from the row's domain: a row made public is checked here too
for _n, _domains, _f in row_cases():
    _names = ("x",) if len(_domains) == 1 else ("a", "b")
    case(_n, *[(v, f"r{lo}:{hi}", (6, 7)) for v, (lo, hi) in zip(_names, _domains)],
         group="unary" if len(_domains) == 1 else "binary")(_row_case(_f, _names))
case("-x, abs(x) (operators)", ("x", "n", (6, 7)), group="unary")(lambda nr, x: -x + abs(x) * 0.5)

case("add (broadcast)", ("a", "n", (5, 4)), ("b", "n", (4,)), group="binary")(lambda nr, a, b: a + b)
case("sub (broadcast)", ("a", "n", (5, 1)), ("b", "n", (1, 4)), group="binary")(lambda nr, a, b: a - b)
case("mul (broadcast)", ("a", "n", (2, 3, 4)), ("b", "n", (3, 1)), group="binary")(lambda nr, a, b: a * b)
case("div (broadcast)", ("a", "n", (5, 4)), ("b", "p", (4,)), group="binary")(lambda nr, a, b: a / b)
case("pow", ("a", "p", (5, 4)), ("b", "u", (5, 4)), group="binary")(lambda nr, a, b: a ** b)
case("pow scalar", ("a", "n", (5, 4)), group="binary")(lambda nr, a: a ** 2)
case("scalar arith", ("a", "n", (5, 4)), group="binary")(lambda nr, a: (2.5 * a + 1.0) / 4.0 - a)
for _n, _f in [("eq", lambda a, b: a == b), ("ne", lambda a, b: a != b), ("lt", lambda a, b: a < b),
               ("le", lambda a, b: a <= b), ("gt", lambda a, b: a > b), ("ge", lambda a, b: a >= b)]:
    case(_n, ("a", "n", (5, 4)), ("b", "n", (4,)), grad=False, group="compare")(
        lambda nr, a, b, _f=_f: _f(a, b))

# -- reductions ------------------------------------------------------------------------------------
case("sum", ("x", "n", (6, 5)), group="reduce")(lambda nr, x: x.sum())
case("sum axis=0", ("x", "n", (6, 5)), group="reduce")(lambda nr, x: x.sum(axis=0))
case("sum axis=1 keepdims", ("x", "n", (6, 5)), group="reduce")(lambda nr, x: x.sum(axis=1, keepdims=True))
case("mean axis=-1", ("x", "n", (3, 4, 5)), group="reduce")(lambda nr, x: x.mean(axis=-1))
case("mean", ("x", "n", (6, 5)), group="reduce")(lambda nr, x: x.mean())
case("max axis=1", ("x", "n", (6, 5)), group="reduce")(lambda nr, x: x.max(axis=1))
case("min axis=0", ("x", "n", (6, 5)), group="reduce")(lambda nr, x: x.min(axis=0))
case("max", ("x", "n", (6, 5)), group="reduce")(lambda nr, x: x.max())

# -- shapes ------------------------------------------------------------------------------------------
case("reshape", ("x", "n", (4, 6)), group="shape")(lambda nr, x: x.reshape(3, 8) * 1.5)
case("transpose", ("x", "n", (4, 6)), group="shape")(lambda nr, x: x.transpose(0, 1) * 1.5)
case(".T", ("x", "n", (4, 6)), group="shape")(lambda nr, x: x.T + 1.0)
case("permute", ("x", "n", (2, 3, 4)), group="shape")(lambda nr, x: x.permute(2, 0, 1) * 2.0)
case("expand", ("x", "n", (3, 1)), group="shape")(lambda nr, x: x.expand(3, 4) * 1.0)
case("slice", ("x", "n", (5, 6)), group="shape")(lambda nr, x: x[1:4, ::2] * 1.0)
case("index", ("x", "n", (5, 6)), group="shape")(lambda nr, x: x[2] * 1.0)

# -- linear algebra ------------------------------------------------------------------------------------
case("matmul", ("a", "n", (5, 7)), ("b", "n", (7, 3)), group="matmul")(lambda nr, a, b: nr.matmul(a, b))
case("matmul @ (64x48x40)", ("a", "n", (64, 48)), ("b", "n", (48, 40)), group="matmul")(
    lambda nr, a, b: a @ b)
case("matmul batched", ("a", "n", (2, 4, 6)), ("b", "n", (2, 6, 5)), group="matmul")(
    lambda nr, a, b: a @ b)
case("matmul broadcast", ("a", "n", (2, 4, 6)), ("b", "n", (6, 5)), group="matmul")(
    lambda nr, a, b: a @ b)

# -- activations, softmax, loss ---------------------------------------------------------------------------
# every row of the activation table (a row added there is checked here too), as nr.<name>(x)
ACTIVATIONS = [n for n in ACT if n != "none"]


def _act(nr, name, x):
    return getattr(nr, name)(x)


for _a in ACTIVATIONS:
    case(_a, ("x", "w", (8, 9)), group="activation")(lambda nr, x, _a=_a: _act(nr, _a, x))
    case(f"{_a} extreme", ("x", "x", (4, 8)), grad=False, group="activation")(
        lambda nr, x, _a=_a: _act(nr, _a, x))
case("softmax", ("x", "w", (6, 10)), group="softmax")(lambda nr, x: nr.softmax(x, axis=-1))
case("softmax axis=0", ("x", "w", (6, 10)), group="softmax")(lambda nr, x: nr.softmax(x, axis=0))
case("log_softmax", ("x", "w", (6, 10)), group="softmax")(lambda nr, x: nr.log_softmax(x, axis=-1))
case("cross_entropy", ("logits", "w", (8, 10)), ("labels", "i10", (8,)), group="loss")(
    lambda nr, logits, labels: nr.cross_entropy(logits, labels))

# -- the fused layer: act(a @ b + bias), forward + backward, every activation -----------------------------
for _a in ["none"] + ACTIVATIONS:
    case(f"matmul_bias_activation {_a}", ("a", "n", (16, 24)), ("b", "n", (24, 12)), ("bias", "n", (12,)),
         group="fused")(lambda nr, a, b, bias, _a=_a: nr.matmul_bias_activation(a, b, bias, activation=_a))
# second order: the loss's gradient of d/da sum(y^2)/2 (create_graph) is a Hessian-vector product
# through act'' (the act_backward op's own VJP)
for _a in ACTIVATIONS:
    case(f"matmul_bias_activation {_a} 2nd order", ("a", "n", (4, 6)), ("b", "n", (6, 5)),
         ("bias", "n", (5,)), group="fused2")(
        lambda nr, a, b, bias, _a=_a: nr.grad(
            (nr.matmul_bias_activation(a, b, bias, activation=_a) ** 2).sum() * 0.5, [a],
            create_graph=True)[0])
case("matmul_bias_activation gelu 3-D", ("a", "n", (2, 8, 24)), ("b", "n", (24, 12)),
     ("bias", "n", (12,)), group="fused")(
    lambda nr, a, b, bias: nr.matmul_bias_activation(a, b, bias, activation="gelu"))


# -- torch functions: rounding, math, comparisons (math_ops.py) -------------------------------------------
# (the public rows' cases are above; these are the hand-written functions and wider inputs)
for _n, _f, _k in [("floor (wide)", lambda nr, x: nr.floor(x * 3.0), "w"),
                   ("round", lambda nr, x: nr.round(x * 3.0), "w"),
                   ("round decimals=1", lambda nr, x: nr.round(x, decimals=1), "w"),
                   ("frac", lambda nr, x: nr.frac(x), "w"), ("square", lambda nr, x: nr.square(x), "n"),
                   ("atan (wide)", lambda nr, x: nr.atan(x), "w"),
                   ("clamp", lambda nr, x: nr.clamp(x, -0.5, 0.7), "n")]:
    case(_n, ("x", _k, (6, 7)), group="math")(_f)
case("fmod", ("a", "w", (5, 4)), ("b", "p", (5, 4)), group="math")(lambda nr, a, b: nr.fmod(a, b))
case("remainder", ("a", "w", (5, 4)), ("b", "p", (5, 4)), group="math")(lambda nr, a, b: nr.remainder(a, b))
case("atan2", ("a", "n", (5, 4)), ("b", "n", (5, 4)), group="math")(lambda nr, a, b: nr.atan2(a, b))
case("hypot", ("a", "w", (5, 4)), ("b", "n", (4,)), group="math")(lambda nr, a, b: nr.hypot(a, b))
case("logaddexp", ("a", "w", (5, 4)), ("b", "w", (5, 4)), group="math")(lambda nr, a, b: nr.logaddexp(a, b))
case("lerp", ("a", "n", (5, 4)), ("b", "n", (5, 4)), ("t", "u", (4,)), group="math")(
    lambda nr, a, b, t: nr.lerp(a, b, t))
case("isclose", ("a", "n", (5, 4)), ("b", "n", (5, 4)), grad=False, group="math")(
    lambda nr, a, b: nr.isclose(a, a + b * 1e-3, rtol=1e-3, atol=1e-3))
case("where(isfinite(log))", ("x", "n", (5, 4)), group="math")(
    lambda nr, x: nr.where(nr.isfinite(x.log()), x, 0.0))

# -- composites (composites.py) ---------------------------------------------------------------------------
case("movedim", ("x", "n", (2, 3, 4)), group="composite")(lambda nr, x: nr.movedim(x, 0, -1) * 1.5)
case("roll", ("x", "n", (4, 5)), group="composite")(lambda nr, x: nr.roll(x, (1, -2), (0, 1)) * 1.5)
case("tile", ("x", "n", (2, 3)), group="composite")(lambda nr, x: nr.tile(x, (2, 3)) * 1.5)
case("mm", ("a", "n", (5, 7)), ("b", "n", (7, 3)), group="composite")(lambda nr, a, b: nr.mm(a, b))
case("addmm", ("c", "n", (3,)), ("a", "n", (5, 7)), ("b", "n", (7, 3)), group="composite")(
    lambda nr, c, a, b: nr.addmm(c, a, b, beta=0.5, alpha=2.0))
case("outer + dot", ("a", "n", (5,)), ("b", "n", (5,)), group="composite")(
    lambda nr, a, b: nr.outer(a, b) * nr.dot(a, b))
case("diag + trace", ("x", "n", (5, 5)), group="composite")(lambda nr, x: nr.diag(x) * nr.trace(x))
case("diag (embed)", ("x", "n", (4,)), group="composite")(lambda nr, x: nr.diag(x, 1) * 2.0)
case("norm", ("x", "n", (6, 5)), group="composite")(lambda nr, x: nr.norm(x))
case("norm p=1 dim=1", ("x", "n", (6, 5)), group="composite")(lambda nr, x: nr.norm(x, p=1, dim=1))
case("cumsum", ("x", "n", (4, 9)), group="composite")(lambda nr, x: nr.cumsum(x, 1))
case("cumprod", ("x", "p", (4, 9)), group="composite")(lambda nr, x: nr.cumprod(x, 1))
case("logcumsumexp", ("x", "w", (9, 4)), group="composite")(lambda nr, x: nr.logcumsumexp(x, 0))
case("diff", ("x", "n", (4, 9)), group="composite")(lambda nr, x: nr.diff(x, dim=1))
case("einsum", ("a", "n", (2, 3, 4)), ("b", "n", (2, 4, 5)), group="composite")(
    lambda nr, a, b: nr.einsum("bij,bjk->bik", a, b))
case("var_mean", ("x", "n", (6, 5)), group="composite")(lambda nr, x: nr.stack(list(nr.var_mean(x, 1))))

# -- sorting (sorting.py: a bitonic network of ops on webgpu, no readback) --------------------------------
case("sort", ("x", "n", (5, 13)), group="sort")(lambda nr, x: nr.sort(x, dim=1).values)
case("sort descending dim=0", ("x", "n", (6, 4)), group="sort")(
    lambda nr, x: nr.sort(x, dim=0, descending=True).values)
case("argsort", ("x", "n", (5, 13)), grad=False, group="sort")(lambda nr, x: nr.argsort(x, dim=-1))
case("topk", ("x", "n", (4, 20)), group="sort")(lambda nr, x: nr.topk(x, 5).values)
case("topk indices smallest", ("x", "n", (4, 20)), grad=False, group="sort")(
    lambda nr, x: nr.topk(x, 3, largest=False).indices)
case("median dim", ("x", "n", (5, 7)), group="sort")(lambda nr, x: nr.median(x, dim=1).values)
case("median", ("x", "n", (6, 5)), group="sort")(lambda nr, x: nr.median(x))
case("kthvalue", ("x", "n", (5, 7)), group="sort")(lambda nr, x: nr.kthvalue(x, 3, dim=1).values)


# -- in place (inplace.py): on a non-leaf copy, gradients flow through the writes --------------------------
def _inplace(nr, x, b):
    y = x * 1.0
    y += b
    y.mul_(2.0)
    y.add_(b, alpha=0.5)
    y[1] = 0.0
    y[:, 2] = b[0]
    return y


case("in place (+=, mul_, add_, x[i] = v)", ("x", "n", (5, 4)), ("b", "n", (4,)), group="inplace")(_inplace)

# -- losses (losses.py) ------------------------------------------------------------------------------------
case("mse_loss", ("a", "n", (6, 5)), ("b", "n", (6, 5)), group="loss")(lambda nr, a, b: nr.mse_loss(a, b))
case("l1_loss", ("a", "n", (6, 5)), ("b", "n", (6, 5)), group="loss")(lambda nr, a, b: nr.l1_loss(a, b))
case("smooth_l1_loss", ("a", "n", (6, 5)), ("b", "n", (6, 5)), group="loss")(
    lambda nr, a, b: nr.smooth_l1_loss(a, b, beta=0.5))
case("huber_loss sum", ("a", "w", (6, 5)), ("b", "n", (6, 5)), group="loss")(
    lambda nr, a, b: nr.huber_loss(a, b, reduction="sum"))
case("binary_cross_entropy", ("p", "u", (6, 5)), ("t", "u", (6, 5)), group="loss")(
    lambda nr, p, t: nr.binary_cross_entropy(nr.sigmoid(p * 3.0), (t + 1.0) * 0.5))
case("binary_cross_entropy_with_logits", ("x", "w", (6, 5)), ("t", "u", (6, 5)), group="loss")(
    lambda nr, x, t: nr.binary_cross_entropy_with_logits(x, (t + 1.0) * 0.5, reduction="none"))
case("kl_div", ("x", "n", (6, 5)), ("t", "n", (6, 5)), group="loss")(
    lambda nr, x, t: nr.kl_div(nr.log_softmax(x, axis=-1), nr.softmax(t, axis=-1), reduction="batchmean"))

# -- nn modules: deterministic weights (copied in place), the input's gradient through them ------------
def _det(nr, shape, device, k):
    n = numel(shape)
    return (nr.arange(n, device=device).astype("float32") * k).sin().reshape(shape) * 0.5


def _mlp(nr, x):
    from numr_web import nn
    d = x.device            # the golden run's default device is cpu; this runs on x's
    m = nn.Sequential(nn.Linear(6, 8, device=d), nn.LayerNorm(8, device=d), nn.GELU(),
                      nn.Linear(8, 3, bias=False, device=d))
    with nr.no_grad():
        m[0].weight.copy_(_det(nr, (8, 6), x.device, 0.37))
        m[0].bias.copy_(_det(nr, (8,), x.device, 1.3))
        m[3].weight.copy_(_det(nr, (3, 8), x.device, 0.71))
    return m(x)


case("nn.Sequential(Linear, LayerNorm, GELU, Linear)", ("x", "n", (4, 6)), group="nn")(_mlp)


def _set(nr, m, k):
    with nr.no_grad():
        for i, p in enumerate(m.parameters()):
            p.copy_(_det(nr, tuple(p.shape), p.device, k + 0.1 * i))


def _cnn(nr, x):
    from numr_web import nn
    d = x.device
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, device=d), nn.BatchNorm2d(4, device=d), nn.ReLU(),
                      nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    _set(nr, m, 0.43)
    return m(x)                                          # BatchNorm2d in training mode: batch stats


def _mha(nr, q, kv):
    from numr_web import nn
    m = nn.MultiheadAttention(8, 2, batch_first=True, device=q.device)
    _set(nr, m, 0.29)
    return m(q, kv, kv)[0]


case("nn Conv2d, BatchNorm2d, ReLU, MaxPool2d, AdaptiveAvgPool2d", ("x", "n", (2, 3, 8, 8)), group="nn")(_cnn)
case("nn.MultiheadAttention", ("q", "n", (2, 3, 8)), ("kv", "n", (2, 5, 8)), group="nn")(_mha)


# -- webgpu elementwise fusion: long chains of elementwise ops (one generated kernel each) -----------------
case("fused chain", ("a", "n", (7, 9)), ("b", "n", (7, 9)), ("c", "n", (9,)), group="fusion")(
    lambda nr, a, b, c: ((a * b + c).tanh() * 2.0 - a.exp() * 0.1 + nr.sigmoid(b - c)) / (1.0 + c * c))
case("fused chain (math)", ("a", "p", (6, 10)), ("b", "n", (6, 10)), group="fusion")(
    lambda nr, a, b: nr.log2(a) * nr.cos(b) + nr.sqrt(a) * nr.atan(b) - nr.reciprocal(a + 1.0))
case("fused chain 3-D column broadcast", ("a", "n", (3, 4, 5)), ("b", "n", (3, 4, 1)), group="fusion")(
    lambda nr, a, b: nr.silu(a * b - 0.5) + (a - b).abs() * 0.25)


# -- helpers shared by both sides ---------------------------------------------------------------------------
class Rng:
    """Tiny deterministic generator (64-bit LCG), identical everywhere; values rounded to float32."""

    def __init__(self, seed):
        self.s = (seed * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)

    def uniform(self):
        self.s = (self.s * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
        return ((self.s >> 11) + 0.5) / 2**53

    def normal(self):
        u, v = self.uniform(), self.uniform()
        return math.sqrt(-2.0 * math.log(u)) * math.cos(2 * math.pi * v)


def _seed(text):
    h = 1469598103934665603
    for ch in text.encode():
        h = ((h ^ ch) * 1099511628211) & (2**64 - 1)
    return h


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def make_data(kind, shape, seed_text):
    r = Rng(_seed(seed_text))
    n = numel(shape)
    if kind.startswith("i"):
        k = int(kind[1:])
        return [int(r.uniform() * k) % k for _ in range(n)]
    if kind.startswith("r"):
        lo, hi = (float(v) for v in kind[1:].split(":"))
        gen = lambda: lo + (hi - lo) * r.uniform()  # noqa: E731
    else:
        gen = {"n": r.normal, "p": lambda: 0.5 + 1.5 * r.uniform(), "u": lambda: 2 * r.uniform() - 1,
               "w": lambda: 4 * r.normal(), "x": lambda: 200 * r.uniform() - 100}[kind]
    return array.array("f", [gen() for _ in range(n)]).tolist()   # float32-exact values


def nest(flat, shape):
    if not shape:
        return flat[0]
    for d in reversed(shape[1:]):
        flat = [flat[i:i + d] for i in range(0, len(flat), d)]
    return flat


def flatten(v):
    if isinstance(v, (list, tuple)):
        out = []
        for e in v:
            out.extend(flatten(e))
        return out
    return [float(v)]


async def run_case(nr, c, inputs, device, w=None):
    """Run one case on `device`. inputs: {name: flat list}. w: flat weights for the loss (None: make
    them from the output's shape). Returns ({output name: flat list}, {output name: shape}, w)."""
    ts = {}
    for name, kind, shape in c.inputs:
        is_int = kind.startswith("i")
        ts[name] = nr.tensor(nest(list(inputs[name]), tuple(shape)), dtype="int32" if is_int else "float32",
                             device=device, requires_grad=c.grad and not is_int)
    y = c.fn(nr, **ts)
    outs = {"y": flatten(await y.read())}
    shapes = {"y": list(y.shape)}
    if c.grad:
        if w is None:
            w = make_data("u", tuple(y.shape), c.name + "/w")
        wt = nr.tensor(nest(list(w), tuple(y.shape)), dtype="float32", device=device)
        loss = (y * wt).sum()
        loss.backward()
        for name, kind, shape in c.inputs:
            if not kind.startswith("i"):
                outs["d" + name] = flatten(await ts[name].grad.read())
                shapes["d" + name] = list(shape)
    return outs, shapes, w


def compare(got, ref, atol, rtol):
    """(max abs error, max abs error / max |ref|, worst error / tolerance) over two flat lists."""
    if len(got) != len(ref):
        return math.inf, math.inf, math.inf
    max_abs = worst = scale = 0.0
    for g, r in zip(got, ref):
        if math.isnan(g) or math.isnan(r):
            if not (math.isnan(g) and math.isnan(r)):
                return math.inf, math.inf, math.inf
            continue
        if math.isinf(g) or math.isinf(r):
            if g != r:
                return math.inf, math.inf, math.inf
            continue
        e = abs(g - r)
        max_abs = max(max_abs, e)
        scale = max(scale, abs(r))
        worst = max(worst, e / (atol + rtol * abs(r)))
    return max_abs, (max_abs / scale if scale else max_abs), worst
