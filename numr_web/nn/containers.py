"""Sequential and ModuleList: submodules named "0", "1", ... as in torch (so state_dict keys such
as "layers.0.weight" match)."""
from __future__ import annotations

from collections import OrderedDict

from ._core import NumrError
from .module import Module


class ModuleList(Module):
    """A list of modules that registers them (a plain Python list would hide their parameters)."""

    def __init__(self, modules=None):
        super().__init__()
        for m in modules or ():
            self.append(m)

    def _index(self, i):
        n = len(self._modules)
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of range for {type(self).__name__} of length {n}")
        return str(i % n)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return type(self)(list(self._modules.values())[i])
        return self._modules[self._index(i)]

    def __setitem__(self, i, module):
        self._replace(self._index(i), module)

    def _replace(self, key, module):
        if not isinstance(module, Module):
            raise NumrError(f"{type(self).__name__} holds Modules, got {type(module).__name__}")
        self._modules[key] = module           # in place: keeps the order

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self


class Sequential(ModuleList):
    """Sequential(*modules) or Sequential(OrderedDict(name=module)): forward feeds each module's
    output to the next."""

    def __init__(self, *modules):
        Module.__init__(self)
        if len(modules) == 1 and isinstance(modules[0], (dict, OrderedDict)):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for m in modules:
                self.append(m)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Sequential(OrderedDict(list(self._modules.items())[i]))
        return list(self._modules.values())[int(self._index(i))]

    def __setitem__(self, i, module):
        self._replace(list(self._modules)[int(self._index(i))], module)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x
