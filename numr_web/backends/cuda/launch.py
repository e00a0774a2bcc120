"""Compiled kernels and their launches, cached per backend instance.

A kernel family (one template of kernels.cu, for one storage type and one variant: vector width,
vectors per thread, ...) is compiled by ONE NVRTC call for every activation row (or every hot
binary op) at once, the first time any member is needed; CuPy also keeps the binary on disk.
Each kernel then gets a pre-bound launcher: its argument buffer (8 bytes an argument, and the
pointer array cuLaunchKernel reads) is built once, so a launch packs the arguments into it with ONE
struct.pack_into and calls the driver: no CuPy argument conversion, no ufunc dispatch, no type
resolution on the hot path.
"""
from __future__ import annotations

import ctypes
import struct
import threading

from . import codegen as G

BLOCK = 256
CASTS = (("float", "half_t"), ("half_t", "float"))    # the cast kernel's pairs (autocast's)
_PACK = {"p": "Q", "q": "q", "d": "d"}     # struct codes: every argument is 8 bytes, unpadded
# argument kinds of each kernel template: p pointer, q int64, d double
SIGNATURES = {"ew": "pppq", "ews": "pdpq", "cast": "ppq", "bias_act": "ppppqq", "bwd_db": "ppppqq",
              "seg_sum": "pppq", "sum_small": "ppqd"}


class Launch:
    """One compiled kernel (a cupy RawKernel) with its argument buffers bound once: one for the
    thread that built it (used without a lock: only that thread touches it), one shared by any
    other thread under a lock (cuLaunchKernel reads the buffer while another thread could refill
    it)."""
    __slots__ = ("fn", "ptr", "fmt", "owner", "buf", "params", "pp", "shared", "lock", "driver")

    def __init__(self, fn, sig, driver):
        self.fn, self.driver = fn, driver                     # fn keeps its module loaded
        self.ptr = getattr(fn, "kernel", fn).ptr              # the CUfunction
        self.fmt = struct.Struct("=" + "".join(_PACK[c] for c in sig))
        self.owner = threading.get_ident()
        self.buf, self.params = _arguments(len(sig))
        self.pp = ctypes.addressof(self.params)
        self.shared = _arguments(len(sig))
        self.lock = threading.Lock()

    def __call__(self, grid, block, args, stream):
        """args: ints (pointers, int64) and floats (double), in the kernel's parameter order."""
        self._launch(grid[0], grid[1], block[0], block[1], args, stream)

    def run1d(self, n, v, u, args, stream):
        """The 1-D launch of the elementwise templates: n elements, v per vector access, u
        vectors per thread, BLOCK threads a block."""
        blocks = -(-(n // v) // (BLOCK * u)) or 1
        if self.driver is not None and _thread() == self.owner:      # the hot path
            self.fmt.pack_into(self.buf, 0, *args)
            self.driver.launchKernel(self.ptr, blocks, 1, 1, BLOCK, 1, 1, 0, stream, self.pp, 0)
        else:
            self._launch(blocks, 1, BLOCK, 1, args, stream)

    def _launch(self, gx, gy, bx, by, args, stream):
        if self.driver is None:       # no driver entry point: CuPy's launch (same arguments:
            self.fn((gx, gy), (bx, by), tuple(args))   # Python ints travel as 8-byte values)
            return
        if _thread() == self.owner:
            self.fmt.pack_into(self.buf, 0, *args)
            self.driver.launchKernel(self.ptr, gx, gy, 1, bx, by, 1, 0, stream, self.pp, 0)
            return
        buf, params = self.shared
        with self.lock:
            self.fmt.pack_into(buf, 0, *args)
            self.driver.launchKernel(self.ptr, gx, gy, 1, bx, by, 1, 0, stream,
                                     ctypes.addressof(params), 0)

    def argument_values(self, shared=False):
        """What a bound buffer holds now, read through its pointer array (tests)."""
        params = self.shared[1] if shared else self.params
        return [struct.unpack("=" + code, ctypes.string_at(params[i], 8))[0]
                for i, code in enumerate(self.fmt.format[1:])]


_thread = threading.get_ident


def _arguments(count):
    """An argument buffer of `count` 8-byte values, and the pointer array cuLaunchKernel reads."""
    buf = ctypes.create_string_buffer(8 * count)
    base = ctypes.addressof(buf)
    return buf, (ctypes.c_void_p * count)(*range(base, base + 8 * count, 8))


class Kernels:
    def __init__(self, cupy):
        try:
            from cupy_backends.cuda.api import driver
            driver = driver if callable(getattr(driver, "launchKernel", None)) else None
        except ImportError:
            driver = None
        self._cp = cupy
        self._driver = driver
        self._fns = {}          # name expression -> cupy Function
        self._launch = {}       # (family, specialisation...) -> Launch

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

    @property
    def launches_blocks(self):
        """Whether launch_block can launch (CuPy has the driver's entry point)."""
        return self._driver is not None

    def launch_block(self, fn, blocks, threads, data, stream):
        """Launch kernel fn, whose one parameter is a struct passed by value, from its bytes
        (`data`): the driver copies the block when it launches, so nothing is uploaded and a
        captured launch keeps the values in its graph node."""
        buf = ctypes.create_string_buffer(bytes(data), len(data))
        params = (ctypes.c_void_p * 1)(ctypes.addressof(buf))
        self._driver.launchKernel(getattr(fn, "kernel", fn).ptr, blocks, 1, 1, threads, 1, 1, 0,
                                  stream, ctypes.addressof(params), 0)

    def _build(self, key, template, name, family):
        """The launcher of `key`, built on its first use (callers look it up first, so the hot
        path builds no closures)."""
        lau = self._launch[key] = Launch(self.function(name(), family), SIGNATURES[template],
                                         self._driver)
        return lau

    # -- families (a launcher per specialisation) ----------------------------------------------
    def map(self, ct, code, fn, v, u):
        key = ("map", ct, code, fn, v, u)
        return self._launch.get(key) or self._build(
            key, "ew", lambda: G.ew(ct, G.map_op(code, fn), 1, v, u),
            lambda: (G.ew(ct, G.map_op(c, fn), 1, v, u) for c in G.codes().values()))

    def cast(self, src, dst, v, u):
        key = ("cast", src, dst, v, u)
        return self._launch.get(key) or self._build(
            key, "cast", lambda: G.cast(src, dst, v, u),
            lambda: (G.cast(a, b, v, u) for a, b in CASTS))

    def bwd(self, ct, code, v, u):
        key = ("bwd", ct, code, v, u)
        return self._launch.get(key) or self._build(
            key, "ew", lambda: G.ew(ct, G.bwd_op(code), 2, v, u),
            lambda: (G.ew(ct, G.bwd_op(c), 2, v, u) for c in G.codes().values()))

    def bias_act(self, ct, code, has_bias, write_z, v, u, ot=None):
        key = ("bias_act", ct, ot, code, has_bias, write_z, v, u)
        return self._launch.get(key) or self._build(
            key, "bias_act", lambda: G.bias_act(ct, code, has_bias, write_z, v, u, ot),
            lambda: (G.bias_act(ct, a.code, has_bias, a.saves == "z", v, u, ot)
                     for a in G.ACT.values()))

    def bwd_db(self, ct, code, v, u):
        key = ("bwd_db", ct, code, v, u)
        return self._launch.get(key) or self._build(
            key, "bwd_db", lambda: G.bwd_db(ct, code, v, u),
            lambda: (G.bwd_db(ct, c, v, u) for c in G.codes().values()))

    def binary(self, ct, op, v, u):
        key = ("bin", ct, op, v, u)
        return self._launch.get(key) or self._build(
            key, "ew", lambda: G.ew(ct, G.bin_op(op), 2, v, u),
            lambda: self._bin_family(ct, v, u))

    def binary_scalar(self, ct, op, rev, v, u):
        key = ("bins", ct, op, rev, v, u)
        return self._launch.get(key) or self._build(
            key, "ews", lambda: G.ews(ct, G.bin_op(op), rev, v, u),
            lambda: self._bin_family(ct, v, u))

    @staticmethod
    def _bin_family(ct, v, u):
        for op in G.BIN_OPS:
            yield G.ew(ct, G.bin_op(op), 2, v, u)
            yield G.ews(ct, G.bin_op(op), False, v, u)
            yield G.ews(ct, G.bin_op(op), True, v, u)

    def seg_sum(self, ct):
        key = ("seg", ct)
        return self._launch.get(key) or self._build(
            key, "seg_sum", lambda: G.seg_sum(ct),
            lambda: (G.seg_sum(c) for c in G.C_TYPES.values()))

    def sum_small(self, ct):
        key = ("sum", ct)
        return self._launch.get(key) or self._build(
            key, "sum_small", lambda: G.sum_small(ct),
            lambda: (G.sum_small(c) for c in G.C_TYPES.values()))
