"""Grad mode: whether ops record the graph, and whether a backward pass builds a graph of its own.

The flags live in context variables, so each thread and each asyncio task (two coroutines of one
browser page, say) has its own: a `no_grad()` in one cannot switch recording off in another.
"""
from __future__ import annotations

import contextlib
import contextvars

from .errors import DTypeError

_enabled = contextvars.ContextVar("numr_grad_enabled", default=True)
_create_graph = contextvars.ContextVar("numr_create_graph", default=False)
_inference = contextvars.ContextVar("numr_inference_mode", default=False)


def is_grad_enabled():
    return _enabled.get()


def is_create_graph():
    """True inside a backward pass run with create_graph=True (VJPs then build a graph)."""
    return _create_graph.get()


class _Mode(contextlib.ContextDecorator):
    """A grad-mode switch usable as a context manager and as a decorator (torch's classes)."""

    def __new__(cls, *args):
        # torch's bare decorator form: @nr.no_grad (no parentheses) decorates the function
        if len(args) == 1 and callable(args[0]) and not isinstance(args[0], bool):
            return cls()(args[0])
        return super().__new__(cls)

    def __init__(self, mode=True):
        self.mode = bool(mode)
        self._stack = []

    def _recreate_cm(self):
        return type(self)(self.mode)

    def __enter__(self):
        self._stack.append(_switch(self._flags()))    # one instance may be entered nested

    def __exit__(self, *exc):
        for var, token in reversed(self._stack.pop()):
            var.reset(token)
        return False

    def _flags(self):
        return ((_enabled, self.mode),)


def _switch(flags):
    return [(var, var.set(value)) for var, value in flags]


class no_grad(_Mode):
    """Disable graph recording inside the block or the decorated function (inference,
    optimizer updates)."""

    def __init__(self, *_func):
        super().__init__(False)

    def _recreate_cm(self):
        return no_grad()


class enable_grad(_Mode):
    """Enable graph recording inside the block (inside a no_grad region, say)."""

    def __init__(self, *_func):
        super().__init__(True)

    def _recreate_cm(self):
        return enable_grad()


class set_grad_enabled(_Mode):
    """torch.set_grad_enabled: called, it sets the mode at once (`nr.set_grad_enabled(False)`
    switches recording off until switched on again); as a context manager the mode holds
    inside the block and the previous one comes back after it; as a decorator, inside the
    function only."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise DTypeError(f"set_grad_enabled expects True or False, got {mode!r}")
        super().__init__(mode)
        self._prev = _enabled.get()
        _enabled.set(mode)

    def __call__(self, fn):
        _enabled.set(self._prev)           # decorating does not switch the mode
        return super().__call__(fn)

    def _recreate_cm(self):
        prev = _enabled.get()
        cm = set_grad_enabled(self.mode)
        _enabled.set(prev)
        return cm

    def __enter__(self):
        _enabled.set(self.mode)

    def __exit__(self, *exc):
        _enabled.set(self._prev)
        return False


class inference_mode(_Mode):
    """torch.inference_mode(mode=True): no graph is recorded inside (as no_grad);
    is_inference_mode_enabled() tells whether one is active."""

    def _flags(self):
        return ((_inference, self.mode),) + (((_enabled, False),) if self.mode else ())


def is_inference_mode_enabled():
    return _inference.get()


@contextlib.contextmanager
def backward_mode(create_graph):
    """The mode a backward pass runs in: VJPs record a graph only when create_graph is set."""
    t1, t2 = _enabled.set(bool(create_graph)), _create_graph.set(bool(create_graph))
    try:
        yield
    finally:
        _create_graph.reset(t2)
        _enabled.reset(t1)
