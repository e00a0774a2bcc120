"""Values crossing between a page's JavaScript and the page scripts' Python (web/py) in Pyodide.
In native Python (the tests of those scripts) there is no JavaScript, and values pass unchanged."""
from __future__ import annotations


def js_object(d):
    """A dict as a plain JavaScript object (nested dicts too), for postMessage and the page."""
    try:
        import js
        from pyodide.ffi import to_js
    except ImportError:          # native Python
        return d
    return to_js(d, dict_converter=js.Object.fromEntries)


def py_value(v):
    """A JavaScript value (object, array) as its Python counterpart; Python values unchanged."""
    return v.to_py() if hasattr(v, "to_py") else v


def whole_number(v):
    """JavaScript numbers arrive as float where they are whole: ints stay ints for the checks."""
    return int(v) if isinstance(v, float) and v.is_integer() else v


def sender(emit):
    """send(event dict) for a page's `emit` callback (None: events go nowhere), as JS objects."""
    if not emit:
        return lambda d: None
    return lambda d: emit(js_object(d))
