"""The CUDA source generated from the activation table, checked without a GPU: every row present
with its name and number taken from the table, a row added to the table alone appears (and
compiles), the whole source compiles with NVRTC where it is installed, and the generated device
functions, compiled for the host with g++, compute each activation and its derivatives within a
few ulp of 30-digit references written here (closed forms, mpmath), independent of the table."""
import io
import re
import shutil
import subprocess
from contextlib import redirect_stdout

import mpmath as mp
import numpy as np
import pytest

from numr_web.backends.cuda import attention as AT
from numr_web.backends.cuda import codegen as G
from numr_web.backends.cuda.launch import CASTS
from numr_web.vocab import activations as A
from numr_web.vocab.activations import ACT, Act, Code
from helpers import KINKS, MP_ACT
from nvrtc import kernel_resources, nvrtc as _nvrtc, ptxas


def test_codes_are_the_table_rows():
    assert G.codes() == {name: i for i, name in enumerate(ACT)}
    assert G.codes() == {name: a.code for name, a in ACT.items()}


def test_every_row_generated_from_its_table_strings():
    src = G.source()
    assert f"#define NUMR_N_ACT {len(ACT)}" in src
    for name, act in ACT.items():
        for fn in G.FUNCTIONS:
            assert re.search(rf"C act_{name}_{fn}\(", src), (name, fn)
            assert f"(A == {act.code}) return act_{name}_{fn}(" in src, (name, fn)
        for fn in ("fwd", "dz", "d2") + (("d1", "ds") if act.saves == "y" else ()):
            text = getattr(act.cuda, fn).strip()
            assert text in src, (name, fn)            # the table's own code, verbatim
        if act.saves == "z":                          # dy * act'(s) from the table's dz
            assert f"return dy * act_{name}_dz(s);" in src


def test_kernel_bodies_hold_no_activation_code():
    body = G.KERNELS_CU.read_text()
    assert body.count(G.MARKER) == 1
    assert "switch" not in body and "case " not in body
    for name in ACT:
        assert f"act_{name}_" not in body


def test_a_row_added_to_the_table_is_generated(monkeypatch):
    cube = Act("cube_test", "z", d3=lambda z: z * 0 + 6,
               np=A._np(lambda xp, z: z ** 3, lambda xp, z: 3 * z * z, lambda xp, z: 6 * z),
               wgsl=Code("z * z * z", "3.0 * z * z", "6.0 * z"),
               cuda=Code("z * z * z", "C(3) * z * z", "C(6) * z"))
    monkeypatch.setitem(ACT, "cube_test", cube)
    src = G.activation_source()
    assert f"#define NUMR_N_ACT {len(ACT)}" in src
    assert f"(A == {cube.code}) return act_cube_test_fwd(z);" in src
    assert "C act_cube_test_d1(C dy, C s) {\n    return dy * act_cube_test_dz(s);" in src
    if _nvrtc() is not None:
        full = G.KERNELS_CU.read_text().replace(G.MARKER, src)
        _compile(full, [G.ew("float", G.map_op(cube.code, "fwd"), 1, 4, 4),
                        G.bwd_db("double", cube.code, 2, 4)])


def test_cli_prints_the_cuda_source():
    from numr_web.apps.cli import main
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(["shaders", "--language", "cuda"])
    assert rc in (0, None)
    assert G.activation_source() in buf.getvalue()


# -- NVRTC ---------------------------------------------------------------------------------------------
def _compile(src, names):
    ptx, mapping = _nvrtc().compile(src, names, G.OPTIONS + ("-arch=compute_80",))
    assert set(mapping) == set(names)
    return ptx


@pytest.mark.skipif(_nvrtc() is None, reason="NVRTC is not installed (CuPy, or the "
                    "nvidia-cuda-nvrtc wheel of the [dev] extra)")
def test_every_kernel_family_compiles_with_nvrtc():
    names = []
    for ct in G.C_TYPES.values():
        for code in G.codes().values():
            names += [G.ew(ct, G.map_op(code, fn), 1, 4, 4) for fn in G.MAP_FN]
            names += [G.ew(ct, G.bwd_op(code), 2, 8, 1),
                      G.bias_act(ct, code, True, ACT[list(ACT)[code]].saves == "z", 4, 1),
                      G.bias_act("float", code, True, True, 4, 1, "half_t"),
                      G.bwd_db(ct, code, 4, 4)]
        for op in G.BIN_OPS:
            names += [G.ew(ct, G.bin_op(op), 2, 4, 1), G.ews(ct, G.bin_op(op), True, 4, 1)]
        names.append(G.seg_sum(ct))
        names += [G.attention(k, ct, 32, m) for k in ("attn_fwd", "attn_bwd_dq", "attn_bwd_dkv")
                  for m in (0, 1, 2)]
    names += [G.attention(k, "float", 128, 2) for k in ("attn_fwd", "attn_bwd_dq", "attn_bwd_dkv")]
    for ct in AT.TILED_TYPES:               # the tiled attention kernels, every mask kind
        names += [G.attention_tiled(AT.KERNELS[k], ct, 32, m, *AT.TILES[k][32])
                  for k in AT.KERNELS for m in AT.MASK_KINDS]
    names += [G.attention_tiled(AT.KERNELS[k], "float", dm, 0, *AT.TILES[k][dm], dense=dense)
              for k in AT.KERNELS for dm in AT.TILED_DIMS if dm != 32 for dense in (False, True)]
    names += [G.attention_tiled(AT.TC_KERNELS[k], "half_t", dm, m, *AT.TC_TILES[k][dm])   # sm_80
              for k in AT.KERNELS for dm in AT.TILED_DIMS for m in ((0, 1, 2) if dm == 64 else (0,))]
    for ct in G.C_TYPES.values():           # nn.cu: layer / RMS norm, cross-entropy, row scatter-add
        b = ("false", "true")
        names += [f"ln_fwd<{ct}, {nt}, {r}, {w}, {bb}>" for nt in (1, 2, 4, 8, 16, 32)
                  for r in b for w in b for bb in b]
        names += [f"ln_bwd_dx<{ct}, {nt}, {r}, {w}>" for nt in (1, 32) for r in b for w in b]
        names += [f"ln_bwd_wb<{ct}, {r}, {bb}>" for r, bb in (b, b[::-1])]
        names.append(f"rows_seg_sum<{ct}>")
        names += [f"{k}<{ct}, {sm}>" for k in ("xent_fwd", "xent_bwd") for sm in b]
    names += [f"adam_list<{d}, {f}, {dev}, {hi}>" for d in (0, 1, 2) for f in ("false", "true")
              for dev in ("false", "true") for hi in ("false", "true")]      # optim.cu
    names += ["sgd_list<false>", "sgd_list<true>"]
    names += [G.cast(a, b, v, 4) for a, b in CASTS for v in (1, 4)]      # autocast's casts
    ptx = _compile(G.source(), names)
    # float and float16 kernels compute in float: no double arithmetic sneaks in (the scalar
    # operand of `ews` arrives as a double and is converted once)
    for entry in re.split(r"\.entry ", ptx)[1:]:
        name = entry.split("(")[0]
        if re.match(r"_Z\d+(ew|bias_act|bwd_db|seg_sum|cast)I[ft]", name):
            assert ".f64" not in entry, name
        if re.match(r"_Z\d+attn_[a-z_]+I[ft]", name):    # the scale: a double, converted once
            f64 = [ln.strip() for ln in entry.splitlines() if ".f64" in ln and not ln.strip()
                   .startswith((".param .f64", ".reg .f64", "ld.param.f64", "cvt.rn.f32.f64"))]
            assert not f64, (name, f64[:3])


# -- the generated formulas, evaluated on the host ---------------------------------------------------------
Z = np.concatenate([np.linspace(-12, 12, 97), [-1e4, -100, -88.5, -30, 30, 88.5, 100, 1e4,
                                                0.0, 1e-7, -1e-7]])


def _host_program(ctype):
    body = G.KERNELS_CU.read_text()
    helpers = body[body.index("// -- math helpers"):body.index(G.MARKER)]
    calls = []
    for name in ACT:
        for fn in ("fwd", "dz", "d2"):
            calls.append(f'    for (double z : zs) std::printf("%.17g\\n", (double)act_{fn}<{ACT[name].code}>'
                         f"(({ctype})z));")
    zs = ", ".join(repr(float(z)) for z in Z)
    return ("#include <cmath>\n#include <cstdio>\nusing std::expm1; using std::log1p;\n"
            "#define __device__\n#define __forceinline__ inline\n" + helpers
            + G.activation_source() + "\nint main() {\n    const double zs[] = {" + zs + "};\n"
            + "\n".join(calls) + "\n    return 0;\n}\n")


_MP_CACHE = {}


def _mp_diff(name, order, z):
    """act^(order) at the points z, in float64 from 30-digit arithmetic (cached)."""
    out = []
    with mp.workdps(30):
        for v in z:
            key = (name, order, float(v))
            if key not in _MP_CACHE:
                _MP_CACHE[key] = float(mp.diff(MP_ACT[name], mp.mpf(float(v)), order))
            out.append(_MP_CACHE[key])
    return np.array(out)


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
@pytest.mark.parametrize("ctype, eps", [("double", 2.0 ** -52), ("float", 2.0 ** -23)])
def test_generated_formulas_on_the_host(tmp_path, ctype, eps):
    src = tmp_path / "acts.cpp"
    src.write_text(_host_program(ctype))
    exe = tmp_path / "acts"
    subprocess.run(["g++", "-std=c++17", "-O1", "-ffp-contract=off", str(src), "-o", str(exe)],
                   check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    got = np.array([float(v) for v in out]).reshape(len(ACT), 3, len(Z))
    z = Z.astype(np.float32 if ctype == "float" else np.float64).astype(np.float64)
    for i, name in enumerate(ACT):
        away = np.all([np.abs(z - k) > 0.02 for k in KINKS.get(name, ())] + [z == z], axis=0)
        for order in range(3):
            g = got[i, order]
            assert np.isfinite(g).all(), (name, order, z[~np.isfinite(g)])
            m = away if order else np.ones(z.shape, bool)
            want = _mp_diff(name, order, z[m])
            # relative to the largest |act^(n)| within 1 of z: relative in the tails, absolute
            # where act^(n) crosses zero
            scale = np.max([np.abs(_mp_diff(name, order, z[m] + d)) for d in (-1, -0.5, 0, 0.5, 1)],
                           axis=0)
            bad = np.abs(g[m] - want) > 8 * eps * np.maximum(scale, 1e-300) + 1e-30
            assert not bad.any(), (name, order, z[m][bad], g[m][bad], want[bad])


# -- launch and GEMM plumbing, against fakes of the driver and of cuBLAS --------------------------------
def test_launch_binds_the_arguments_once():
    from numr_web.backends.cuda.launch import SIGNATURES, Launch
    calls = []

    class Driver:
        @staticmethod
        def launchKernel(*a):
            calls.append(a)

    class Raw:
        kernel = type("F", (), {"ptr": 99})()
    lau = Launch(Raw(), SIGNATURES["bwd_db"], Driver)
    for args in [(1 << 40, 2 << 40, 3 << 40, 4 << 40, 7, 9), (5, 6, 7, 8, 2 ** 40, 0)]:
        lau((3, 2), (32, 8), args, 1234)
        assert lau.argument_values() == list(args)
        f, gx, gy, gz, bx, by, bz, smem, stream, params, extra = calls[-1]
        assert (f, gx, gy, gz, bx, by, bz, smem, stream, extra) == (99, 3, 2, 1, 32, 8, 1, 0, 1234, 0)
        assert params == lau.pp
    assert SIGNATURES["ews"][1] == "d"
    # the 1-D launch: blocks of 256 threads cover n / (v u) threads; a double and a negative int64
    ews = Launch(Raw(), SIGNATURES["ews"], Driver)
    for n, v, u, blocks in [(1, 4, 1, 1), (3, 4, 1, 1), (1024, 4, 1, 1), (1028, 4, 1, 2),
                            (2 ** 20, 4, 4, 256), (2 ** 20 + 4, 4, 4, 257)]:
        ews.run1d(n, v, u, (11, -2.5e-300, 12, -n), 77)
        assert ews.argument_values() == [11, -2.5e-300, 12, -n]
        assert calls[-1][1:10] == (blocks, 1, 1, 256, 1, 1, 0, 77, ews.pp)
    # another thread packs into the shared buffer (under the lock), not the owner's
    import threading
    worker = threading.Thread(target=ews.run1d, args=(8, 4, 1, (21, 0.5, 22, 8), 78))
    worker.start()
    worker.join()
    assert ews.argument_values(shared=True) == [21, 0.5, 22, 8]
    assert ews.argument_values() == [11, -2.5e-300, 12, -(2 ** 20 + 4)]
    assert calls[-1][8] == 78 and calls[-1][9] not in (ews.pp, 0)


class _Buf:
    """A fake device array: numpy memory, a pointer into a registry, cupy's layout flags."""
    mem = {}

    def __init__(self, arr):
        self.arr = arr
        self.shape, self.dtype = arr.shape, arr.dtype
        self._c_contiguous, self._f_contiguous = arr.flags.c_contiguous, arr.flags.f_contiguous
        ptr = 4096 * (len(_Buf.mem) + 1)
        _Buf.mem[ptr] = arr
        self.data = type("M", (), {"ptr": ptr})()


def _col(ptr, rows, cols, ld):
    """The column-major rows x cols matrix with leading dimension ld at ptr (raw memory order)."""
    flat = np.ravel(_Buf.mem[ptr], order="K")
    return np.stack([flat[j * ld:j * ld + rows] for j in range(cols)], axis=1)


def test_gemm_layouts_map_to_cublas_flags():
    """blas.Blas.matmul through a fake cuBLAS that computes with column-major semantics: the
    transpose flags and leading dimensions give a @ b for every layout of the operands."""
    import ctypes
    from numr_web.backends.cuda import blas as B

    def sgemm(h, ta, tb, m, n, k, alpha, A, lda, Bp, ldb, beta, C, ldc):
        opa = _col(A, m, k, lda) if ta == 0 else _col(A, k, m, lda).T
        opb = _col(Bp, k, n, ldb) if tb == 0 else _col(Bp, n, k, ldb).T
        c = opa @ opb
        out = np.ravel(_Buf.mem[C], order="K")
        for j in range(n):
            out[j * ldc:j * ldc + m] = c[:, j]
        return 0
    import threading
    streams, workspaces = [], []
    blas = B.Blas.__new__(B.Blas)
    blas.lib = type("L", (), {
        "cublasSetStream_v2": staticmethod(lambda h, s: streams.append(s) or 0),
        "cublasSetWorkspace_v2": staticmethod(lambda h, p, n: workspaces.append((p, n)) or 0)})()
    blas.handle = ctypes.c_void_p()
    blas.workspace = _Buf(np.zeros(8, np.uint8))
    blas._on_stream, blas._lock = None, threading.Lock()
    blas._ptrs = {"f": (0, 0), "d": (0, 0)}
    blas._ex = {}                                   # no 16-bit operands here
    blas._gemm = {"f": sgemm, "d": sgemm}
    rng = np.random.default_rng(0)
    a0, b0 = rng.standard_normal((5, 3)), rng.standard_normal((3, 4))
    for a in (a0, np.asfortranarray(a0)):
        for b in (b0, np.asfortranarray(b0)):
            out = np.zeros((5, 4))
            blas.matmul(_Buf(a), _Buf(b), _Buf(out), 0)
            np.testing.assert_allclose(out, a0 @ b0, rtol=1e-14)
    # the handle's stream is set when it changes, not on every call, and each time the workspace
    # again (cublasSetStream resets it to cuBLAS's own pool)
    assert streams == [0]
    blas.matmul(_Buf(a0), _Buf(b0), _Buf(np.zeros((5, 4))), 7)
    blas.matmul(_Buf(a0), _Buf(b0), _Buf(np.zeros((5, 4))), 7)
    assert streams == [0, 7]
    assert workspaces == [(blas.workspace.data.ptr, B._WORKSPACE)] * 2


# -- the attention kernels' registers, from ptxas (no GPU) ---------------------------------------------
@pytest.mark.skipif(_nvrtc() is None or ptxas() is None,
                    reason="NVRTC and ptxas are not installed (the nvidia-cuda-nvrtc and "
                           "nvidia-cuda-nvcc wheels of the [dev] extra)")
def test_attention_kernels_of_a_gpt_head_do_not_spill_on_sm90():
    """The tile tables are chosen so that the kernels a GPT runs (head dim 64, no mask tensor)
    keep their accumulators in registers on the H100 / H200 (sm_90): a spill to local memory
    costs a kernel a large share of its speed and shows in no test of values."""
    names = [G.attention_tiled(AT.KERNELS[k], ct, 64, 0, *AT.TILES[k][64], dense=dense)
             for k in AT.KERNELS for ct in AT.TILED_TYPES for dense in (False, True)]
    names += [G.attention_tiled(AT.TC_KERNELS[k], "half_t", 64, 0, *AT.TC_TILES[k][64],
                                dense=dense) for k in AT.KERNELS for dense in (False, True)]
    got = kernel_resources(G.source(), names, 90, G.OPTIONS)
    assert set(got) == set(names)
    for name, (registers, stores, loads) in got.items():
        assert registers <= 255 and stores == loads == 0, (name, registers, stores, loads)


def test_optimizer_lists_are_read_in_place():
    """The optimizers' list kernels index their tensor tables (kernel parameters, passed by
    value) with a runtime index: read in place from the parameter space, not copied into each
    thread's stack (3.5 KiB a thread)."""
    names = [f"adam_list<{d}, true, {dev}, false>" for d in (0, 2) for dev in ("false", "true")]
    names += ["sgd_list<false>", "sgd_list<true>"]
    for arch in (80, 90):
        got = kernel_resources(G.source(), names, arch, G.OPTIONS, stack=True)
        assert set(got) == set(names)
        for name, (registers, stores, loads, stack) in got.items():
            assert stack == stores == loads == 0, (arch, name, registers, stores, loads, stack)
