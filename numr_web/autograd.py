"""Reverse-mode autograd: graph nodes, `apply` (run an op, record a node), the backward pass, grad().

A Node records one op application: the op row (whose `vjp` gives the input gradients), the input
tensors, the output handles the VJP reuses (tanh' = 1 - y²), extra handles the forward saved, and
the op's attributes. Backward walks nodes in reverse topological order (iteratively, so graphs as
deep as memory allows work), accumulates gradients, writes each leaf's .grad as soon as it is final
(firing its post-accumulate hooks, which data-parallel training uses to overlap communication) and
frees what the nodes saved unless retain_graph is set.
With create_graph=True every VJP runs with recording on: the gradients have a graph of their own.

Tensors are known here only by their interface (`_data`, `_backend`, `grad_fn`, `requires_grad`,
`_wrap`), so this module sits below numr_web.tensor.
"""
from __future__ import annotations

import weakref

from .autocast_state import disabled as autocast_disabled
from .errors import DeviceError, GradientError
from .gradmode import backward_mode, is_create_graph, is_grad_enabled
from .profiler import current as _profiling


class Node:
    """A grad_fn: `.name` ("MulBackward"), `.inputs` (parent nodes, leaf tensors, or None for
    inputs that need no gradient), `.saved_tensors`, and `.next_functions` like torch's."""

    __slots__ = ("op", "args", "attrs", "outs", "saved", "out_dtypes", "released", "hooks",
                 "retained", "versions", "edges", "out_refs", "keeps_inputs", "__weakref__")

    def __init__(self, op, args, attrs, outs, saved, out_dtypes, keep_inputs=True):
        self.op, self.args, self.attrs = op, args, attrs
        self.outs = outs              # output handles the VJP reads (op.save_out), else None
        self.saved = saved            # extra handles the forward saved for the VJP, or None
        self.out_dtypes = out_dtypes
        self.released = False
        self.hooks = None             # {output index: {handle id: fn}}: t.register_hook on outputs
        self.retained = None          # {output index: [tensor]}: t.retain_grad() on outputs
        self.versions = tuple(a._version for a in args)     # to catch a later in-place write
        # each input's place in the graph as it was here: an in-place write re-points the
        # tensor object at a new node, but this node's gradient belongs to the old one
        self.edges = tuple((a.grad_fn, a._out_index, a.requires_grad) for a in args)
        self.out_refs = None          # ((weakref to an output, its version), ...) when outs saved
        self.keeps_inputs = keep_inputs
        if not keep_inputs:           # the VJP reads shapes only: hold no computed input's data
            self.args = _edges(args, self.edges)

    @property
    def name(self):
        return self.op.backward_name

    @property
    def inputs(self):
        return tuple(fn if fn is not None else (a if rg else None)
                     for a, (fn, _, rg) in zip(self.args, self.edges))

    next_functions = inputs

    def _check_versions(self):
        """An input written in place after this node recorded it (x.add_(...), x[i] = v) would
        feed the VJP its new values: refuse, as torch does, where the VJP reads them."""
        for ref, v in self.out_refs or ():           # the VJP reads the output (exp, sigmoid)
            t = ref()
            if t is not None and t._version != v:
                raise GradientError(
                    f"{self.name}: its output, which the gradient computation reads, was "
                    f"modified by an in-place operation (a tensor of shape {t.shape} is at "
                    f"version {t._version}; expected version {v}). Compute the new value out of "
                    "place (y = y + 1) or .clone() the output before writing to it")
        if not self.op.vjp_reads_saved:
            return
        for a, v in zip(self.args, self.versions):
            now = getattr(a, "_version", v)           # a released node's edges keep no data
            if now != v:
                raise GradientError(
                    f"{self.name}: one of the tensors needed for gradient computation was "
                    f"modified by an in-place operation (a tensor of shape {a.shape} is at "
                    f"version {now}; expected version {v}). Compute the new value out of place "
                    "(x = x + y) or .clone() the tensor before writing to it")

    def _check_alive(self):
        if self.released:
            raise GradientError(
                f"{self.name}: trying to backward through the graph a second time (or to read "
                "its saved tensors after they were freed); pass retain_graph=True to the first "
                "backward() / grad() call if you need to")

    def output(self, index=0):
        """The forward's output `index` as a tensor, for VJPs that reuse it (exp' = exp). Under
        create_graph its grad_fn is this node, so second derivatives see its dependence on the
        inputs without running the forward again."""
        self._check_alive()
        t = self.args[0]._wrap(self.outs[index], self.out_dtypes[index], self.args[0].device,
                               self.args[0]._backend)
        if is_create_graph():
            t._requires_grad, t.grad_fn, t._out_index = True, self, index
        return t

    def saved_handle(self, key):
        self._check_alive()
        return self.saved[key]

    @property
    def saved_tensors(self):
        self._check_alive()
        a0 = self.args[0]
        out = list(self.args) if self.keeps_inputs else []
        for i, h in enumerate(self.outs or ()):
            out.append(a0._wrap(h, self.out_dtypes[i], a0.device, a0._backend))
        for h in (self.saved or {}).values():
            if hasattr(h, "shape"):
                out.append(a0._wrap(h, a0._backend.dtype_of(h), a0.device, a0._backend))
        return tuple(out)

    def release(self):
        """Free what the node saved (backward without retain_graph); the graph's edges stay."""
        self.outs = self.saved = None
        self.args = _edges(self.args, self.edges)
        self.released = True

    def __repr__(self):
        return f"<{self.name}>"


class _Edge:
    """What a node keeps of a non-leaf input whose data it does not need (released, or an op
    whose VJP reads shapes only): enough to walk the graph and wrap outputs, no data."""
    __slots__ = ("grad_fn", "_out_index", "requires_grad", "shape", "dtype", "device", "_backend",
                 "_wrap")

    def __init__(self, t, grad_fn, out_index):
        self.grad_fn, self._out_index = grad_fn, out_index
        self.requires_grad, self.shape, self.dtype, self.device = \
            t.requires_grad, t.shape, t.dtype, t.device
        self._backend, self._wrap = t._backend, t._wrap


def _edges(args, edges):
    """args with every computed input (one with a grad_fn) replaced by its _Edge; leaves stay
    (their .grad is written, and integer index inputs are read)."""
    return tuple(_Edge(a, fn, i) if fn is not None and type(a) is not _Edge else a
                 for a, (fn, i, _) in zip(args, edges))


def _needs_grad(args):
    if not is_grad_enabled():
        return False
    for a in args:
        if a._requires_grad:
            return True
    return False


def apply(op, /, *args, **attrs):
    """Run op.forward on the args' backend handles; record a Node when a gradient is needed.
    forward returns (output handle or tuple of handles, saved dict or None)."""
    prof = _profiling()
    if prof is not None:
        return prof.record(op.name, "op", args[0]._backend, args, _apply, op, args, attrs)
    return _apply(op, args, attrs)


def _apply(op, args, attrs):
    x0 = args[0]
    be = x0._backend
    outs, saved = op.forward(be, *[a._data for a in args], **attrs)
    multi = type(outs) is tuple
    if not multi and (op.vjp is None or not _needs_grad(args)):   # the common eager case
        return x0._wrap(outs, be.dtype_of(outs), x0.device, be)
    handles = outs if multi else (outs,)
    dtypes = tuple(be.dtype_of(h) for h in handles)
    results = tuple(x0._wrap(h, d, x0.device, be) for h, d in zip(handles, dtypes))
    if op.vjp is not None and _needs_grad(args):
        save_out, keep_in = op.save_out, op.keeps_inputs
        if save_out.__class__ is not bool:
            save_out = save_out(attrs)
        if keep_in.__class__ is not bool:
            keep_in = keep_in(attrs)
        node = Node(op, args, attrs, handles if save_out else None, saved, dtypes, keep_in)
        for i, t in enumerate(results):
            if t.dtype.is_floating:
                t._requires_grad, t.grad_fn, t._out_index = True, node, i
        if save_out:
            node.out_refs = tuple((weakref.ref(t), t._version) for t in results)
    return results if multi else results[0]


def attach(data, op, args, attrs, like):
    """A tensor holding `data`, recorded as op(*args, **attrs) without running the forward (a VJP
    that saved an intermediate result hands it to create_graph this way)."""
    t = like._wrap(data, like._backend.dtype_of(data), like.device, like._backend)
    if is_grad_enabled() and any(a.requires_grad for a in args):
        t._requires_grad = True
        t.grad_fn = Node(op, tuple(args), attrs, (data,), None, (t.dtype,))
    return t


# ------------------------------------------------------------------------------------------------
def _topo_order(roots):
    """Nodes reachable from `roots`, each after every node that consumes it (iterative DFS), and
    the number of graph edges reaching each leaf (its .grad is final when all have delivered)."""
    order, seen, leaf_uses = [], set(), {}
    for root in roots:
        if root is None or id(root) in seen:
            continue
        stack = [(root, False)]
        while stack:
            node, done = stack.pop()
            if done:
                order.append(node)
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.append((node, True))
            for a, (fn, _, rg) in zip(node.args, node.edges):
                if fn is not None:
                    if id(fn) not in seen:
                        stack.append((fn, False))
                elif rg:
                    leaf_uses[id(a)] = leaf_uses.get(id(a), 0) + 1
    order.reverse()
    return order, leaf_uses


def _backend_of(grads):
    return next(g._backend for g in grads if g is not None)


def _add(store, key, g):
    prev = store.get(key)
    store[key] = g if prev is None else prev + g


def run_backward(outputs, grad_outputs, inputs=None, create_graph=False, retain_graph=None,
                 allow_unused=False):
    """Core of Tensor.backward (inputs None: accumulate into the leaves' .grad) and of grad()."""
    if retain_graph is None:
        retain_graph = create_graph
    node_grads, leaf_grads, leaves = {}, {}, {}
    for out, g in zip(outputs, grad_outputs):
        if out.grad_fn is not None:
            _add(node_grads, (id(out.grad_fn), getattr(out, "_out_index", 0)), g)
        elif out.requires_grad:
            _add(leaf_grads, id(out), g)
            leaves[id(out)] = out
    order, leaf_uses = _topo_order([o.grad_fn for o in outputs])
    wanted = None if inputs is None else {(id(t.grad_fn), getattr(t, "_out_index", 0))
                                           for t in inputs if t.grad_fn is not None}
    root_ids = {id(g._data) for g in grad_outputs}
    captured, delivered = {}, set()

    def leaf_done(a):
        if inputs is None:
            g = run_tensor_hooks(a, leaf_grads.pop(id(a)))
            _assign_grad(a, g, create_graph, root_ids, delivered)

    # the VJPs run in the dtypes the forward recorded: autocast is off in a backward pass
    with backward_mode(create_graph), autocast_disabled():
        for node in order:
            n_out = len(node.out_dtypes)
            gs = [node_grads.pop((id(node), i), None) for i in range(n_out)]
            if all(g is None for g in gs):
                _settle(node, leaf_uses, leaf_grads, leaf_done)
                continue
            if node.hooks or node.retained:
                gs = [_node_hooks(node, i, g, create_graph) for i, g in enumerate(gs)]
            if wanted is not None:
                for i, g in enumerate(gs):
                    if (id(node), i) in wanted and g is not None:
                        captured[(id(node), i)] = g
            if node.released and node.op.vjp_reads_saved:
                node._check_alive()
            node._check_versions()
            g0 = gs[0] if n_out == 1 else tuple(gs)
            prof = _profiling()
            grads = node.op.vjp(node, g0) if prof is None else \
                prof.record(node.name, "backward", _backend_of(gs), [g for g in gs if g is not None],
                            node.op.vjp, node, g0)
            for a, ga, (fn, index, rg) in zip(node.args, grads, node.edges):
                if ga is None or not rg:
                    continue
                if ga.shape != a.shape:
                    raise GradientError(f"internal: {node.name} produced a gradient of shape "
                                        f"{ga.shape} for an input of shape {a.shape}")
                if fn is not None:
                    _add(node_grads, (id(fn), index), ga)
                else:
                    _add(leaf_grads, id(a), ga)
                    leaves[id(a)] = a
            _settle(node, leaf_uses, leaf_grads, leaf_done)
            if not retain_graph:
                node.release()
    if inputs is None:
        for key in list(leaf_grads):         # root leaves (backward() on a leaf itself)
            g = run_tensor_hooks(leaves[key], leaf_grads.pop(key))
            _assign_grad(leaves[key], g, create_graph, root_ids, delivered)
        return None
    result = []
    for i, t in enumerate(inputs):
        if t.grad_fn is not None:
            g = captured.get((id(t.grad_fn), getattr(t, "_out_index", 0)))
        else:
            g = leaf_grads.get(id(t))
            g = None if g is None else run_tensor_hooks(t, g)
        if g is None and not allow_unused:
            raise GradientError(f"input {i} (shape {t.shape}) is not used to compute the outputs "
                                "(torch: 'appears to not have been used in the graph'); pass "
                                "allow_unused=True to get None for it, or materialize_grads=True "
                                "for zeros")
        if g is not None and not create_graph:
            g = g.detach()
        result.append(g)
    return tuple(result)


def _hook_result(t_shape, g, r, where):
    if r is None:
        return g
    if not _is_tensor(r) or r.shape != g.shape or r.device != g.device:
        raise GradientError(f"a hook registered on {where} returned "
                            f"{getattr(r, 'shape', type(r).__name__)}; a hook must return None or a "
                            f"Tensor like its gradient (shape {g.shape}, device {g.device!r})")
    return r if r.dtype is g.dtype else r.astype(g.dtype)


def run_tensor_hooks(leaf, g):
    """A leaf's register_hook functions, in registration order, on its total gradient of the
    pass (each may return a replacement)."""
    hooks = getattr(leaf, "_grad_hooks", None)
    for fn in list(hooks.values()) if hooks else ():
        g = _hook_result(leaf.shape, g, fn(g), f"a leaf of shape {leaf.shape}")
    return g


def _node_hooks(node, i, g, create_graph):
    """The hooks of output i of `node` (t.register_hook on a non-leaf), then its retain_grad."""
    if g is None:
        return g
    hooks = node.hooks.get(i) if node.hooks else None
    for fn in list(hooks.values()) if hooks else ():
        g = _hook_result(g.shape, g, fn(g), f"an output of {node.name}")
    for t in (node.retained.get(i, ()) if node.retained else ()):
        add = g if create_graph else g.detach()
        t._grad = add._copy() if t._grad is None and not create_graph else \
            (add if t._grad is None else t._grad + add)
    return g


def _settle(node, leaf_uses, leaf_grads, leaf_done):
    """Count the node's edges into leaves as delivered; finish the leaves that got all of theirs."""
    for a, (fn, _, rg) in zip(node.args, node.edges):
        if fn is None and rg:
            k = id(a)
            leaf_uses[k] -= 1
            if leaf_uses[k] == 0 and k in leaf_grads:
                leaf_done(a)


def _assign_grad(leaf, g, create_graph, root_ids, delivered):
    """leaf.grad += g. A gradient that might alias another buffer (a view, the caller's
    grad_output, one already given to another leaf) is copied so that every .grad owns its memory."""
    if not create_graph:
        g = g.detach()
        if id(g._data) in root_ids or id(g._data) in delivered or g._backend.is_view(g._data):
            g = g._copy()
        delivered.add(id(g._data))
    if leaf.grad is None:
        leaf.grad = g
    else:
        total = leaf.grad + g
        leaf.grad = total if create_graph else total.detach()
    for hook in leaf._post_accumulate_hooks():
        hook(leaf)


# ------------------------------------------------------------------------------------------------
def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=None, materialize_grads=False):
    """Gradients of `outputs` with respect to `inputs` (tuple of Tensors), like torch.autograd.grad.
    With create_graph=True the results are differentiable (higher-order derivatives). An input the
    outputs do not depend on raises GradientError, unless allow_unused=True (its gradient is None)
    or materialize_grads=True (zeros)."""
    if materialize_grads:
        if allow_unused is False:
            raise GradientError("grad(): materialize_grads=True needs allow_unused=True or left "
                                "unset (it gives zeros for unused inputs)")
        allow_unused = True
    single = _is_tensor(outputs)
    outputs = [outputs] if single else list(outputs)
    inputs = [inputs] if _is_tensor(inputs) else list(inputs)
    for i, t in enumerate(inputs):
        if not _is_tensor(t) or not t.requires_grad:
            raise GradientError(f"grad(): input {i} must be a Tensor with requires_grad=True, "
                                f"got {type(t).__name__}")
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif _is_tensor(grad_outputs):
        grad_outputs = [grad_outputs]
    if len(grad_outputs) != len(outputs):
        raise GradientError(f"grad(): {len(outputs)} outputs but {len(grad_outputs)} grad_outputs")
    gos = [check_grad_output(o, g) for o, g in zip(outputs, grad_outputs)]
    result = run_backward(outputs, gos, inputs, create_graph, retain_graph, bool(allow_unused))
    if materialize_grads:
        result = tuple(t._new_full(t.shape, 0) if g is None else g
                       for t, g in zip(inputs, result))
    return result


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """torch.autograd.backward: sum of the tensors' gradients accumulated into the leaves' .grad
    (or, with inputs=, into those tensors' .grad only)."""
    tensors = [tensors] if _is_tensor(tensors) else list(tensors)
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    elif _is_tensor(grad_tensors):
        grad_tensors = [grad_tensors]
    if len(grad_tensors) != len(tensors):
        raise GradientError(f"backward(): {len(tensors)} tensors but {len(grad_tensors)} "
                            "grad_tensors")
    gos = [check_grad_output(t, g) for t, g in zip(tensors, grad_tensors)]
    if inputs is None:
        run_backward(tensors, gos, None, create_graph, retain_graph)
        return
    inputs = [inputs] if _is_tensor(inputs) else list(inputs)
    if not inputs:
        raise GradientError("backward(inputs=...) cannot be empty; leave it out to accumulate "
                            "into every leaf")
    for i, t in enumerate(inputs):
        if not _is_tensor(t) or not t.requires_grad:
            raise GradientError(f"backward(inputs=...): input {i} must be a Tensor that requires "
                                f"grad, got {type(t).__name__}"
                                + (" with requires_grad=False" if _is_tensor(t) else ""))
    grads = run_backward(tensors, gos, inputs, create_graph, retain_graph, allow_unused=True)
    for t, g in zip(inputs, grads):
        if g is None:
            continue
        g = g if create_graph else g._copy()
        total = g if t.grad is None else t.grad + g
        t.grad = total if create_graph else total.detach()
        for hook in t._post_accumulate_hooks():
            hook(t)


def _is_tensor(x):
    return hasattr(x, "_data") and hasattr(x, "grad_fn")


def check_grad_output(out, g):
    """The gradient to start backward from: ones for a one-element output, else `g` checked
    (shape, device) and cast to the output's dtype as torch does."""
    if not _is_tensor(out):
        raise GradientError(f"backward/grad needs Tensor outputs, got {type(out).__name__}")
    if not out.requires_grad:
        raise GradientError("this tensor does not require grad and has no grad_fn: nothing to "
                            "differentiate (did you create it under no_grad, or forget "
                            "requires_grad=True on the inputs?)")
    if g is None:
        if out.size != 1:
            raise GradientError(f"backward on a non-scalar tensor of shape {out.shape} needs a "
                                "gradient: pass grad= a tensor of that shape (or call .sum() first)")
        return out._new_full(out.shape, 1)
    g = out._like_tensor(g)
    if g.shape != out.shape:
        raise GradientError(f"gradient has shape {g.shape} but the output has shape {out.shape}; "
                            "they must be equal")
    if g.device != out.device:
        raise DeviceError(f"gradient is on {g.device!r} but the output is on {out.device!r}")
    if g.dtype is not out.dtype:
        g = g.detach().astype(out.dtype)
    return g
