"""Ready-made models for the demos: a small CNN for the 8x8 digits and a
character-level GPT. Built from numr_web.nn only, so they run on every device."""
from .cnn import DigitsCNN  # noqa: F401
from .gpt import GPT, GPTConfig  # noqa: F401
