"""DistributedDataParallel, with torch's name and semantics.

- At construction: the model's structure (names, shapes, dtypes) is checked to be the same on every
  rank (ShapeError otherwise), then parameters and buffers are broadcast from rank 0.
- Gradients are averaged over ranks in buckets (about bucket_cap_mb each, the first 1 MiB as in
  torch, parameters in reverse order since backward produces the last layers' gradients first).
  A post-accumulate-grad hook on each parameter copies its gradient into its bucket as soon as it is
  final; a full bucket starts a non-blocking all-reduce (MPI Iallreduce / NCCL on its own stream)
  while backward goes on computing the earlier layers. Buckets start in index order on every rank.
  The hook of the last gradient waits for all buckets, so the averaged gradients are in p.grad when
  backward() returns, as in torch.
- no_sync(): forward/backward inside it only accumulate local gradients; the next synchronised
  backward reduces the accumulated sum.
- find_unused_parameters=True: the forward's autograd graph is walked to find parameters that will
  get no gradient; they count as ready at once (contributing their current gradient or zeros).
"""
from __future__ import annotations

from contextlib import contextmanager

from ..errors import DeviceError, DistributedError, ShapeError
from .. import Tensor, from_dlpack, is_grad_enabled   # public names only
from ._seam import writable_array
from . import world

FIRST_BUCKET_BYTES = 1 << 20


def named_parameters(module):
    """[(name, leaf)] from named_parameters() when the module has it, else parameters(); shared
    parameters once; only those requiring grad."""
    if hasattr(module, "named_parameters"):
        items = list(module.named_parameters())
    else:
        items = [(f"param{i}", p) for i, p in enumerate(module.parameters())]
    seen, out = set(), []
    for name, p in items:
        if id(p) not in seen and p.requires_grad:
            seen.add(id(p))
            out.append((name, p))
    return out


def _requires_grad(out):
    if isinstance(out, Tensor):
        return out.requires_grad
    if isinstance(out, (list, tuple)):
        return any(_requires_grad(o) for o in out)
    if isinstance(out, dict):
        return any(_requires_grad(o) for o in out.values())
    return False


def _xp(device):
    if device == "cuda":
        import cupy
        return cupy
    import numpy
    return numpy


def _array(t):
    """A read-only look at a tensor's values as a backend array, through public API."""
    if t.device == "cuda":
        import cupy
        return cupy.from_dlpack(t)
    return t.numpy()


class _Bucket:
    def __init__(self, index, params, device):
        self.index, self.params, self.device = index, params, device
        self.dtype = params[0].dtype
        self.offsets, n = [], 0
        for p in params:
            self.offsets.append(n)
            n += p.size
        self.numel = n
        self.flat = self.work = None
        self.ready = set()

    def reset(self):
        self.flat = _xp(self.device).empty(self.numel, dtype=_array(self.params[0]).dtype)
        self.work, self.ready = None, set()

    def put(self, slot, grad):
        p, off = self.params[slot], self.offsets[slot]
        view = self.flat[off:off + p.size]
        if grad is None:
            view[...] = 0
        else:
            view[...] = _array(grad).reshape(-1)
        self.ready.add(slot)

    def full(self):
        return len(self.ready) == len(self.params)


class DistributedDataParallel:
    def __init__(self, module, device_ids=None, output_device=None, broadcast_buffers=True,
                 bucket_cap_mb=25, find_unused_parameters=False, process_group=None):
        self.group = process_group or world.group("DistributedDataParallel")
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self._named = named_parameters(module)
        if not self._named:
            raise DistributedError("DistributedDataParallel: the module has no parameter that "
                                   "requires grad")
        devices = {p.device for _, p in self._named}
        if len(devices) > 1 or not devices <= set(self.group.accepts):
            raise DeviceError(f"DistributedDataParallel over {self.group.name} needs every "
                              f"parameter on one of {self.group.accepts}; found {sorted(devices)}")
        self.device = devices.pop()
        self._verify_same_model()
        self._broadcast_state()
        self._buckets, self._where = self._make_buckets(bucket_cap_mb)
        self._armed = False
        self._next = 0
        self._hooks = []
        for _, p in self._named:     # each bucket is reduced as soon as its gradients are final
            self._hooks.append(p.register_post_accumulate_grad_hook(self._on_grad_ready))

    # -- construction -----------------------------------------------------------------------------
    def _verify_same_model(self):
        mine = "\n".join(f"{n}:{tuple(p.shape)}:{p.dtype.name}" for n, p in self._named)
        everyone = [b.decode() for b in self.group.allgather_bytes(mine.encode())]
        for r, theirs in enumerate(everyone):
            if theirs != mine:
                a, b = mine.split("\n"), theirs.split("\n")
                diff = next((f"{x!r} here vs {y!r} on rank {r}" for x, y in zip(a, b) if x != y),
                            f"{len(a)} parameters here vs {len(b)} on rank {r}")
                raise ShapeError(f"DistributedDataParallel: the model differs across ranks "
                                 f"(name:shape:dtype): {diff}")

    def _buffers(self):
        nb = getattr(self.module, "named_buffers", None)
        return [b for _, b in nb()] if nb is not None else []

    def _broadcast_tensors(self, tensors):
        works = []
        for t in tensors:
            arr, commit = writable_array(t)
            w = self.group._broadcast(arr, 0, "DistributedDataParallel state broadcast")
            w._then = commit
            works.append(w)
        for w in works:
            w.wait()

    def _broadcast_state(self):
        if self.group.size > 1:
            self._broadcast_tensors([p for _, p in self._named] + self._buffers())

    def _make_buckets(self, cap_mb):
        cap, first = int(cap_mb * (1 << 20)), True
        buckets, where, current, size = [], {}, [], 0
        for _, p in reversed(self._named):
            nbytes = p.size * p.dtype.itemsize
            limit = min(cap, FIRST_BUCKET_BYTES) if first else cap
            if current and (size + nbytes > limit or p.dtype is not current[0].dtype):
                buckets.append(current)
                current, size, first = [], 0, False
            current.append(p)
            size += nbytes
        if current:
            buckets.append(current)
        out = []
        for i, ps in enumerate(buckets):
            b = _Bucket(i, ps, self.device)
            for slot, p in enumerate(ps):
                where[id(p)] = (b, slot)
            out.append(b)
        return out, where

    # -- module interface -------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        if self._armed and any(b.ready for b in self._buckets):
            raise DistributedError(
                "DistributedDataParallel: the previous iteration's gradient reduction did not "
                "finish: some parameters got no gradient (pass find_unused_parameters=True).")
        if self.broadcast_buffers and self.group.size > 1 and self._buffers():
            self._broadcast_tensors(self._buffers())
        out = self.module(*args, **kwargs)
        # as torch: only a forward that autograd will differentiate prepares a reduction
        self._arm(self.require_backward_grad_sync and is_grad_enabled() and _requires_grad(out))
        if self._armed and self.find_unused_parameters:
            self._mark_unused(out)
        return out

    def parameters(self):
        return self.module.parameters()

    def named_parameters(self, *a, **k):
        return self.module.named_parameters(*a, **k)

    def __getattr__(self, name):           # train/eval/state_dict/zero_grad/... of the module
        if name == "module":
            raise AttributeError(name)
        return getattr(self.module, name)

    @contextmanager
    def no_sync(self):
        """Forward/backward passes inside only accumulate local gradients."""
        old, self.require_backward_grad_sync = self.require_backward_grad_sync, False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    # -- the reduction ----------------------------------------------------------------------------
    def _arm(self, sync):
        self._armed, self._next = sync, 0
        if sync:
            for b in self._buckets:
                b.reset()

    def _mark_unused(self, out):
        reached, stack, seen = set(), [out], set()
        while stack:
            x = stack.pop()
            if isinstance(x, (list, tuple)):
                stack.extend(x)
            elif isinstance(x, dict):
                stack.extend(x.values())
            elif isinstance(x, Tensor):
                if x.grad_fn is None:
                    reached.add(id(x))
                else:
                    stack.append(x.grad_fn)
            elif x is not None and id(x) not in seen and hasattr(x, "inputs"):
                seen.add(id(x))
                stack.extend(i for i in x.inputs if i is not None)
        for _, p in self._named:
            if id(p) not in reached:
                self._ready(p)

    def _on_grad_ready(self, p):
        if self._armed:       # else: no_sync(), or a graph not built through this wrapper's forward
            self._ready(p)

    def _ready(self, p):
        b, slot = self._where[id(p)]
        if slot in b.ready:
            raise DistributedError("DistributedDataParallel: a parameter's gradient was marked "
                                   "ready twice in one iteration (two backward passes through "
                                   "one forward need no_sync() for the first)")
        b.put(slot, p.grad)
        while self._next < len(self._buckets) and self._buckets[self._next].full():
            nb = self._buckets[self._next]
            nb.work = self.group._allreduce(nb.flat, "sum", f"DDP gradient bucket {nb.index}")
            self._next += 1
        for ob in self._buckets[:self._next]:
            ob.work.is_completed()    # lets MPI progress the reductions already started
        if self._next == len(self._buckets):
            self._finish()

    def _finish(self):
        scale = 1.0 / self.group.size
        for b in self._buckets:
            b.work.wait()
            if self.group.size > 1:
                b.flat *= scale
            for p, off in zip(b.params, b.offsets):
                p.grad = from_dlpack(b.flat[off:off + p.size].reshape(p.shape))
            b.flat = b.work = None
        self._armed = False

