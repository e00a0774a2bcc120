"""Load the WGSL library, specialise it per dtype, and cache one pipeline per
(kernel file, entry point, dtype(s), override constants) and adapter.

A module's source is the concatenation of files from shaders/ and the text codegen.py generates
from the Python tables:
    [enable_subgroups.wgsl (browser)]  [enable_f16.wgsl]  dtype_<S>.wgsl  out_<SO>.wgsl
    <generated header of the kernel file>
    common.wgsl  act.wgsl  <generated activation dispatch>  [<generated op dispatch>]
    [<included kernel files, contract.includes>]  <kernel>.wgsl
where a kernel file's `// @generate NAME` lines are replaced by the code codegen_gemm.py generates.
dtype_<S> defines the element type S and compute type C of the tensors, out_<SO> the output type of
converting kernels (astype); the header (contract.py) names the metadata words, declares the
bindings and the override constants. Variants inside a module (operation, activation, flags) are
WGSL `override` constants, so the driver folds the switches away and no source is templated.

Shaders are read with importlib.resources from numr_web/shaders (where the wheel puts them); in a
source checkout the repository's top-level shaders/ is used.
"""
from __future__ import annotations

import os

from ...errors import KernelError
from . import codegen, codegen_gemm

_COMMON = ("common.wgsl", "act.wgsl")
_text_cache: dict = {}


def shader_dir():
    """A Traversable / path of the directory holding the *.wgsl files."""
    try:
        from importlib.resources import files
        d = files("numr_web") / "shaders"
        if d.is_dir():
            return d
    except Exception:  # pragma: no cover - zip imports without resources
        pass
    from pathlib import Path
    here = Path(__file__).resolve()
    d = here.parents[3] / "shaders"
    if d.is_dir():
        return d
    env = os.environ.get("NUMR_SHADER_DIR")
    if env:
        return Path(env)
    raise KernelError("cannot find the WGSL shaders (numr_web/shaders in the wheel, or shaders/ "
                      "next to the numr_web package in a source checkout)")


def load(name):
    """The text of one shader file (cached)."""
    t = _text_cache.get(name)
    if t is None:
        try:
            t = (shader_dir() / name).read_text(encoding="utf-8")
        except (OSError, FileNotFoundError) as e:
            raise KernelError(f"shader file {name!r} not found: {e}") from e
        _text_cache[name] = t
    return t


def kernel_text(name):
    """The text of one kernel file with its generated sections expanded (cached)."""
    key = ("expanded", name)
    t = _text_cache.get(key)
    if t is None:
        t = _text_cache[key] = codegen_gemm.expand(load(name), name)
    return t


def module_source(kernel_file, dtype, out_dtype=None, enables=None):
    """The complete WGSL module of one kernel file for tensors of `dtype` (astype: -> out_dtype).
    enables: {feature: the shader file of the `enable` directive this adapter's compiler wants for
    it} (the browser's enable_subgroups.wgsl; wgpu-native's compiler takes subgroup builtins
    without one)."""
    contract = codegen.contract_of(kernel_file)
    out_dtype = out_dtype or dtype
    parts = [load(enables[f]) for f in contract.features if enables and enables.get(f)]
    if "float16" in (dtype.name, out_dtype.name):
        parts.append(load("enable_f16.wgsl"))
    parts.append(load(f"dtype_{dtype.name}.wgsl"))
    parts.append(load(f"out_{out_dtype.name}.wgsl"))
    parts.append(codegen.header(kernel_file))
    parts.extend(load(h) for h in _COMMON)
    parts.append(codegen.activation_wgsl())
    if contract.vocabulary:
        parts.append(codegen.elementwise_wgsl())
    parts.extend(kernel_text(f) for f in contract.includes)
    parts.append(kernel_text(kernel_file))
    return "\n".join(parts)


class KernelCache:
    """One compiled pipeline per (file, entry, dtype, out dtype, constants), shared by every
    backend on the same adapter (`KernelCache.of(adapter)`)."""

    _by_adapter: dict = {}

    @classmethod
    def of(cls, adapter):
        entry = cls._by_adapter.get(id(adapter))
        if entry is None or entry[0] is not adapter:
            entry = cls._by_adapter[id(adapter)] = (adapter, cls(adapter))
        return entry[1]

    def __init__(self, adapter):
        self.adapter = adapter
        self._pipes: dict = {}
        self._sources: dict = {}

    def __len__(self):
        return len(self._pipes)

    def labels(self):
        """Labels of the compiled pipelines, e.g. "matmul.gemm_v4[float32,ACT=5,...]"."""
        return [p[1] for p in self._pipes.values()]

    def pipeline(self, kernel_file, entry, dtype, out_dtype=None, constants=None):
        consts = tuple(sorted((constants or {}).items()))
        key = (kernel_file, entry, dtype.name, out_dtype.name if out_dtype else None, consts)
        p = self._pipes.get(key)
        if p is None:
            contract = codegen.contract_of(kernel_file)
            unknown = [k for k, _ in consts if k not in contract.overrides]
            if entry not in contract.entries or unknown:
                raise KernelError(f"{kernel_file}: no entry point {entry!r} or no override "
                                  f"constants {unknown} in its contract")
            missing = [f for f in contract.features if f not in self.adapter.features]
            if missing:
                raise KernelError(f"{kernel_file} needs the adapter features {missing}, which "
                                  f"{getattr(self.adapter, 'name', 'this adapter')} lacks")
            skey = key[:1] + key[2:4]
            src = self._sources.get(skey)
            if src is None:
                src = self._sources[skey] = module_source(
                    kernel_file, dtype, out_dtype, getattr(self.adapter, "wgsl_enables", None))
            label = f"{kernel_file[:-5]}.{entry}[{dtype.name}" + \
                (f"->{out_dtype.name}" if out_dtype else "") + \
                "".join(f",{k}={int(v)}" for k, v in consts) + "]"
            p = self._pipes[key] = (self.adapter.create_pipeline(
                label, src, entry, {k: int(v) for k, v in consts}), label)
        return p[0]

    def fused(self, dtype, key, entry, text):
        """The pipeline of a generated fused kernel (fusion.py): the module of shaders/fused.wgsl
        for `dtype` followed by `text()`, its entry point `entry`; cached by the chain's
        structural key (codegen_fused.py), so a training step compiles each chain once."""
        p = self._pipes.get(("fused.wgsl", key))
        if p is None:
            skey = ("fused.wgsl", dtype.name, None)
            src = self._sources.get(skey)
            if src is None:
                src = self._sources[skey] = module_source(
                    "fused.wgsl", dtype, None, getattr(self.adapter, "wgsl_enables", None))
            label = f"fused.{entry}[{dtype.name},{len(key[1])} ops]"
            p = self._pipes[("fused.wgsl", key)] = (self.adapter.create_pipeline(
                label, src + "\n" + text(), entry, {}), label)
        return p[0]

    def compile_source(self, label, code, entry, constants=None):
        """Compile arbitrary WGSL (no caching): errors come back typed (KernelError)."""
        return self.adapter.create_pipeline(label, code, entry, constants or {})


def kernel_defined(family, name):
    """Whether shaders/elementwise_ops.wgsl defines the hand-written kernel of a vocabulary row."""
    return f"fn {family}_{name}(" in load("elementwise_ops.wgsl")
