"""The ACT table lives in numr_web/vocab/activations.py (the layer backends read); its names stay
importable from here."""
from ..vocab.activations import *  # noqa: F401,F403
from ..vocab.activations import ACT, Act, Code, _np, get_act  # noqa: F401
