"""Typed errors. Every message says what was wrong and what would be right."""


class NumrError(Exception):
    """Base class of every error numr_web raises on purpose."""


class ShapeError(NumrError, ValueError):
    """Shapes that cannot be combined (broadcasting, matmul inner dims, bad axes, ragged data)."""


class DTypeError(NumrError, TypeError):
    """An unknown dtype, or dtypes that an operation cannot accept."""


class DeviceError(NumrError):
    """An unknown device, or tensors on different devices combined."""


class BackendUnavailableError(DeviceError):
    """A known device whose backend cannot run here (library missing, no driver, no GPU)."""


class BackendLimitError(NumrError):
    """The request exceeds a hard limit of the backend (e.g. WebGPU's maxStorageBufferBindingSize)."""


class GradientError(NumrError):
    """Misuse of autograd: backward on a non-scalar without a gradient, wrong gradient shape, ..."""


class KernelError(NumrError):
    """A GPU kernel failed to compile or validate, or the device was lost. Names the kernel."""
