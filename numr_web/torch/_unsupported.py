"""What numr_web.torch does not provide: a module's __getattr__ built here raises UnsupportedError
(also an AttributeError, so hasattr() and getattr(mod, name, default) behave as for any missing
name) naming the module, the name and, for the names in the module's table, what to use instead.
README's "not supported" table lists the same entries."""
from __future__ import annotations

from ..errors import UnsupportedAttributeError


_LEGACY = ("legacy tensor types are not supported: make tensors with torch.tensor(data, "
           "dtype=...) or torch.empty(size, dtype=...)")

TORCH = {
    **{n: _LEGACY for n in ("FloatTensor", "LongTensor", "IntTensor", "DoubleTensor",
                            "HalfTensor", "BoolTensor", "ByteTensor", "CharTensor",
                            "ShortTensor", "BFloat16Tensor")},
    "jit": "TorchScript (torch.jit) is not supported: run the module as it is; torch.compile "
           "is accepted and returns the model unchanged",
    "fx": "torch.fx graph tracing is not supported",
    "export": "torch.export is not supported",
    "distributed": "torch.distributed is not provided under torch's name: numr_web.distributed "
                   "has process groups, all_reduce and DDP with its own launcher (README)",
    "fft": "torch.fft is not supported",
    "sparse": "sparse tensors are not supported",
    "complex": "complex tensors are not supported",
    "complex64": "complex dtypes are not supported",
    "complex128": "complex dtypes are not supported",
    "cfloat": "complex dtypes are not supported",
    "linalg": "torch.linalg is not supported; torch.norm, torch.matmul, torch.einsum are",
    "vmap": "torch.vmap is not supported: batch with a leading dimension",
    "func": "torch.func (functional transforms) is not supported; torch.autograd.grad is",
    "hub": "torch.hub downloads models; it is not supported: load a safetensors file with "
           "torch.load / numr_web.load",
    "set_num_threads": "the cpu device's threads are not set through torch; numpy's BLAS "
                       "reads OMP_NUM_THREADS / OPENBLAS_NUM_THREADS at start-up",
    "get_num_threads": "the cpu device's threads are not set through torch",
    "use_deterministic_algorithms": "numr_web has no nondeterministic-algorithm switch",
    "Storage": "storages are not exposed; tensors own device handles",
    "UntypedStorage": "storages are not exposed; tensors own device handles",
    "quantization": "quantization is not supported",
    "profiler": "torch.profiler is not provided: numr_web.profile() and "
                "numr_web.record_function time each op per device (README)",
}


def module_getattr(module_name, table):
    """A module-level __getattr__ for `module_name` with the messages of `table`."""
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        why = table.get(name, "not provided by numr_web.torch (README: 'Running PyTorch code' "
                              "lists what is)")
        raise UnsupportedAttributeError(f"{module_name}.{name}: {why}")
    return __getattr__
