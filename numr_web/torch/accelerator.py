"""torch.accelerator: the device to train on. numr_web's accelerators are "cuda" (CuPy) and, where
there is no CUDA GPU, "webgpu" (wgpu-native natively, the browser's WebGPU under Pyodide; on a
machine without a GPU that can be a software rasterizer such as lavapipe)."""
from __future__ import annotations

from ..devices import DEVICES
from ..backends import probe
from ..creation import zeros
from ..errors import DeviceError

_ORDER = ("cuda", "webgpu")


def current_accelerator(check_available=False):
    """The accelerator's device ("cuda", else "webgpu"), or None when there is none."""
    for name in _ORDER:
        if probe(name)[0]:
            return DEVICES[name]
    return None


def is_available():
    return current_accelerator() is not None


def device_count():
    return 1 if is_available() else 0


def current_device_index():
    _need()
    return 0


current_device_idx = current_device_index


def set_device_index(device):
    _need()
    if getattr(device, "index", device) not in (None, 0):
        raise DeviceError(f"numr_web drives one accelerator per process (index 0), got {device!r}")


set_device_idx = set_device_index


def synchronize(device=None):
    """Wait until the accelerator's queued work is done."""
    name = _need()
    if name == "cuda":
        from .cuda import synchronize as cuda_sync
        cuda_sync()
    else:
        zeros(1, device=name).tolist()           # a readback waits for the queued work


def _need():
    dev = current_accelerator()
    if dev is None:
        raise DeviceError("Cannot access accelerator device when none is available (no CUDA GPU "
                          "and no WebGPU adapter)")
    return dev
