"""The cpu device's GEMMs in tiles (numr_web/backends/cpu_gemm.py): a large GEMM runs as tiles of
its output, one BLAS call at one thread per tile, on the worker threads, and the fused layer
applies its bias and activation per tile. References: numpy's own matmul with BLAS held at one
thread (threadpoolctl), numpy's one call per op (the engine with blocks switched off), float64
products, and torch."""
import numpy as np
import pytest
import torch

import numr_web as nr
from numr_web.backends import cpu_threads

from helpers import restored_cpu_settings, same_bits

threadpoolctl = pytest.importorskip("threadpoolctl")

ONE_CALL = 1 << 40          # parallel_min past every size: one numpy call per op
BLOCKS = 1024               # small enough that every case below runs in tiles


_restore_settings = pytest.fixture(autouse=True)(restored_cpu_settings)


def _operands(m, k, n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)


# K = 777 is longer than OpenBLAS's K block and no multiple of it: its threaded driver splits
# that K otherwise than its one-thread driver; tiles sum it as the one-thread call does.
@pytest.mark.parametrize("m, k, n, dtype, layout", [
    (500, 777, 333, np.float32, "nn"), (1000, 256, 700, np.float32, "tn"),
    (300, 777, 900, np.float32, "nt"), (700, 300, 500, np.float32, "tt"),
    (40, 1500, 2000, np.float32, "nn"), (900, 64, 450, np.float32, "nn")])
def test_tiled_gemm_gives_one_single_threaded_blas_calls_bits(m, k, n, dtype, layout):
    a, b = _operands(m, k, n, dtype)
    if layout[0] == "t":
        a = np.ascontiguousarray(a.T).T          # the same values, column-major
    if layout[1] == "t":
        b = np.ascontiguousarray(b.T).T
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        want = np.matmul(a, b)
    truth = a.astype(np.float64) @ b.astype(np.float64)
    bound = 4 * np.finfo(dtype).eps * np.sqrt(k) * (np.abs(a) @ np.abs(b))
    for threads in (1, 3, 4):
        cpu_threads.configure(threads=threads, parallel_min=BLOCKS)
        got = nr.matmul(nr.tensor(a), nr.tensor(b)).numpy()
        same_bits(got, want, f"{threads} threads")
        assert (np.abs(got - truth) <= bound).all()


def test_float64_gemm_stays_numpys_one_call():
    a, b = _operands(700, 300, 500, np.float64)
    cpu_threads.configure(threads=4, parallel_min=BLOCKS)
    same_bits(nr.matmul(nr.tensor(a), nr.tensor(b)).numpy(), np.matmul(a, b), "float64")


def test_batched_rows_and_float16_fold_into_one_tiled_gemm():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 90, 256)).astype(np.float32)
    w = rng.standard_normal((256, 300)).astype(np.float32)
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        want = np.matmul(x.reshape(-1, 256), w).reshape(6, 90, 300)
        want16 = np.matmul(x.astype(np.float16).astype(np.float32).reshape(-1, 256),
                           w.astype(np.float16).astype(np.float32)).astype(np.float16)
    for threads in (1, 4):
        cpu_threads.configure(threads=threads, parallel_min=BLOCKS)
        same_bits(nr.matmul(nr.tensor(x), nr.tensor(w)).numpy(), want, "float32")
        xt = nr.tensor(x.transpose(1, 0, 2).copy()).permute(1, 0, 2)    # rows not dense: a copy
        same_bits(nr.matmul(xt, nr.tensor(w)).numpy(), want, "strided rows")
        got16 = nr.matmul(nr.tensor(x, dtype="float16"), nr.tensor(w, dtype="float16")).numpy()
        same_bits(got16, want16.reshape(6, 90, 300), "float16")


@pytest.mark.parametrize("act", ["none", "relu", "gelu", "gelu_tanh", "silu", "sigmoid"])
def test_fused_layer_in_tiles_matches_one_call_forward_and_backward(act):
    """The tiles (forward: a @ b + bias and the activation per tile; backward: dz @ b.T and
    a.T @ dz on transposed views) give the bits of numpy's one call per op with BLAS at one
    thread, on 1 and 4 threads, float32 and float16, the saved z included. (With BLAS's own
    threads the one call differs in the last bits on some CPUs: OpenBLAS's Haswell kernels
    split K otherwise on two threads.)"""
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((2, 120, 256)), rng.standard_normal((256, 256)) / 16
    bias, g = rng.standard_normal(256), rng.standard_normal((2, 120, 256))

    def run():
        out = []
        for dt in ("float32", "float16"):
            xt, wt, bt = (nr.tensor(v, dtype=dt, requires_grad=True) for v in (x, w, bias))
            y = nr.matmul_bias_activation(xt, wt, bt, act)
            y.backward(nr.tensor(g, dtype=dt))
            out += [y, xt.grad, wt.grad, bt.grad]
        xt = nr.tensor(x, dtype="float32", requires_grad=True)
        y = nr.matmul_bias_activation(xt, nr.tensor(w, dtype="float32"), None, act)
        gx, = nr.grad((y * y).sum(), [xt], create_graph=True)       # z saved by the tiles
        gx.sum().backward()
        return [np.asarray(t.numpy()) for t in out + [y, gx, xt.grad]]
    cpu_threads.configure(threads=1, parallel_min=ONE_CALL)
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        ref = run()
    for threads in (1, 4):
        cpu_threads.configure(threads=threads, parallel_min=BLOCKS)
        for i, (r, got) in enumerate(zip(ref, run())):
            same_bits(got, r, f"output {i}, {threads} threads")


def test_large_tiled_gelu_layer_matches_torch():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((700, 900)), rng.standard_normal((900, 600)) / 30
    bias, g = rng.standard_normal(600), rng.standard_normal((700, 600))
    cpu_threads.configure(threads=4)
    xt, wt, bt = (nr.tensor(v, dtype="float32", requires_grad=True) for v in (x, w, bias))
    y = nr.matmul_bias_activation(xt, wt, bt, "gelu")
    y.backward(nr.tensor(g, dtype="float32"))
    tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (x, w, bias))   # float64
    ty = torch.nn.functional.gelu(tx @ tw + tb)
    ty.backward(torch.tensor(g))
    for ours, ref in ((y, ty), (xt.grad, tx.grad), (wt.grad, tw.grad), (bt.grad, tb.grad)):
        ref = ref.detach().numpy()
        np.testing.assert_allclose(ours.numpy(), ref, rtol=2e-5, atol=2e-5 * np.abs(ref).max())
