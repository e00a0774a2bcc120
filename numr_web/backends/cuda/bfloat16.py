"""bfloat16 on the cuda device: CuPy 14 holds ml_dtypes' bfloat16 type (storage, casts, copies);
the backend computes it in float32 and rounds once (the array-module paths), and its GEMMs run
through cublasGemmEx (blas.py).

One cast needs care: float64 -> bfloat16 rounds through float32, as torch's does, and CuPy
compiles its kernels with -ftz=true, so its float64 -> float32 step flushes float32's subnormals
to zero. Those values (|x| < 2^-126) are rounded here in float64 arithmetic, which does not
flush: first to float32's quantum 2^-149, then to bfloat16's 2^-133 (ties to even both times)."""
from __future__ import annotations

from ... import dtypes

_F32_TINY = 2.0 ** -126          # float32's (and bfloat16's) smallest normal number


class CudaBfloat16:
    def _bfloat16_type(self):
        """ml_dtypes' bfloat16 where ml_dtypes is installed and this CuPy holds it (CuPy 14 does)."""
        try:
            import ml_dtypes
            self.xp.zeros(1, ml_dtypes.bfloat16).astype(self.xp.float32)
        except Exception:           # no ml_dtypes, or a CuPy without the type
            return None
        return ml_dtypes.bfloat16

    def _missing_dtype_hint(self, dtype):
        if dtype.name == "bfloat16":
            return ("CuPy holds bfloat16 through ml_dtypes' type (CuPy 14 or newer): pip install "
                    "ml_dtypes; or use float32 or float16")
        return super()._missing_dtype_hint(dtype)

    def astype(self, h, dtype):
        if dtype is not dtypes.bfloat16 or h.dtype != self.xp.float64:
            return super().astype(h, dtype)
        xp = self.xp
        bits = super().astype(h, dtype).view(xp.uint16)
        a = xp.abs(h)
        tiny = (a < _F32_TINY) & (a > 0)
        a = xp.where(tiny, a, 0.0)                                  # (NaN, inf: not cast below)
        quanta = xp.rint(xp.rint(a * 2.0 ** 149) * 2.0 ** -16)    # bfloat16's subnormal bits
        sub = quanta.astype(xp.uint16) | (xp.signbit(h).astype(xp.uint16) << 15)
        return xp.where(tiny, sub, bits).view(self._np_dtype[dtypes.bfloat16])
