"""Backend registry: device name -> backend class, imported lazily (each backend imports its heavy
library only when first used), one instance per device."""
from __future__ import annotations

import importlib
import os

from ..devices import DEVICES
from ..errors import BackendUnavailableError, DeviceError
from ..host import dlpack_device_type

# device -> "module:Class" (relative to this package)
REGISTRY = {
    "cpu": "numpy_backend:NumpyBackend",
    "cuda": "cuda.backend:CudaBackend",
    "webgpu": "webgpu.backend:WebGPUBackend",
}
_instances: dict = {}
_probes: dict = {}


def _backend_class(device):
    mod, cls = REGISTRY[device].split(":")
    return getattr(importlib.import_module(f"{__name__}.{mod}"), cls)


def probe(device):
    """(ok, description-or-reason) for one device; never raises. A success is cached; a failure
    is not (a browser's device can become ready later)."""
    if device in _probes:
        return _probes[device]
    try:
        result = _backend_class(device).probe()
    except Exception as e:  # a probe must never crash the caller
        result = (False, f"{type(e).__name__}: {e}")
    if result[0]:
        _probes[device] = result
    return result


def available_devices():
    """Devices usable on this machine, e.g. ["cpu", "webgpu"]."""
    return [d for d in REGISTRY if probe(d)[0]]


def normalize_device(device):
    """The device name ("cpu", "cuda", "webgpu") of a device string or object; DeviceError for a
    name that is not one, for "gpu" (it could mean either GPU backend) and for an index that does
    not exist here ("cpu:1"; "cpu:0" and "cuda:0" are accepted, as torch accepts them)."""
    if device is None:
        device = os.environ.get("NUMR_DEVICE") or "cpu"
    if not isinstance(device, str):
        device = getattr(device, "device", None) or str(device)
    name, colon, index = device.lower().partition(":")
    if name == "gpu":
        raise DeviceError(f"device {device!r} is ambiguous: say 'cuda' (NVIDIA GPUs, through "
                          f"CuPy) or 'webgpu' (any GPU through Vulkan, Metal or DX12, or a "
                          f"browser tab); nr.available_devices() lists this machine's")
    if name not in REGISTRY:
        raise DeviceError(f"unknown device {device!r}; expected one of {list(REGISTRY)}")
    if colon:
        _check_index(device, name, index)
    return DEVICES[name]           # a str with torch.device's .type / .index (numr_web.devices)


def _check_index(device, name, index):
    if not (index.isascii() and index.isdigit()):
        raise DeviceError(f"device {device!r}: the index after ':' must be a whole number "
                          f"(e.g. '{name}:0'), or leave it out ('{name}')")
    i = int(index)
    if name != "cuda":
        if i != 0:
            raise DeviceError(f"device {device!r}: there is one {name} device, '{name}' (or "
                              f"'{name}:0'); index {i} does not exist")
        return
    current = _current_cuda_index()
    if current is not None and i != current:
        raise DeviceError(f"device {device!r}: the cuda backend runs on this process's current "
                          f"GPU, 'cuda:{current}'; to use GPU {i}, start the process with "
                          f"CUDA_VISIBLE_DEVICES={i} (it is then 'cuda'), or run one process "
                          f"per GPU (numr_web.distributed)")


def _current_cuda_index():
    """The GPU the cuda backend works on (this process's current CuPy device); None where cuda
    is unavailable (get_backend then says why)."""
    if not probe("cuda")[0]:
        return None
    import cupy
    return int(cupy.cuda.runtime.getDevice())


def get_backend(device):
    """The backend instance for a device name; BackendUnavailableError says why it cannot run."""
    be = _instances.get(device)
    if be is None:
        device = normalize_device(device)
        be = _instances.get(device)
        if be is None:
            ok, why = probe(device)
            if not ok:
                raise BackendUnavailableError(
                    f"device {device!r} is not available here: {why}. "
                    f"Available devices: {available_devices()}")
            be = _instances[device] = _backend_class(device)()
            be.device = DEVICES[device]
    return be


def backend_for_dlpack(obj):
    """The backend of the device a DLPack producer's memory is on (None: not DLPack, or on a
    device numr_web has no backend for, or that backend is unavailable here)."""
    kind = dlpack_device_type(obj)
    if kind is None:
        return None
    for device in REGISTRY:
        if kind in _backend_class(device).dlpack_device_types and probe(device)[0]:
            return get_backend(device)
    return None
