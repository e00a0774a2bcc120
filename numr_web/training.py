"""The earlier import path of numr_web.apps.training (kept so code written against it keeps working):
`import numr_web.training` gives that very module."""
import sys

from .apps import training as _module

sys.modules[__name__] = _module
