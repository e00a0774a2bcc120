"""Typed errors. Every message says what was wrong and what would be right, and every check runs
before any work reaches a device (a bad argument never loses a GPU device).

    NumrError                      base class of everything below
    ├── ShapeError(ValueError)     shapes, dims, indices, sizes, argument values
    │   └── IndexOutOfRangeError(IndexError)  a dim or an index beyond the tensor's bounds
    ├── UnknownActivationError(ValueError)  an activation name not in the table
    ├── StateDictError(RuntimeError)  load_state_dict: missing/unexpected keys, shape mismatches
    ├── DTypeError(TypeError)      dtypes and argument types
    ├── DeviceError(RuntimeError)  devices
    │   └── BackendUnavailableError
    ├── BackendLimitError(RuntimeError)  hardware limits
    ├── GradientError(RuntimeError)  autograd misuse
    ├── KernelError(RuntimeError)  a GPU kernel failed
    ├── UnsupportedError(NotImplementedError)  a torch feature numr_web does not provide
    │   └── UnsupportedAttributeError(AttributeError)  a torch name numr_web.torch lacks
    ├── WeightsOnlyUnpicklingError(pickle.UnpicklingError)  torch.load met a global not allowed
    └── DistributedError(RuntimeError)  a collective failed (a rank died, timed out, mismatched)

The second base is the built-in class torch raises in the same situation, so code written for
torch (`except RuntimeError`, `except ValueError`) catches these too. Each class below shows one
message it carries.

A check on values (labels, indices) raises at the call on the cpu; on a GPU it is found at the
next sync (numr_web/backends/checks.py), and the error names the op and the user's call that
queued it, also as the attributes `.op` (e.g. "cross_entropy") and `.call_site` ((file, line)).
"""
import pickle


class NumrError(Exception):
    """Base class of every error numr_web raises on purpose. Catch it to handle them all."""


class ShapeError(NumrError, ValueError):
    """Shapes that cannot be combined, dims out of range, ragged data, bad sizes or values.

    >>> nr.ones((2, 3)) + nr.ones((2, 4))
    ShapeError: shapes (2, 3) and (2, 4) cannot be broadcast together: dimension -1 is 3 in one
    and 4 in the other; each dimension must match or be 1
    """


class IndexOutOfRangeError(ShapeError, IndexError):
    """A dim or an index outside the tensor's bounds. Also an IndexError, which is what torch
    (and Python sequences) raise there, so `except IndexError` written for torch catches it.

    >>> nr.ones((2, 3)).sum(dim=2)
    IndexOutOfRangeError: dim 2 is out of range for a tensor with 2 dimension(s); expected
    -2 <= dim < 2
    """


class UnknownActivationError(NumrError, ValueError):
    """An activation name not in the ACT table (numr_web/vocab/activations.py).

    >>> nr.activation(nr.ones(2), "swish2")
    UnknownActivationError: unknown activation 'swish2'; expected one of ['none', 'relu', ...]
    """


class StateDictError(NumrError, RuntimeError):
    """load_state_dict found missing or unexpected keys, or shapes that differ; nothing was
    loaded. .missing_keys, .unexpected_keys and .mismatched ([(key, model_shape, given_shape)]).

    >>> nn.Linear(2, 3).load_state_dict({"weight": nr.zeros((3, 2))})
    StateDictError: Error(s) in loading state_dict for Linear:
        Missing key(s) in state_dict: "bias"
    """

    def __init__(self, module_name, missing, unexpected, mismatched):
        self.missing_keys, self.unexpected_keys, self.mismatched = missing, unexpected, mismatched
        lines = [f"Error(s) in loading state_dict for {module_name}:"]
        if missing:
            lines.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing))
        if unexpected:
            lines.append("Unexpected key(s) in state_dict: "
                         + ", ".join(f'"{k}"' for k in unexpected))
        for key, want, got in mismatched:
            lines.append(f"size mismatch for {key}: copying a param with shape {got} from "
                         f"checkpoint, the shape in current model is {want}.")
        super().__init__("\n\t".join(lines))


class DTypeError(NumrError, TypeError):
    """An unknown dtype, a dtype an operation cannot take, or a value that does not fit one.

    >>> nr.tensor([float("nan")], dtype="int32")
    DTypeError: cannot convert nan to an integer dtype; replace NaN/inf first
    """


class DeviceError(NumrError, RuntimeError):
    """An unknown device, or tensors on different devices combined.

    >>> nr.ones(2) + nr.ones(2, device="webgpu")
    DeviceError: tensors on different devices ('cpu' and 'webgpu') can not be combined; move one
    with .to('cpu') or .to('webgpu')
    """


class BackendUnavailableError(DeviceError):
    """A known device whose backend cannot run here (library missing, no driver, no GPU).

    >>> nr.zeros(2, device="cuda")
    BackendUnavailableError: device 'cuda' is not available here: cupy is not installed
    (pip install 'numr-web[cuda]'). Available devices: ['cpu', 'webgpu']
    """


class BackendLimitError(NumrError, RuntimeError):
    """The request exceeds a hard limit of the device (memory, WebGPU's binding size, ...).

    >>> nr.zeros(2 ** 41)
    BackendLimitError: a float32 tensor of shape (2199023255552,) (2199023255552 elements) is
    larger than the cpu device can hold (6318997504 elements)
    """


class GradientError(NumrError, RuntimeError):
    """Misuse of autograd.

    >>> (nr.ones(3, requires_grad=True) * 2).backward()
    GradientError: backward on a non-scalar tensor of shape (3,) needs a gradient: pass grad= a
    tensor of that shape (or call .sum() first)
    """


class KernelError(NumrError, RuntimeError):
    """A GPU kernel failed to compile or validate, or the device was lost. Names the kernel.

    KernelError: elementwise.unary[float32,OP=2]: <the WGSL compiler's message>
    """


class UnsupportedError(NumrError, NotImplementedError):
    """A PyTorch name or argument numr_web.torch does not provide, or provides with other
    semantics: says what differs and what to use instead (README: "Running PyTorch code").

    >>> torch.nn.LSTM(8, 16, proj_size=4)
    UnsupportedError: LSTM(proj_size=...) is not supported; use proj_size=0 and a Linear layer
    on the output
    """


class UnsupportedAttributeError(UnsupportedError, AttributeError):
    """A torch name numr_web.torch does not have. Also an AttributeError, so hasattr(torch, name)
    is False and getattr(torch, name, default) gives the default.

    >>> torch.jit
    UnsupportedAttributeError: torch.jit: TorchScript (torch.jit) is not supported: run the module
    as it is; torch.compile is accepted and returns the model unchanged
    """


class WeightsOnlyUnpicklingError(NumrError, pickle.UnpicklingError):
    """torch.load(weights_only=True) of a pickle naming a class that is not allowed (PyTorch
    raises pickle.UnpicklingError there too).

    >>> torch.load("model.pt")
    WeightsOnlyUnpicklingError: Weights only load failed: model.Net is not an allowed global. ...
    allow it: torch.serialization.add_safe_globals([Net]) or ...
    """


class DistributedError(NumrError, RuntimeError):
    """A collective failed: a rank died, hangs or never joined (timeout), the world size does not
    match the launch, or the ranks called different collectives. Says which rank saw what.

    DistributedError: rank 0: all_reduce did not complete within 3.0 s (timeout): rank 1 is gone
    or hangs
    """

