"""Device objects: what `t.device` is and what `torch.device(...)` makes (numr_web.torch.device).

A Device is a `str` ("cpu", "cuda", "webgpu", or with an index "cuda:0"), so everything written
for the device strings keeps working (`t.device == "cpu"`, dict keys, f-strings), and it has
torch.device's attributes: `.type` ("cuda") and `.index` (0, or None). Everywhere a device string
is accepted a Device is too; the string is resolved by `backends.normalize_device`, which decides
which names and indices are valid.

Differences from torch.device: it equals its string (`torch.device("cpu") == "cpu"` is False in
torch), and a tensor's device carries no index (`t.device` is "cuda", torch's "cuda:0").
"""
from __future__ import annotations

from .errors import DTypeError, DeviceError

# the device types numr_web has backends for (backends.REGISTRY) and torch's other ones, named
# so that torch.device("mps") says what it is rather than "unknown"
TYPES = ("cpu", "cuda", "webgpu")
TORCH_ONLY_TYPES = ("mps", "xpu", "hip", "meta", "xla", "lazy", "vulkan", "mtia", "hpu", "ipu",
                    "maia", "privateuseone", "mkldnn", "opengl", "opencl", "ideep", "ve", "fpga")


class Device(str):
    """torch.device: Device("cuda"), Device("cuda:1"), Device("cuda", 1), Device(0) ("cuda:0"),
    Device(type="cpu"), Device(other_device)."""

    __slots__ = ()

    def __new__(cls, type, index=None):  # noqa: A002  (torch's parameter name)
        if isinstance(type, Device) and index is None:
            return type
        if isinstance(type, int) and not isinstance(type, bool) and index is None:
            type, index = "cuda", type         # torch.device(0): the current accelerator's index
        if not isinstance(type, str):
            raise DTypeError(f"device() takes a device type string ('cpu', 'cuda', 'webgpu') or "
                              f"a device index, got {type.__class__.__name__} {type!r}")
        name = type
        if ":" in type:
            if index is not None:
                raise DeviceError(f"device({type!r}, {index!r}): give the index either in the "
                                  "string or as the second argument, not both")
            name, _, idx = type.partition(":")
            if not idx.isdigit():
                raise DeviceError(f"invalid device string {type!r}: the index after ':' must be "
                                  "a non-negative integer, e.g. 'cuda:0'")
            index = int(idx)
        if name not in TYPES:
            if name in TORCH_ONLY_TYPES:
                raise DeviceError(f"numr_web has no {name!r} device; its devices are {list(TYPES)}")
            raise DeviceError(f"unknown device type {name!r} in {type!r}; expected one of "
                              f"{list(TYPES)}, optionally with an index ('cuda:0')")
        if index is not None and (not isinstance(index, int) or isinstance(index, bool)
                                  or index < 0):
            raise DeviceError(f"device index must be a non-negative int, got {index!r}")
        return str.__new__(cls, name if index is None else f"{name}:{index}")

    @property
    def type(self):  # noqa: A003
        return self.partition(":")[0]

    @property
    def index(self):
        idx = self.partition(":")[2]
        return int(idx) if idx else None

    def __reduce__(self):
        return (Device, (str(self),))


DEVICES = {name: Device(name) for name in TYPES}
