"""WGSL generated from the Python tables, so that nothing is synchronised by hand:

  * the header of each kernel file from its contract (contract.py): named metadata word indices
    (`const W_N: u32 = 0u;`), the `@group(0) @binding(k) var<...>` declarations, the `override`
    constants and the named codes they take (REDUCE_SUM, RANDOM_NORMAL, ...);
  * the activation dispatch (`act_fwd`, `act_dz`, `act_d2`, `act_d1`, `act_ds`) from the ACT table
    (numr_web/vocab/activations.py): one named constant and one function per activation and
    derivative, and a `switch` on an `override` constant that the driver folds away;
  * the elementwise dispatch (`unop`, `binop`, `cmpop`) from the elementwise rows
    (numr_web/vocab/elementwise.py): case UNARY_EXP calls `unary_exp`, the hand-written function of
    shaders/elementwise_ops.wgsl; the backend's own kernels (copy, the activation maps) follow the
    rows.

`numr-web shaders --dump` prints the generated text (`dump()`); kernels.py assembles the modules.
The rows are declarative (a table, not registrations), so the codes never depend on import order.
"""
from __future__ import annotations

import functools

from ...errors import KernelError
from ...vocab.activations import ACT
from ...vocab.registry import family_names
from .contract import GENERATED, KERNELS, META_BINDING, META_WORDS, WG, WORD_PREFIX

# kernels of the backend itself, after the vocabulary's rows in each family's switch
BACKEND_UNARY = ("copy", "act_fwd", "act_dz", "act_d2", "act_ds")
BACKEND_BINARY = ("act_d1",)
_FAMILY = {"unary": ("unop", "x: C", "C", BACKEND_UNARY),
           "binary": ("binop", "x: C, y: C", "C", BACKEND_BINARY),
           "compare": ("cmpop", "x: C, y: C", "bool", ())}
# per activation function: WGSL parameters and the value a missing function returns
_ACT_FNS = {"fwd": "z: f32", "dz": "z: f32", "d2": "z: f32", "d1": "dy: f32, s: f32",
            "ds": "s: f32"}


@functools.lru_cache(maxsize=None)
def op_names(family):
    """Names in op-code order: the vocabulary's rows of the family, then the backend's kernels."""
    return family_names(family) + _FAMILY[family][3]


@functools.lru_cache(maxsize=None)
def op_code(family, name):
    return op_names(family).index(name)


@functools.lru_cache(maxsize=None)
def act_code(name):
    return list(ACT).index(name)


def _body(code):
    """A table entry is an expression, or a function body when it contains `return`."""
    return code if "return" in code else f"return {code};"


def _const(prefix, name):
    return f"{prefix}_{name.upper()}"


def activation_wgsl():
    lines = ["// generated from numr_web/vocab/activations.py (the ACT table) - do not edit"]
    for i, name in enumerate(ACT):
        lines.append(f"const {_const('ACT', name)}: u32 = {i}u;")
    for fn, params in _ACT_FNS.items():
        for name, act in ACT.items():
            code = getattr(act.wgsl, fn)
            if code is None:
                code = "dy * act_dz_" + name + "(s)" if fn == "d1" else \
                    ("act_d2_" + name + "(s)" if fn == "ds" else None)
            lines.append(f"fn act_{fn}_{name}({params}) -> f32 {{\n    {_body(code)}\n}}")
        args = ", ".join(p.split(":")[0] for p in params.split(", "))
        cases = "\n".join(f"        case {_const('ACT', n)}: {{ return act_{fn}_{n}({args}); }}"
                          for n in ACT)
        lines.append(f"fn act_{fn}(code: u32, {params}) -> f32 {{\n    switch code {{\n{cases}\n"
                     f"        default: {{ return 0.0; }}\n    }}\n}}")
    return "\n".join(lines) + "\n"


def op_call(family, name, args, act=None):
    """The WGSL call of one elementwise op's function (shaders/elementwise_ops.wgsl) on the
    argument expressions `args`: what the generated `unop` / `binop` / `cmpop` switches return, and
    one step of a fused kernel (codegen_fused.py). act: the ACT table name of the act_* ops, passed
    as its code (None: the ACT override, as the one-op kernels do)."""
    if act is not None and name.startswith("act_"):
        return f"{name}_c({_const('ACT', act)}, {args})"
    return f"{family}_{name}({args})"


def elementwise_wgsl():
    lines = ["// generated from numr_web/vocab/elementwise.py (the elementwise rows) - do not edit"]
    for family, (fname, params, ret, _) in _FAMILY.items():
        names = op_names(family)
        prefix = family.upper()
        for i, name in enumerate(names):
            lines.append(f"const {_const(prefix, name)}: u32 = {i}u;")
        args = ", ".join(p.split(":")[0] for p in params.split(", "))
        cases = "\n".join(f"        case {_const(prefix, n)}: {{ return {op_call(family, n, args)}; }}"
                          for n in names[:-1])
        last = f"        default: {{ return {op_call(family, names[-1], args)}; }}"
        lines.append(f"fn {fname}({params}) -> {ret} {{\n    switch OP {{\n{cases}\n{last}\n"
                     "    }\n}")
    return "\n".join(lines) + "\n"


def contract_of(name):
    """The contract of one kernel file (KernelError naming the known ones if there is none)."""
    k = KERNELS.get(name) or GENERATED.get(name)
    if k is None:
        raise KernelError(f"no kernel file {name!r} in the contract; expected one of {list(KERNELS)}")
    return k


def _pad(text, width=40):
    return text + " " * max(1, width - len(text))


@functools.lru_cache(maxsize=None)
def header(name):
    """The generated WGSL declarations of one kernel file: metadata word names, bindings,
    overrides and named codes (contract.py)."""
    k = contract_of(name)
    lines = [f"// generated from numr_web/backends/webgpu/contract.py ({name}) - do not edit",
             f"const WG: u32 = {WG}u;",
             f"// metadata: {META_WORDS} u32 words per dispatch, read with mu(W_...)",
             f"@group(0) @binding({META_BINDING}) var<uniform> META: array<vec4<u32>, "
             f"{META_WORDS // 4}>;"]
    for fname, word, count, doc in k.layout.fields:
        size = "" if count == 1 else f"[{count}] "
        lines.append(_pad(f"const {WORD_PREFIX}{fname}: u32 = {word}u;") + f"// {size}{doc}")
    for s in k.slots.values():
        lines.append(_pad(f"@group(0) @binding({s.index}) var<storage, {s.access}> {s.name}: {s.type};",
                          72) + f"// {s.doc}")
    for cname, (value, doc) in k.constants.items():
        lines.append(_pad(f"const {cname}: u32 = {value}u;") + f"// {doc}")
    for oname, (typ, default, doc) in k.overrides.items():
        lines.append(_pad(f"override {oname}: {typ} = {default};") + f"// {doc}")
    for group, names in k.codes.items():
        for i, n in enumerate(names):
            lines.append(f"const {k.code_name(group, n)}: u32 = {i}u;")
    return "\n".join(lines) + "\n"


def dump(kernel_file=None):
    """The generated WGSL: the header of `kernel_file` (every kernel file when None), the
    activation dispatch, and the op dispatch of the files that get it (`numr-web shaders --dump`)."""
    names = list(KERNELS) if kernel_file is None else [kernel_file]
    parts = [header(n) for n in names]
    parts.append(activation_wgsl())
    if any(contract_of(n).vocabulary for n in names):
        parts.append(elementwise_wgsl())
    return "\n".join(parts)

