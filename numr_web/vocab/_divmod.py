"""torch's float floor division and remainder for the array backends (numpy, CuPy), as the
numpy functions of the `floor_divide` and `remainder` rows (numr_web/vocab/elementwise.py)."""


def np_floor_divide(xp, a, b):
    """torch's floor_divide (and numpy's, which CuPy's float kernel does not follow: inf // 0.1 is
    inf there, NaN here): the quotient of a - fmod(a, b), which is exact, rounded to the integer
    nearest its floor; a zero quotient takes the sign of a / b; b = 0 gives a / b."""
    if not any(isinstance(v, float) or getattr(getattr(v, "dtype", None), "kind", "") == "f"
               for v in (a, b)):
        return xp.floor_divide(a, b)
    mod = xp.fmod(a, b)
    q = a / b                                   # its sign for a zero quotient; b = 0's result
    div = (a - mod) / b
    div = xp.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1, div)
    fl = xp.floor(div)
    fl = xp.where(div - fl > 0.5, fl + 1, fl)
    fl = xp.where(div == 0, xp.copysign(0 * div, q), fl)
    if not hasattr(b, "dtype"):                 # a Python number (CuPy's where takes no bool)
        return q if b == 0 else fl
    return xp.where(b == 0, q, fl)


def np_remainder(xp, a, b):
    """torch's remainder: fmod, moved into the divisor's sign; a zero keeps fmod's sign (that
    of a), where numpy's remainder gives the divisor's (-0.0 % 2 is -0.0 in torch, 0.0 in numpy)."""
    r = xp.fmod(a, b)
    return xp.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)
