"""cuDNN's convolutions (forward, backward data, backward filter), called through ctypes on a
handle of numr's own: CuPy 14 dropped its cuDNN bindings, and cuDNN 9's legacy convolution API
(libcudnn.so.9, as torch's Conv_v7 calls it) is all this needs.

The library is looked for at NUMR_CUDNN_LIBRARY, among the libraries already loaded in the
process, in the `nvidia-cudnn-cu*` wheel (nvidia/cudnn/lib) and by the dynamic linker. Before the
first use a probe runs a small convolution, both directions, against im2col + cuBLAS; anything
wrong (no library, no GPU support, a wrong result) leaves the cuda backend on im2col + cuBLAS,
with the reason in `numr-web info`.

Numerics as torch's defaults with TF32 off: float32 data, float32 compute, FMA math (no tensor
cores; with NUMR_CUDA_TF32 tensor-op math); float64 in float64. Algorithms: the first of cuDNN's
heuristic ranking (cudnnGet*Algorithm_v7, as torch without benchmark mode) that is deterministic
and, by default (NUMR_CUDA_CONV_ALGO=exact), a direct or GEMM form, whose products and sums are
those of the convolution itself; NUMR_CUDA_CONV_ALGO=fast also admits FFT and Winograd forms
(fewer multiplications, larger rounding errors), which torch's default may pick. Workspaces come
from CuPy's pool (a captured step's from the graph's), so calls record into CUDA graphs."""
from __future__ import annotations

import ctypes
import os
import threading

from ...errors import KernelError
from .blas import _loaded

_NCHW, _CROSS_CORRELATION = 0, 1
_DATA = {"f": 0, "d": 1}                  # cudnnDataType_t: float, double
_DEFAULT_MATH, _TENSOR_OP_MATH, _FMA_MATH = 0, 1, 3
_DETERMINISTIC = 1
# algorithms whose arithmetic is the convolution's own products and sums (direct, GEMM forms)
_EXACT = {"fwd": {0, 1, 2, 3}, "data": {0, 1}, "filter": {0, 1, 3}}
_ALGOS = 16                               # perf results asked for (every algorithm of a kind)
WORKSPACE_LIMIT = 1 << 30
ALGO_MODES = ("exact", "fast")
_SUBLIBS = ("graph", "ops", "heuristic", "engines_precompiled", "engines_runtime_compiled", "cnn",
            "adv")


class _Perf(ctypes.Structure):            # cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t
    _fields_ = [("algo", ctypes.c_int), ("status", ctypes.c_int), ("time", ctypes.c_float),
                ("memory", ctypes.c_size_t), ("determinism", ctypes.c_int),
                ("mathType", ctypes.c_int), ("reserved", ctypes.c_int * 3)]


def _find_library():
    """(CDLL, path) of libcudnn, or OSError naming every place tried."""
    cands = []
    env = os.environ.get("NUMR_CUDNN_LIBRARY")
    if env:
        cands.append(env)
    here = _loaded("libcudnn.so")
    if here:
        cands.append(here)
    try:
        import nvidia.cudnn as pkg
        for d in getattr(pkg, "__path__", ()):
            cands.append(os.path.join(d, "lib", "libcudnn.so.9"))
    except ImportError:
        pass
    cands += ["libcudnn.so.9", "libcudnn.so"]
    tried = []
    for path in cands:
        if os.path.isabs(path) and not os.path.exists(path):
            tried.append(f"{path}: no such file")
            continue
        try:
            if os.path.isabs(path):       # the sub-libraries the shim loads, from its directory
                for sub in _SUBLIBS:
                    p = os.path.join(os.path.dirname(path), f"libcudnn_{sub}.so.9")
                    if os.path.exists(p):
                        try:
                            ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL)
                        except OSError:
                            pass
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL), path
        except OSError as e:
            tried.append(f"{path}: {e}")
    raise OSError("libcudnn not found (" + "; ".join(tried) + "); pip install nvidia-cudnn-cu13 "
                  "or set NUMR_CUDNN_LIBRARY")


def _declare(lib):
    vp, i, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    pvp, pi, psz = ctypes.POINTER(vp), ctypes.POINTER(i), ctypes.POINTER(sz)
    perf = ctypes.POINTER(_Perf)
    sig = {
        "cudnnCreate": [pvp], "cudnnSetStream": [vp, vp],
        "cudnnCreateTensorDescriptor": [pvp], "cudnnSetTensor4dDescriptor": [vp, i, i] + [i] * 4,
        "cudnnCreateFilterDescriptor": [pvp], "cudnnSetFilter4dDescriptor": [vp, i, i] + [i] * 4,
        "cudnnCreateConvolutionDescriptor": [pvp],
        "cudnnSetConvolution2dDescriptor": [vp] + [i] * 6 + [i, i],
        "cudnnSetConvolutionMathType": [vp, i],
        "cudnnGetConvolutionForwardAlgorithm_v7": [vp, vp, vp, vp, vp, i, pi, perf],
        "cudnnGetConvolutionBackwardDataAlgorithm_v7": [vp, vp, vp, vp, vp, i, pi, perf],
        "cudnnGetConvolutionBackwardFilterAlgorithm_v7": [vp, vp, vp, vp, vp, i, pi, perf],
        "cudnnGetConvolutionForwardWorkspaceSize": [vp, vp, vp, vp, vp, i, psz],
        "cudnnGetConvolutionBackwardDataWorkspaceSize": [vp, vp, vp, vp, vp, i, psz],
        "cudnnGetConvolutionBackwardFilterWorkspaceSize": [vp, vp, vp, vp, vp, i, psz],
        "cudnnConvolutionForward": [vp, vp, vp, vp, vp, vp, vp, i, vp, sz, vp, vp, vp],
        "cudnnConvolutionBackwardData": [vp, vp, vp, vp, vp, vp, vp, i, vp, sz, vp, vp, vp],
        "cudnnConvolutionBackwardFilter": [vp, vp, vp, vp, vp, vp, vp, i, vp, sz, vp, vp, vp],
    }
    for name, args in sig.items():
        f = getattr(lib, name)
        f.argtypes, f.restype = args, ctypes.c_int
    lib.cudnnGetErrorString.argtypes, lib.cudnnGetErrorString.restype = [i], ctypes.c_char_p
    lib.cudnnGetVersion.argtypes, lib.cudnnGetVersion.restype = [], sz


class _Plan:
    """The descriptors of one convolution geometry, and its algorithms once chosen."""
    __slots__ = ("x", "w", "y", "conv", "algo")

    def __init__(self):
        self.algo = {}


class Cudnn:
    def __init__(self, be):
        import numpy
        self.be, self.xp = be, be.xp
        self.lib, self.path = _find_library()
        _declare(self.lib)
        self.version = int(self.lib.cudnnGetVersion())
        h = ctypes.c_void_p()
        self._check(self.lib.cudnnCreate(ctypes.byref(h)), "cudnnCreate")
        self.handle = h
        self._lock = threading.Lock()
        self._on_stream = None
        self._plans = {}
        self._one = {"f": numpy.ones(1, numpy.float32), "d": numpy.ones(1, numpy.float64)}
        self._zero = {"f": numpy.zeros(1, numpy.float32), "d": numpy.zeros(1, numpy.float64)}
        mode = os.environ.get("NUMR_CUDA_CONV_ALGO", "exact").strip().lower() or "exact"
        if mode not in ALGO_MODES:
            raise KernelError(f"NUMR_CUDA_CONV_ALGO must be one of {ALGO_MODES}, got {mode!r}")
        self.algos = mode

    # -- availability -----------------------------------------------------------------------------
    @classmethod
    def probe(cls, be):
        """A Cudnn that computed a small convolution right, or the reason (a str) why not."""
        try:
            dnn = cls(be)
            dnn._self_test()
            return dnn
        except Exception as e:          # any failure: the im2col path, with the reason shown
            return f"{type(e).__name__}: {e}"

    def _self_test(self):
        from ..conv import ComposedConv
        xp, be = self.xp, self.be
        rs = xp.random.RandomState(0)
        x = rs.standard_normal((2, 3, 5, 6), dtype=xp.float32)
        w = rs.standard_normal((4, 3, 3, 3), dtype=xp.float32)
        geo = ((2, 1), (1, 2), (1, 1))
        ref, _ = ComposedConv.conv2d(be, x, w, None, *geo, "none")
        y = self.forward(x, w, *geo)
        dy = rs.standard_normal(y.shape, dtype=xp.float32)
        rdx, rdw, _ = ComposedConv.conv2d_backward(be, dy, x, w, None, "none", *geo, True, True,
                                                   False)
        got = (y, self.backward_data(w, dy, x.shape, *geo),
               self.backward_filter(x, dy, w.shape, *geo))
        for name, a, b in zip(("forward", "backward data", "backward filter"), got,
                              (ref, rdx, rdw)):
            err = float(xp.abs(a - b).max())
            if not err <= 1e-4 * max(1.0, float(xp.abs(b).max())):
                raise KernelError(f"cuDNN's {name} differs from im2col + cuBLAS by {err:g}")

    def supports(self, x, w):
        return x.dtype.char in _DATA and w.dtype == x.dtype and x.ndim == 4 and \
            max(x.size, w.size) < 2 ** 31

    def describe(self):
        v = self.version
        return (f"cuDNN {v // 10000}.{v // 100 % 100}.{v % 100} ({self.path}; algorithms: "
                f"{self.algos}, deterministic)")

    # -- plumbing ---------------------------------------------------------------------------------
    def _check(self, status, what):
        if status:
            text = self.lib.cudnnGetErrorString(status)
            raise KernelError(f"cuDNN {what} failed: {text.decode() if text else status}")

    def _desc(self, create, setter, *args):
        d = ctypes.c_void_p()
        self._check(getattr(self.lib, create)(ctypes.byref(d)), create)
        self._check(getattr(self.lib, setter)(d, *args), setter)
        return d

    def _plan(self, x_shape, w_shape, stride, padding, dilation, ch):
        tf32 = bool(self.be._tf32) and ch == "f"
        key = (tuple(x_shape), tuple(w_shape), tuple(stride), tuple(padding), tuple(dilation),
               ch, tf32)
        p = self._plans.get(key)
        if p is None:
            p = _Plan()
            dt = _DATA[ch]
            n, _, h, w = x_shape
            k, c, kh, kw = w_shape
            oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
            ow = (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
            p.x = self._desc("cudnnCreateTensorDescriptor", "cudnnSetTensor4dDescriptor",
                             _NCHW, dt, n, c, h, w)
            p.y = self._desc("cudnnCreateTensorDescriptor", "cudnnSetTensor4dDescriptor",
                             _NCHW, dt, n, k, oh, ow)
            p.w = self._desc("cudnnCreateFilterDescriptor", "cudnnSetFilter4dDescriptor",
                             dt, _NCHW, k, c, kh, kw)
            p.conv = self._desc("cudnnCreateConvolutionDescriptor",
                                "cudnnSetConvolution2dDescriptor", padding[0], padding[1],
                                stride[0], stride[1], dilation[0], dilation[1],
                                _CROSS_CORRELATION, dt)
            math = _DEFAULT_MATH if ch == "d" else (_TENSOR_OP_MATH if tf32 else _FMA_MATH)
            self._check(self.lib.cudnnSetConvolutionMathType(p.conv, math),
                        "cudnnSetConvolutionMathType")
            self._plans[key] = p
        return p

    def _algo(self, p, kind, descs):
        """(algorithm, workspace bytes) of `kind` for plan p, chosen once."""
        got = p.algo.get(kind)
        if got is None:
            name = {"fwd": "Forward", "data": "BackwardData", "filter": "BackwardFilter"}[kind]
            perf, count = (_Perf * _ALGOS)(), ctypes.c_int()
            self._check(getattr(self.lib, f"cudnnGetConvolution{name}Algorithm_v7")(
                self.handle, *descs, _ALGOS, ctypes.byref(count), perf), f"{name} heuristics")
            ok = [r for r in perf[:count.value] if r.status == 0 and
                  (self.algos == "fast" or r.algo in _EXACT[kind])]
            ok = [r for r in ok if r.determinism == _DETERMINISTIC] or ok
            for r in ok:
                size = ctypes.c_size_t()
                if getattr(self.lib, f"cudnnGetConvolution{name}WorkspaceSize")(
                        self.handle, *descs, r.algo, ctypes.byref(size)) == 0 and \
                        size.value <= WORKSPACE_LIMIT:
                    got = p.algo[kind] = (r.algo, size.value)
                    break
            else:
                raise KernelError(f"cuDNN offers no {kind} algorithm for this convolution "
                                  f"({len(ok)} candidates)")
        return got

    def _run(self, fn, what, p, kind, descs, args, out):
        algo, size = self._algo(p, kind, descs)
        ch = out.dtype.char
        work = self.xp.empty(size, dtype=self.xp.uint8) if size else None
        stream = self.xp.cuda.get_current_stream().ptr
        a, b = self._one[ch].ctypes.data, self._zero[ch].ctypes.data
        with self._lock:                  # one handle: its stream and the call go together
            if stream != self._on_stream:
                self._check(self.lib.cudnnSetStream(self.handle, stream), "cudnnSetStream")
                self._on_stream = stream
            self._check(fn(self.handle, a, *args, p.conv, algo,
                           None if work is None else work.data.ptr, size, b, descs[-1],
                           out.data.ptr), what)
        return out

    # -- the three convolutions -------------------------------------------------------------------
    def forward(self, x, w, stride, padding, dilation):
        p = self._plan(x.shape, w.shape, stride, padding, dilation, x.dtype.char)
        y = self.xp.empty(self._out_shape(x.shape, w.shape, stride, padding, dilation), x.dtype)
        return self._run(self.lib.cudnnConvolutionForward, "convolution forward", p, "fwd",
                         (p.x, p.w, p.conv, p.y), (p.x, x.data.ptr, p.w, w.data.ptr), y)

    def backward_data(self, w, dy, x_shape, stride, padding, dilation):
        p = self._plan(x_shape, w.shape, stride, padding, dilation, dy.dtype.char)
        dx = self.xp.empty(tuple(x_shape), dy.dtype)
        return self._run(self.lib.cudnnConvolutionBackwardData, "convolution backward data", p,
                         "data", (p.w, p.y, p.conv, p.x), (p.w, w.data.ptr, p.y, dy.data.ptr), dx)

    def backward_filter(self, x, dy, w_shape, stride, padding, dilation):
        p = self._plan(x.shape, w_shape, stride, padding, dilation, dy.dtype.char)
        dw = self.xp.empty(tuple(w_shape), dy.dtype)
        return self._run(self.lib.cudnnConvolutionBackwardFilter, "convolution backward filter",
                         p, "filter", (p.x, p.y, p.conv, p.w), (p.x, x.data.ptr, p.y, dy.data.ptr),
                         dw)

    @staticmethod
    def _out_shape(x_shape, w_shape, stride, padding, dilation):
        return (x_shape[0], w_shape[0]) + tuple(
            (x_shape[2 + i] + 2 * padding[i] - dilation[i] * (w_shape[2 + i] - 1) - 1)
            // stride[i] + 1 for i in range(2))
