"""Reverse-mode autograd: graph nodes, an iterative topological backward, no_grad, grad().

A Node records one op application: the op row (whose `vjp` gives the input gradients), the input
tensors, what the forward saved, and its attributes. Backward walks nodes in reverse topological order
(computed iteratively, so a graph as deep as memory allows works) and accumulates gradients.
With create_graph=True every VJP is evaluated with differentiable tensor ops, so the gradients have a
graph of their own and can be differentiated again.
"""
from __future__ import annotations

import contextlib

from .errors import GradientError

_state = {"enabled": True, "create_graph": False}


def is_grad_enabled():
    return _state["enabled"]


@contextlib.contextmanager
def no_grad():
    """Disable graph recording inside the block (inference, optimizer updates)."""
    prev = _state["enabled"]
    _state["enabled"] = False
    try:
        yield
    finally:
        _state["enabled"] = prev


@contextlib.contextmanager
def enable_grad():
    prev = _state["enabled"]
    _state["enabled"] = True
    try:
        yield
    finally:
        _state["enabled"] = prev


class Node:
    """A grad_fn: `.name` ("MulBackward"), `.inputs` (parent nodes, or leaf tensors, or None for
    inputs that need no gradient) and `.saved_tensors`."""

    __slots__ = ("op", "args", "out_data", "extra", "attrs", "out_dtype", "__weakref__")

    def __init__(self, op, args, out_data, extra, attrs, out_dtype):
        self.op, self.args, self.out_data, self.extra = op, args, out_data, extra
        self.attrs, self.out_dtype = attrs, out_dtype

    @property
    def name(self):
        return self.op.backward_name

    @property
    def inputs(self):
        return tuple(a.grad_fn if a.grad_fn is not None else (a if a.requires_grad else None)
                     for a in self.args)

    @property
    def saved_tensors(self):
        from .tensor import Tensor
        saved = [a for a in self.args]
        if self.out_data is not None:
            saved.append(Tensor._wrap(self.out_data, self.out_dtype, self.args[0].device))
        if self.extra is not None:
            saved.append(Tensor._wrap(self.extra, self.out_dtype, self.args[0].device))
        return tuple(saved)

    def output(self):
        """The forward output, for VJPs that reuse it (exp' = exp). Under create_graph it is
        recomputed with recording on, so second derivatives see its dependence on the inputs."""
        from .tensor import Tensor
        if _state["create_graph"]:
            from .ops import apply
            return apply(self.op, *self.args, **self.attrs)
        return Tensor._wrap(self.out_data, self.out_dtype, self.args[0].device)

    def __repr__(self):
        return f"<{self.name}>"


def _topo_order(roots):
    """Nodes reachable from `roots`, each after every node that consumes it (iterative DFS)."""
    order, seen = [], set()
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
            for a in node.args:
                fn = a.grad_fn
                if fn is not None and id(fn) not in seen:
                    stack.append((fn, False))
    order.reverse()
    return order


def _accumulate(store, key, g):
    prev = store.get(key)
    store[key] = g if prev is None else prev + g


def run_backward(outputs, grad_outputs, inputs=None, create_graph=False, allow_unused=False):
    """Core of Tensor.backward (inputs None: accumulate into leaves' .grad) and of grad()."""
    from .tensor import Tensor
    node_grads, leaf_grads, leaves = {}, {}, {}
    for out, g in zip(outputs, grad_outputs):
        if out.grad_fn is not None:
            _accumulate(node_grads, id(out.grad_fn), g)
        elif out.requires_grad:
            _accumulate(leaf_grads, id(out), g)
            leaves[id(out)] = out
    wanted = None
    if inputs is not None:
        wanted = {id(t.grad_fn) for t in inputs if t.grad_fn is not None}
    prev = dict(_state)
    _state["create_graph"] = create_graph
    _state["enabled"] = create_graph
    captured = {}
    try:
        for node in _topo_order([o.grad_fn for o in outputs]):
            g = node_grads.pop(id(node), None)
            if g is None:
                continue
            if wanted is not None and id(node) in wanted:
                captured[id(node)] = g
            grads = node.op.vjp(node, g)
            for a, ga in zip(node.args, grads):
                if ga is None or not a.requires_grad:
                    continue
                if isinstance(ga, Tensor) and ga.shape != a.shape:
                    raise GradientError(f"internal: {node.name} produced a gradient of shape "
                                        f"{ga.shape} for an input of shape {a.shape}")
                if a.grad_fn is not None:
                    _accumulate(node_grads, id(a.grad_fn), ga)
                else:
                    _accumulate(leaf_grads, id(a), ga)
                    leaves[id(a)] = a
    finally:
        _state.update(prev)
    if inputs is None:
        for key, g in leaf_grads.items():
            t = leaves[key]
            if not create_graph:
                g = g.detach()
            t.grad = g if t.grad is None else (t.grad + g if create_graph else (t.grad + g).detach())
        return None
    result = []
    for i, t in enumerate(inputs):
        g = captured.get(id(t.grad_fn)) if t.grad_fn is not None else leaf_grads.get(id(t))
        if g is None and not allow_unused:
            raise GradientError(f"input {i} (shape {t.shape}) is not used to compute the outputs; "
                                "pass allow_unused=True to get None for it")
        if g is not None and not create_graph:
            g = g.detach()
        result.append(g)
    return tuple(result)


def grad(outputs, inputs, grad_outputs=None, create_graph=False, allow_unused=False):
    """Gradients of `outputs` with respect to `inputs` (tuple of Tensors), like torch.autograd.grad.
    With create_graph=True the results are differentiable (higher-order derivatives)."""
    from .tensor import Tensor
    single = isinstance(outputs, Tensor)
    outputs = [outputs] if single else list(outputs)
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    for t in inputs:
        if not isinstance(t, Tensor) or not t.requires_grad:
            raise GradientError("every input to grad() must be a Tensor with requires_grad=True")
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs]
    gos = [_check_grad_output(o, g) for o, g in zip(outputs, grad_outputs)]
    return run_backward(outputs, gos, inputs, create_graph, allow_unused)


def _check_grad_output(out, g):
    from .tensor import Tensor
    if not out.requires_grad:
        raise GradientError("this tensor does not require grad and has no grad_fn: nothing to "
                            "differentiate (did you create it under no_grad, or forget "
                            "requires_grad=True on the inputs?)")
    if g is None:
        if out.size != 1:
            raise GradientError(f"backward on a non-scalar tensor of shape {out.shape} needs a "
                                "gradient: pass grad= a tensor of that shape (or call .sum() first)")
        from . import ops
        return ops.ones_like(out)
    if not isinstance(g, Tensor):
        from .tensor import tensor
        g = tensor(g, dtype=out.dtype, device=out.device)
    if g.shape != out.shape:
        raise GradientError(f"gradient has shape {g.shape} but the output has shape {out.shape}; "
                            "they must be equal")
    if g.device != out.device:
        from .errors import DeviceError
        raise DeviceError(f"gradient is on {g.device!r} but the output is on {out.device!r}")
    return g
