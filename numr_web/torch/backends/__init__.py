"""torch.backends: the switches torch code sets (cudnn.benchmark, cuda.matmul.allow_tf32, ...).
numr_web uses no cuDNN, so the cudnn flags are recorded and change nothing; allow_tf32 switches
the cuda device's TF32 GEMMs (numr_web's NUMR_CUDA_TF32)."""
from . import cpu, cuda, cudnn, mps  # noqa: F401
