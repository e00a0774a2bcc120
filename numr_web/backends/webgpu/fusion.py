"""Fusion of elementwise chains: unary, binary and activation ops whose output has one size and
dtype, on dense operands of that size, Python scalars, or dense tensors broadcast along leading
and/or trailing dims (a row or column vector, a single element), are not dispatched when called but
recorded, and a chain of them runs as ONE generated kernel (shaders/fused.wgsl, codegen_fused.py)
when it is flushed.

Each recorded op gets its output buffer at once (a normal GPUArray, so views, autograd's saved
tensors and every other consumer see an ordinary handle); the chain keeps its inputs alive and its
outputs only weakly. A flush stores the outputs somebody still references; an intermediate that
nobody references any more is computed in registers and never written. Results are bit-identical
to the one-op kernels: the same op functions (shaders/elementwise_ops.wgsl), in the order the ops
were called, each reading the value as the unfused kernel would have stored it (fused.wgsl's
`fused_value`: rounded to the storage dtype, f16 included).

A chain is flushed (recorded as a dispatch) when:
  * any other dispatch is launched (Dispatcher.launch: it may read the chain's values; copies,
    writes into existing buffers, reductions, GEMMs...), and before every queue submit, readback,
    step capture boundary and replay (Dispatcher.flush);
  * the next op does not fit: another dtype or output size, an operand that is a view of a pending
    value other than the whole of it (a slice, a transpose, a broadcast), a broadcast of another
    kind (the one-op kernel runs it), more than MAX_OPS ops, FUSED_SCALARS scalars, or more inputs + live outputs than the
    adapter's storage bindings per shader stage (maxStorageBuffersPerShaderStage, at most 8);
  * `WebGPUBackend.settle()` is called.
A chain of one op runs the one-op kernel itself (elementwise.wgsl, vec4 path included). Pipelines
are cached by the chain's structural key (ops, operand wiring, stored outputs, dtype), not by
values or buffers, so a training step compiles its chains once. State is per Dispatcher (per
backend object); nothing is shared between backends or module-global.
"""
from __future__ import annotations

import weakref

from . import codegen_fused
from . import launch_elementwise as ew
from .codegen import act_code, op_code
from .contract import FUSED, FUSED_SCALARS
from .timing import FUSED_PREFIX
from .views import ITEMSIZE, GPUArray, coalesce, expanded, prod

MAX_OPS = 64                  # ops per fused kernel (bounds the generated source and its compile)
L = FUSED.layout
NEG_ZERO = 0x80000000


DENSE = (0, 0)                # broadcast pattern of an operand with the output's size


def broadcast_pattern(a, shape, n):
    """How dense handle `a` is read for an output of `shape` (n elements): DENSE when it has n
    elements, (div, mod) when element i of the output reads element (i // div) % mod of `a` (a
    broadcast along leading and/or trailing dims); None for any other broadcast."""
    if a.size == n:
        return DENSE
    if len(a.shape) > len(shape) or a.size == 0:
        return None
    sh, (st,) = coalesce(shape, [expanded(a, shape).strides])
    moving = [i for i, s in enumerate(st) if s != 0]
    if not moving:
        return (1, 1)
    if len(moving) > 1 or st[moving[0]] != 1:
        return None
    return (prod(sh[moving[0] + 1:]), sh[moving[0]])


class _Op:
    __slots__ = ("family", "name", "act", "args", "ref", "shape")

    def __init__(self, family, name, act, args, ref, shape):
        self.family, self.name, self.act, self.args, self.ref = family, name, act, args, ref
        self.shape = shape


class Fuser:
    def __init__(self, d, max_buffers):
        self.d = d
        self.enabled = True
        self.max_buffers = max_buffers
        self.recorded = 0          # ops recorded lazily
        self.kernels = 0           # fused kernels dispatched (chains of >= 2 ops)
        self.fused_ops = 0         # ops those kernels ran
        self.skipped = 0           # recorded values never written (nobody referenced them)
        self._reset()

    def _reset(self):
        self.ops = []              # _Op, in call order
        self.leaves = []           # input GPUArrays (dense, held until the flush)
        self._leaf = {}            # (id(storage), offset) -> index in leaves
        self._pending = {}         # id(output storage) -> index in ops
        self.scalars = []          # u32 words
        self.dtype, self.n = None, 0

    def enable(self, on):
        self.flush()
        self.enabled = bool(on)

    def stats(self):
        return {"enabled": self.enabled, "recorded": self.recorded, "kernels": self.kernels,
                "fused_ops": self.fused_ops, "skipped": self.skipped,
                "max_buffers": self.max_buffers}

    # -- recording ---------------------------------------------------------------------------------------
    def record(self, family, name, dtype, shape, args, act=None):
        """Record op `name` of `family` ("unary": args (x,), "binary": args (a, b), either possibly a
        Python scalar) with output `shape`; returns the output GPUArray, or None when the op cannot
        be fused (the caller runs the one-op kernel, which flushes the chain first)."""
        d = self.d
        n = prod(shape)
        if not self.enabled or n == 0 or n * ITEMSIZE.get(dtype.name, 8) + d.align > d.binding_limit:
            return None
        pats = []
        for a in args:
            pat = None
            if isinstance(a, GPUArray):
                if a.dtype is not dtype or not a.is_contiguous:
                    return None
                pat = broadcast_pattern(a, shape, n)
                if pat is None:
                    return None
            pats.append(pat)
        if self.ops and (dtype is not self.dtype or n != self.n):
            self.flush()
        refs = self._refs(args, pats, dtype)
        if refs is not None and not self._fits(refs):
            self.flush()
            refs = self._refs(args, pats, dtype)
        if refs is None:               # another view of a pending value: run it unfused
            return None
        self.dtype, self.n = dtype, n
        wired = []
        for (kind, k, value), pat in zip(refs, pats):
            if kind == "i" and k == len(self.leaves):
                self._leaf[(id(value.storage), value.offset) + pat] = k
                self.leaves.append((value, pat))
            elif kind == "s":
                self.scalars.append(value)
            wired.append((kind, k))
        out = d.alloc(tuple(shape), dtype)
        self._pending[id(out.storage)] = len(self.ops)
        self.ops.append(_Op(family, name, act, tuple(wired), weakref.ref(out.storage), out.shape))
        self.recorded += 1
        return out

    def _refs(self, args, pats, dtype):
        """[(kind, index, value)] of the operands: ("v", op) a pending value read whole, ("i",
        input) an input tensor, ("s", scalar word) a Python scalar; None when an operand is
        another view of a pending value."""
        refs, new_leaves, new_scalars = [], {}, 0
        for a, pat in zip(args, pats):
            if not isinstance(a, GPUArray):
                refs.append(("s", len(self.scalars) + new_scalars, ew.scalar_bits(a, dtype)))
                new_scalars += 1
                continue
            j = self._pending.get(id(a.storage))
            if j is not None and self.ops[j].ref() is a.storage:
                if a.offset != 0 or pat != DENSE:
                    return None
                refs.append(("v", j, None))
                continue
            key = (id(a.storage), a.offset) + pat
            k = self._leaf.get(key)
            if k is None:
                k = new_leaves.setdefault(key, len(self.leaves) + len(new_leaves))
            refs.append(("i", k, a))
        return refs

    def _fits(self, refs):
        if not self.ops:
            return True
        inputs = max([len(self.leaves)] + [k + 1 for kind, k, _ in refs if kind == "i"])
        scalars = len(self.scalars) + sum(kind == "s" for kind, _, _ in refs)
        live = 1 + sum(op.ref() is not None for op in self.ops)
        return (len(self.ops) < MAX_OPS and scalars <= FUSED_SCALARS and
                inputs + live <= self.max_buffers)

    # -- flushing ----------------------------------------------------------------------------------------
    def flush(self):
        """Record the pending chain as dispatches (as one kernel when it has several ops)."""
        if not self.ops:
            return
        ops, leaves, scalars, dtype, n = self.ops, self.leaves, self.scalars, self.dtype, self.n
        self._reset()
        live = {}
        for j, op in enumerate(ops):
            st = op.ref()
            if st is not None:
                live[j] = st
        needed = set(live)
        for j in range(len(ops) - 1, -1, -1):
            if j in needed:
                needed.update(k for kind, k in ops[j].args if kind == "v")
        self.skipped += len(ops) - len(live)
        if not live:
            return
        order = sorted(needed)
        if len(order) == 1:
            self._one(ops[order[0]], leaves, scalars, dtype, live[order[0]])
            return
        inputs, smap, vmap, steps = {}, {}, {}, []
        for j in order:
            op = ops[j]
            args = tuple((kind, inputs.setdefault(k, len(inputs)) if kind == "i" else
                          smap.setdefault(k, len(smap)) if kind == "s" else vmap[k])
                         for kind, k in op.args)
            vmap[j] = len(steps)
            steps.append((op.family, op.name, op.act, args))
        outputs = [j for j in order if j in live]
        w = L.new()
        bufs = {}
        bcast = []
        for k, m in inputs.items():
            leaf, pat = leaves[k]
            bufs[m], w[L.OFFSET_IN + m] = self.d.bind(leaf, leaf.offset, leaf.size)
            bcast.append(pat != DENSE)
            w[L.DIV_IN + m], w[L.MOD_IN + m] = pat
        for m, j in enumerate(outputs):
            bufs[-1 - m], w[L.OFFSET_OUT + m] = self.d.bind(GPUArray(live[j], (n,), dtype), 0, n)
        # vec4 loads and stores where every operand allows them (dense, 4-aligned: as elementwise)
        vec4 = n % 4 == 0 and not any(bcast) and \
            all(w[L.OFFSET_IN + m] % 4 == 0 for m in range(len(inputs))) and \
            all(w[L.OFFSET_OUT + m] % 4 == 0 for m in range(len(outputs)))
        v = "4" if vec4 else ""
        if vec4:
            for word in [L.OFFSET_IN + m for m in range(len(inputs))] + \
                    [L.OFFSET_OUT + m for m in range(len(outputs))]:
                w[word] //= 4
        bufs = {(f"in{v}{m}" if m >= 0 else f"out{v}{-1 - m}"): b for m, b in bufs.items()}
        key = (dtype.name, tuple(steps), tuple(vmap[j] for j in outputs), len(inputs), vec4,
               tuple(bcast))
        entry = codegen_fused.entry_name(key)
        pipe = self.d.kernels.fused(dtype, key, entry, lambda: codegen_fused.entry_wgsl(key))
        w[L.N], w[L.NEG_ZERO] = n // 4 if vec4 else n, NEG_ZERO
        for k, m in smap.items():
            w[L.SCALARS + m] = scalars[k]
        self.d.launch_pipeline(pipe, FUSED.name, entry, w, bufs, self.d.grid(w[L.N]),
                               None if self.d.timing is None else
                               FUSED_PREFIX + "+".join(s[2] or s[1] for s in steps))
        self.kernels += 1
        self.fused_ops += len(steps)

    def _one(self, op, leaves, scalars, dtype, storage):
        """A chain of one op: the one-op kernel, with the constants the unfused call passes."""
        consts = {"OP": op_code(op.family, op.name)}
        if op.act is not None:
            consts["ACT"] = act_code(op.act)
        views, words = [], []
        for (kind, k), flag, word in zip(op.args, ("A_SCALAR", "B_SCALAR"),
                                         (ew.L.SCALAR_A, ew.L.SCALAR_B)):
            if op.family == "binary":
                consts[flag] = int(kind == "s")
            if kind == "s":
                views.append(None)
                words.append((word, scalars[k]))
            else:
                leaf, pat = leaves[k]
                views.append(GPUArray(leaf.storage, op.shape, dtype, None, leaf.offset)
                             if pat == DENSE else expanded(leaf, op.shape))
        ew.strided(self.d, op.family, dtype, GPUArray(storage, op.shape, dtype), views, consts, words)
