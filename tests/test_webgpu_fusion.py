"""Fusion of elementwise chains on webgpu (numr_web/backends/webgpu/fusion.py): chains of unary,
binary and activation ops run as one generated kernel, bit-identical to one kernel per op.

Every test runs a computation twice through the public API, with the declared knob `fuse` of the
webgpu backend off (one kernel per op, the reference) and on, and compares the results bit for
bit; dispatch counts come from `info()["dispatches"]` and `info()["fusion"]`.
"""
import asyncio

import numpy as np
import pytest

import numr_web as nr
from numr_web import nn

import numr_web.backends.webgpu.backend as wb
ok, why = wb.WebGPUBackend.probe()
if not ok:
    pytest.fail(f"webgpu unavailable here: {why}", pytrace=False)

BE = nr.get_backend("webgpu")
HAS_F16 = BE.f16


@pytest.fixture(autouse=True)
def _restore_knob():
    was = BE.fuse
    yield
    BE.fuse = was


def T(x, dtype="float32", **kw):
    return nr.tensor(np.asarray(x), dtype=dtype, device="webgpu", **kw)


def dispatches():
    return sum(BE.info()["dispatches"].values())


def fused_kernels():
    return BE.info()["fusion"]["kernels"]


def both(fn):
    """fn() with fusion off and on: ((results off, dispatches), (results on, dispatches))."""
    out = []
    for fuse in (False, True):
        BE.fuse = fuse
        BE.flush()
        n0 = dispatches()
        res = [np.asarray(r.numpy() if hasattr(r, "numpy") else r) for r in fn()]
        out.append((res, dispatches() - n0))
    return out


def same_bits(a, b):
    assert len(a) == len(b)
    for u, v in zip(a, b):
        assert u.dtype == v.dtype and u.shape == v.shape
        assert u.tobytes() == v.tobytes(), (u.ravel()[:6], v.ravel()[:6])


def data(n=1000, seed=0, lo=-4.0, hi=4.0):
    return np.random.default_rng(seed).uniform(lo, hi, n).astype(np.float32)


def gelu_graph(x):
    return 0.5 * x * (1 + nr.tanh(0.79788456 * (x + 0.044715 * x ** 3)))


def test_unfused_gelu_forward_and_backward_are_bit_identical_in_fewer_dispatches():
    xs = data(4099)                        # not a multiple of 4: the vec4 path has a tail unfused

    def run():
        x = T(xs, requires_grad=True)
        y = gelu_graph(x)
        (y * T(data(4099, 1))).sum().backward()
        return y, x.grad
    (off, n_off), (on, n_on) = both(run)
    same_bits(off, on)
    assert n_on < n_off / 2, (n_on, n_off)


def test_the_forward_chain_without_grad_is_one_kernel():
    xs = data(2048)
    with nr.no_grad():
        k0 = fused_kernels()
        (off, n_off), (on, n_on) = both(lambda: [gelu_graph(T(xs))])
    same_bits(off, on)
    assert fused_kernels() - k0 == 1 and n_on == 1, (n_on, n_off)    # uploads are no dispatches
    assert n_off >= 8


def test_fused_activation_ops_and_their_backward():
    xs = data(3000)

    def run():
        x = T(xs, requires_grad=True)
        y = nr.gelu(x * 1.5 - 0.25) * nr.sigmoid(x)
        y.sum().backward()
        return y, x.grad
    (off, _), (on, _) = both(run)
    same_bits(off, on)


@pytest.mark.skipif(not HAS_F16, reason="this adapter has no shader-f16")
@pytest.mark.parametrize("n", [1531, 1536])          # scalar path, vec4 path
def test_float16_intermediates_round_between_ops_as_unfused(n):
    xs = data(n, lo=-3, hi=3)

    def run():
        x = T(xs, dtype="float16")
        y = x * 1.0009765625 + 0.000244140625        # rounding after the mul matters in f16
        z = (y * y - x / 3.0).exp() * 0.1 + nr.tanh(y)
        return [z, (x * 3.1).sqrt() - x ** 2]
    (off, _), (on, _) = both(run)
    same_bits(off, on)


def test_mixed_dtypes_and_integer_chains():
    xs = data(777)
    ints = np.random.default_rng(2).integers(-50, 50, 777).astype(np.int32)

    def run():
        x, i = T(xs), T(ints, dtype="int32")
        a = (i * 3 + 7) // 4 % 5 - i            # int32 chain
        b = x * 2 - 1                           # float32 chain (the int32 one is flushed first)
        c = b + a.astype("float32") * 0.5       # astype between: its own kernel
        d = (a * a).astype("float32") / (b * b + 1)
        return [a, b, c, d]
    (off, _), (on, _) = both(run)
    same_bits(off, on)


def test_python_scalars_on_either_side_and_broadcast_tensors():
    xs = data(1200, lo=0.1, hi=3)

    def run():
        x = T(xs)
        y = 2.0 ** x - 3.0 / x + (1 - x) * 0.25 + x ** 3 + nr.maximum(x, 1.5)
        row = T(xs.reshape(40, 30))
        z = row * T(data(30, 5)) + 1.0         # a broadcast row vector
        w = (z - 2.0).abs().sqrt() * x.reshape(40, 30)
        return [y, z, w]
    (off, _), (on, _) = both(run)
    same_bits(off, on)


def test_a_long_chain_is_split():
    xs = data(512, lo=-1, hi=1)

    def run():
        x = T(xs)
        y = x
        for k in range(150):
            y = y * 0.999 + (0.001 if k % 2 else -0.0005)
        return [y]
    k0 = fused_kernels()
    (off, _), (on, n_on) = both(run)
    same_bits(off, on)
    assert fused_kernels() - k0 >= 300 // 64 and n_on <= 300 // 16 + 1   # <= 64 ops, 32 scalars


def test_many_inputs_are_split_at_the_storage_binding_limit():
    arrays = [data(640, seed=s) for s in range(20)]

    def run():
        xs = [T(a) for a in arrays]
        acc = xs[0]
        for x in xs[1:]:
            acc = acc * 0.5 + x
        return [acc]
    k0 = fused_kernels()
    (off, _), (on, n_on) = both(run)
    same_bits(off, on)
    assert fused_kernels() - k0 >= 3            # 19 inputs over kernels of at most 8 bindings
    assert BE.info()["fusion"]["max_buffers"] <= 8


def test_many_live_outputs_are_split():
    def run():
        x = T(data(300))
        outs = [x]
        for _ in range(30):                     # every intermediate kept: each must be stored
            outs.append(outs[-1] * 1.01 + 0.5)
        return outs
    (off, _), (on, _) = both(run)
    same_bits(off, on)


def test_a_value_read_in_the_middle_of_a_chain():
    xs = data(1000)

    def run():
        x = T(xs)
        y = x * 2 + 1
        mid = y.numpy().copy()
        z = (y * y).exp() - y
        return [mid, z, y]
    (off, _), (on, _) = both(run)
    same_bits(off, on)


def test_an_intermediate_read_by_two_consumers_and_by_views():
    xs = data(24 * 16)

    def run():
        x = T(xs)
        t = x * 3 - 1
        a, b = t + 1, t * t                    # t: one value in registers, read twice
        s = (a - b).reshape(16, 24)
        r = s * 2 + s                          # a reshaped pending value: still one chain
        v = s.T * 2                            # a transposed view of a pending value: unfused
        lin = nr.matmul(s, T(data(24 * 3).reshape(24, 3)))   # a consumer that is no chain
        return [r, v, lin, a]
    (off, _), (on, _) = both(run)
    same_bits(off, on)


def test_adamw_steps_are_identical_with_fusion_on_and_off():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 12)).astype(np.float32)
    y = rng.integers(0, 4, 16).astype(np.int32)

    def run():
        model = nn.MLP([12, 8, 4], activation="gelu", device="webgpu", dtype="float32", seed=1)
        opt = nn.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1)
        for _ in range(3):
            opt.zero_grad()
            nr.cross_entropy(model(T(x)), T(y, dtype="int32")).backward()
            opt.step()
        return [p for p in model.parameters()]
    (off, n_off), (on, n_on) = both(run)
    same_bits(off, on)
    assert n_on < n_off


def test_a_captured_step_with_fused_chains_replays_like_eager_unfused():
    rng = np.random.default_rng(1)
    batches = [(rng.standard_normal((8, 12)).astype(np.float32),
                rng.integers(0, 4, 8).astype(np.int32)) for _ in range(4)]

    def run(captured):
        model = nn.MLP([12, 8, 4], activation="gelu", device="webgpu", dtype="float32", seed=2)
        opt = nn.optim.Adam(model.parameters(), lr=0.01, capturable=True)

        def step(x, y):
            opt.zero_grad()
            loss = nr.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss * 1.0 + 0.0             # a chain pending when the recording ends
        f = nr.capture(step) if captured else step
        losses = [f(T(a), T(b, dtype="int32")) for a, b in batches]
        if captured:
            assert len(f.graphs) == 1 and not f.eager
        return [l.numpy() for l in losses] + [p.numpy() for p in model.parameters()]

    BE.fuse = False
    ref = run(False)
    BE.fuse = True
    same_bits(ref, run(True))
    same_bits(ref, run(False))


def test_chains_of_concurrent_tasks_stay_apart():
    async def task(seed):
        x = T(data(700, seed))
        y = x
        for k in range(12):
            y = y * 0.75 + k
            if k % 4 == 3:
                await asyncio.sleep(0)          # the other task records ops in between
        return np.asarray(await y.read(), np.float32)

    async def both_tasks():
        return await asyncio.gather(task(1), task(2))
    BE.fuse = False
    ref = asyncio.run(both_tasks())
    BE.fuse = True
    got = asyncio.run(both_tasks())
    same_bits(ref, got)


def test_the_knob_and_its_environment_variable(monkeypatch):
    monkeypatch.setenv("NUMR_WEBGPU_FUSE", "0")
    be = wb.WebGPUBackend()
    assert be.fuse is False and be.info()["knobs"]["fuse"] == 0
    monkeypatch.delenv("NUMR_WEBGPU_FUSE")
    be = wb.WebGPUBackend()
    assert be.fuse is True and be.info()["knobs"]["fuse"] == 1
    assert not wb.WebGPUBackend(fuse=0).fuse


def test_pipelines_are_reused_by_the_structure_of_a_chain():
    BE.fuse = True

    def once(scale):
        x = T(data(999, seed=int(scale)))
        return (x * scale + 1.0).exp() * (x - scale)
    once(1.0).numpy()
    n = BE.info()["pipelines"]
    for s in (2.0, 3.0, 4.0):
        once(s).numpy()                         # other values, other buffers: same pipeline
    assert BE.info()["pipelines"] == n


def test_unreferenced_intermediates_are_not_stored():
    BE.fuse = True
    before = BE.info()["fusion"]["skipped"]
    with nr.no_grad():
        x = T(data(256))
        y = ((x * 2 + 1) * 3 - 4).abs()
        y.numpy()
    assert BE.info()["fusion"]["skipped"] - before == 4      # of 5 ops, only y is stored


def test_bool_chains_and_inputs_at_unaligned_offsets():
    xs = data(1031)
    m = np.random.default_rng(3).random((3, 1031)) > 0.5

    def run():
        big = T(xs)
        x = big[1:1030]                         # dense, offset 1: no vec4 loads for it
        y = (x * 2 + 1).exp() - x
        a, b, c = (T(v, dtype="bool") for v in m)
        logic = (a & b) | ~c ^ a
        return [y, logic]
    (off, _), (on, _) = both(run)
    same_bits(off, on)


def test_settle_records_the_pending_chain():
    BE.fuse = True
    BE.flush()
    k0, d0 = fused_kernels(), dispatches()
    x = T(data(64))
    y = (x + 1) * 2
    assert dispatches() == d0                   # recorded lazily: nothing dispatched yet
    BE.settle()
    assert fused_kernels() - k0 == 1 and dispatches() - d0 == 1
    np.testing.assert_array_equal(y.numpy(), (data(64) + 1) * 2)


def test_fused_wgsl_and_its_generated_entries_name_only_their_metadata_words():
    import re
    from numr_web.backends.webgpu import codegen, codegen_fused, contract, kernels
    k = contract.GENERATED["fused.wgsl"]
    steps = (("unary", "exp", None, (("i", 0),)), ("binary", "mul", None, (("v", 0), ("s", 0))),
             ("unary", "act_fwd", "tanh", (("v", 1),)))
    for vec4 in (False, True):
        key = ("float32", steps, (2, 1), 1, vec4, (False,))
        entry = codegen_fused.entry_name(key)
        assert entry == ("fused4_1_2" if vec4 else "fused_1_2") and entry in k.entries
        text = re.sub(r"//[^\n]*", "", kernels.load("fused.wgsl") + codegen_fused.entry_wgsl(key))
        assert "@binding" not in text and not re.search(r"\bmu\(\s*\d", text)
        for w in set(re.findall(r"\bW_[A-Z0-9_]+", text)):
            assert hasattr(k.layout, w[2:]), w
        assert "act_fwd_c(ACT_TANH, " in text and "binary_mul(r0" in text
    text = codegen_fused.entry_wgsl(("float32", steps, (2,), 1, False, (True,)))
    assert "(i / mu(W_DIV_IN + 0u)) % mu(W_MOD_IN + 0u)" in text
    assert "(fused.wgsl)" in codegen.dump("fused.wgsl")


def _vocabulary_chain(family, name, dtype):
    """Through the Backend interface: op `name` inside a chain of three, on float32 or int32."""
    from numr_web import dtypes
    dt = dtypes.get_dtype(dtype)
    rng = np.random.default_rng(7)
    if dtype == "int32":
        a, b = rng.integers(-9, 9, 1024).astype(np.int32), rng.integers(1, 9, 1024).astype(np.int32)
    else:
        a, b = rng.uniform(-3, 3, 1024).astype(np.float32), rng.uniform(0.5, 3, 1024).astype(np.float32)
    x, y = BE.from_host(a, dt), BE.from_host(b, dt)
    t = BE.binary("mul", x, 1)                   # a pending value as the op's input
    r = BE.unary(name, t) if family == "unary" else BE.binary(name, t, y)
    r2 = BE.binary("sub", r, t)
    return [np.frombuffer(BE.to_bytes(h), np.uint8) for h in (r, r2)]


def _vocabulary():
    from numr_web.vocab.registry import family_names
    ints = {"bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor"}
    return [(f, n, "int32" if n in ints else "float32")
            for f in ("unary", "binary") for n in family_names(f)]


@pytest.mark.parametrize("family,name,dtype", _vocabulary())
def test_every_vocabulary_op_fused_equals_its_one_op_kernel(family, name, dtype):
    BE.fuse = False
    ref = _vocabulary_chain(family, name, dtype)
    BE.fuse = True
    k0 = fused_kernels()
    got = _vocabulary_chain(family, name, dtype)
    assert fused_kernels() > k0
    same_bits(ref, got)


def test_layer_norm_written_op_by_op_forward_and_backward():
    xs, ws, bs = data(64 * 48).reshape(64, 48), data(48, 1), data(48, 2)

    def run():
        x, w, b = (T(v, requires_grad=True) for v in (xs, ws, bs))
        mu = x.mean(-1, keepdim=True)
        xc = x - mu                             # a column broadcast
        var = (xc * xc).mean(-1, keepdim=True)
        y = xc * (var + 1e-5).rsqrt() * w + b   # a column, then rows
        (y * y).sum().backward()
        return [y, x.grad, w.grad, b.grad]
    (off, n_off), (on, n_on) = both(run)
    same_bits(off, on)
    assert n_on < n_off * 0.7, (n_on, n_off)


def test_broadcast_patterns():
    a = data(5 * 6 * 7).reshape(5, 6, 7)
    mid, inner, one, both_ends = data(6, 1).reshape(1, 6, 1), data(7, 2), data(1, 3), \
        data(5 * 7, 4).reshape(5, 1, 7)

    def run():
        x = T(a)
        y = (x * 2 + T(mid)) * T(inner) - T(one)   # fused: middle, trailing, one element
        z = (y + T(both_ends)) * 0.5               # two moving dims: one-op kernel, same bits
        return [y, z]
    (off, _), (on, _) = both(run)
    same_bits(off, on)
