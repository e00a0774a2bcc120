"""numr_web.install_as_torch(): make `import torch` (and `import torch.nn.functional as F`,
`from torch.utils.data import DataLoader`, ...) give numr_web.torch's modules, so code written for
PyTorch runs unchanged. Opt-in: nothing changes until it is called. In Pyodide, where there is no
PyTorch, this is the usual way to run torch code; natively it hides an installed PyTorch for the
rest of the process.

It installs an import hook (a meta-path finder) that maps the module name `torch[.X]` to
`numr_web.torch[.X]`, loaded on first import; a name numr_web.torch has no module for raises
ModuleNotFoundError naming it.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys

from .errors import NumrError

ALIAS, TARGET = "torch", "numr_web.torch"


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target):
        self.target = target

    def create_module(self, spec):
        return None                        # a placeholder; exec_module puts the real one in place

    def exec_module(self, module):
        # the import system returns whatever sys.modules holds under the name afterwards
        sys.modules[module.__name__] = importlib.import_module(self.target)


class _TorchFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != ALIAS and not fullname.startswith(ALIAS + "."):
            return None
        real = TARGET + fullname[len(ALIAS):]
        spec = importlib.util.find_spec(real)
        if spec is None:
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: numr_web.torch (which `import torch` gives after "
                f"numr_web.install_as_torch()) has no {real!r}; README's 'Running PyTorch code' "
                "lists what it provides", name=fullname)
        return importlib.machinery.ModuleSpec(
            fullname, _AliasLoader(real), is_package=spec.submodule_search_locations is not None)


def install_as_torch():
    """Make `import torch` and its submodules resolve to numr_web.torch (for the rest of the
    process) and return that module. Call it before the first `import torch`."""
    mod = sys.modules.get(ALIAS)
    if mod is not None and getattr(mod, "__name__", None) != TARGET:
        raise NumrError("PyTorch is already imported in this process, so `import torch` keeps "
                        "giving it; call numr_web.install_as_torch() before the first "
                        "`import torch` (or use `import numr_web.torch as torch`)")
    if not any(isinstance(f, _TorchFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _TorchFinder())
    return importlib.import_module(ALIAS)
