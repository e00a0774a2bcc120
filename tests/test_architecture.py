"""The structure rules of numr_web/, checked: the layers in docs/architecture.md's order (no
module imports one of a higher layer; function-local imports included), no import cycles, no
module over 500 lines, and the op vocabulary and activation table complete on every backend."""
import ast
from pathlib import Path

import pytest

import numr_web as nr
from numr_web.vocab.activations import ACT, Code
from numr_web.vocab.registry import KERNEL_FAMILIES, OPS, family_names

PKG = Path(nr.__file__).parent


def _module_name(path):
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path, name, files):
    """Modules of numr_web imported anywhere in the file (relative imports resolved): for
    `from pkg import x`, the module pkg.x when x is one, else pkg."""
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = pkg
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            mod = (base + "." + node.module if node.module else base) if node.level else node.module
            if mod and mod.startswith("numr_web"):
                for a in node.names:
                    out.add(f"{mod}.{a.name}" if f"{mod}.{a.name}" in files else mod)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("numr_web"))
    return out


def _graph():
    files = {_module_name(p): p for p in PKG.rglob("*.py")}
    return {m: {i for i in _imports(p, m, files) if i in files and i != m}
            for m, p in files.items()}


# bottom up, as docs/architecture.md draws them; a module belongs to the layer of the longest
# prefix listed (a module not listed: above ops)
LAYERS = (
    ("foundations", ("errors", "dtypes", "shapes", "gradmode", "formatting", "profiler", "devices",
                     "host", "generator")),
    ("vocab", ("vocab",)),
    ("backends", ("backends",)),
    ("tensor", ("autocast_state", "autograd", "tensor", "creation")),
    ("ops", ("ops",)),
)


def _layer(module):
    best, rank = -1, len(LAYERS)          # not listed: above ops (nn, amp, data, torch, apps)
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            full = "numr_web." + p
            if (module == full or module.startswith(full + ".")) and len(full) > best:
                best, rank = len(full), i
    return rank


def test_layers_import_only_downward():
    names = [n for n, _ in LAYERS] + ["nn and apps"]
    up = sorted(f"{m} ({names[_layer(m)]}) imports {i} ({names[_layer(i)]})"
                for m, deps in _graph().items() for i in deps if _layer(i) > _layer(m))
    assert not up, "imports from a lower layer to a higher one:\n" + "\n".join(up)


def test_backends_read_only_the_spec_of_the_op_layer():
    for m, deps in _graph().items():
        if m.startswith("numr_web.backends"):
            assert not {d for d in deps if d.startswith(("numr_web.ops", "numr_web.tensor",
                                                          "numr_web.autograd"))}, m


def test_tensor_gets_its_op_methods_from_the_families_classes():
    """Each op family defines its Tensor methods in a class of its own (ops/*.py: XMethods), and
    all of them are Tensor's bases (ops/tensor_methods.py); nothing sets attributes on Tensor."""
    import importlib
    import inspect
    modules = [importlib.import_module(f"numr_web.ops.{p.stem}")
               for p in (PKG / "ops").glob("*.py") if p.stem != "__init__"]
    classes = {c for m in modules for c in vars(m).values() if inspect.isclass(c)
               and c.__name__.endswith("Methods") and c.__module__ == m.__name__}
    assert len(classes) > 10 and classes <= set(nr.Tensor.__mro__)
    for p in PKG.rglob("*.py"):
        assert "setattr(Tensor" not in p.read_text(), p


def test_no_import_cycles():
    graph = _graph()
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == "open":
                pytest.fail("import cycle: " + " -> ".join(stack[stack.index(n):] + [n]))
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_no_module_over_500_lines():
    big = {str(p.relative_to(PKG)): n for p in PKG.rglob("*.py")
           if (n := len(p.read_text().splitlines())) > 500}
    assert not big, f"split these along their responsibilities: {big}"


def test_activation_table_is_complete():
    for name, act in ACT.items():
        assert act.saves in ("y", "z"), name
        for lang in ("np", "wgsl", "cuda"):
            code = getattr(act, lang)
            assert isinstance(code, Code)
            for fn in ("fwd", "dz", "d2") + (("d1", "ds") if act.saves == "y" else ()):
                assert getattr(code, fn) is not None, (name, lang, fn)


@pytest.mark.parametrize("device", ["cpu", "webgpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not nr.backends.probe("cuda")[0], reason=f"cuda: {nr.backends.probe('cuda')[1]}"))])
def test_every_backend_covers_the_vocabulary(device):
    be = nr.get_backend(device)
    for family in KERNEL_FAMILIES:
        for name in family_names(family):
            assert be.covers(family, name), f"{device} has no kernel for {family} op {name!r}"
    assert set(OPS) >= {n for f in KERNEL_FAMILIES for n in family_names(f)}
