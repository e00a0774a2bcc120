"""The cpu device's conv-net primitives in blocks of images (numr_web/backends/cpu_cnn.py), at
sizes where they take several blocks: convolution, batch norm and max pooling forward and
backward give the bits of one numpy call per op (parallel_min past every size) on 1 and 4
threads, except batch norm's compiled sums (float64, within a few ulp of the one call) and
the convolution: the same bits on every thread count, the one call's where BLAS
keeps them for a block of the GEMM's columns (else within a few ulp), and its weight gradient
adds its blocks' GEMMs in a fixed order: its error against float64 truth within float32 GEMM's
bound and near one BLAS call's. Values are also checked against torch in float64."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import numr_web as nr
import numr_web.nn.functional as F
from numr_web.backends import cpu_jit, cpu_threads
from numr_web.backends.cpu_gemm import tile_steps

from helpers import restored_cpu_settings, same_bits

ONE_CALL = 1 << 40          # parallel_min past every size: one numpy call per op
BLOCKS = 1024               # every case below runs in blocks
EPS32 = np.finfo(np.float32).eps


_restore_settings = pytest.fixture(autouse=True)(restored_cpu_settings)


def runs(fn):
    """{setting: [arrays]} of fn() with one call per op, and in blocks on 1 and 4 threads."""
    out = {}
    for name, threads, pmin in (("one call", 1, ONE_CALL), ("1 thread", 1, BLOCKS),
                                ("4 threads", 4, BLOCKS)):
        cpu_threads.configure(threads=threads, parallel_min=pmin)
        out[name] = [np.asarray(t.numpy() if isinstance(t, nr.Tensor) else t) for t in fn()]
    return out


def close_to_one_call(ref, got, what):
    """A block's GEMM gives the one call's bits where BLAS keeps them for a block of columns
    (OpenBLAS's SkylakeX kernels); OpenBLAS's Haswell kernels (AMD EPYC) round a cut of the
    columns otherwise: within a few ulp of the one call there."""
    if tile_steps()[1] is not None:
        same_bits(ref, got, what)
    else:
        np.testing.assert_allclose(got, ref, rtol=8 * EPS32, atol=8 * EPS32 * np.abs(ref).max(),
                                   err_msg=what)


def _img(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("act,stride,kernel,pad", [("none", 1, (3, 3), 1), ("relu", 2, (3, 3), 1),
                                                   ("gelu", 1, (2, 2), (0, 2)),
                                                   ("none", 2, (3, 3), 1)])
def test_convolution_in_blocks_of_images(act, stride, kernel, pad):
    """24 images of 32 channels, about 16 x 16 outputs (stride 1: its column gradient is added
    back in whole padded rows): one image a block (cpu_cnn.CONV_MIN_BLOCKS), so the weight
    gradient adds 24 blocks' products."""
    hw = 32 if stride == 2 else 16
    x0, w0 = _img((24, 32, hw, hw), 1), _img((16, 32) + kernel, 2) * 0.2
    out = TF.conv2d(torch.zeros(1, 32, hw, hw), torch.zeros((16, 32) + kernel), stride=stride,
                    padding=pad).shape[2:]
    b0, g0 = _img((16,), 3), _img((24, 16) + tuple(out), 4)

    def run():
        x = nr.tensor(x0, requires_grad=True)
        w = nr.tensor(w0, requires_grad=True)
        b = nr.tensor(b0, requires_grad=True)
        y = nr.conv2d_bias_activation(x, w, b, act, stride=stride, padding=pad)
        dx, dw, db = nr.grad(y, [x, w, b], nr.tensor(g0))
        return [y, dx, db, dw]
    got = runs(run)
    for i, what in enumerate(("y", "dx", "dbias", "dw")):
        same_bits(got["1 thread"][i], got["4 threads"][i], f"{what} on 1 and 4 threads")
    for i, what in enumerate(("y", "dx", "dbias")):
        close_to_one_call(got["one call"][i], got["1 thread"][i], what)
    # the weight gradient against float64 truth (torch, from the same float32 inputs)
    xt = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
    wt = torch.tensor(w0, dtype=torch.float64, requires_grad=True)
    z = TF.conv2d(xt, wt, torch.tensor(b0, dtype=torch.float64), stride=stride, padding=pad)
    y = {"none": z, "relu": torch.relu(z), "gelu": TF.gelu(z)}[act]
    dx, dw = torch.autograd.grad(y, [xt, wt], torch.tensor(g0, dtype=torch.float64))
    np.testing.assert_allclose(got["4 threads"][0], y.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got["4 threads"][1], dx.numpy(), rtol=1e-4, atol=1e-4)
    # |error| of a float32 dot product of K terms: within K eps sum |a b| (K = N * OH * OW);
    # the blocked sum's error stays near one BLAS call's
    k = 24 * out[0] * out[1]
    truth = dw.numpy()
    scale = np.abs(truth).max()
    err_one = np.abs(got["one call"][3] - truth).max()
    err_blk = np.abs(got["4 threads"][3] - truth).max()
    assert err_blk <= k * EPS32 * scale and err_blk <= 4 * err_one + 8 * EPS32 * scale, \
        (err_blk, err_one)


@pytest.mark.parametrize("act", ["none", "relu", "silu"])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_in_blocks_against_one_call_and_float64(act, training):
    """Blocks give the same bits on 1 and 4 threads. numpy's formulas in blocks give the one
    call's bits; the compiled loops (numba) sum in float64 in another order: each output's
    error against torch in float64 within 4 float32 ulp of its largest value and no more than
    twice the one call's (whose float32 row sums are pairwise; the errors here: up to 1.4 ulp,
    the weight and bias gradients' 0.2-0.8 against the one call's 0.8-2.1)."""
    x0, g0 = _img((16, 24, 20, 20), 5) * 2 + 1, _img((16, 24, 20, 20), 6)
    w0, b0 = _img((24,), 7), _img((24,), 8)
    rm0, rv0 = _img((24,), 9) * 0.1, np.abs(_img((24,), 10)) + 0.5

    def run():
        x = nr.tensor(x0, requires_grad=True)
        w = nr.tensor(w0, requires_grad=True)
        b = nr.tensor(b0, requires_grad=True)
        rm, rv = nr.tensor(rm0), nr.tensor(rv0)
        y = F.batch_norm(x, rm, rv, w, b, training=training, activation=act)
        dx, dw, db = nr.grad(y, [x, w, b], nr.tensor(g0))
        return [y, dx, dw, db, rm, rv]
    got = runs(run)
    for i, a in enumerate(got["1 thread"]):
        same_bits(a, got["4 threads"][i], f"output {i}, 1 and 4 threads")
    t = [torch.tensor(a, dtype=torch.float64, requires_grad=r)
         for a, r in ((x0, True), (w0, True), (b0, True), (rm0, False), (rv0, False))]
    z = TF.batch_norm(t[0], t[3], t[4], t[1], t[2], training=training)
    y = {"none": z, "relu": torch.relu(z), "silu": TF.silu(z)}[act]
    grads = torch.autograd.grad(y, t[:3], torch.tensor(g0, dtype=torch.float64))
    for i, ref in enumerate([y.detach()] + list(grads) + [t[3], t[4]]):
        ref = ref.numpy()
        if not cpu_jit.kernels():
            same_bits(got["one call"][i], got["4 threads"][i], f"output {i}")
        scale = np.abs(ref).max()
        err_one = np.abs(got["one call"][i] - ref).max()
        err_blk = np.abs(got["4 threads"][i] - ref).max()
        assert err_blk <= 4 * EPS32 * scale, (i, err_blk / scale)
        assert err_blk <= 2 * err_one + 2 * EPS32 * scale, (i, err_blk, err_one)


def test_batch_norm_relu_in_blocks_keeps_signed_zeros_and_nans():
    """relu's blocked form (integer work on the bits, or the compiled select) against the one
    call's masked copy: a channel with weight 0 and bias -0.0 gives -0.0 and +0.0, one holding
    a NaN gives NaN, one an inf NaN; the gradient passes through NaN and stops at both zeros.
    The same NaNs and signed zeros as the one call, values within a few ulp of it."""
    x0, g0 = _img((8, 6, 30, 30), 13), _img((8, 6, 30, 30), 14)
    x0[0, 1, 3, 4], x0[2, 2, 0, 0] = np.nan, np.inf
    w0 = np.array([0, 1, 1, 0.5, 0, 2], np.float32)
    b0 = np.array([-0.0, 0, 1, -0.0, 0, -1], np.float32)

    def run():
        x = nr.tensor(x0, requires_grad=True)
        w, b = nr.tensor(w0, requires_grad=True), nr.tensor(b0, requires_grad=True)
        y = F.batch_norm(x, None, None, w, b, training=True, activation="relu")
        return [y] + list(nr.grad(y, [x, w, b], nr.tensor(g0)))
    got = runs(run)
    y = got["one call"][0]
    assert np.signbit(y[:, 0][y[:, 0] == 0]).any() and np.isnan(y[:, 1]).all()
    for i, a in enumerate(got["one call"]):
        same_bits(got["1 thread"][i], got["4 threads"][i], f"output {i}, 1 and 4 threads")
        b = got["4 threads"][i]
        if not cpu_jit.kernels():
            same_bits(a, b, f"output {i}")
            continue
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b), err_msg=f"output {i}")
        zero = a == 0
        np.testing.assert_array_equal(zero, b == 0, err_msg=f"output {i}")
        np.testing.assert_array_equal(np.signbit(a[zero]), np.signbit(b[zero]),
                                      err_msg=f"output {i}")
        ok = np.isfinite(a)
        np.testing.assert_allclose(b[ok], a[ok], rtol=0, atol=(64 if i > 1 else 8) * EPS32 *
                                   np.abs(a[ok]).max(), err_msg=f"output {i}")


@pytest.mark.parametrize("case", [dict(k=2), dict(k=2, nan=False), dict(k=(2, 3), s=(3, 3),
                                  nan=False), dict(k=3, s=2, p=1), dict(k=3, s=2, ceil=True),
                                  dict(k=2, s=1, d=2)])
def test_max_pool_in_blocks_matches_one_call_and_torch(case):
    x0 = _img((12, 20, 17, 18), 11)
    flat = x0.reshape(-1)
    if case.get("nan", True):       # (a block holding a NaN maximum takes the general form)
        flat[::53] = np.nan
    flat[1::211], flat[2::307] = -np.inf, np.inf
    flat[5::13] = -0.0
    flat[3::7] = flat[4::7]                                        # ties: the first maximum
    g0 = _img((12, 20) + TF.max_pool2d(torch.tensor(x0), case["k"], case.get("s"),
                                        case.get("p", 0), case.get("d", 1),
                                        case.get("ceil", False)).shape[2:], 12)
    g0.reshape(-1)[::17] = -0.0                     # the gradient of a window: 0 + -0.0 = +0.0
    args = (case["k"], case.get("s"), case.get("p", 0), case.get("d", 1), case.get("ceil", False))

    def run():
        x = nr.tensor(x0, requires_grad=True)
        y, idx = F.max_pool2d(x, *args, return_indices=True)
        return [y, idx, nr.grad(y, [x], nr.tensor(g0))[0]]
    got = runs(run)
    for name in ("1 thread", "4 threads"):
        for i, a in enumerate(got["one call"]):
            same_bits(a, got[name][i], f"output {i}, {name}")
    xt = torch.tensor(x0, requires_grad=True)
    y, idx = TF.max_pool2d(xt, *args, return_indices=True)
    dx, = torch.autograd.grad(y, [xt], torch.tensor(g0))
    np.testing.assert_array_equal(got["4 threads"][0], y.detach().numpy())
    np.testing.assert_array_equal(got["4 threads"][1], idx.numpy())
    # overlapping windows add their gradients in another order than torch's
    np.testing.assert_allclose(got["4 threads"][2], dx.numpy(), rtol=4 * EPS32, atol=1e-6)


def test_float64_conv_batch_norm_pool_in_blocks():
    """The blocked forms in float64 (the integer relu on 8-byte words): one call's bits, but
    the conv weight gradient's and (compiled) batch norm's sums, the same on 1 and 4 threads
    and within 1e-12 / 1e-13 of it."""
    x0 = np.random.default_rng(15).standard_normal((16, 8, 24, 24))
    w0 = np.random.default_rng(16).standard_normal((16, 8, 3, 3)) * 0.2

    def run():
        x = nr.tensor(x0, dtype="float64", requires_grad=True)
        w = nr.tensor(w0, dtype="float64", requires_grad=True)
        z = nr.conv2d_bias_activation(x, w, None, "none", padding=1)
        y = F.max_pool2d(F.batch_norm(z, None, None, training=True, activation="relu"), 2)
        dx, dw = nr.grad((y * y).sum(), [x, w])
        return [y, dx, dw]
    got = runs(run)
    for name in ("1 thread", "4 threads"):
        for i in (0, 1):
            if cpu_jit.kernels():       # batch norm's compiled sums: in another order
                np.testing.assert_allclose(got[name][i], got["one call"][i], rtol=1e-13,
                                           atol=1e-13 * np.abs(got["one call"][i]).max())
            else:
                same_bits(got["one call"][i], got[name][i], f"output {i}, {name}")
    for i in (0, 1, 2):
        same_bits(got["1 thread"][i], got["4 threads"][i], f"output {i} on 1 and 4 threads")
    np.testing.assert_allclose(got["4 threads"][2], got["one call"][2], rtol=1e-12, atol=1e-12)
