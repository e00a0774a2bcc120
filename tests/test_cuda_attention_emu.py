"""The cuda backend's tiled attention kernels (attention_tiled.cu) checked without a GPU: each
kernel is compiled with g++ against tests/cuda_emu.h (CUDA's execution model emulated on the CPU:
a block's threads as OS threads, barriers, warp shuffles through per-warp slots) and launched
through attention.py itself (its planning, tile table, shared-memory sizes, vector flags and
argument lists) with numpy arrays standing in for CuPy's. Outputs, the log-sum-exp and the
gradients are compared with float64 references written here, over head dims that are not
multiples of 4, sequence lengths that are not multiples of a tile, Tq != Tk, causal, bool and
additive masks broadcast over batch dims, rows that see no key, and float16 storage. A write past
a kernel's dynamic shared memory (attention.py's size too small) fails the launch.

These runs check the kernels' logic; speed and the real compiler are the GPU suite's part
(tests/test_cuda.py)."""
import ctypes
import hashlib
import shutil
import subprocess
import types
from pathlib import Path

import numpy as np
import pytest

from numr_web.backends.array_backend import ArrayBackend
from numr_web.backends.cuda import attention as A
from numr_web.backends.cuda import codegen as G

from helpers import attention_reference, kernel_argv

CXX = shutil.which("g++")
pytestmark = pytest.mark.skipif(CXX is None, reason="g++ is not installed")
HERE = Path(__file__).parent
SMEM_OPTIN = 227 * 1024                   # an sm_90 GPU's shared memory a block may opt in to
DYN_SHARED = "extern __shared__ att_f4 att_sh4[];"


class _Ptr:
    __slots__ = ("ptr",)

    def __init__(self, p):
        self.ptr = p


class Arr(np.ndarray):
    """A numpy array that shows its address as CuPy's does (a.data.ptr)."""
    @property
    def data(self):
        return _Ptr(self.ctypes.data)


class _XP:
    float16, float32, float64 = np.float16, np.float32, np.float64
    cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(
        getDevice=lambda: 0,
        getDeviceProperties=lambda d: {"sharedMemPerBlockOptin": SMEM_OPTIN, "major": 9}))

    @staticmethod
    def empty(shape, dtype):
        return np.full(shape, np.nan, dtype).view(Arr)      # unwritten outputs show as NaN

    @staticmethod
    def ascontiguousarray(a):
        return np.ascontiguousarray(a).view(Arr)


class _Function:
    def __init__(self, lib, name):
        self.lib, self.name = lib, name
        self.max_dynamic_shared_size_bytes = 0
        self.launches = []

    def __call__(self, grid, block, args, shared_mem=0):
        assert shared_mem <= max(A.DEFAULT_SMEM, self.max_dynamic_shared_size_bytes), \
            "launched with more shared memory than opted in"
        buf, argv = kernel_argv(args)
        self.launches.append((grid, block, shared_mem))
        ok = self.lib.emu_run(grid[0], grid[1], block[0], shared_mem, argv)
        assert ok, f"{self.name} wrote past its {shared_mem} bytes of dynamic shared memory"


class _Kernels:
    def __init__(self, cache):
        self.cache, self.fns = cache, {}

    def function(self, name, family):
        """As launch.Kernels.function; builds the kernel with its family (one g++ process each,
        in parallel)."""
        if name not in self.fns:
            names = list(dict.fromkeys(list(family()) + [name]))
            for n, lib in _build(self.cache, names).items():
                self.fns[n] = _Function(lib, n)
        return self.fns[name]


def _source(name):
    srcs = [f.read_text() for f in G.ATTENTION_SOURCES]
    assert all(DYN_SHARED in s for s in srcs[1:])
    return "\n".join(['#include "cuda_emu.h"']
                     + [s.replace(DYN_SHARED, "att_f4* att_sh4 = (att_f4*)emu_dyn_smem;")
                        for s in srcs] + [
                      'extern "C" int emu_run(unsigned gx, unsigned gy, unsigned bx,',
                      '                       unsigned long long smem, void** args) {',
                      "    return emu_launch(gx, gy, bx, smem,",
                      f"                      [&] {{ emu_call(&{name}, args); }});",
                      "}"])


def _build(cache, names):
    """name -> the loaded library of its kernel (cached on disk by source)."""
    emu = (HERE / "cuda_emu.h").read_text()
    libs, jobs = {}, []
    for name in names:
        src = _source(name)
        lib = cache / f"attn_{hashlib.sha256((src + emu).encode()).hexdigest()[:16]}.so"
        libs[name] = lib
        if not lib.exists():
            cpp = lib.with_suffix(".cpp")
            cpp.write_text(src)
            jobs.append(subprocess.Popen(
                [CXX, "-std=c++20", "-O0", "-shared", "-fPIC", "-pthread",
                 "-Wno-unknown-pragmas", "-I", str(HERE), "-o", str(lib), str(cpp)],
                stderr=subprocess.PIPE, text=True))
    for job in jobs:
        _, err = job.communicate()
        assert job.returncode == 0, err
    out = {}
    for name, lib in libs.items():
        so = out[name] = ctypes.CDLL(str(lib))
        so.emu_run.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_ulonglong,
                               ctypes.c_void_p]
        so.emu_run.restype = ctypes.c_int
    return out


@pytest.fixture(scope="module")
def att(tmp_path_factory):
    probe = tmp_path_factory.mktemp("probe") / "probe.cpp"     # C++20 barriers, _Float16
    probe.write_text('#include "cuda_emu.h"\nint main() { return 0; }\n')
    r = subprocess.run([CXX, "-std=c++20", "-fsyntax-only", "-I", str(HERE), str(probe)],
                       capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"{CXX} cannot compile tests/cuda_emu.h (C++20 <barrier>, _Float16): "
                    f"{r.stderr.strip()[:200]}")
    be = types.SimpleNamespace(xp=_XP, _ct={np.dtype(k).char: v for k, v in G.C_TYPES.items()},
                               kernels=_Kernels(tmp_path_factory.mktemp("emu")),
                               grads_in_place=lambda *ts: None)
    return A.Attention(be)


def _run(att, q, k, v, mask, causal, scale, g):
    arr = lambda a: None if a is None else np.asarray(a).view(Arr)   # noqa: E731
    fwd = att.forward(arr(q), arr(k), arr(v), arr(mask), causal, scale)
    assert fwd is not None
    out, lse = fwd
    grads = att.backward(arr(g), arr(q), arr(k), arr(v), out, lse, arr(mask), causal, scale)
    return (out, lse) + tuple(grads)


def _check(got, want, dtype):
    # float32: sums of float32 products; float16: the inputs are the same float16 values, the
    # results rounded once to float16 (half an ulp: 2^-11 relative)
    rtol, atol = (3e-6, 3e-6) if dtype == np.float32 else (1.5e-3, 2e-3)
    for name, g, w in zip(("out", "lse", "dq", "dk", "dv"), got, want):
        g = np.asarray(g, np.float64)
        assert g.shape == w.shape, name
        fin = np.isfinite(w)
        assert np.array_equal(np.isfinite(g), fin), f"{name}: non-finite where the truth is not"
        assert np.array_equal(g[~fin], w[~fin]), name
        scale = 1 + np.abs(w[fin]).max(initial=0)
        np.testing.assert_allclose(g[fin], w[fin], rtol=rtol, atol=atol * scale, err_msg=name)


def _inputs(shape_q, tk, dv, dtype, seed=0):
    r = np.random.default_rng(seed)
    *lead, tq, d = shape_q
    q = r.normal(size=shape_q).astype(dtype)
    k = r.normal(size=(*lead, tk, d)).astype(dtype)
    v = r.normal(size=(*lead, tk, dv)).astype(dtype)
    g = r.normal(size=(*lead, tq, dv)).astype(dtype)
    return q, k, v, g


CASES = [   # (q shape, keys, dv, causal)
    ((2, 3, 70, 20), 70, 12, True),          # d not a multiple of 4; two query blocks
    ((1, 2, 130, 64), 130, 64, True),        # three blocks, the diagonal inside a tile
    ((2, 65, 32), 40, 32, False),            # Tq > Tk
    ((1, 2, 33, 16), 100, 8, True),          # Tq < Tk: causal keys past the last query unseen
    ((1, 1, 40, 100), 47, 128, False),       # head dim 128, d != dv
]


@pytest.mark.parametrize("shape,tk,dv,causal", CASES)
def test_tiled_kernels_against_float64(att, shape, tk, dv, causal):
    q, k, v, g = _inputs(shape, tk, dv, np.float32)
    want = attention_reference(q, k, v, None, causal, 0.3, g)
    got = _run(att, q, k, v, None, causal, 0.3, g)
    assert got[1].dtype == np.float32
    _check(got, want, np.float32)


@pytest.mark.parametrize("kind", ["bool", "add"])
def test_tiled_kernels_with_masks(att, kind):
    """Masks broadcast over the heads (a stride-0 dim), rows that see no key, -inf entries."""
    q, k, v, g = _inputs((2, 3, 70, 24), 66, 24, np.float32, seed=1)
    r = np.random.default_rng(2)
    if kind == "bool":
        m = r.random((2, 1, 70, 66)) > 0.4
        m[0, 0, 5] = False                   # a row that sees no key
        m[1, 0, :, 64:] = False
    else:
        m = r.normal(size=(70, 66)).astype(np.float32)
        m[:, 3] = -np.inf
        m[7] = -np.inf                       # no key for row 7
    mask = np.broadcast_to(m, (2, 3, 70, 66))
    want = attention_reference(q, k, v, mask, False, 0.25, g)
    got = _run(att, q, k, v, mask, False, 0.25, g)
    _check(got, want, np.float32)
    if kind == "bool":
        assert np.all(got[0][0, :, 5] == 0) and np.all(got[2][0, :, 5] == 0)


@pytest.mark.parametrize("tensor_cores", [True, False])
def test_tiled_kernels_float16(att, tensor_cores):
    """float16: on tensor cores (attention_mma.cu: mma.sync and ldmatrix emulated from their PTX
    definitions) or on the SIMT kernels."""
    alt = A.Attention(att.be)
    alt.tensor_cores = tensor_cores
    q, k, v, g = _inputs((1, 2, 70, 40), 75, 40, np.float16, seed=3)
    want = attention_reference(q, k, v, None, True, 40 ** -0.5, g)
    got = _run(alt, q, k, v, None, True, 40 ** -0.5, g)
    assert got[0].dtype == np.float16 and got[1].dtype == np.float32
    _check(got, want, np.float16)
    tc = [n for n in att.be.kernels.fns if "_tc<half_t, 64, 0," in n]
    assert len(tc) == (3 if tensor_cores else 0) or not tensor_cores


TC_CASES = [   # (q shape, keys, dv, causal, mask)
    ((1, 2, 40, 20), 70, 12, True, None),        # d, dv not multiples of 8; Tq < Tk
    ((1, 70, 64), 66, 64, False, "bool"),        # a tile's keys past Tk; rows that see no key
    ((1, 1, 40, 128), 33, 100, False, "add"),    # head dim 128
]


@pytest.mark.parametrize("shape,tk,dv,causal,kind", TC_CASES)
def test_tensor_core_kernels(att, shape, tk, dv, causal, kind):
    q, k, v, g = _inputs(shape, tk, dv, np.float16, seed=8)
    mask = None
    r = np.random.default_rng(9)
    if kind == "bool":
        mask = r.random((shape[-2], tk)) > 0.5
        mask[3] = False
    elif kind == "add":
        mask = r.normal(size=(shape[-2], tk)).astype(np.float16)
        mask[:, 5] = -np.inf
    want = attention_reference(q, k, v, mask, causal, 0.2, g)
    got = _run(att, q, k, v, mask, causal, 0.2, g)
    _check(got, want, np.float16)
    dm = next(m for m in A.TILED_DIMS if m >= max(shape[-1], dv))
    assert any(n.startswith(f"attn_fwd_tc<half_t, {dm},") for n in att.be.kernels.fns)


def test_tiled_kernels_misaligned_rows(att):
    """Arrays starting off a 16-byte boundary are read element by element."""
    q, k, v, g = _inputs((1, 1, 36, 32), 36, 32, np.float32, seed=4)
    base = np.zeros(q.size + 1, np.float32)
    base[1:] = q.reshape(-1)
    qm = base[1:].reshape(q.shape)
    assert qm.ctypes.data % 16
    want = attention_reference(q, k, v, None, True, 0.2, g)
    got = _run(att, qm, k, v, None, True, 0.2, g)
    _check(got, want, np.float32)


@pytest.mark.parametrize("fam,dtype", [("simt", np.float32), ("tc", np.float16)])
def test_tiled_kernels_shared_memory(att, monkeypatch, fam, dtype):
    """Each kernel gets attention.py's size, opted in past 48 KiB; less is caught (two shared
    rows' padding short: the last tile row's values past the end)."""
    q, k, v, g = _inputs((1, 1, 8, 64), 8, 64, dtype, seed=5)
    _run(att, q, k, v, None, False, 0.1, g)
    kernels, size, _ = A.FAMILIES[fam]
    table = A.TILES if fam == "simt" else A.TC_TILES
    ct = "float" if dtype == np.float32 else "half_t"
    for kernel, name in kernels.items():
        fn = att.be.kernels.fns[G.attention_tiled(name, ct, 64, 0, *table[kernel][64],
                                                  dense=True)]
        smem = fn.launches[-1][2]
        assert smem == size(kernel, 64, table[kernel][64])
        assert smem <= A.DEFAULT_SMEM or fn.max_dynamic_shared_size_bytes >= smem
    short = 2 * (A.PAD * A.FLOAT_BYTES if fam == "simt" else A.HPAD * 2)
    monkeypatch.setitem(A.FAMILIES, fam, (kernels, lambda *a: size(*a) - short, A.FAMILIES[fam][2]))
    with pytest.raises(AssertionError, match="wrote past"):
        A.Attention(att.be).forward(*(x.view(Arr) for x in (q, k, v)), None, False, 0.1)


def test_tiled_kernels_other_tile_shape(att):
    """Another tile of the `tiles` knob: 2 warps, 8 rows a thread, 16 tile columns."""
    alt = A.Attention(att.be)
    alt.tiles = {kernel: {dm: (2, 8, 16) for dm in A.TILED_DIMS} for kernel in A.KERNELS}
    q, k, v, g = _inputs((1, 2, 75, 20), 75, 20, np.float32, seed=6)
    want = attention_reference(q, k, v, None, True, 0.3, g)
    _check(_run(alt, q, k, v, None, True, 0.3, g), want, np.float32)


def test_tiles_shrink_to_fit_the_device(att):
    """On a device that opts in to less shared memory, the tiles' columns are halved until they
    fit (float32 d = 64 in 60 KiB: 32 keys a forward tile, 16 in dq) and the results hold."""
    small = types.SimpleNamespace(**vars(att.be))
    small.xp = types.SimpleNamespace(**{k: getattr(_XP, k) for k in ("float16", "float32",
                                                                     "float64", "empty",
                                                                     "ascontiguousarray")})
    small.xp.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(
        getDevice=lambda: 0,
        getDeviceProperties=lambda d: {"sharedMemPerBlockOptin": 60 * 1024, "major": 9}))
    alt = A.Attention(small)
    q, k, v, g = _inputs((1, 2, 70, 64), 70, 64, np.float32, seed=10)
    want = attention_reference(q, k, v, None, True, 0.125, g)
    _check(_run(alt, q, k, v, None, True, 0.125, g), want, np.float32)
    launched = att.be.kernels.fns
    assert launched["attn_fwd_t<float, 64, 0, 4, 4, 32, 1>"].launches          # (dense inputs)
    assert launched["attn_bwd_dq_t<float, 64, 0, 4, 4, 16, 1>"].launches


@pytest.mark.parametrize("dtype,tensor_cores", [(np.float32, False), (np.float16, True),
                                                (np.float16, False)])
def test_tiled_kernels_read_and_write_heads_in_place(att, dtype, tensor_cores, monkeypatch):
    """q, k, v as the heads of one fused projection ((B, T, 3 H d) viewed as three (B, H, T, d):
    rows 3 H d values apart) and dout as the heads of a (B, T, H d) gradient are read where they
    are (no copies); out, dq, dk and dv come back laid out as (B, T, H, n), so that merging the
    heads (transpose(1, 2).reshape(B, T, H n)) is a view. Values as the float64 reference."""
    alt = A.Attention(att.be)
    alt.tensor_cores = tensor_cores
    B, H, T, d = 2, 3, 70, 32
    r = np.random.default_rng(11)
    qkv = r.normal(size=(B, T, 3 * H * d)).astype(dtype)
    q, k, v = (qkv[..., i * H * d:(i + 1) * H * d].reshape(B, T, H, d).transpose(0, 2, 1, 3)
               for i in range(3))
    g = r.normal(size=(B, T, H * d)).astype(dtype).reshape(B, T, H, d).transpose(0, 2, 1, 3)
    copies = []
    dense = _XP.ascontiguousarray
    monkeypatch.setattr(_XP, "ascontiguousarray",
                        staticmethod(lambda a: copies.append(a.shape) or dense(a)))
    got = _run(alt, q, k, v, None, True, d ** -0.5, g)
    assert [s for s in copies if len(s) == 4] == []
    want = attention_reference(q, k, v, None, True, d ** -0.5, g)
    _check(got, want, dtype)
    for t in (got[0],) + got[2:]:
        assert t.shape == (B, H, T, d) and t.swapaxes(1, 2).flags.c_contiguous


class _InPlace:
    """ArrayBackend's grads_in_place and joined on numpy, their views shown as CuPy's."""
    xp = np
    _allocation = ArrayBackend._allocation
    _address = staticmethod(ArrayBackend._address)
    grads_in_place, joined = ArrayBackend.grads_in_place, ArrayBackend.joined

    def _view_from(self, h, shape, strides, byte_offset=0):
        return ArrayBackend._view_from(self, h, shape, strides, byte_offset).view(Arr)


def test_fused_heads_get_their_gradients_where_they_lie(att):
    """q, k, v the heads of one fused projection: dq, dk, dv are written into one new array,
    each where q, k, v lie in theirs, so split's backward joins them into the projection's
    (B, T, 3 H d) gradient as a view (no concatenation). Values as the float64 reference."""
    place = _InPlace()
    alt = A.Attention(types.SimpleNamespace(**{**vars(att.be), "grads_in_place":
                                               place.grads_in_place}))
    B, H, T, d = 2, 3, 70, 32
    r = np.random.default_rng(12)
    qkv = r.normal(size=(B, T, 3 * H * d)).astype(np.float32)
    q, k, v = (qkv[..., i * H * d:(i + 1) * H * d].reshape(B, T, H, d).transpose(0, 2, 1, 3)
               for i in range(3))
    g = r.normal(size=(B, H, T, d)).astype(np.float32)
    got = _run(alt, q, k, v, None, True, d ** -0.5, g)
    _check(got, attention_reference(q, k, v, None, True, d ** -0.5, g), np.float32)
    merged = [t.transpose(0, 2, 1, 3).reshape(B, T, H * d) for t in got[2:]]
    whole = place.joined(merged, 2)
    assert whole is not None and whole.shape == (B, T, 3 * H * d)
    np.testing.assert_array_equal(whole, np.concatenate(merged, axis=2))
    # a q, k, v that are not disjoint (one tensor three times) get arrays of their own
    assert place.grads_in_place(q, q, v) is None


def test_dense_inputs_take_the_dense_variant(att):
    """Dense q, k, v and dout run the kernels' DENSE variant (compile-time row strides); the same
    values as views of one (B, T, H, d) buffer run the strided one; both as the reference."""
    alt = A.Attention(att.be)
    B, H, T, d = 1, 2, 40, 64
    q, k, v, g = _inputs((B, H, T, d), T, d, np.float32, seed=12)
    name = {dense: G.attention_tiled(A.KERNELS["dq"], "float", 64, 0, *A.TILES["dq"][64],
                                     dense=dense) for dense in (False, True)}
    fns = att.be.kernels.fns
    before = {dn: len(fns[n].launches) if n in fns else 0 for dn, n in name.items()}
    want = attention_reference(q, k, v, None, True, 0.125, g)
    _check(_run(alt, q, k, v, None, True, 0.125, g), want, np.float32)
    assert len(fns[name[True]].launches) == before[True] + 1
    views = [np.ascontiguousarray(t.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
             for t in (q, k, v, g)]
    _check(_run(alt, *views[:3], None, True, 0.125, views[3]), want, np.float32)
    assert len(fns[name[False]].launches) == before[False] + 1
    assert len(fns[name[True]].launches) == before[True] + 1


def test_tiled_kernels_without_keys(att):
    """No keys (Tk = 0): out is 0, lse -inf, and the gradients are 0, as torch's."""
    q = np.ones((1, 3, 4), np.float32)
    kv = np.ones((1, 0, 4), np.float32)
    got = _run(att, q, kv, kv, None, False, 0.5, np.ones((1, 3, 4), np.float32))
    assert np.all(np.asarray(got[0]) == 0) and np.all(np.asarray(got[1]) == -np.inf)
    assert np.all(np.asarray(got[2]) == 0)
