"""Checks on values that a GPU backend makes on the device and reports at the next sync.

Some arguments can only be checked by looking at their values: class labels in [0, C)
(cross_entropy, nll_loss, one_hot), indices in bounds (embedding, gather, index_select,
take_along_dim, scatter_add, x[idx]), probabilities in [0, 1] (binary_cross_entropy). The op
computes the check on the device as a 0-d bool handle, the *flag* (true: the check failed). The
cpu has the values at hand and raises at the call. A GPU backend cannot look without waiting for
the device, so it keeps the flag and reads it at its next sync — a readback: `t.numpy()`,
`t.tolist()`, `t.item()`, `await t.read()`, `t.to("cpu")` — as torch's CUDA reports a device-side
assert. That sync can belong to a later, unrelated op, so the error names the op that queued the
check and the user's line that called it: the first frame outside numr_web, taken when the check
was queued (a file name and a line number, no traceback):

    cross_entropy (train.py:41): targets must be in [0, 3) or equal ignore_index=-100 for 3
    classes; some are not; found at the next sync

Pending checks belong to the thread or asyncio task that queued them — to its contextvars
Context: the next sync in that thread or task raises them, once; a task never sees another's,
not even the ones pending in its parent's context when it was created (tasks that share one
Context, as a notebook kernel's cells do, share them). All the pending flags are read in one
readback at the sync (one small gather of the flags when there are several). The same check
queued again before a sync (an op called in a loop) keeps one flag, the maximum of the two.
"""
from __future__ import annotations

import contextvars
import os
import sys
from typing import NamedTuple

from ..errors import ShapeError

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class Check(NamedTuple):
    """One check: the op that queued it, what was wrong and what is right (`text`), the error
    class to raise and the call site ((file, line) of the user's call, or None)."""
    op: str
    text: str
    error: type = ShapeError
    site: tuple | None = None

    def at_once(self):
        """The error raised at the call (the cpu)."""
        err = self.error(f"{self.op}: {self.text}")
        err.op, err.call_site = self.op, self.site
        return err

    def where(self):
        if self.site is None:
            return self.op
        return f"{self.op} ({_short_path(self.site[0])}:{self.site[1]})"

    def deferred(self, others=()):
        """The error raised at a later sync; `others`: further checks that failed too."""
        msg = f"{self.where()}: {self.text}; found at the next sync"
        if others:
            msg += " (also failed since the last sync: " + \
                "; ".join(f"{c.where()}: {c.text}" for c in others) + ")"
        err = self.error(msg)
        err.op, err.call_site = self.op, self.site
        return err


def call_site():
    """(file, line) of the innermost frame outside numr_web: the user's call into it."""
    getframe = getattr(sys, "_getframe", None)
    f = getframe(1) if getframe is not None else None
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE):
        f = f.f_back
    return None if f is None else (f.f_code.co_filename, f.f_lineno)


def _short_path(path):
    """A path below the working directory relative to it (as a traceback a user reads)."""
    try:
        cwd = os.getcwd() + os.sep
    except OSError:
        return path
    return path[len(cwd):] if path.startswith(cwd) else path


class _State:
    """One context's pending checks, and the token of the ContextVar.set that stored it here."""
    __slots__ = ("checks", "token")


class PendingChecks:
    """The pending checks of one backend in each context (a thread's, an asyncio task's):
    {Check: flag handle}, in the order they were first queued. A context copied from another (a
    new task, asyncio.to_thread) starts with none; tasks that share one context (a notebook
    kernel runs its cells so) share them."""

    def __init__(self, name):
        self._var = contextvars.ContextVar(name, default=None)

    def _here(self):
        """This context's state, or None: none yet, or the state of the context this one was
        copied from (its token resets only in the context that set it)."""
        state = self._var.get()
        if state is None:
            return None
        try:
            self._var.reset(state.token)
        except ValueError:                   # set in the context this one was copied from:
            self._var.set(None)              # not this one's; drop it (and its flags) here
            return None
        state.token = self._var.set(state)
        return state

    def get(self):
        state = self._here()
        return state.checks if state is not None else {}

    def set(self, checks):
        self._store(dict(checks) if checks else {})

    def _store(self, checks):
        state = self._here()
        if state is None:
            state = _State()
            state.token = self._var.set(state)
        state.checks = checks                # replaced, never changed in place

    def take(self):
        checks = self.get()
        if checks:
            self._store({})
        return checks

    def queue(self, backend, check, flag):
        """Add `flag` to `check`'s pending flag (their maximum)."""
        while True:
            prev = self.get().get(check)
            new = flag if prev is None else backend.binary("maximum", prev, flag)
            # binary() may compile a kernel and let other work run meanwhile (JSPI in the browser):
            # write only onto the state the merge was made from
            current = self.get()
            if current.get(check) is prev:
                current = dict(current)
                current[check] = new
                self._store(current)
                return


def failed_checks(checks, flag_bytes):
    """The checks whose flag byte is set, in queue order."""
    return [c for c, b in zip(checks, flag_bytes) if b]


def stack_flags(backend, flags):
    """One handle holding every flag (one readback instead of one per check)."""
    if len(flags) == 1:
        return flags[0]
    return backend.concat([backend.reshape(f, (1,)) for f in flags], 0)
