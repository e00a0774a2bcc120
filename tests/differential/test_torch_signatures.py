"""The signatures of numr_web.torch's names against PyTorch's own (inspect.signature, or the
first line of the docstring for torch's C functions): every parameter torch has is there, in the
same position and kind, with the same default, so torch calls bind the same way; parameters
numr_web adds have defaults. The few deliberate differences are listed with their reasons."""
import ast
import inspect

import pytest
import torch

import numr_web as nr
import numr_web.torch as ntorch
from numr_web.vocab.elementwise import rows

NAMES = """
multinomial bernoulli poisson manual_seed seed initial_seed save load max min sort topk kthvalue median mode aminmax cummax cummin argmax argmin
utils.data.Dataset utils.data.IterableDataset utils.data.TensorDataset utils.data.DataLoader
utils.data.random_split utils.data.Subset utils.data.RandomSampler utils.data.SequentialSampler
utils.data.BatchSampler utils.data.ConcatDataset utils.data.default_collate
cuda.is_available cuda.device_count cuda.manual_seed cuda.manual_seed_all cuda.synchronize
cuda.memory_allocated cuda.max_memory_allocated cuda.memory_reserved cuda.max_memory_reserved
cuda.reset_peak_memory_stats cuda.empty_cache cuda.memory_stats cuda.mem_get_info
accelerator.is_available accelerator.current_accelerator accelerator.device_count
accelerator.synchronize accelerator.current_device_index
optim.SGD optim.Adam optim.AdamW optim.Adadelta optim.Adagrad optim.RMSprop optim.Adamax
optim.NAdam optim.RAdam optim.LBFGS
optim.lr_scheduler.StepLR optim.lr_scheduler.MultiStepLR optim.lr_scheduler.ExponentialLR
optim.lr_scheduler.CosineAnnealingLR optim.lr_scheduler.LinearLR optim.lr_scheduler.LambdaLR
optim.lr_scheduler.ConstantLR optim.lr_scheduler.OneCycleLR optim.lr_scheduler.ReduceLROnPlateau
optim.lr_scheduler.CosineAnnealingWarmRestarts optim.lr_scheduler.PolynomialLR
optim.lr_scheduler.SequentialLR optim.lr_scheduler.MultiplicativeLR
nn.utils.clip_grad_norm_ nn.utils.clip_grad_value_ nn.functional.one_hot nn.functional.embedding
nn.functional.interpolate nn.RNN nn.LSTM nn.GRU nn.MultiheadAttention
nn.TransformerEncoderLayer nn.TransformerEncoder nn.Embedding nn.Linear nn.Upsample
""".split()
# the functions generated from the public elementwise rows (torch has no cbrt: nothing to compare)
ROW_NAMES = [r.name for r in rows(public=True) if hasattr(torch, r.name)]

# torch.nn's recurrent layers take (*args, **kwargs); their documented signatures
DOCUMENTED = {
    "nn.RNN": "(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True, "
              "batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None)",
    "nn.LSTM": "(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, "
               "dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None)",
    "nn.GRU": "(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, "
              "dropout=0.0, bidirectional=False, device=None, dtype=None)",
}

# (name, parameter): why numr_web's default differs from torch's (the calls still bind the same)
DEFAULTS_DIFFER = {
    ("save", "pickle_module"): "None stands for the pickle module, which torch names",
    ("load", "weights_only"): "torch's None means True since 2.6: numr_web says True",
    ("utils.data.random_split", "generator"): "None is the default generator, torch names it",
    ("nn.TransformerEncoderLayer", "activation"): "'relu' is torch's F.relu, by name",
    ("topk", "dim"): "torch documents None but takes an int only: the last dim, -1",
    ("kthvalue", "dim"): "torch documents None but takes an int only: the last dim, -1",
}
# torch names the tensor `input`; these name it `x` (pass it by position, as torch code does)
FIRST_NAMED_X = {"sort", "topk", "kthvalue", "median", "argmax", "argmin"}
# numr_web's Linear has its fused activation= fourth (its public contract): torch code gives
# device= / dtype= by keyword
POSITION_DIFFERS = {("nn.Linear", "device"), ("nn.Linear", "dtype")}
# torch's keyword `out=` (write into a given tensor) is not provided: numr_web's results are new
NOT_PROVIDED = {"out"}
# (name, parameter): a parameter of torch's that numr_web does not take, and why
NOT_TAKEN = {}
# torch.max / min / median / argmax document only their first overload; numr_web's one function
# takes every overload's arguments (max(x), max(x, dim, keepdim), max(x, other))
OVERLOADED = {"max", "min", "median", "argmax", "argmin", "bernoulli", "normal", "rand", "randn",
              "randint", "var_mean", "std_mean"}


def _get(mod, name):
    for part in name.split("."):
        mod = getattr(mod, part)
    return mod


_UNPARSED = object()          # a default the docstring names by an expression (torch.int64)


def _literal(node):
    if node is None:
        return inspect.Parameter.empty
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _UNPARSED


def _from_docstring(obj):
    """torch's C functions: the signature on the first line of the docstring."""
    line = (obj.__doc__ or "").strip().splitlines()[0]
    start, depth = line.index("("), 0
    for end in range(start, len(line)):
        depth += {"(": 1, ")": -1}.get(line[end], 0)
        if depth == 0:
            break
    fn = ast.parse(f"def f{line[start:end + 1]}: pass").body[0].args
    params = []
    pos = fn.posonlyargs + fn.args
    pos_defaults = [None] * (len(pos) - len(fn.defaults)) + list(fn.defaults)
    for a, d in zip(pos, pos_defaults):
        params.append(inspect.Parameter(a.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                        default=_literal(d)))
    for a, d in zip(fn.kwonlyargs, fn.kw_defaults):
        params.append(inspect.Parameter(a.arg, inspect.Parameter.KEYWORD_ONLY,
                                        default=_literal(d)))
    return inspect.Signature(params)


def _signature(obj, name):
    if name in DOCUMENTED:
        return _from_docstring(type("D", (), {"__doc__": "f" + DOCUMENTED[name]}))
    try:
        return inspect.signature(obj)
    except ValueError:
        return _from_docstring(obj)


def _positional(sig):
    return [p.name for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


@pytest.mark.parametrize("name", NAMES + ROW_NAMES)
def test_signature_binds_torchs_calls(name):
    theirs = _signature(_get(torch, name), name)
    ours = inspect.signature(_get(ntorch, name))
    if any(p.kind == p.VAR_POSITIONAL for p in ours.parameters.values()) and \
            any(p.kind == p.VAR_POSITIONAL for p in theirs.parameters.values()):
        return                                               # (*tensors) / (*args) forms
    t_pos, o_pos = _positional(theirs), _positional(ours)
    for p in theirs.parameters.values():
        if p.name in NOT_PROVIDED or p.name == "self" or p.kind == p.VAR_KEYWORD or \
                (name, p.name) in NOT_TAKEN:
            continue
        if p.name == "input" and name in FIRST_NAMED_X:
            assert o_pos[0] == "x" and t_pos[0] == "input"
            continue
        assert p.name in ours.parameters, f"{name}: no parameter {p.name!r} (torch{theirs})"
        q = ours.parameters[p.name]
        if p.kind == p.POSITIONAL_OR_KEYWORD and name not in OVERLOADED and \
                (name, p.name) not in POSITION_DIFFERS:
            assert q.kind == q.POSITIONAL_OR_KEYWORD and \
                o_pos.index(p.name) == t_pos.index(p.name), \
                f"{name}: {p.name!r} is not where torch has it: ours{ours} torch{theirs}"
        elif p.kind == p.KEYWORD_ONLY:
            assert q.kind in (q.KEYWORD_ONLY, q.POSITIONAL_OR_KEYWORD), (name, p.name)
        if p.default not in (p.empty, _UNPARSED) and (name, p.name) not in DEFAULTS_DIFFER:
            assert q.default is not q.empty and q.default == p.default, \
                f"{name}: {p.name}={q.default!r}, torch's is {p.default!r}"
    for q in ours.parameters.values():
        if q.name not in theirs.parameters and q.name != "x" and q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD):
            assert q.default is not q.empty, f"{name}: our extra parameter {q.name!r} is required"


def test_embedding_takes_torchs_arguments(device):
    w = [[0.5, -1.0], [2.0, 0.25], [1.5, 3.0]]
    ids = [[2, 0], [1, 2]]
    for freeze in (False, True):
        m = ntorch.nn.Embedding(3, 2, padding_idx=0, sparse=True, device=device,
                                _weight=ntorch.tensor(w, device=device), _freeze=freeze)
        tm = torch.nn.Embedding(3, 2, padding_idx=0, sparse=True, _weight=torch.tensor(w),
                                _freeze=freeze)
        assert m.weight.requires_grad is tm.weight.requires_grad is (not freeze)
        out, tout = m(ntorch.tensor(ids, device=device)), tm(torch.tensor(ids))
        assert out.tolist() == tout.tolist()
        if not freeze:
            (out * out).sum().backward()
            (tout * tout).sum().backward()
            assert m.weight.grad.tolist() == tm.weight.grad.to_dense().tolist()  # padding row: 0
    with pytest.raises(ntorch.UnsupportedError, match="max_norm"):
        ntorch.nn.Embedding(3, 2, max_norm=1.0)
    with pytest.raises(nr.ShapeError):
        ntorch.nn.Embedding(3, 2, _weight=ntorch.ones(2, 2))
