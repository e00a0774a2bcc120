"""torch.amp's autocast: the region's state and the casts live in numr_web/autocast_state.py (the
ops and autograd read it, below this package); their names stay importable from here."""
from ..autocast_state import *  # noqa: F401,F403
from ..autocast_state import (DEFAULT_DTYPE, DEVICES, POLICY, active, autocast, cast,  # noqa: F401
                              disabled, get_autocast_dtype, is_autocast_enabled, lowers)
