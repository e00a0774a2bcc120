"""Random number generators, as torch's: `nr.manual_seed(s)` seeds the default generator, which
every random constructor (`nr.rand`, `nr.randn`, `nr.rand_like`, `nr.randn_like`), dropout and the
`nn.init` functions draw from when given no explicit `seed=` or `generator=`; `nr.Generator()` is
a private stream (`rand(..., generator=g)`).

A generator hands each random op a 63-bit seed from one host stream; the device turns that seed
into the values (numpy's PCG64 on cpu/cuda, a counter-based hash in WGSL), so one seed gives the
same values on one device, and the same sequence of ops after `manual_seed` repeats exactly.
As torch's, the default generator starts from a seed drawn from the OS (each process draws other
numbers until `manual_seed`), and a new `Generator()` from a fixed one (DEFAULT_SEED, torch's).
"""
from __future__ import annotations

import random as _random

from . import shapes as sh
from .errors import DTypeError, ShapeError


DEFAULT_SEED = 67280421310721          # torch.initial_seed() of a fresh process


class Generator:
    """A stream of seeds for random ops (torch.Generator): manual_seed(s) returns self,
    seed() reseeds from the OS and returns the new seed, initial_seed() the last seed set,
    get_state() / set_state() snapshot and restore the stream."""

    def __init__(self, device="cpu"):
        self.device = device
        self._rng = _random.Random()
        self.manual_seed(DEFAULT_SEED)

    def manual_seed(self, seed):
        seed = sh.as_int(seed, "seed")
        self._initial = seed
        self._rng.seed(seed)
        return self

    def seed(self):
        s = _random.SystemRandom().getrandbits(63)
        self.manual_seed(s)
        return s

    def initial_seed(self):
        return self._initial

    def get_state(self):
        return (self._initial, self._rng.getstate())

    def set_state(self, state):
        if not (isinstance(state, tuple) and len(state) == 2):
            raise ShapeError("set_state expects a state returned by get_state()")
        self._initial = state[0]
        self._rng.setstate(state[1])
        return self

    def next_seed(self):
        """The seed of the next random op (a non-negative 63-bit int)."""
        return self._rng.getrandbits(63)

    def __repr__(self):
        return f"<numr_web.Generator initial_seed={self._initial}>"


default_generator = Generator()
default_generator.seed()


def manual_seed(seed):
    """Seed the default generator (every random op without its own seed= / generator=)."""
    return default_generator.manual_seed(seed)


def seed():
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(state):
    default_generator.set_state(state)


def resolve_seed(seed=None, generator=None):
    """The seed a random op uses: an explicit seed, else the next one of `generator` (default:
    the default generator)."""
    if seed is not None:
        return seed
    if generator is not None and not isinstance(generator, Generator):
        raise DTypeError(f"generator must be an nr.Generator, got {type(generator).__name__}")
    return (generator or default_generator).next_seed()
