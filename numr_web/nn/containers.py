"""Sequential, ModuleList, ModuleDict, ParameterList and ParameterDict: entries named "0", "1", ...
or by their keys as in torch (so state_dict keys such as "layers.0.weight" match)."""
from __future__ import annotations

from collections import OrderedDict

from ._core import NumrError, Tensor
from .module import Module, Parameter


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


class ModuleDict(Module):
    """An ordered dict of modules that registers them under their keys (torch.nn.ModuleDict)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(_key(self, key), module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def clear(self):
        self._modules.clear()

    def update(self, modules):
        pairs = modules.items() if hasattr(modules, "items") else modules
        for pair in pairs:
            if len(pair) != 2:
                raise NumrError(f"{type(self).__name__}.update: expected (key, module) pairs, "
                                f"got {pair!r}")
            self[pair[0]] = pair[1]


def _key(container, key):
    if not isinstance(key, str):
        raise NumrError(f"{type(container).__name__} keys must be str, got "
                        f"{type(key).__name__}")
    if "." in key or key == "":
        raise NumrError(f"{type(container).__name__} key {key!r} can not be empty or contain "
                        "'.' (it names the entry in state_dict keys)")
    return key


def _as_param(value):
    """torch's parameter containers turn a plain Tensor into a Parameter (other values, such as
    None or numbers, are held as they are)."""
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


class ParameterList(Module):
    """A list of parameters registered as "0", "1", ... (torch.nn.ParameterList)."""

    def __init__(self, values=None):
        super().__init__()
        for v in values or ():
            self.append(v)

    def _index(self, i):
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of range for {type(self).__name__} of length {n}")
        return str(i % n)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return type(self)([self[j] for j in range(len(self))[i]])
        return getattr(self, self._index(i))

    def __setitem__(self, i, value):
        self._set(self._index(i), value)

    def _set(self, key, value):
        value = _as_param(value)
        if isinstance(value, Tensor) or value is None:
            self.register_parameter(key, value)
        else:
            self._forget(key)
            object.__setattr__(self, key, value)
        self.__dict__.setdefault("_order", [])
        if key not in self._order:
            self._order.append(key)

    def __len__(self):
        return len(self.__dict__.get("_order", ()))

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def append(self, value):
        self._set(str(len(self)), value)
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        # torch's layout: one "  (i): ..." line per entry, which Module's repr indents again
        return "\n".join(f"  ({i}): " + _describe(p) for i, p in enumerate(self))


class ParameterDict(Module):
    """An ordered dict of parameters registered under their keys (torch.nn.ParameterDict)."""

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        return self._parameters[key]

    def __setitem__(self, key, value):
        self.register_parameter(_key(self, key), _as_param(value))

    def __delitem__(self, key):
        del self._parameters[key]

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def __contains__(self, key):
        return key in self._parameters

    def keys(self):
        return self._parameters.keys()

    def items(self):
        return self._parameters.items()

    def values(self):
        return self._parameters.values()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def update(self, parameters):
        pairs = parameters.items() if hasattr(parameters, "items") else parameters
        for k, v in pairs:
            self[k] = v

    def extra_repr(self):
        return "\n".join(f"  ({k}): " + _describe(p) for k, p in self.items())


def _describe(p):
    if not isinstance(p, Tensor):
        return f"Object of type: {type(p).__name__}"
    size = "x".join(str(s) for s in p.shape)
    dev = "" if p.device == "cpu" else f" ({p.device})"
    kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
    return f"{kind} containing: [{p.dtype!r} of size {size}{dev}]"
