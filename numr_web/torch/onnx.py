"""torch.onnx: export is not supported (numr_web has no graph tracer)."""
from ..errors import UnsupportedError


def export(*args, **kwargs):
    raise UnsupportedError("torch.onnx.export is not supported: numr_web has no graph tracer; "
                           "save the weights with torch.save(model.state_dict(), path) (a "
                           "safetensors file) and export from PyTorch")
