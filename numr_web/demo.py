"""The earlier import path of numr_web.apps.demo (kept so code written against it keeps working):
`import numr_web.demo` gives that very module."""
import sys

from .apps import demo as _module

sys.modules[__name__] = _module
