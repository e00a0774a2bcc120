"""The webgpu GEMM schedules, a mixin of WebGPUBackend: matmul and GEMM + bias + activation as
one launch (launch_gemm.py picks the entry), or in slices of K: under a loop budget (Mesa
llvmpipe) blocks summed one after another; for an output of few tiles and a long K (a weight
gradient, K = tokens) slices run as one batched GEMM and are summed after, so the whole GPU works."""
from __future__ import annotations

from ...dtypes import bool_
from ...errors import DTypeError
from ...vocab.activations import ACT
from . import launch_gemm as gemm
from .codegen import act_code
from .views import GPUArray, broadcast_shapes, full_index, prod, sliced


class LinalgPrimitives:
    # -- linear algebra --------------------------------------------------------------------------------
    def matmul(self, a, b):
        return self._gemm(a, b, None, "none", False)[0]

    def gemm_bias_act(self, a, b, bias, act):
        if gemm.activation_after(act, a.dtype, a.shape, b.shape):     # (launch_gemm.py: why)
            z = self._gemm(a, b, bias, "none", False)[0]
            return self.activation(act, z, "fwd"), (z if ACT[act].saves == "z" else None)
        return self._gemm(a, b, bias, act, ACT[act].saves == "z")

    def _gemm(self, a, b, bias, act, want_z):
        if a.dtype is bool_:
            raise DTypeError("matmul of bool tensors is not supported on webgpu")
        M, K = a.shape[-2], a.shape[-1]
        shape = broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (M, b.shape[-1])
        kb = gemm.k_block(self.loop_budget)
        if prod(shape) and (K == 0 or (kb and K > kb)):
            return self._gemm_split_k(a, b, bias, act, want_z, shape, kb)
        s = gemm.split_k(M, shape[-1], K, self.loop_budget) if a.ndim == b.ndim == 2 else 1
        if s > 1 and bias is None and act == "none":     # slices as a batch, summed after
            kc = K // s
            sa, sb = a.strides
            pa = GPUArray(a.storage, (s, M, kc), a.dtype, (kc * sb, sa, sb), a.offset, True)
            pb = GPUArray(b.storage, (s, kc, shape[-1]), b.dtype,
                          (kc * b.strides[0],) + tuple(b.strides), b.offset, True)
            return self.reduce("sum", self._gemm(pa, pb, None, "none", False)[0], (0,),
                               False), None
        out = self.d.alloc(shape, a.dtype)
        z = self.d.alloc(shape, a.dtype) if want_z else None
        if out.size == 0:
            return out, z
        a, b = gemm.dense_operands(self._copy, a, b, shape[-1], self.gemm_tile, self._gemm_caps)
        return gemm.launch(self.d, a, b, bias, out, z, act_code(act), self.gemm_tile,
                           self._gemm_caps)

    def _gemm_split_k(self, a, b, bias, act, want_z, shape, kb):
        """z = the sum of GEMMs over blocks of at most kb along K (each within the loop budget),
        then bias and activation as separate primitives. Also the K == 0 case (z = 0)."""
        K = a.shape[-1]
        z = self.full(shape, 0, a.dtype) if K == 0 else None
        for k0 in range(0, K, kb or max(K, 1)):        # kb None: no loop budget, one block
            k1 = min(K, k0 + kb)
            pa = sliced(a, full_index(a.shape[:-1]) + [(k0, k1, 1)])
            pb = sliced(b, full_index(b.shape[:-2]) + [(k0, k1, 1), (0, b.shape[-1], 1)])
            part = self._gemm(pa, pb, None, "none", False)[0]
            z = part if z is None else self.binary("add", z, part)
        if bias is not None:
            z = self.binary("add", z, bias)
        y = z if act == "none" else self.activation(act, z, "fwd")
        return y, (z if want_z else None)
