"""torch.backends.cuda: matmul.allow_tf32 is the cuda device's TF32 switch (numr_web's
NUMR_CUDA_TF32); the scaled-dot-product-attention kernel switches are accepted (numr_web picks its
own attention kernel) and is_built() says whether CuPy and a GPU are there."""
from __future__ import annotations

import contextlib

from ...backends import get_backend, probe


class _Matmul:
    @property
    def allow_tf32(self):
        return probe("cuda")[0] and get_backend("cuda").tf32

    @allow_tf32.setter
    def allow_tf32(self, on):
        if probe("cuda")[0]:
            get_backend("cuda").tf32 = bool(on)

    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True


matmul = _Matmul()


def is_built():
    return probe("cuda")[0]


def enable_flash_sdp(enabled): pass
def enable_mem_efficient_sdp(enabled): pass
def enable_math_sdp(enabled): pass
def flash_sdp_enabled(): return True
def mem_efficient_sdp_enabled(): return True
def math_sdp_enabled(): return True


@contextlib.contextmanager
def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True, **kwargs):
    yield
