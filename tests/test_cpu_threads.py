"""The cpu device on many cores (numr_web/backends/cpu_threads.py and the blocked primitives):
large ops run in blocks on worker threads and give the SAME bits as one numpy call per op
(parallel_min set past every size) on 1 and on 4 threads (cpu_threads.configure, the knobs
NUMR_CPU_PARALLEL_MIN / NUMR_CPU_THREADS); the pool survives nesting, fork, concurrent callers
and asyncio; NUMR_CPU_THREADS=1 creates no threads.
Correctness of each op against torch / float64 is tested elsewhere on the one-call path; here
a few large cases are also checked against torch directly."""
import asyncio
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
import threadpoolctl
import torch

import numr_web as nr
import numr_web.nn.functional as F
from numr_web import nn
from numr_web.backends import cpu_jit, cpu_threads
from numr_web.backends.cpu_gemm import tile_steps

from helpers import restored_cpu_settings, same_bits

ONE_CALL = 1 << 40          # parallel_min past every size: one numpy call per op
BLOCKS = 1024               # small enough that every case below runs in blocks


_restore_settings = pytest.fixture(autouse=True)(restored_cpu_settings)


def _arrays(out):
    return [np.asarray(o.numpy() if isinstance(o, nr.Tensor) else o) for o in out]


def blocked_matches_one_call(fn, threads=(1, 4, 16)):
    """fn() -> list of tensors/arrays: one numpy call per op (BLAS at one thread: with its own
    threads, OpenBLAS's Haswell kernels sum some K in another order) vs blocks on each thread
    count."""
    cpu_threads.configure(threads=1, parallel_min=ONE_CALL)
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        ref = _arrays(fn())
    for t in threads:
        cpu_threads.configure(threads=t, parallel_min=BLOCKS)
        got = _arrays(fn())
        assert len(got) == len(ref)
        for i, (a, b) in enumerate(zip(ref, got)):
            same_bits(a, b, f"output {i}, {t} threads")


def _data(shape, seed=0, specials=True):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 3
    if specials:
        flat = x.reshape(-1)
        flat[::97], flat[1::97] = 0.0, -0.0
        flat[2::1009], flat[3::1009], flat[4::1009] = np.nan, np.inf, -np.inf
    return x


UNARY = ["neg", "abs", "exp", "log", "sqrt", "sin", "cos", "sign", "erf", "log1p", "expm1",
         "rsqrt", "floor", "round", "reciprocal", "exp2", "tan", "atan", "sinh", "relu", "sigmoid",
         "tanh", "silu", "gelu", "mish", "softplus", "elu", "hardswish", "leaky_relu"]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_unary_ops_in_blocks_give_the_one_call_bits(dtype):
    x = _data((48, 37, 29))

    def run():
        t = nr.tensor(x, dtype=dtype)
        return [getattr(nr, op)(t) for op in UNARY] + [nr.exp(t.permute(2, 0, 1)),
                                                      nr.gelu(t, approximate="tanh")]
    blocked_matches_one_call(run)


def test_binary_ops_where_and_casts_in_blocks():
    x, y = _data((48, 37, 29)), _data((48, 37, 29), seed=1, specials=False)
    row = _data((29,), seed=2, specials=False)

    def run():
        a, b, r = nr.tensor(x), nr.tensor(y), nr.tensor(row)
        out = []
        for f in (lambda u, v: u + v, lambda u, v: u - v, lambda u, v: u * v, lambda u, v: u / v,
                  lambda u, v: u ** v, nr.maximum, nr.minimum, nr.atan2, lambda u, v: u // v,
                  lambda u, v: u % v, lambda u, v: u < v, lambda u, v: u == v):
            out += [f(a, b), f(a, r), f(a, 2.5), f(a.permute(1, 0, 2), b.permute(1, 0, 2)),
                    f(a.permute(2, 1, 0), b.permute(2, 1, 0).contiguous())]
        out += [nr.where(a > 0, a, b), nr.where(a > 0, a, 0.0), (a * 1e9).astype("int32"),
                a.astype("float16"), a.astype("float16") * b.astype("float16"),
                a.permute(2, 0, 1).contiguous(), a.permute(2, 0, 1).reshape(29, -1)]
        return out
    blocked_matches_one_call(run)


@pytest.mark.parametrize("act", ["none", "relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid",
                                 "mish"])
def test_fused_linear_forward_and_backward_in_blocks(act):
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((4, 64, 48)), rng.standard_normal((48, 40)) / 7
    b, g = rng.standard_normal(40), rng.standard_normal((4, 64, 40))

    def run():
        out = []
        for dt in ("float32", "float16"):
            xt, wt, bt = (nr.tensor(v, dtype=dt, requires_grad=True) for v in (x, w, b))
            y = nr.matmul_bias_activation(xt, wt, bt, act)
            y.backward(nr.tensor(g, dtype=dt))
            out += [y, xt.grad, wt.grad, bt.grad]
        xt, wt = nr.tensor(x, dtype="float32", requires_grad=True), nr.tensor(w, dtype="float32")
        y = nr.matmul_bias_activation(xt, wt, None, act)       # no bias; second derivative
        gx, = nr.grad((y * y).sum(), [xt], create_graph=True)
        gx.sum().backward()
        return out + [y, gx, xt.grad]
    blocked_matches_one_call(run)


def test_reductions_softmax_and_losses_in_blocks():
    x = _data((32, 24, 40), specials=False)
    img = _data((16, 8, 12, 12), seed=4, specials=False)

    def run():
        t, im = nr.tensor(x), nr.tensor(img)
        out = []
        for d in (0, 1, 2, (0, 1), (1, 2), (0, 2)):
            for kd in (False, True):
                out += [t.sum(d, keepdim=kd), t.mean(d, keepdim=kd), t.amax(d, keepdim=kd),
                        t.amin(d, keepdim=kd)]
        out += [t.permute(2, 0, 1).sum((1, 2)), im.sum((0, 2, 3)), im.var((0, 2, 3)),
                im.permute(0, 2, 3, 1).mean((0, 1, 2))]
        for d in (0, 1, 2):
            out += [nr.softmax(t, d), nr.log_softmax(t, d)]
        logits = nr.tensor(x.reshape(-1, 40), requires_grad=True)
        labels = nr.tensor(np.arange(logits.shape[0]) % 40, dtype="int32")
        loss = nr.cross_entropy(logits, labels)
        loss.backward()
        return out + [loss, logits.grad]
    blocked_matches_one_call(run)


def test_norms_in_blocks():
    x = _data((16, 33, 40), specials=False)
    rng = np.random.default_rng(5)
    w, b, g = rng.standard_normal(40), rng.standard_normal(40), rng.standard_normal((16, 33, 40))

    def run():
        out = []
        for dt in ("float32", "float16"):
            xt, wt, bt = (nr.tensor(v, dtype=dt, requires_grad=True) for v in (x, w, b))
            y = nr.layer_norm(xt, (40,), wt, bt)
            r = nr.rms_norm(xt.permute(1, 0, 2), (40,), wt)      # a view: copied in blocks
            (y * nr.tensor(g, dtype=dt)).sum().backward()
            (r * r).sum().backward()
            out += [y, r, xt.grad, wt.grad, bt.grad]
        xt = nr.tensor(x, requires_grad=True)
        y = nr.layer_norm(xt, (33, 40))                          # two dims, no weight
        y.backward(nr.tensor(g, dtype="float32"))
        out += [y, xt.grad]
        xt, wt = nr.tensor(x, requires_grad=True), nr.tensor(w, requires_grad=True)
        y = nr.layer_norm(xt, (40,), wt)                         # a weight, no bias
        r = nr.rms_norm(xt, (40,))                               # no weight
        (y * r).sum().backward()
        return out + [y, r, xt.grad, wt.grad]
    blocked_matches_one_call(run)


@pytest.mark.parametrize("case", ["causal", "bool mask", "float mask", "shared kv", "float16"])
def test_attention_in_blocks_of_heads(case):
    rng = np.random.default_rng(6)
    qkv = rng.standard_normal((3, 40, 3 * 96)).astype(np.float32)
    g = rng.standard_normal((3, 6, 40, 16)).astype(np.float32)
    mask = rng.random((40, 40)) > 0.3
    mask[7] = False                                   # a row with every key masked
    fmask = rng.standard_normal((3, 1, 40, 40))
    dt = "float16" if case == "float16" else "float32"

    def run():
        t = nr.tensor(qkv, dtype=dt, requires_grad=True)
        q, k, v = (t[..., i * 96:(i + 1) * 96].reshape(3, 40, 6, 16).transpose(1, 2)
                   for i in range(3))
        kw = {}
        if case == "shared kv":
            k, v = k[:, :1], v[:, :1]
        if case == "bool mask":
            kw["attn_mask"] = nr.tensor(mask)
        elif case == "float mask":
            kw["attn_mask"] = nr.tensor(fmask, dtype=dt)
        else:
            kw["is_causal"] = True
        y = F.scaled_dot_product_attention(q, k, v, **kw)
        y.backward(nr.tensor(g, dtype=dt))
        return [y, t.grad]
    blocked_matches_one_call(run)


@pytest.mark.parametrize("heads_of_one_projection", [True, False])
def test_fused_qkv_gradient_is_written_where_q_k_v_lie(heads_of_one_projection):
    """q, k, v split from one projection: the attention backward writes dq, dk, dv into one new
    array where q, k, v lie in theirs, and split's backward joins them as a view (its concat
    allocates nothing). Dense copies of q, k, v get a concatenated gradient (the concat
    allocates it). The values are the one-call path's in both (test_attention_in_blocks_of_heads
    holds the bits); here against float64 numpy."""
    rng = np.random.default_rng(11)
    qkv = rng.standard_normal((2, 40, 3 * 96)).astype(np.float32)
    g = rng.standard_normal((2, 6, 40, 16)).astype(np.float32)
    cpu_threads.configure(threads=2, parallel_min=BLOCKS)
    t = nr.tensor(qkv, requires_grad=True)
    heads = [z.reshape(2, 40, 6, 16).transpose(1, 2) for z in t.split(96, dim=2)]
    if not heads_of_one_projection:
        heads = [z.contiguous() for z in heads]
    y = F.scaled_dot_product_attention(*heads, is_causal=True)
    with nr.profile() as p:
        y.backward(nr.tensor(g))
    concat = [r for r in p.rows() if r.name == "concat"]
    assert len(concat) == 1 and concat[0].calls == 1
    assert (concat[0].bytes == 0) == heads_of_one_projection, concat[0].bytes

    q, k, v = (qkv[..., i * 96:(i + 1) * 96].reshape(2, 40, 6, 16).transpose(0, 2, 1, 3)
               .astype(np.float64) for i in range(3))
    s = q @ k.swapaxes(-1, -2) / 4.0 + np.triu(np.full((40, 40), -np.inf), 1)
    pr = np.exp(s - s.max(-1, keepdims=True))
    pr /= pr.sum(-1, keepdims=True)
    dv = pr.swapaxes(-1, -2) @ g
    dp = g @ v.swapaxes(-1, -2)
    ds = pr * (dp - (dp * pr).sum(-1, keepdims=True)) / 4.0
    want = np.concatenate([(x.transpose(0, 2, 1, 3)).reshape(2, 40, 96)
                           for x in (ds @ k, ds.swapaxes(-1, -2) @ q, dv)], axis=2)
    np.testing.assert_allclose(t.grad.numpy(), want, rtol=2e-5, atol=2e-5)


def test_convolution_pooling_batchnorm_and_embedding_in_blocks():
    img = _data((8, 3, 16, 16), specials=False)
    ids = np.random.default_rng(7).integers(0, 50, (6, 40))
    ids[0, :20] = 3                                   # a row gathered many times

    def run():
        nr.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, stride=2, padding=2,
                                                         dilation=2))
        x = nr.tensor(img, requires_grad=True)
        y = model(x)
        (y * y).sum().backward()
        emb = nn.Embedding(50, 64)
        e = emb(nr.tensor(ids, dtype="int32"))
        (e * e).sum().backward()
        return [y, x.grad, e, emb.weight.grad] + [p.grad for p in model.parameters()]
    # a convolution's blocks of images: the same bits on every thread count; the one call's
    # where BLAS keeps them for a block of columns, and its weight gradients (2 of the
    # parameters) add the blocks in a fixed order: near the one call's (tests/test_cpu_cnn.py);
    # batch norm's compiled sums (float64, another order) too
    conv_w = (4, 8)
    exact = tile_steps()[1] is not None and not cpu_jit.kernels()
    blocked_matches_one_call(lambda: [t for i, t in enumerate(run()) if i not in conv_w]
                             if exact else run()[2:4])              # (the embedding's part)
    got = {}
    for name, threads, pmin in (("one call", 1, ONE_CALL), ("1 thread", 1, BLOCKS),
                                ("4 threads", 4, BLOCKS)):
        cpu_threads.configure(threads=threads, parallel_min=pmin)
        got[name] = _arrays(run())
    ref = got["one call"]
    for i, (a, b, c) in enumerate(zip(ref, got["1 thread"], got["4 threads"])):
        same_bits(b, c, f"output {i} on 1 and 4 threads")
        # output 5, the first conv's bias gradient, is 0 up to rounding (batch norm follows):
        # its scale is its weight gradient's
        scale = np.abs(ref[4] if i == 5 else a).max()
        np.testing.assert_allclose(c, a, rtol=1e-5, atol=1e-5 * scale, err_msg=f"output {i}")


def test_gather_scatter_and_argmax_in_blocks():
    x = _data((64, 50, 12), specials=False)
    idx = np.random.default_rng(12).integers(0, 50, (64, 30, 12))     # repeats along dim 1

    def run():
        t = nr.tensor(x, requires_grad=True)
        g = nr.gather(t, 1, nr.tensor(idx, dtype="int32"))
        (g * g).sum().backward()
        return [g, t.grad, t.argmax(1), t.argmax(2, keepdim=True), t.argmax(0)]
    blocked_matches_one_call(run)


def test_concat_in_blocks_keeps_numpy_layout():
    """concat of dense and of transposed inputs (a split's backward): the one call's bits and
    its memory layout (numpy follows the inputs' layout)."""
    dense = [_data((8, 40, 24), seed=s) for s in range(3)]
    swapped = [np.ascontiguousarray(_data((8, 24, 40), seed=s + 3)).transpose(0, 2, 1)
               for s in range(3)]

    def run():
        return [nr.concat([nr.tensor(a) for a in group], axis) for group in (dense, swapped)
                for axis in (0, 1, 2)]
    blocked_matches_one_call(run)
    cpu_threads.configure(threads=4, parallel_min=BLOCKS)
    for group in (dense, swapped):
        got = nr.concat([nr.tensor(a) for a in group], 2).numpy()
        assert got.strides == np.concatenate(group, 2).strides


def test_gpt_training_step_in_blocks():
    from numr_web.models import GPT, GPTConfig

    def run():
        cfg = GPTConfig(vocab_size=40, block_size=32, n_layer=2, n_head=4, n_embd=64)
        model = GPT(cfg, device="cpu", dtype="float32", seed=0)
        opt = nn.optim.AdamW(model.parameters(), lr=1e-3)
        rng = np.random.default_rng(8)
        x = nr.tensor(rng.integers(0, 40, (4, 32)), dtype="int32")
        y = nr.tensor(rng.integers(0, 40, (4, 32)), dtype="int32")
        losses = []
        for _ in range(2):
            _, loss = model(x, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss)
        return losses + [p for p in model.parameters()]
    blocked_matches_one_call(run)


def test_column_sums_of_many_rows_add_fixed_chunks():
    """Past 1024 rows a column sum (a bias or norm weight's gradient) adds fixed chunks of rows:
    the same bits on every thread count, and no less accurate than numpy's row-after-row sum
    against float64 truth."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2500, 3, 48)).astype(np.float32) + 1      # 7500 rows, mean 1
    w, b = rng.standard_normal(48), rng.standard_normal(48)
    g = rng.standard_normal((2500, 3, 48)).astype(np.float32) + 0.5
    eye = np.eye(48, dtype=np.float32)                 # z = x + b: the bias gradient's rows

    def run():
        xt = nr.tensor(x)
        wt, bt = (nr.tensor(v, dtype="float32", requires_grad=True) for v in (w, b))
        lin = nr.tensor(eye, requires_grad=True)
        y = nr.layer_norm(xt, (48,), wt, bt)
        z = nr.matmul_bias_activation(xt, lin, bt, "relu")
        (y * nr.tensor(g)).sum().backward()
        z.backward(nr.tensor(g))
        return [wt.grad, bt.grad]
    got = {}
    for t in (1, 4, 16):
        cpu_threads.configure(threads=t, parallel_min=BLOCKS)
        got[t] = _arrays(run())
        same_bits(got[t][0], got[1][0], f"weight gradient, {t} threads")
        same_bits(got[t][1], got[1][1], f"bias gradient, {t} threads")
    # float64 truth of the same float32 inputs: db = sum g + sum relu'(z) g, dw = sum g xhat
    x64, g64 = x.astype(np.float64).reshape(-1, 48), g.astype(np.float64).reshape(-1, 48)
    xhat = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5)
    z64 = x64 + b.astype(np.float32)
    truth_db = g64.sum(0) + (g64 * (z64 > 0)).sum(0)
    truth_dw = (g64 * xhat).sum(0)
    cpu_threads.configure(threads=1, parallel_min=ONE_CALL)
    one = _arrays(run())
    for i, truth in ((0, truth_dw), (1, truth_db)):
        err_chunks = np.abs(got[4][i] - truth).max()
        err_numpy = np.abs(one[i] - truth).max()
        assert err_chunks <= err_numpy + 4 * np.finfo(np.float32).eps * np.abs(truth).max(), \
            (i, err_chunks, err_numpy)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["adamw", "adam_l2", "adam_no_decay", "beta1_small", "capturable"])
def test_adam_update_in_blocks(kind, dtype):
    shapes = [(96, 53), (3, 40, 11), (7,)]          # blocks, and a parameter below the threshold

    def run():
        rng = np.random.default_rng(11)
        ps = [nn.Parameter(nr.tensor(rng.standard_normal(s), dtype=dtype)) for s in shapes]
        betas = (0.3, 0.95) if kind == "beta1_small" else (0.9, 0.999)    # both lerp forms
        if kind == "adamw":
            opt = nn.optim.AdamW(ps, lr=1e-2, betas=betas, weight_decay=0.1)
        else:
            opt = nn.optim.Adam(ps, lr=1e-2, betas=betas,
                                weight_decay=0.1 if kind == "adam_l2" else 0,
                                capturable=kind == "capturable")
        for _ in range(3):                  # the first step has no moments yet; later ones do
            for p in ps:
                p.grad = nr.tensor(rng.standard_normal(p.shape), dtype=dtype)
            opt.step()
        return ps + [opt.state[p][k] for p in ps for k in ("exp_avg", "exp_avg_sq")]
    blocked_matches_one_call(run)


# -- large ops at the default settings, against torch ------------------------------------------------
def test_large_fused_gelu_layer_matches_torch():
    rng = np.random.default_rng(9)
    x, w = rng.standard_normal((512, 256)), rng.standard_normal((256, 384)) / 16
    b, g = rng.standard_normal(384), rng.standard_normal((512, 384))   # 196608 outputs: blocks
    xt, wt, bt = (nr.tensor(v, dtype="float32", requires_grad=True) for v in (x, w, b))
    y = nr.matmul_bias_activation(xt, wt, bt, "gelu")
    y.backward(nr.tensor(g, dtype="float32"))
    tx, tw, tb = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (x, w, b))
    ty = torch.nn.functional.gelu(tx @ tw + tb)
    ty.backward(torch.tensor(g))
    for ours, ref in ((y, ty), (xt.grad, tx.grad), (wt.grad, tw.grad), (bt.grad, tb.grad)):
        ref = ref.detach().numpy()
        np.testing.assert_allclose(ours.numpy(), ref, rtol=2e-5, atol=2e-5 * np.abs(ref).max())


def test_large_attention_matches_torch():
    rng = np.random.default_rng(10)
    q, k, v, g = (rng.standard_normal((2, 4, 128, 64)) for _ in range(4))   # 65536 each; the
    ts = [nr.tensor(a, dtype="float32", requires_grad=True) for a in (q, k, v)]   # scores 131072
    y = F.scaled_dot_product_attention(*ts, is_causal=True)
    y.backward(nr.tensor(g, dtype="float32"))
    tt = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    ty = torch.nn.functional.scaled_dot_product_attention(*tt, is_causal=True)
    ty.backward(torch.tensor(g))
    for ours, ref in zip([y] + [t.grad for t in ts], [ty] + [t.grad for t in tt]):
        np.testing.assert_allclose(ours.numpy(), ref.detach().numpy(), rtol=1e-4, atol=1e-5)


# -- the pool: knobs, nesting, fork, concurrency -----------------------------------------------------
def test_thread_count_knobs(monkeypatch):
    monkeypatch.setenv("NUMR_CPU_THREADS", "3")
    monkeypatch.setenv("NUMR_CPU_PARALLEL_MIN", "5000")
    cpu_threads.configure()                         # re-reads the environment
    assert (cpu_threads.num_threads(), cpu_threads.parallel_min()) == (3, 5000)
    assert "3" in nr.get_backend("cpu").info()["threads"]
    monkeypatch.delenv("NUMR_CPU_THREADS")
    monkeypatch.delenv("NUMR_CPU_PARALLEL_MIN")
    cpu_threads.configure()
    assert cpu_threads.num_threads() == len(os.sched_getaffinity(0))
    assert cpu_threads.parallel_min() == cpu_threads.PARALLEL_MIN
    assert cpu_threads.configure(threads=2) == (len(os.sched_getaffinity(0)),
                                                cpu_threads.PARALLEL_MIN)   # the previous
    assert cpu_threads.num_threads() == 2
    for bad in ("0", "-2", "many"):
        monkeypatch.setenv("NUMR_CPU_THREADS", bad)
        with pytest.raises(nr.BackendUnavailableError, match="NUMR_CPU_THREADS"):
            cpu_threads.configure()
    for bad in (0, -1, 2.5, True):
        with pytest.raises(nr.BackendUnavailableError, match="positive int"):
            cpu_threads.configure(threads=bad)
    monkeypatch.setattr(sys, "platform", "emscripten")     # Pyodide has no threads
    assert cpu_threads.num_threads() == 1


def test_one_thread_creates_no_threads():
    code = ("import threading, numr_web as nr\n"
            "x = nr.randn((512, 1024), seed=0, requires_grad=True)\n"
            "y = nr.gelu(x * 2 + 1); y.sum().backward()\n"
            "names = [t.name for t in threading.enumerate()]\n"
            "assert len(names) == 1, names\n"
            "print(float(y.sum()), float(x.grad.sum()))\n")
    env = dict(os.environ, NUMR_CPU_THREADS="1", NUMR_CPU_PARALLEL_MIN="1024",
               OPENBLAS_NUM_THREADS="1", PYTHONPATH=os.getcwd())
    one = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert one.returncode == 0, one.stderr
    env["NUMR_CPU_THREADS"] = "4"
    four = subprocess.run([sys.executable, "-c", code.replace("len(names) == 1", "True")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert four.returncode == 0, four.stderr
    assert one.stdout == four.stdout


def test_nested_parallel_calls_run_and_finish():
    cpu_threads.configure(threads=4)
    x = nr.randn((256, 1024), seed=1)
    want = nr.gelu(x).numpy()
    got = [None] * 8

    def block(i):                   # each block runs ops that are parallel calls themselves
        got[i] = nr.gelu(x).numpy()
    cpu_threads.parallel_for(8, block)
    for g in got:
        same_bits(g, want, "nested")


def test_an_error_in_a_block_reaches_the_caller_and_the_pool_still_works():
    cpu_threads.configure(threads=4)

    def block(i):
        if i == 5:
            raise ValueError("block 5")
    with pytest.raises(ValueError, match="block 5"):
        cpu_threads.parallel_for(16, block)
    x = nr.randn((512, 512), seed=2)
    np.testing.assert_array_equal((x + 1).numpy(), x.numpy() + np.float32(1))


def test_concurrent_threads_and_asyncio_tasks_share_the_pool():
    cpu_threads.configure(threads=4)
    from threadpoolctl import threadpool_info
    blas_before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    rng = np.random.default_rng(11)
    q, k, v = (rng.standard_normal((4, 8, 64, 32)).astype(np.float32) for _ in range(3))
    want = torch.nn.functional.scaled_dot_product_attention(
        *(torch.tensor(a) for a in (q, k, v)), is_causal=True).numpy()

    def attend():
        return F.scaled_dot_product_attention(nr.tensor(q), nr.tensor(k), nr.tensor(v),
                                              is_causal=True).numpy()
    results, errors = [], []

    def worker():
        try:
            for _ in range(3):
                results.append(attend())
        except BaseException as e:      # reported below
            errors.append(e)
    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()

    async def task():
        await asyncio.sleep(0)
        return attend()

    async def main():
        return await asyncio.gather(*(task() for _ in range(3)))
    results += asyncio.run(main())
    for t in threads:
        t.join(timeout=300)
    assert not errors and len(results) == 12
    for r in results:
        np.testing.assert_allclose(r, want, rtol=1e-4, atol=1e-5)
        same_bits(r, results[0], "concurrent callers")
    blas_after = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    assert blas_after == blas_before                 # BLAS's own thread count is restored


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_makes_its_own_pool():
    cpu_threads.configure(threads=4, parallel_min=1024)
    x = nr.randn((512, 1024), seed=3)
    want = nr.gelu(x, approximate="tanh").numpy()          # the parent's pool is running now
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                             # the child: a hang fails the test
        os.close(r)
        try:
            import signal
            signal.alarm(120)
            ok = np.array_equal(nr.gelu(x, approximate="tanh").numpy(), want)
            os.write(w, b"ok" if ok else b"wrong")
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        answer = f.read()
    os.waitpid(pid, 0)
    assert answer == b"ok"


def test_split_k_weight_gradient_is_as_accurate_as_blas():
    """A conv's weight gradient (small output, K = every pixel of the batch) is summed in fixed
    K chunks on the threads: another order than BLAS's, so its error against float64 truth is
    checked to stay within BLAS's own (and within float32 GEMM's bound), on any thread count."""
    rng = np.random.default_rng(13)
    a, b = rng.standard_normal((96, 40960)), rng.standard_normal((40960, 48))
    truth = a @ b
    bound = 4 * np.finfo(np.float32).eps * np.sqrt(a.shape[1]) * (np.abs(a) @ np.abs(b))
    errs = {}
    for name, threads, pmin in (("one call", 1, ONE_CALL), ("1 thread", 1, BLOCKS),
                                ("4 threads", 4, BLOCKS)):
        cpu_threads.configure(threads=threads, parallel_min=pmin)
        ours = nr.matmul(nr.tensor(a, dtype="float32"), nr.tensor(b, dtype="float32")).numpy()
        err = np.abs(ours.astype(np.float64) - truth)
        assert (err <= bound).all(), name
        errs[name] = (ours, err.max())
    same_bits(errs["1 thread"][0], errs["4 threads"][0], "split-K on 1 and 4 threads")
    assert errs["4 threads"][1] <= 1.5 * errs["one call"][1]


def test_ieee_results_raise_no_warning_in_helper_threads():
    """inf, NaN and division by zero are answers (as in torch), in every thread: the helpers
    run blocks under the caller's numpy error state."""
    import warnings
    cpu_threads.configure(threads=4, parallel_min=BLOCKS)
    x = nr.tensor(np.linspace(-1000, 1000, 1 << 20, dtype=np.float32).reshape(1024, 1024))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = [nr.exp(x), (x - x) / (x - x), nr.log(x), nr.gelu(x), nr.softmax(x * 1e30, 1)]
    assert np.isinf(out[0].numpy()).any() and np.isnan(out[1].numpy()).any()


@pytest.mark.parametrize("threads", [1, 3])
def test_blocks_that_call_blas_hold_it_at_one_thread(threads):
    """parallel_blas_for's blocks (attention's heads, a split GEMM's parts) see numpy's BLAS at
    one thread on any numr thread count, one included (BLAS's pool on each block's small GEMMs
    cost more than it gave), and BLAS's own setting comes back after."""
    def blas_threads():          # numpy's BLAS (a wheel's, in numpy.libs): scipy may load its own
        here = os.path.dirname(os.path.dirname(np.__file__))
        return [i["num_threads"] for i in threadpoolctl.threadpool_info()
                if i["user_api"] == "blas" and
                os.path.dirname(i["filepath"]) == os.path.join(here, "numpy.libs")]
    if not blas_threads():
        pytest.skip("threadpoolctl finds no BLAS in numpy.libs (numpy not from a wheel)")
    cpu_threads.configure(threads=threads)
    seen = [None] * 6
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        def block(i):
            seen[i] = blas_threads()
            np.matmul(np.ones((64, 64)), np.ones((64, 64)))
        cpu_threads.parallel_blas_for(len(seen), block)
        assert all(s == [1] * len(s) for s in seen), seen
        assert blas_threads() == [2] * len(blas_threads())
