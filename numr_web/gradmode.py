"""Grad mode: whether ops record the graph, and whether a backward pass builds a graph of its own.

The flags live in context variables, so each thread and each asyncio task (two coroutines of one
browser page, say) has its own: a `no_grad()` in one cannot switch recording off in another.
"""
from __future__ import annotations

import contextlib
import contextvars

_enabled = contextvars.ContextVar("numr_grad_enabled", default=True)
_create_graph = contextvars.ContextVar("numr_create_graph", default=False)


def is_grad_enabled():
    return _enabled.get()


def is_create_graph():
    """True inside a backward pass run with create_graph=True (VJPs then build a graph)."""
    return _create_graph.get()


@contextlib.contextmanager
def set_grad_enabled(mode):
    """Enable or disable graph recording inside the block (torch.set_grad_enabled as a context)."""
    token = _enabled.set(bool(mode))
    try:
        yield
    finally:
        _enabled.reset(token)


def no_grad():
    """Disable graph recording inside the block (inference, optimizer updates)."""
    return set_grad_enabled(False)


def enable_grad():
    return set_grad_enabled(True)


@contextlib.contextmanager
def backward_mode(create_graph):
    """The mode a backward pass runs in: VJPs record a graph only when create_graph is set."""
    t1, t2 = _enabled.set(bool(create_graph)), _create_graph.set(bool(create_graph))
    try:
        yield
    finally:
        _create_graph.reset(t2)
        _enabled.reset(t1)
