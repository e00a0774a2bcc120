"""cnn.cu's kernels (batch norm, per-channel bias + activation, max pooling) checked without a
GPU: compiled for the host with g++ behind a small shim of CUDA's built-ins, each block run in
turn with one thread (the block-wide sums then reduce one value; the per-channel partial sums
and their fixed-order total, the indexing, the statistics and the running-statistics update are
the kernels' own), against the numpy backend, which the differential suite checks against
PyTorch. The launches' argument lists are checked against the kernels' parameter lists through
cnn.py with a fake kernel cache. NVRTC compiles every specialisation where CuPy is installed."""
import re
import shutil
import subprocess

import numpy as np
import pytest

import numr_web as nr
from numr_web.backends.cuda import cnn as K
from numr_web.backends.cuda import codegen as G
from numr_web.vocab.activations import ACT
from nvrtc import nvrtc

CNN_CU = G.KERNELS_CU.with_name("cnn.cu")
SHIM = r"""
#include <cmath>
#include <cstdio>
using std::expm1; using std::log1p; using std::sqrt;
#define __device__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(n)
#define __shared__ static
struct Dim { unsigned x = 0, y = 0, z = 0; };
static Dim blockIdx, threadIdx, blockDim, gridDim;
template <typename T> T __shfl_xor_sync(unsigned, T, int) { return T(0); }   // no other lanes
template <typename T> T __shfl_sync(unsigned, T v, int) { return v; }
inline void __syncthreads() {}
template <typename S> struct IO;
template <> struct IO<float> {
    typedef float C;
    static float ld(float x) { return x; }
    static float st(float x) { return x; }
};
template <> struct IO<double> {
    typedef double C;
    static double ld(double x) { return x; }
    static double st(double x) { return x; }
};
template <typename F> void launch(unsigned gx, unsigned gy, F f) {
    gridDim.x = gx; gridDim.y = gy; blockDim.x = blockDim.y = 1;
    for (unsigned y = 0; y < gy; ++y)
        for (unsigned x = 0; x < gx; ++x) { blockIdx.x = x; blockIdx.y = y; f(); }
}
template <typename T> void out(const char* name, const T* a, long long n) {
    std::printf("%s", name);
    for (long long i = 0; i < n; ++i) std::printf(" %.17g", (double)a[i]);
    std::printf("\n");
}
"""


def _source():
    body = G.KERNELS_CU.read_text()
    helpers = body[body.index("// -- math helpers"):body.index(G.MARKER)]
    return SHIM + helpers + G.activation_source() + CNN_CU.read_text()


def _lit(v):
    v = float(v)
    return repr(v) if np.isfinite(v) else ("NAN" if v != v else ("-INFINITY" if v < 0 else
                                                                   "INFINITY"))


def _arr(name, a, ct):
    a = np.ascontiguousarray(a).reshape(-1)
    vals = ", ".join(_lit(v) for v in a) or "0"
    return f"static {ct} {name}[] = {{{vals}}};\n"


def _run(tmp_path, decls, body):
    src = tmp_path / "cnn_host.cpp"
    src.write_text(_source() + decls + "int main() {\n" + body + "    return 0;\n}\n")
    exe = tmp_path / "cnn_host"
    r = subprocess.run(["g++", "-std=c++17", "-O1", "-ffp-contract=off", str(src), "-o", str(exe)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return {ln.split()[0]: np.array([float(v) for v in ln.split()[1:]]) for ln in lines.splitlines()}


needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
CPU = nr.get_backend("cpu")


@needs_gxx
@pytest.mark.parametrize("act", ["none", "relu", "gelu", "sigmoid"])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_kernels_match_the_numpy_backend(tmp_path, act, training):
    r = np.random.default_rng(0)
    nb, nc, hw, rpc = 5, 3, 7, 2                # 3 chunks of 2, 2, 1 samples
    x = r.normal(3, 2, (nb, nc, hw))
    w, b = r.uniform(0.5, 2, nc), r.normal(size=nc)
    rm, rv = r.normal(size=nc), r.uniform(0.5, 2, nc)
    dy = r.normal(size=x.shape)
    code, row = ACT[act].code, ACT[act]
    wz, hs = act != "none" and row.saves == "z", act != "none"
    chunks = -(-nb // rpc)
    t = "true" if training else "false"
    decls = "".join(_arr(n, a, "double") for n, a in
                    (("x", x), ("w", w), ("b", b), ("rm", rm), ("rv", rv), ("dy", dy))) + f"""
static double part[{nc * chunks * 2}], y[{x.size}], z[{x.size}], mean[{nc}], rstd[{nc}],
    rmo[{nc}], rvo[{nc}], dx[{x.size}], dw[{nc}], db[{nc}];
"""
    upd = "true" if training else "false"
    sv = "z" if wz else "y"
    body = f"""
    if ({t}) launch({nc}, {chunks}, [&] {{ bn_stats<double, 0, false, false>(x, nullptr, nullptr,
        nullptr, nullptr, part, {nb}, {nc}, {hw}, {rpc}); }});
    launch({nc}, {chunks}, [&] {{ bn_fwd<double, {code}, {t}, true, true, {str(wz).lower()},
        {upd}, false>(x, part, {chunks}, w, b, rm, rv, nullptr, y, z, mean, rstd, rmo, rvo,
        {nb}, {nc}, {hw}, {rpc}, 1e-5, 0.1); }});
    out("y", y, {x.size}); out("z", z, {x.size}); out("mean", mean, {nc}); out("rstd", rstd, {nc});
    out("rm", rmo, {nc}); out("rv", rvo, {nc});
    launch({nc}, {chunks}, [&] {{ bn_stats<double, {code}, true, {str(hs).lower()}>(x, dy, {sv},
        mean, rstd, part, {nb}, {nc}, {hw}, {rpc}); }});
    launch({nc}, {chunks}, [&] {{ bn_bwd<double, {code}, {t}, true, {str(hs).lower()}, true,
        true>(dy, x, {sv}, mean, rstd, w, part, {chunks}, dx, dw, db, {nb}, {nc}, {hw}, {rpc}); }});
    out("dx", dx, {x.size}); out("dw", dw, {nc}); out("db", db, {nc});
"""
    got = _run(tmp_path, decls, body)
    ys, s, mean, rstd, nrm, nrv = CPU.batch_norm(x, w, b, rm, rv, 0.1, 1e-5, training, act)
    tol = dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["y"], ys.reshape(-1), **tol)
    np.testing.assert_allclose(got["mean"], mean, **tol)
    np.testing.assert_allclose(got["rstd"], rstd, **tol)
    if training:
        np.testing.assert_allclose(got["rm"], nrm, **tol)
        np.testing.assert_allclose(got["rv"], nrv, **tol)
    if wz:
        np.testing.assert_allclose(got["z"], s.reshape(-1), **tol)
    dx, dw, db = CPU.batch_norm_backward(dy, x, w, mean, rstd, s, act, training, True, True)
    np.testing.assert_allclose(got["dx"], dx.reshape(-1), rtol=1e-10, atol=1e-11)
    np.testing.assert_allclose(got["dw"], dw, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(got["db"], db, rtol=1e-11, atol=1e-12)


@needs_gxx
@pytest.mark.parametrize("act", ["none", "relu", "gelu"])
def test_channel_bias_activation_kernels(tmp_path, act):
    r = np.random.default_rng(1)
    nb, nc, hw, rpc = 3, 4, 5, 2
    zin, bias, dy = r.normal(size=(nb, nc, hw)), r.normal(size=nc), r.normal(size=(nb, nc, hw))
    code, wz = ACT[act].code, ACT[act].saves == "z" and act != "none"
    chunks = -(-nb // rpc)
    decls = "".join(_arr(n, a, "double") for n, a in (("z", zin), ("bias", bias), ("dy", dy))) + \
        f"static double y[{zin.size}], dz[{zin.size}], part[{nc * chunks}];\n"
    sv = "z" if wz else "y"
    body = f"""
    launch({nc}, {chunks}, [&] {{ chan_bias_act<double, {code}, true, {str(wz).lower()}>(z, bias,
        {'y' if wz else 'z'}, {nb}, {nc}, {hw}, {rpc}); }});
    {'' if wz else f'for (int i = 0; i < {zin.size}; ++i) y[i] = z[i];'}
    out("y", y, {zin.size}); out("z", z, {zin.size});
    launch({nc}, {chunks}, [&] {{ chan_act_bwd<double, {code}, {str(act != 'none').lower()}, true,
        true>(dy, {sv}, dz, part, {nb}, {nc}, {hw}, {rpc}); }});
    out("dz", dz, {zin.size}); out("part", part, {nc * chunks});
"""
    got = _run(tmp_path, decls, body)
    pre = zin + bias[None, :, None]
    want = pre if act == "none" else ACT[act].np.fwd(np, pre.copy())
    np.testing.assert_allclose(got["y"], want.reshape(-1), rtol=1e-13, atol=1e-14)
    s = pre if wz else want
    g = dy if act == "none" else ACT[act].np.d1(np, dy, s, None)
    np.testing.assert_allclose(got["dz"], g.reshape(-1), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(got["part"].reshape(nc, chunks).sum(1), g.sum((0, 2)), rtol=1e-12)


POOLS = [((2, 2), (2, 2), (0, 0), (1, 1), (3, 3)), ((3, 3), (2, 2), (1, 1), (1, 1), (4, 3)),
         ((3, 2), (1, 2), (1, 0), (2, 1), (5, 3)), ((2, 2), (1, 1), (1, 1), (1, 1), (8, 7))]


@needs_gxx
@pytest.mark.parametrize("kernel,stride,padding,dilation,out_hw", POOLS)
def test_max_pool_kernels(tmp_path, kernel, stride, padding, dilation, out_hw):
    r = np.random.default_rng(2)
    x = np.round(r.normal(size=(2, 2, 7, 6)), 1)         # ties: the first maximum wins
    x[0, 0, 1, 1] = np.nan
    x[0, 0, 2, 2] = np.nan                               # two NaNs: the last one wins
    x[1, 1] = -np.inf                                    # all -inf: the first element
    oh, ow = out_hw
    out_hw = (min(oh, (7 + 2 * padding[0] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1),
              min(ow, (6 + 2 * padding[1] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1))
    n_out = 4 * out_hw[0] * out_hw[1]
    dy = r.normal(size=(2, 2) + out_hw)
    geo = ", ".join(str(v) for v in (7, 6) + out_hw + kernel + stride + padding + dilation)
    decls = _arr("x", x, "double") + _arr("dy", dy, "double") + \
        f"static double y[{n_out}], dx[{x.size}];\nstatic int idx[{n_out}];\n"
    body = f"""
    launch(3, 1, [&] {{ maxpool_fwd<double>(x, y, idx, {n_out}, {geo}); }});
    out("y", y, {n_out}); out("idx", idx, {n_out});
    launch(3, 1, [&] {{ maxpool_bwd<double>(dy, idx, dx, {x.size}, {geo}); }});
    out("dx", dx, {x.size});
"""
    got = _run(tmp_path, decls, body)
    y, idx = CPU.max_pool2d(x, kernel, stride, padding, dilation, out_hw)
    np.testing.assert_array_equal(got["y"], y.reshape(-1))
    np.testing.assert_array_equal(got["idx"], idx.reshape(-1))
    dx = CPU.max_pool2d_backward(dy, idx, x.shape, kernel, stride, padding, dilation)
    np.testing.assert_allclose(got["dx"], dx.reshape(-1), rtol=1e-15, atol=0)


# -- the launches' arguments against the kernels' parameter lists --------------------------------------
def _params():
    """kernel name -> its parameters' kinds: p (pointer), q (long long), d (double)."""
    text = CNN_CU.read_text()
    out = {}
    for m in re.finditer(r"__global__ void __launch_bounds__\(\w+\) (\w+)\((.*?)\)\s*\{", text, re.S):
        kinds = []
        for p in m.group(2).split(","):
            p = p.strip()
            kinds.append("p" if "*" in p else "d" if p.startswith("double") else "q")
        out[m.group(1)] = kinds
    return out


class _FakeKernels:
    def __init__(self):
        self.calls = []

    def function(self, name, family):
        assert name in list(family())
        return lambda grid, block, args: self.calls.append((name, grid, block, args))


def _fake_backend():
    import numpy
    from numr_web.backends.array_backend import ArrayBackend

    class Fake(K.CudaCNN, ArrayBackend):
        xp = numpy
        _sms = 4
        _tf32 = False
        capturing = False

        def __init__(self):
            super().__init__()
            self.kernels = _FakeKernels()
            self._ct = {numpy.dtype(k).char: v for k, v in G.C_TYPES.items()}
            self._code = {name: i for i, name in enumerate(ACT)}
    return Fake()


@pytest.mark.parametrize("act", ["none", "relu", "gelu"])
def test_launch_arguments_match_the_kernels(act):
    params = _params()
    be = _fake_backend()
    r = np.random.default_rng(3)
    x = r.normal(size=(6, 3, 4, 5)).astype(np.float32)
    c = np.ones(3, np.float32)
    for training, mom in ((True, 0.1), (True, np.array(0.5, np.float32)), (False, 0.1)):
        be.batch_norm(x, c, c, c, c, mom, 1e-5, training, act)
    mean, rstd = np.zeros(3, np.float32), np.ones(3, np.float32)
    be.batch_norm_backward(x, x, c, mean, rstd, x if act != "none" else None, act, True, True,
                           True)
    be.batch_norm_backward(x, x, None, mean, rstd, x if act != "none" else None, act, False,
                           False, False)
    be.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1), (2, 2))
    be.max_pool2d_backward(x[:, :, :2, :2], np.zeros((6, 3, 2, 2), np.int32), x.shape, (2, 2),
                           (2, 2), (0, 0), (1, 1))
    assert be.kernels.calls
    for name, grid, block, args in be.kernels.calls:
        kinds = params[name.split("<")[0]]
        assert len(args) == len(kinds), (name, len(args), len(kinds))
        for a, k in zip(args, kinds):
            if k == "p":
                assert isinstance(a, np.ndarray) or a == 0, (name, type(a))
            elif k == "d":
                assert type(a) is float, (name, a)
            else:
                assert type(a) is int, (name, a)
        assert all(isinstance(g, int) and 0 < g < 2 ** 31 for g in grid), (name, grid)
        assert np.prod(block) <= K.CNN_BLOCK, (name, block)
        if name.startswith(("bn_", "chan_")):
            assert grid[0] == 3 and block[0] * block[1] == K.CNN_BLOCK


def test_every_cnn_kernel_compiles_with_nvrtc():
    compiler = nvrtc()
    if compiler is None:
        pytest.skip("NVRTC is not installed (CuPy, or the nvidia-cuda-nvrtc wheel of the [dev] extra)")
    names = []
    for ct in G.C_TYPES.values():
        for code in (0, ACT["relu"].code, ACT["gelu"].code):
            names += [K.bn_stats(ct, 0, False, False), K.bn_stats(ct, code, True, code != 0),
                      K.bn_fwd(ct, code, True, True, True, code == ACT["gelu"].code, True, True),
                      K.bn_fwd(ct, code, False, False, False, False, False, False),
                      K.bn_bwd(ct, code, True, True, code != 0, True, True),
                      K.bn_bwd(ct, code, False, False, code != 0, False, False),
                      K.chan_bias_act(ct, code, True, False), K.chan_act_bwd(ct, code, True, True, True)]
        names += [K.maxpool(ct, False), K.maxpool(ct, True)]
    ptx, mapping = compiler.compile(G.source(), names, G.OPTIONS + ("-arch=compute_80",))
    assert set(mapping) == set(names)
