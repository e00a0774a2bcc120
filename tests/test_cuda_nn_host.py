"""The cuda backend's scatter-add checked without a GPU: its host logic (cuda/nn.py: which path
an index takes, the keys and their order, the launch grid) runs with numpy standing in for CuPy,
and nn.cu's rows_seg_sum kernel runs compiled for the host with g++ (test_cuda_cnn_host.py's shim
of CUDA's built-ins, every thread of every block in turn). Each result is np.add.at's, bit for
bit: the kernel adds each target's rows in source order, as add.at does."""
import re
import subprocess

import numpy as np
import pytest

from numr_web.backends.array_nn import ArrayNN
from numr_web.backends.cuda import codegen as G
from numr_web.backends.cuda.nn import CudaNN
from test_cuda_cnn_host import SHIM, _arr, needs_gxx

NN_CU = G.KERNELS_CU.with_name("nn.cu")
LAUNCH3 = """
template <typename F> void launch3(unsigned gx, unsigned gy, unsigned gz, unsigned bx, F f) {
    blockDim.x = bx; blockDim.y = blockDim.z = 1;
    for (unsigned z = 0; z < gz; ++z) for (unsigned y = 0; y < gy; ++y)
        for (unsigned x = 0; x < gx; ++x) for (unsigned t = 0; t < bx; ++t) {
            blockIdx.x = x; blockIdx.y = y; blockIdx.z = z; threadIdx.x = t; f(); }
}
"""


def _kernel(name):
    src = NN_CU.read_text()
    start = src.rindex("template <typename S>", 0, src.index(f" {name}("))
    return src[start:src.index("\n}\n", start) + 3]


class HostCuda(CudaNN, ArrayNN):
    """CudaNN's scatter-add on numpy, its kernel launches run by the host build."""
    xp = np
    _ct = {"f": "float", "d": "double"}

    def __init__(self, tmp_path):
        self.tmp_path, self.launches = tmp_path, []

    def _nn_fn(self, name, family):
        ct = re.fullmatch(r"rows_seg_sum<(\w+)>", name).group(1)

        def run(grid, block, args):
            key, perm, rows, out, L, R = args
            self.launches.append(name)
            decls = "".join(f"static long long {n}[] = {{{', '.join(map(str, a.tolist()))}}};\n"
                            for n, a in (("key", key), ("perm", perm))) + \
                _arr("src", rows, ct) + f"static {ct} out[{out.size}];\n"
            body = (f"    launch3({grid[0]}, {grid[1]}, {grid[2]}, {block[0]}, [&] {{ "
                    f"rows_seg_sum<{ct}>(key, perm, src, out, {L}LL, {R}LL); }});\n"
                    f"    out_(\"out\", out, {out.size});\n")
            cpp = self.tmp_path / "nn_host.cpp"
            cpp.write_text(SHIM.replace("void out(", "void out_(") + LAUNCH3 +
                           _kernel("rows_seg_sum") + decls + "int main() {\n" + body +
                           "    return 0;\n}\n")
            exe = self.tmp_path / "nn_host"
            r = subprocess.run(["g++", "-std=c++17", "-O1", "-ffp-contract=off", str(cpp), "-o",
                                str(exe)], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr[-3000:]
            line = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
            out.reshape(-1)[:] = [float(v) for v in line.split()[1:]]
        return run


def _add_at(shape, axis, index, src):
    want = np.zeros(shape, src.dtype)
    full = [np.arange(n).reshape([-1 if d == e else 1 for e in range(len(shape))])
            for d, n in enumerate(index.shape)]
    full[axis] = index % shape[axis]
    np.add.at(want, tuple(full), src[tuple(slice(0, k) for k in index.shape)])
    return want


@needs_gxx
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis,shape", [(0, (5, 8)), (1, (3, 6, 4)), (2, (2, 3, 7))])
def test_embedding_backward_rows_kernel_as_add_at(tmp_path, dtype, axis, shape):
    """An index that is one vector along `axis`, broadcast over the other dims (an embedding's
    backward; negative and repeated entries): the row path, one launch, add.at's bits."""
    rng = np.random.default_rng(axis)
    L = 11
    vec = rng.integers(-shape[axis], shape[axis], L)
    ishape = list(shape)
    ishape[axis] = L
    index = np.broadcast_to(vec.reshape([L if d == axis else 1 for d in range(len(shape))]),
                            ishape)
    src = rng.standard_normal(ishape).astype(dtype)
    be = HostCuda(tmp_path)
    got = be.scatter_add(shape, axis, index, src)
    assert be.launches == [f"rows_seg_sum<{be._ct[np.dtype(dtype).char]}>"]
    assert got.dtype == dtype and got.tobytes() == _add_at(shape, axis, index, src).tobytes()


def test_label_gather_backward_is_a_write(tmp_path):
    """One index a row (a cross-entropy's label gather): no launch, 0 + g at each label (an
    out-of-range label wraps, as CuPy's indexing)."""
    idx = np.array([[2], [0], [-1], [7]])
    src = np.array([[-0.0], [1.5], [-2.0], [3.0]], np.float32)
    be = HostCuda(tmp_path)
    got = be.scatter_add((4, 5), 1, idx, src)
    assert be.launches == []
    assert got.tobytes() == _add_at((4, 5), 1, idx, src).tobytes()
    assert not np.signbit(got[0, 2])
