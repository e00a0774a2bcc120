"""Module and Parameter, shaped like torch.nn.Module: attributes register parameters, buffers and
submodules; state_dict() keys are the attribute paths ("layers.0.weight"), so checkpoints line up
with the same model written in PyTorch."""
from __future__ import annotations

from collections import OrderedDict, namedtuple

from . import _core
from ..errors import StateDictError  # noqa: F401  (re-exported by nn)
from ._core import NumrError, Tensor


IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class _ParameterMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.__dict__.get("_is_param", False)


class Parameter(metaclass=_ParameterMeta):
    """Parameter(t) marks a tensor as a module parameter: a leaf (detached from t's graph, sharing
    its storage) with requires_grad=True. It returns a plain Tensor, not a subclass, because ops
    build their outputs with their input's class; isinstance(p, Parameter) still answers."""

    def __new__(cls, data, requires_grad=True):
        if not isinstance(data, Tensor):
            raise _core.DTypeError(f"Parameter needs a Tensor, got {type(data).__name__}")
        p = data.detach()
        p._is_param = True
        p.requires_grad = requires_grad
        return p


def _check_value(kind, name, value, ok_type):
    if value is not None and not isinstance(value, ok_type):
        raise NumrError(f"cannot assign a {type(value).__name__} as {kind} {name!r} "
                        f"({ok_type.__name__} or None expected)")


class Module:
    """Base class of layers and models: subclasses set attributes in __init__ and define
    forward(); calling the module calls forward."""

    training = True

    def __init__(self):
        d = self.__dict__
        d.setdefault("_parameters", OrderedDict())
        d.setdefault("_buffers", OrderedDict())
        d.setdefault("_non_persistent", set())
        d.setdefault("_modules", OrderedDict())

    # -- registration ------------------------------------------------------------------------------
    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:      # a subclass forgot super().__init__()
            Module.__init__(self)
        params, bufs, mods = self._parameters, self._buffers, self._modules
        if isinstance(value, Parameter):
            self._forget(name)
            params[name] = value
        elif isinstance(value, Module):
            self._forget(name)
            mods[name] = value
        elif name in params:
            _check_value("parameter", name, value, Parameter)
            params[name] = value
        elif name in bufs:
            _check_value("buffer", name, value, Tensor)
            bufs[name] = value
        elif name in mods:
            _check_value("submodule", name, value, Module)
            mods[name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name):
        self.__dict__.pop(name, None)
        for d in (self._parameters, self._buffers, self._modules):
            d.pop(name, None)
        self._non_persistent.discard(name)

    def __getattr__(self, name):   # only called when normal lookup fails
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if table in d and name in d[table]:
                return d[table][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        if name in self._parameters or name in self._buffers or name in self._modules:
            self._forget(name)
        else:
            object.__delattr__(self, name)

    def register_parameter(self, name, param):
        _check_value("parameter", name, param, Parameter)
        self._forget(name)
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """A tensor that is state but not a parameter (moved by to(); in state_dict() when
        persistent)."""
        _check_value("buffer", name, tensor, Tensor)
        self._forget(name)
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent.add(name)

    def add_module(self, name, module):
        _check_value("submodule", name, module, Module)
        self._forget(name)
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target):
        """The submodule at a dotted path ("layers.0"); "" is the module itself."""
        m = self
        for part in target.split(".") if target else ():
            if part not in m._modules:
                raise AttributeError(f"{type(m).__name__} has no submodule {part!r} "
                                     f"(looking up {target!r})")
            m = m._modules[part]
        return m

    # -- traversal ---------------------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name,
                                           remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, table, prefix, recurse, remove_duplicate=True):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for mod_prefix, m in mods:
            for name, v in getattr(m, table).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                seen.add(id(v))
                yield (f"{mod_prefix}.{name}" if mod_prefix else name), v

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(name, parameter) pairs; a parameter shared by two modules (tied weights) once."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn):
        """fn(m) on every submodule, children first, then on self (as torch)."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # -- modes and gradients -----------------------------------------------------------------------
    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is not None:
                p.grad = None if set_to_none else _core.zeros_like(p.grad)

    # -- devices and dtypes ------------------------------------------------------------------------
    def to(self, *args, device=None, dtype=None):
        """to(device), to(dtype) or both: moves every parameter and buffer (and .grad) in place,
        so references held elsewhere (an optimizer, a tied weight) follow. dtype converts the
        floating-point ones only, as torch does."""
        for a in args:
            if _is_dtype(a):
                dtype = a
            else:
                device = a
        device = _core.normalize_device(device) if device is not None else None
        dtype = _core.get_dtype(dtype) if dtype is not None else None
        for t in _unique(list(self.parameters()) + list(self.buffers())):
            _move(t, device, dtype)
        return self

    def cpu(self): return self.to("cpu")
    def cuda(self, device=None): return self.to("cuda")
    def half(self): return self.to(dtype="float16")
    def bfloat16(self): return self.to(dtype="bfloat16")
    def float(self): return self.to(dtype="float32")
    def double(self): return self.to(dtype="float64")

    # -- checkpoints -------------------------------------------------------------------------------
    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """Ordered {name: tensor} of parameters and persistent buffers, detached unless keep_vars.
        Tied weights appear under each of their names (as in torch)."""
        out = OrderedDict() if destination is None else destination
        for mod_prefix, m in self.named_modules(prefix=prefix.rstrip("."), remove_duplicate=False):
            pre = f"{mod_prefix}." if mod_prefix else ""
            for name, p in m._parameters.items():
                if p is not None:
                    out[pre + name] = p if keep_vars else p.detach()
            for name, b in m._buffers.items():
                if b is not None and name not in m._non_persistent:
                    out[pre + name] = b if keep_vars else b.detach()
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Copy values into the existing parameters and buffers (their dtype and device stay;
        values may be Tensors or anything nr.tensor accepts). Checks everything before changing
        anything: StateDictError on a shape mismatch, and with strict=True on missing or unexpected
        keys. Returns (missing_keys, unexpected_keys)."""
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        values, mismatched = {}, []
        for key, t in own.items():
            if key not in state_dict:
                continue
            v = state_dict[key]
            if not isinstance(v, Tensor):
                v = _core.tensor(v, dtype=t.dtype, device=t.device)
            if tuple(v.shape) != t.shape:
                mismatched.append((key, t.shape, tuple(v.shape)))
            values[key] = v
        if mismatched or (strict and (missing or unexpected)):
            raise StateDictError(type(self).__name__, missing, unexpected, mismatched)
        for key, v in values.items():
            t = own[key]
            _core.rebind(t, v.detach().to(t.device).to(dtype=t.dtype))
        return IncompatibleKeys(missing, unexpected)

    # -- calling and printing ----------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def extra_repr(self):
        return ""

    def __repr__(self):
        """torch's layout: Name(extra) on one line, else the extra lines and (child): repr
        lines indented by two spaces."""
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        for name, m in self._modules.items():
            lines.append(f"({name}): " + repr(m).replace("\n", "\n  "))
        if not lines:
            return f"{type(self).__name__}()"
        if len(lines) == 1 and not self._modules:
            return f"{type(self).__name__}({lines[0]})"
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"


def _is_dtype(x):
    try:
        _core.get_dtype(x)
        return True
    except Exception:
        return False


def _unique(ts):
    seen, out = set(), []
    for t in ts:
        if id(t) not in seen:
            seen.add(id(t))
            out.append(t)
    return out


def _move(t, device, dtype):
    if dtype is not None and not (t.dtype.is_floating and dtype.is_floating):
        dtype = None
    moved = _cast_and_move(t.detach(), device, dtype)
    if moved._data is not t._data or moved.device != t.device:
        _core.rebind(t, moved)
    if t.grad is not None:
        t.grad = _cast_and_move(t.grad, t.device, t.dtype)


def _cast_and_move(t, device, dtype):
    """Narrowing casts first (on the source device: float64 -> float32 before a move to webgpu,
    which holds no float64), widening ones after the move."""
    if dtype is not None and dtype.itemsize <= t.dtype.itemsize:
        return t.to(dtype=dtype).to(device)
    return t.to(device).to(dtype=dtype)
