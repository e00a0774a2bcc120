"""Compiled kernels and their launches, cached per backend instance.

A kernel family (one template of kernels.cu, for one storage type and one variant: vector width,
vectors per thread, ...) is compiled by ONE NVRTC call for every activation row (or every hot
binary op) at once, the first time any member is needed; CuPy also keeps the binary on disk.
A launch is then a dict lookup and a call of the pre-bound cupy Function with the grid already
computed: no CuPy ufunc dispatch, no type resolution, no broadcasting analysis on the hot path.
"""
from __future__ import annotations

from . import codegen as G

BLOCK = 256


class Kernels:
    def __init__(self, cupy, int64):
        self._cp = cupy
        self._i64 = int64
        self._fns = {}          # name expression -> cupy Function

    def function(self, name, family):
        """The compiled kernel `name`; `family()` lists the names compiled together with it."""
        fn = self._fns.get(name)
        if fn is None:
            names = list(family())
            if name not in names:
                names.append(name)
            mod = self._cp.RawModule(code=G.source(), options=G.OPTIONS, name_expressions=names)
            for n in names:
                self._fns[n] = mod.get_function(n)
            fn = self._fns[name]
        return fn

    def compiled(self):
        return len(self._fns)

    # -- families ------------------------------------------------------------------------------
    def map(self, ct, code, fn, v, u):
        name = G.ew(ct, G.map_op(code, fn), 1, v, u)
        return self.function(name, lambda: (G.ew(ct, G.map_op(c, fn), 1, v, u)
                                            for c in G.codes().values()))

    def bwd(self, ct, code, v, u):
        name = G.ew(ct, G.bwd_op(code), 2, v, u)
        return self.function(name, lambda: (G.ew(ct, G.bwd_op(c), 2, v, u)
                                            for c in G.codes().values()))

    def bias_act(self, ct, code, has_bias, write_z, v, u):
        name = G.bias_act(ct, code, has_bias, write_z, v, u)
        return self.function(name, lambda: (G.bias_act(ct, a.code, has_bias, a.saves == "z", v, u)
                                            for a in G.ACT.values()))

    def bwd_db(self, ct, code, v, u):
        name = G.bwd_db(ct, code, v, u)
        return self.function(name, lambda: (G.bwd_db(ct, c, v, u) for c in G.codes().values()))

    def binary(self, ct, op, v, u):
        name = G.ew(ct, G.bin_op(op), 2, v, u)
        return self.function(name, lambda: self._bin_family(ct, v, u))

    def binary_scalar(self, ct, op, rev, v, u):
        name = G.ews(ct, G.bin_op(op), rev, v, u)
        return self.function(name, lambda: self._bin_family(ct, v, u))

    @staticmethod
    def _bin_family(ct, v, u):
        for op in G.BIN_OPS:
            yield G.ew(ct, G.bin_op(op), 2, v, u)
            yield G.ews(ct, G.bin_op(op), False, v, u)
            yield G.ews(ct, G.bin_op(op), True, v, u)

    def seg_sum(self, ct):
        return self.function(G.seg_sum(ct), lambda: (G.seg_sum(c) for c in G.C_TYPES.values()))

    # -- launch helpers ------------------------------------------------------------------------
    def grid_1d(self, n, v, u):
        return (max(1, -(-(n // v) // (BLOCK * u))),)
