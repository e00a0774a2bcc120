"""torch.backends.mps: numr_web has no Metal (mps) device (WebGPU runs over Metal instead)."""


def is_available():
    return False


def is_built():
    return False
