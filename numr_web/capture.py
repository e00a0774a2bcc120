"""nr.capture(fn): record a step once (a CUDA graph on cuda, its dispatch list on webgpu) and replay it.

    step = nr.capture(train_step)        # or @nr.capture
    for x, y in batches:
        loss = step(x, y)                # same results as train_step(x, y), one graph launch

Semantics are the eager step's:
  * Tensor arguments are inputs: their values are copied into the graph's input buffers at each
    call. Their shapes, dtypes and devices, and the values of the other (hashable) arguments, form
    the signature; a call with another signature is recorded anew (the first call of a signature
    runs eagerly, as a warm-up that builds lazily created state; the second records and replays).
  * State the step updates (parameters re-pointed by an optimizer, .grad, optimizer and module
    state in dicts) is carried: what a slot holds after the step is copied back, inside the graph,
    into the storage it held before, so every replay reads the previous replay's results.
  * Returned tensors are fresh copies (never a buffer the next replay overwrites).
  * The step must stay on the device and be the same work every call. When it is not — it reads a
    value back (.item(), .numpy(), print), draws host random numbers (dropout), or changes Python
    values in the state it updates (Adam's step count, a learning rate) — the step is not recorded
    and runs eagerly (a warning says why, once); a learning rate changed between calls is seen and
    the step recorded again. Python side effects of fn (appending to a list) happen on the
    recording call only.
  * Host data the step uploads (nr.tensor(...) inside it) is replayed with the values it had when
    recorded, like the Python numbers the step uses; pass data that changes as an argument.
On cuda a replay is one CUDA graph launch; on webgpu the recorded dispatches are submitted in a
few command buffers of growing length (backends/webgpu/graphs.py); on cpu capture(fn) just calls
fn.
"""
from __future__ import annotations

import gc
import warnings

from .errors import GradientError, NumrError
from .generator import default_generator
from .tensor import Tensor

_MISSING = object()


class Captured:
    """The callable nr.capture returns. `.graphs`: signatures recorded so far; `.eager`:
    signatures that run eagerly, with the reason."""

    def __init__(self, fn, max_graphs=8):
        self.fn = fn
        self.max_graphs = max_graphs
        self.graphs = {}
        self.eager = {}
        self._warm = set()
        self.__wrapped__ = fn
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, *args, **kwargs):
        tensors = [a for a in list(args) + list(kwargs.values()) if isinstance(a, Tensor)]
        be = tensors[0]._backend if tensors else None
        if be is None or not getattr(be, "can_capture", False) or be.capturing:
            return self.fn(*args, **kwargs)
        for t in tensors:
            if t.requires_grad:
                raise GradientError("nr.capture: tensor arguments are inputs copied into the "
                                    "recorded step and cannot require gradients; reach "
                                    "parameters through the model, not as arguments")
            if t._backend is not be:
                return self.fn(*args, **kwargs)
        try:
            sig = _signature(args, kwargs)
        except TypeError:                       # an unhashable argument: no signature
            return self.fn(*args, **kwargs)
        if sig in self.eager:
            return self.fn(*args, **kwargs)
        g = self.graphs.get(sig)
        if g is not None and not g.stale():
            return g.replay(args, kwargs)
        if g is None and sig not in self._warm:
            self._warm.add(sig)
            return self.fn(*args, **kwargs)     # warm-up: lazily built state, kernels compiled
        if g is not None:
            g.recaptures += 1
            if g.recaptures > 4:
                return self._go_eager(sig, "values in the step's state change between calls",
                                      args, kwargs)
        if len(self.graphs) >= self.max_graphs and sig not in self.graphs:
            self.graphs.pop(next(iter(self.graphs)))
        g = _Graph(self.fn, be, args, kwargs, g.recaptures if g is not None else 0)
        why = g.record()
        if why is not None:
            self.graphs.pop(sig, None)
            return self._go_eager(sig, why, args, kwargs)
        self.graphs[sig] = g
        return g.replay(args, kwargs)

    def _go_eager(self, sig, why, args=(), kwargs=None):
        self.eager[sig] = why
        self.graphs.pop(sig, None)
        warnings.warn(f"nr.capture({getattr(self.fn, '__name__', 'fn')}): running eagerly: {why}",
                      RuntimeWarning, stacklevel=3)
        return self.fn(*args, **(kwargs or {}))


def capture(fn=None, *, max_graphs=8):
    """Record `fn` (a training step) once per signature and replay it; see the module docstring."""
    if fn is None:
        return lambda f: Captured(f, max_graphs)
    if not callable(fn):
        raise NumrError(f"nr.capture needs a function, got {type(fn).__name__}")
    return Captured(fn, max_graphs)


def _key(a):
    if isinstance(a, Tensor):
        return ("T", a.shape, a.dtype.name, a.device)
    if isinstance(a, (list, tuple)):
        return (type(a).__name__,) + tuple(_key(x) for x in a)
    hash(a)
    return ("V", type(a).__name__, a) if isinstance(a, (int, float, str, bool, type(None))) \
        else ("O", id(a))


def _signature(args, kwargs):
    return tuple(_key(a) for a in args) + tuple((k, _key(v)) for k, v in sorted(kwargs.items()))


# -- the state a step carries ------------------------------------------------------------------------
def _snapshot(be):
    """Every live Tensor of this backend (its storage and grad), and every other dict holding
    one (a copy of its items): the slots a step may re-point."""
    tensors, dicts, own = [], [], set()
    objects = gc.get_objects()
    # type(o), not isinstance(o, ...): isinstance reads o.__class__, and some objects of other
    # libraries warn on any attribute access (torch.distributed.reduce_op: a FutureWarning)
    for o in objects:
        if _is(o, Tensor) and o._backend is be:
            tensors.append((o, o._data, o._grad))
            own.add(id(o.__dict__))          # a tensor's own attributes: tracked above
        elif _is(o, (_Graph, Captured)):
            own.add(id(o.__dict__))          # capture's own bookkeeping is not the step's state
    for o in objects:
        if type(o) is dict or (_is(o, dict) and id(o) not in own):
            if id(o) in own:
                continue
            try:
                if any(_holds_tensor(v, be) for v in o.values()):
                    dicts.append((o, dict(o)))
            except Exception:                    # a dict subclass with odd values()
                continue
    return tensors, dicts


# The state's values are any objects (a module's globals among them): tested by type(v), never by
# isinstance, which reads v.__class__ (see _snapshot)
def _is(v, cls):
    return issubclass(type(v), cls)


def _holds_tensor(v, be):
    if _is(v, Tensor):
        return v._backend is be
    if _is(v, (list, tuple)):
        return any(_is(x, Tensor) and x._backend is be for x in v)
    return False


def _scalar(v):
    if _is(v, (bool, int, float, complex, str, type(None))):
        return True
    return _is(v, tuple) and all(_scalar(x) for x in v)


def _same_value(a, b):
    if a is b:
        return True
    if _is(a, Tensor) or _is(b, Tensor):
        return False
    if _is(a, (list, tuple)) and _is(b, (list, tuple)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:
        return False


class _Graph:
    def __init__(self, fn, be, args, kwargs, recaptures):
        self.fn, self.be = fn, be
        self.recaptures = recaptures
        # input buffers: copies of the tensor arguments, read by the recorded step
        self.inputs = []

        def static(a):
            if isinstance(a, Tensor):
                s = Tensor._wrap(be.copy(a._data), a.dtype, a.device, be)
                self.inputs.append(s)
                return s
            if isinstance(a, (list, tuple)):
                return type(a)(static(x) for x in a)
            return a
        self.args = [static(a) for a in args]
        self.kwargs = {k: static(v) for k, v in kwargs.items()}

    def record(self):
        """Record the step; None when done, else why it cannot be recorded (state restored)."""
        be = self.be
        tensors, dicts = _snapshot(be)
        rng_state = default_generator.get_state()
        seen = set()
        for t, data, _ in tensors:               # build the copy kernels before recording
            if t.dtype not in seen:
                seen.add(t.dtype)
                be.assign(data, data)
        rec = be.recording()
        try:
            rec.begin()
        except Exception as e:
            return f"the device cannot record: {type(e).__name__}: {e}"
        saved_checks = be.take_checks()
        try:
            out = self.fn(*self.args, **self.kwargs)
            why = self._carry(tensors, dicts, rng_state)
        except NumrError as e:
            why, out = f"{type(e).__name__}: {e}", None
        except Exception as e:   # e.g. a library call that synchronises (not allowed in a graph)
            why, out = f"the step failed while recording: {type(e).__name__}: {e}", None
        if why is not None:
            rec.abort()
            self._restore(tensors, dicts, grads=True)
            default_generator.set_state(rng_state)
            be.put_checks(saved_checks)
            return why
        try:
            self.graph = rec.end()
        except NumrError as e:                  # the capture was invalidated on the device
            self._restore(tensors, dicts, grads=True)
            default_generator.set_state(rng_state)
            be.put_checks(saved_checks)
            return str(e)
        self.recording = rec                # its pool (addresses the graph writes stay
        #                                     reserved) and the host data its uploads read
        self.checks = be.take_checks()     # value checks made by the step: re-armed per replay
        be.put_checks(saved_checks)
        self.out = out
        self._restore(tensors, dicts)
        # what replays rely on: parameters keep their storage, Python values of the state stay
        self.bound = [(t, data0) for t, data0, _ in tensors
                      if id(data0) in self.carried or (t.is_leaf and t.requires_grad)]
        self.state = [(d, {k: v for k, v in items.items() if _scalar(v)})
                      for d, items in dicts if "__builtins__" not in d]
        return None

    def _carry(self, tensors, dicts, rng_state):
        """Still recording: copy each slot's new storage into its old one; None or why not."""
        if default_generator.get_state() != rng_state:
            return "the step draws host random numbers (dropout): each replay would reuse them"
        be = self.be
        pairs = {}

        def pair(old, new, what):
            if old.shape != new.shape or old.dtype != new.dtype:
                raise NumrError(f"the step changes the shape or dtype of {what}")
            if old is not new:
                pairs[id(old)] = (old, new)
        for t, data0, grad0 in tensors:
            if t._data is not data0:
                pair(data0, t._data, "a tensor it updates")
            if grad0 is not None and t._grad is not grad0:
                if t._grad is None:
                    return "the step clears a .grad it does not set again"
                pair(grad0._data, t._grad._data, "a .grad")
        for d, items in dicts:
            for k, v0 in items.items():
                v = d.get(k, _MISSING)
                if _is(v0, Tensor):
                    if v is not v0:
                        if not _is(v, Tensor):
                            return f"the step removes the state {k!r}"
                        pair(v0._data, v._data, f"the state {k!r}")
                elif _scalar(v0) and not _same_value(v, v0):
                    return (f"the step changes the Python value {k!r} of its state "
                            f"({str(v0)[:40]} -> {str(v)[:40]})")
            if any(k not in items and _holds_tensor(v, be) for k, v in d.items()):
                return "the step creates new state (warm it up with more eager calls first)"
        for old, new in pairs.values():
            be.assign(old, new)
        self.carried = {k: old for k, (old, _) in pairs.items()}   # kept alive with the graph
        return None

    @staticmethod
    def _restore(tensors, dicts, grads=False):
        """Slots back to what they held before the step (grads=True, after a recording that
        failed: every slot, .grad that was None and Python values included)."""
        for t, data0, grad0 in tensors:
            t._data = data0
            if grad0 is not None or grads:
                t._grad = grad0
        for d, items in dicts:
            for k, v in items.items():
                if d.get(k, _MISSING) is not v and (grads or _is(v, Tensor)):
                    d[k] = v
            if grads:                        # a failed recording: its new keys go too
                for k in [k for k in d if k not in items]:
                    del d[k]

    def stale(self):
        """Whether the state changed outside the step since it was recorded: a parameter given
        new storage (load_state_dict), or a Python value of the state (a new learning rate)."""
        for t, data in self.bound:
            if t._data is not data:
                return True
        for d, items in self.state:
            for k, v in items.items():
                if not _same_value(d.get(k, _MISSING), v):
                    return True
        return False

    def replay(self, args, kwargs):
        be = self.be
        for s, a in zip(self.inputs, _flat_tensors(args, kwargs, self.kwargs)):
            be.assign(s._data, a._data)
        self.graph.launch()
        be.requeue_checks(self.checks)
        return _fresh(self.out, be)


def _flat_tensors(args, kwargs, order):
    out = []

    def walk(a):
        if isinstance(a, Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            for x in a:
                walk(x)
    for a in args:
        walk(a)
    for k in order:
        walk(kwargs[k])
    return out


def _fresh(out, be):
    if isinstance(out, Tensor):
        return Tensor._wrap(be.copy(out._data), out.dtype, out.device, be)
    if isinstance(out, (list, tuple)):
        return type(out)(_fresh(x, be) for x in out)
    if isinstance(out, dict):
        return {k: _fresh(v, be) for k, v in out.items()}
    return out
