"""torch.random: the default generator's seed and state (numr_web.generator)."""
from __future__ import annotations

import contextlib

from ..generator import (default_generator, get_rng_state, initial_seed,  # noqa: F401
                         manual_seed, seed, set_rng_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, device_type="cuda"):
    """Restore the default generator's state when the block ends (numr_web has one generator
    for every device)."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
