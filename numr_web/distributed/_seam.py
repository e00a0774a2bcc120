"""THE one place numr_web.distributed touches Tensor internals.

In-place collectives (all_reduce, broadcast, DDP's parameter broadcast) must write into a tensor's
storage, like torch's. The public API reads values (t.numpy(), DLPack) but has no in-place write, so
`writable_array` reaches the backend array behind a tensor through the private `_data` attribute.
When the engine offers a public in-place hook (e.g. torch's `t.copy_(src)`), only this function
changes; everything else in the package uses the public API.
"""
from __future__ import annotations


def writable_array(t):
    """-> (arr, commit). arr: a C-contiguous, writable backend array (numpy for cpu, cupy for cuda)
    holding t's values; after writing into it, call commit() to make them t's values. arr is the
    storage itself when that is contiguous and writable (zero-copy, commit does nothing; aliases of
    the storage see the change, as with torch's in-place collectives); otherwise a contiguous copy
    that commit() writes back (or rebinds, for read-only storage such as a broadcast view)."""
    a = t._data
    writeable = getattr(a.flags, "writeable", True)
    if a.flags.c_contiguous and writeable:
        return a, _nothing
    buf = a.copy(order="C")

    def commit():
        if writeable:
            a[...] = buf
        else:
            t._data = buf
    return buf, commit


def _nothing():
    pass
