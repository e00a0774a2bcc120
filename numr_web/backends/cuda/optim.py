"""Launches of optim.cu, a mixin of CudaBackend: the Adam / AdamW and SGD updates of float32
parameters, each one kernel over a list of up to LIST_TENSORS tensors (instead of a dozen
elementwise ops a parameter, or one launch a parameter). The new values of a list go to one
allocation per kind (parameters, first and second moments), each tensor a view of it, so a step
allocates three times instead of three times per parameter. Cases the kernels do not cover (not
float32, no driver entry point to pass a list by value) are left to the optimizer's composed
form (SGD: ArrayOptim's one pass)."""
from __future__ import annotations

import math
import struct

from ..base import adam_scalars

LIST_TENSORS = 48                  # optim.cu's LIST_TENSORS
LIST_ELEMENTS = 1 << 24            # elements a list at most (its new values beside the old ones)
UPDATE_BLOCK, UPDATE_BLOCKS_PER_SM = 256, 8
ALIGN = 64                         # elements: each tensor of a list's outputs starts on 256 bytes
DECAY = {None: 0, "l2": 1, "decoupled": 2}    # optim.cu's ADAM_DECAY_*
SGD_FLAGS = {"maximize": 1, "decay": 2, "momentum": 4, "damp": 8, "nesterov": 16}  # SGD_*
_L = LIST_TENSORS
# optim.cu's AdamList and SgdList, field by field: pointer arrays, the cumulative sizes, then
# the scalars (float32, rounded here as numpy rounds a Python number)
ADAM_LIST = struct.Struct(f"={8 * _L}Q{_L}qQq12f")
SGD_LIST = struct.Struct(f"={5 * _L}Q{_L}qqq4f")


def _b(flag):
    return "true" if flag else "false"


def _words(ptrs, ends):
    """The list's pointer columns and cumulative sizes, each padded to LIST_TENSORS entries."""
    pad = [0] * (_L - len(ends))
    return [x for col in ptrs for x in list(col) + pad] + list(ends) + pad


def pack_adam(ptrs, ends, found, scalars):
    """AdamList's bytes. ptrs: eight lists (p, g, m, v, po, mo, vo, step) of addresses (0 for
    none), one per tensor; ends: the cumulative sizes; found: an address or 0; scalars: f, w,
    w1, b2, w2, eps, ss, bc, lr, ln_b1, ln_b2."""
    return ADAM_LIST.pack(*_words(ptrs, ends), found, len(ends), *scalars, 0.0)


def pack_sgd(ptrs, ends, flags, scalars):
    """SgdList's bytes. ptrs: five lists (p, g, buf, po, bo); scalars: wd, mom, damp1, lr."""
    return SGD_LIST.pack(*_words(ptrs, ends), len(ends), flags, *scalars)


def chunks(items):
    """Consecutive runs of at most LIST_TENSORS items (one launch each)."""
    return [items[i:i + _L] for i in range(0, len(items), _L)]


class CudaOptim:
    adam_takes_found = True               # adam_update(found=...) skips the step on the device
    update_list = (LIST_TENSORS, LIST_ELEMENTS)

    def _update_grid(self, n):
        """The update kernels' grid over n elements (a grid-stride loop past the cap)."""
        return max(1, min(-(-n // UPDATE_BLOCK), UPDATE_BLOCKS_PER_SM * self._sms))

    def _list_outputs(self, shapes, kinds):
        """`kinds` allocations holding one float32 tensor of each shape, and the views: a list
        of tuples, one per shape."""
        xp = self.xp
        starts, n = [], 0
        for s in shapes:
            starts.append(n)
            size = math.prod(s)
            n += -(-size // ALIGN) * ALIGN
        slabs = [xp.empty(max(n, 1), dtype=xp.float32) for _ in range(kinds)]
        return [tuple(b[o:o + math.prod(s)].reshape(s) for b in slabs)
                for o, s in zip(starts, shapes)]

    def _lists(self, items, kinds, first_of, launch):
        """Every item the kernels take (float32, one shape), in lists of at most LIST_TENSORS
        of one kind of step (first_of(item): True, False, or None where no kernel fits): for
        each list launch(first, indices, inputs made contiguous, `kinds` new outputs each, the
        cumulative sizes). Returns [outputs or None] per item (an empty tensor's new outputs
        without a launch); all None where no list can be launched."""
        xp = self.xp
        out = [None] * len(items)
        if not self.kernels.launches_blocks:
            return out
        fits = [first_of(it) if self._fits(*it) else None for it in items]
        for first in (True, False):
            todo = [i for i, it in enumerate(items) if fits[i] is first and it[0].size]
            for part in chunks(todo):
                ins = [tuple(None if a is None else xp.ascontiguousarray(a) for a in items[i])
                       for i in part]
                outs = self._list_outputs([items[i][0].shape for i in part], kinds)
                ends, n = [], 0
                for it in ins:
                    n += it[0].size
                    ends.append(n)
                launch(first, part, ins, outs, ends)
                for i, o in zip(part, outs):
                    out[i] = o
        for i, it in enumerate(items):
            if fits[i] is not None and it[0].size == 0:
                out[i] = tuple(xp.empty(it[0].shape, dtype=xp.float32) for _ in range(kinds))
        return out

    @staticmethod
    def _address(a):
        """A device array's address; 0 for none (a null pointer in the list)."""
        return 0 if a is None else a.data.ptr

    def _fits(self, p, g, *state):
        xp = self.xp
        return all(a.dtype == xp.float32 and a.shape == p.shape for a in (p, g, *state)
                   if a is not None)

    # -- Adam / AdamW --------------------------------------------------------------------------------
    def adam_update(self, p, g, m, v, decay, factor, w, b2, eps, lr, b1, step, found=None):
        """(p, m, v) after one Adam step (optim.cu's adam_list over a list of one)."""
        dev = not isinstance(step, (int, float))
        out = self.adam_update_many([(p, g, m, v)], decay, factor, w, b2, eps, lr, b1,
                                    [step] if dev else step, found)
        return out[0]

    def adam_update_many(self, items, decay, factor, w, b2, eps, lr, b1, step, found=None):
        """[(p, m, v) or None] after one Adam step of each item (p, g, m, v): m and v None on
        the first step; step a number (the count of every item) or one 0-d device array per
        item (capturable); found: None or a 0-d float32 device array, GradScaler's flag. None
        for an item the kernel does not take (not float32), and for every item where a list
        cannot be launched (the optimizer composes those)."""
        dev = not isinstance(step, (int, float))
        ss, bc = (0.0, 0.0) if dev else adam_scalars(lr, b1, b2, step)
        hi = abs(w) >= 0.5
        scalars = (factor, w, 1 - w, b2, 1 - b2, eps, ss, bc, lr, math.log(b1), math.log(b2))
        ptr, xp = self._address, self.xp
        flag = None if found is None else found.astype(xp.float32, copy=False)

        def launch(first, part, ins, outs, ends):
            fn = self.kernels.function(
                f"adam_list<{DECAY[decay]}, {_b(first)}, {_b(dev)}, {_b(hi)}>",
                lambda: (f"adam_list<{d}, {_b(f)}, {_b(dev)}, {_b(hi)}>"
                         for d in DECAY.values() for f in (False, True)))
            # (arrays made here stay referenced until the launch is queued)
            steps = [step[i].astype(xp.float32, copy=False) for i in part] if dev else None
            ptrs = [[ptr(t[k]) for t in ins] for k in range(4)] + \
                [[ptr(o[k]) for o in outs] for k in range(3)] + \
                [[ptr(s) for s in steps] if dev else [0] * len(part)]
            self.kernels.launch_block(fn, self._update_grid(ends[-1]), UPDATE_BLOCK,
                                      pack_adam(ptrs, ends, ptr(flag), scalars),
                                      self._stream().ptr)
        # a list of first steps (no moments yet) or of later ones (both moments)
        return self._lists(items, 3, lambda it: (it[2] is None) if (it[2] is None) ==
                           (it[3] is None) else None, launch)

    # -- SGD -----------------------------------------------------------------------------------------
    def sgd_update(self, p, g, buf, weight_decay, momentum, dampening, nesterov, maximize, lr):
        """(p, buf) after one SGD step: sgd_update_many of one."""
        return self.sgd_update_many([(p, g, buf)], weight_decay, momentum, dampening, nesterov,
                                    maximize, lr)[0]

    def sgd_update_many(self, items, weight_decay, momentum, dampening, nesterov, maximize, lr):
        """[(p, buf) or None] after one SGD step of each item (p, g, buf): buf the momentum
        buffer, None on the first step (and returned None without momentum). optim.cu's
        sgd_list over the float32 items; ArrayOptim's one pass for the others (None where that
        has none)."""
        flags = sum(SGD_FLAGS[k] for k, on in (("maximize", maximize), ("decay", weight_decay),
                                               ("momentum", momentum), ("damp", dampening),
                                               ("nesterov", nesterov)) if on)
        scalars = (weight_decay, momentum, 1 - dampening, lr)
        ptr = self._address

        def launch(first, part, ins, outs, ends):
            fn = self.kernels.function(f"sgd_list<{_b(first)}>",
                                       lambda: (f"sgd_list<{_b(f)}>" for f in (False, True)))
            ptrs = [[ptr(t[0]) for t in ins], [ptr(t[1]) for t in ins],
                    [ptr(t[2]) if momentum else 0 for t in ins], [ptr(o[0]) for o in outs],
                    [ptr(o[1]) if momentum else 0 for o in outs]]
            self.kernels.launch_block(fn, self._update_grid(ends[-1]), UPDATE_BLOCK,
                                      pack_sgd(ptrs, ends, flags, scalars), self._stream().ptr)
        out = self._lists(items, 2 if momentum else 1,
                          lambda it: it[2] is None or not momentum, launch)
        for i, (o, item) in enumerate(zip(out, items)):
            out[i] = super().sgd_update(*item, weight_decay, momentum, dampening, nesterov,
                                        maximize, lr) if o is None else \
                (o[0], o[1] if momentum else None)
        return out
