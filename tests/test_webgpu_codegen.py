"""The generated WGSL: every kernel file compiles for every dtype with the bindings its contract
declares (numr_web/backends/webgpu/contract.py), every vocabulary op and activation has its case,
the hand-written kernels number nothing themselves, and `codegen.dump` shows the generated text."""
import re
from pathlib import Path

import pytest

import numr_web as nr
from numr_web import dtypes
from numr_web.backends.webgpu import codegen, contract, kernels
from numr_web.errors import KernelError
from numr_web.vocab.registry import KERNEL_FAMILIES, family_names

import numr_web.backends.webgpu.backend as wb
SHADERS = Path(kernels.shader_dir())
DTYPES = ("float32", "int32", "bool", "float16")


@pytest.fixture(scope="module")
def adapter():
    ok, why = wb.WebGPUBackend.probe()
    if not ok:
        pytest.fail(f"webgpu unavailable here: {why}", pytrace=False)
    return wb.shared_adapter()


def test_kernel_files_number_nothing_themselves():
    """Bindings, overrides and metadata word indices come from the generated header only."""
    def code(name):                              # without the comments
        return re.sub(r"//[^\n]*", "", (SHADERS / name).read_text())

    for name in contract.KERNELS:
        text = code(name)
        assert "@binding" not in text and not re.search(r"^\s*override\s", text, re.M), name
        assert not re.search(r"\bmu\(\s*\d", text), f"{name} reads a metadata word by number"
        for w in set(re.findall(r"\bW_[A-Z0-9_]+", text)):
            assert hasattr(contract.KERNELS[name].layout, w[2:]), f"{name}: {w} is not in its layout"
    for name in ("common.wgsl", "act.wgsl"):
        text = code(name)
        assert "@binding" not in text and not re.search(r"\bmu\(\s*(W_|\d)", text), name


@pytest.mark.parametrize("kernel_file", list(contract.KERNELS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_generated_wgsl_compiles(adapter, kernel_file, dtype):
    """Every entry point compiles, and a dispatch binding exactly the bindings the contract
    declares for it validates (a pipeline's "auto" layout has exactly the ones it uses)."""
    dt = dtypes.get_dtype(dtype)
    if dt is dtypes.float16 and "shader-f16" not in adapter.features:
        pytest.skip("this adapter has no shader-f16")
    from numr_web.backends.webgpu.adapter import Binding, Dispatch
    k = contract.KERNELS[kernel_file]
    missing = [f for f in k.features if f not in adapter.features]
    if missing:
        pytest.skip(f"this adapter lacks {missing}")
    bufs = {s: adapter.create_buffer(256, "storage") for s in k.slots}
    meta = adapter.create_buffer(contract.META_BYTES, "uniform")
    outs = [None] + ([dtypes.get_dtype(o) for o in DTYPES if o != dtype and
                      (o != "float16" or "shader-f16" in adapter.features)]
                     if kernel_file == "elementwise.wgsl" else [])
    for out in outs:
        src = kernels.module_source(kernel_file, dt, out)
        for entry, used in k.entries.items():
            if out is not None and entry != "astype":
                continue
            label = f"{kernel_file}:{entry}[{dtype}->{out.name if out else dtype}]"
            pipe = adapter.create_pipeline(label, src, entry, {})
            binds = [Binding(contract.META_BINDING, meta, 0, contract.META_BYTES)] + \
                [Binding(k.slots[s].index, bufs[s], 0, 256) for s in used]
            adapter.submit([Dispatch(pipe, binds, (0, 1, 1), label)])
    adapter.read_buffer(next(iter(bufs.values())), 0, 4)   # waits: errors of the submits surface


def test_every_vocabulary_op_and_activation_has_its_case():
    dispatch = codegen.elementwise_wgsl()
    kernel = (SHADERS / "elementwise_ops.wgsl").read_text()
    for family in KERNEL_FAMILIES:
        names = family_names(family)
        assert names, family
        for n in names + codegen.op_names(family)[len(names):]:
            assert f"fn {family}_{n}(" in kernel, f"shaders/elementwise_ops.wgsl has no {family}_{n}"
            assert f"return {family}_{n}(" in dispatch and \
                f"const {family.upper()}_{n.upper()}: u32" in dispatch, (family, n)
            assert codegen.op_names(family)[codegen.op_code(family, n)] == n
    acts = codegen.activation_wgsl()
    for fn in ("fwd", "dz", "d2", "d1", "ds"):
        for name in nr.ACT:
            assert f"case ACT_{name.upper()}: {{ return act_{fn}_{name}(" in acts, (fn, name)
            assert f"fn act_{fn}_{name}(" in acts
    assert [codegen.act_code(n) for n in nr.ACT] == list(range(len(nr.ACT)))


def test_dump_shows_the_generated_text():
    everything = codegen.dump()
    for name, k in contract.KERNELS.items():
        assert f"({name})" in everything
        for fname, word, count, _ in k.layout.fields:
            assert f"const W_{fname}: u32 = {word}u;" in codegen.header(name)
        for s in k.slots.values():
            assert f"@binding({s.index}) var<storage, {s.access}> {s.name}: {s.type};" in \
                codegen.header(name)
    assert "fn act_fwd(" in everything and "fn unop(" in everything
    red = codegen.dump("reduce.wgsl")
    assert "const REDUCE_MEAN: u32 = 1u;" in red and "W_RED_SHAPE" in red and "fn unop(" not in red
    with pytest.raises(KernelError, match="no_such"):
        codegen.dump("no_such.wgsl")


def test_pipeline_requests_are_checked_against_the_contract(adapter):
    cache = kernels.KernelCache.of(adapter)
    with pytest.raises(KernelError, match="NOPE"):
        cache.pipeline("reduce.wgsl", "reduce_thread", dtypes.float32, None, {"NOPE": 1})
    with pytest.raises(KernelError, match="no_entry"):
        cache.pipeline("reduce.wgsl", "no_entry", dtypes.float32)
    assert cache is kernels.KernelCache.of(adapter)


# -- generated sections of the kernel files (codegen_gemm.py) ---------------------------------------
def test_no_kernel_file_over_600_lines_and_every_marker_is_expanded():
    from numr_web.backends.webgpu import codegen_gemm
    long = {p.name: n for p in SHADERS.glob("*.wgsl") if (n := len(p.read_text().splitlines())) > 600}
    assert not long, f"generate the repeated code (codegen_gemm.py) or split: {long}"
    for name in contract.KERNELS:
        assert not re.search(r"^\s*// @generate", kernels.kernel_text(name), re.M), name
    asked = re.findall(r"^\s*// @generate (\w+)\s*$", (SHADERS / "matmul.wgsl").read_text(), re.M)
    assert asked == ["gemm_v4_ksteps"]
    assert codegen_gemm.dump("matmul.wgsl").startswith("// generated section gemm_v4_ksteps")
    assert codegen_gemm.dump("reduce.wgsl") == ""
    with pytest.raises(KernelError, match="no generated section 'nope'"):
        codegen_gemm.expand("    // @generate nope\n", "matmul.wgsl")
    with pytest.raises(KernelError, match="gemm_v4_ksteps"):        # a section of another file
        codegen_gemm.expand("// @generate gemm_v4_ksteps\n", "reduce.wgsl")


def test_gemm_v4_unrolled_slice_is_the_register_block():
    """The generated K-slice of gemm_v4, read back as data: 16 blocks, block k reads the tile row
    k at the swizzled slots ty ^ 2 (k / 4), tx ^ 2 (k / 4) (slot4 in matmul.wgsl: g ^ ((k >> 2) << 1))
    and adds a[m] * b[n] into the accumulator that store_row4 writes to (m, n): acc[j] holds rows
    4ty + (j % 4) + 64 ((j / 4) % 2), columns 4tx.. + 64 (j / 8) (the + 64 columns under V4_WIDE)."""
    text = kernels.kernel_text("matmul.wgsl")
    body = text[text.index("for (var k4 = 0u;"):text.index("if (more) {                       // the other")]
    blocks = re.split(r"\n\s*\{\n\s*let k = k4 \+ ", body)[1:]
    assert len(blocks) == 16
    for k, block in enumerate(blocks):
        assert block.startswith(f"{k}u;")
        s = 2 * (k // 4)
        assert f"let a0 = As4[base + k * 32u + ty{s}];" in block
        assert f"let a1 = As4[base + k * 32u + 16u + ty{s}];" in block
        assert f"let b0 = Bs4[base + k * 32u + tx{s}];" in block
        assert f"let b1 = Bs4[base + k * 32u + 16u + tx{s}];" in block
        narrow, wide = block.split("if (V4_WIDE) {")
        for part, bs in ((narrow, {"b0"}), (wide, {"b1"})):
            mads = re.findall(r"acc\[(\d+)\] = mad4\((a[01])\.([xyzw]), (b[01]), acc\[(\d+)\]\);", part)
            assert {m[3] for m in mads} == bs
            want = {(8 * int(b[1]) + 4 * int(a[1]) + "xyzw".index(lane), a, lane, b)
                    for a in ("a0", "a1") for lane in "xyzw" for b in bs}
            assert {(int(j), a, lane, b) for j, a, lane, b, j2 in mads if j == j2} == want
            assert len(mads) == 8


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("a_col,b_col", [(False, False), (True, False), (False, True), (True, True)])
def test_gemm_v4_generated_slice_compiles_and_multiplies(adapter, wide, a_col, b_col):
    """gemm_v4 with its generated K-slice, for every layout variant (A_MLANES, B_KLANES) and tile
    (V4_WIDE), without bounds checks (full tiles, 3 K-slices), against float64: a wrong
    multiply-add, slot or accumulator in any of the 16 blocks moves the result by far more than
    the float32 rounding allowed here."""
    import numpy as np
    import numr_web.backends.webgpu.backend as wbk
    M, N, K = 256, 256, 48
    rng = np.random.default_rng(7)
    a = rng.uniform(-2, 2, (M, K)).astype(np.float32)
    b = rng.uniform(-2, 2, (K, N)).astype(np.float32)
    be = wbk.WebGPUBackend(gemm_tile="v4w" if wide else "v4")
    def up(x, col):         # a column-major operand: the transposed view of its dense transpose
        h = be.from_host(np.ascontiguousarray(x.T if col else x), dtypes.float32)
        return be.permute(h, (1, 0)) if col else h
    ran = be.info()["dispatches"].get("matmul.gemm_v4", 0)
    got = be.to_numpy(be.matmul(up(a, a_col), up(b, b_col))).astype(np.float64)
    assert be.info()["dispatches"].get("matmul.gemm_v4", 0) == ran + 1
    consts = f"A_MLANES={int(a_col)},B_KLANES={int(b_col)},CHECK=0,HAS_BIAS=0,V4_WIDE={int(wide)},"
    assert any(lbl.startswith("matmul.gemm_v4[float32,ACT=0,") and consts in lbl
               for lbl in kernels.KernelCache.of(adapter).labels()), consts
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want, mag = a64 @ b64, np.abs(a64) @ np.abs(b64)
    eps = float(np.finfo(np.float32).eps)
    err = np.abs(got - want) / (eps * (np.abs(want) + mag))
    assert err.max() <= 4, f"worst {err.max():.1f} ulp of the terms' magnitude"
