"""repr() of a tensor, formatted as torch prints: aligned columns, 4 decimals (scientific notation
when magnitudes differ by more than 1000x), and for more than 1000 elements only the 3 edge items
of each dimension (fetched from the device alone, not the whole tensor)."""
from __future__ import annotations

import math

THRESHOLD = 1000
EDGE = 3
PRECISION = 4
_QUIET_DTYPES = ("float32", "int32", "bool")     # the defaults: not repeated in the repr


def _edges(be, h, shape):
    """The handle cut down to EDGE items at each end of every long dimension."""
    for d, n in enumerate(shape):
        if n > 2 * EDGE:
            head = tuple((0, s, 1) if i != d else (0, EDGE, 1) for i, s in enumerate(h.shape))
            tail = tuple((0, s, 1) if i != d else (n - EDGE, n, 1) for i, s in enumerate(h.shape))
            h = be.concat([be.slice(h, head), be.slice(h, tail)], d)
    return h


def _fmt_float(values):
    finite = [abs(v) for v in values if math.isfinite(v)]
    if finite and all(v == int(v) for v in finite):
        sci = max(finite) > 1e8
        return (lambda v: f"{v:.{PRECISION}e}") if sci else \
            (lambda v: f"{v:.0f}." if math.isfinite(v) else _special(v))
    nonzero = [v for v in finite if v != 0]
    sci = bool(nonzero) and (max(nonzero) / min(nonzero) > 1000 or max(nonzero) > 1e8
                             or min(nonzero) < 1e-4)
    fmt = f".{PRECISION}e" if sci else f".{PRECISION}f"
    return lambda v: format(v, fmt) if math.isfinite(v) else _special(v)


def _prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _special(v):
    return "nan" if v != v else ("inf" if v > 0 else "-inf")


def _nest(flat, shape, full_shape, fmt, width, indent):
    if not shape:
        return fmt(flat[0]).rjust(width)
    n, rest = shape[0], shape[1:]
    step = len(flat) // n if n else 0
    parts = [_nest(flat[i * step:(i + 1) * step], rest, full_shape[1:], fmt, width, indent + 1)
             for i in range(n)]
    if full_shape[0] > 2 * EDGE and n == 2 * EDGE:
        parts = parts[:EDGE] + ["..."] + parts[EDGE:]
    if not rest:
        return "[" + ", ".join(parts) + "]"
    sep = "," + "\n" * len(rest) + " " * (indent + 1)
    return "[" + sep.join(parts) + "]"


def format_tensor(t, extra=""):
    """`tensor([...], dtype=..., device=...)` with torch's layout; the body is replaced by a note
    where values cannot be read synchronously (a browser without JSPI)."""
    suffix = "" if t.dtype.name in _QUIET_DTYPES else f", dtype={t.dtype.name}"
    if t.device != "cpu":
        suffix = f", device={t.device!r}" + suffix
    shape = t.shape
    try:
        h = _edges(t._backend, t._data, shape) if t.size > THRESHOLD else t._data
        be = t._backend
        flat = be.to_list(be.reshape(be.contiguous(h), (_prod(h.shape),)) if h.shape else h)
    except Exception as e:  # noqa: BLE001  a repr must not raise (e.g. no synchronous readback)
        return f"tensor(<{type(e).__name__}: use await t.read()>, shape={shape}{suffix}{extra})"
    flat = flat if isinstance(flat, list) else [flat]
    if t.size == 0:
        body = "[]"
        suffix = f", size={shape}" + suffix
    else:
        if t.dtype.kind == "f":
            fmt = _fmt_float(flat)
        elif t.dtype.kind == "b":
            fmt = lambda v: str(bool(v))  # noqa: E731
        else:
            fmt = str
        width = max(len(fmt(v)) for v in flat)
        cut = tuple(min(n, 2 * EDGE) if t.size > THRESHOLD else n for n in shape)
        body = _nest(flat, cut, shape, fmt, width, len("tensor("))
    return f"tensor({body}{suffix}{extra})"
