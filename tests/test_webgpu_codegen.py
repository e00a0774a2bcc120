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
