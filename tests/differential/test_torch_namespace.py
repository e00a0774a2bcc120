"""numr_web.torch, the torch-shaped module tree, against PyTorch: the module tree and
install_as_torch(), dtype names, torch.device, torch.max/min, finfo/iinfo, the cuda /
accelerator / backends namespaces, the typed errors of what is not provided, and t.data writes."""
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import numr_web as nr
import numr_web.torch as ntorch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _python(code):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=300)


# -- the module tree -------------------------------------------------------------------------------
def test_install_as_torch_makes_import_torch_give_numr_web():
    r = _python("""
        import sys
        import numr_web
        mod = numr_web.install_as_torch()
        import torch, torch.nn as nn, torch.nn.functional as F, torch.optim as optim
        from torch.optim.lr_scheduler import StepLR
        from torch.utils.data import DataLoader, TensorDataset
        import torch.backends.cudnn, torch.cuda, torch.accelerator, torch.onnx
        from torch.nn.modules.rnn import LSTM
        assert mod is torch and torch.__name__ == "numr_web.torch", torch.__name__
        assert nn is sys.modules["numr_web.torch.nn"] and F.relu is sys.modules["torch.nn.functional"].relu
        assert torch.Tensor is numr_web.Tensor and LSTM is numr_web.nn.LSTM
        assert numr_web.install_as_torch() is torch          # twice: the same module
        try:
            import torch.no_such_module
        except ModuleNotFoundError as e:
            assert e.name == "torch.no_such_module" and "numr_web.torch" in str(e), e
        else:
            raise AssertionError("no error")
        x = torch.ones(2, 3, dtype=torch.long)
        print(type(x).__module__, x.dtype, nn.Linear(3, 2)(x.float()).shape)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["numr_web.tensor", "numr_web.int32", "(2,", "2)"]


def test_install_as_torch_after_pytorch_was_imported_is_refused():
    r = _python("""
        import torch, numr_web
        try:
            numr_web.install_as_torch()
        except numr_web.NumrError as e:
            print("refused:", e)
    """)
    assert r.returncode == 0, r.stderr
    assert "refused: PyTorch is already imported" in r.stdout


def test_import_numr_web_does_not_import_the_torch_tree():
    r = _python("import sys, numr_web; print('numr_web.torch' in sys.modules, 'torch' in sys.modules)")
    assert r.stdout.split() == ["False", "False"], r.stderr


def test_namespaces_hold_torch_names():
    for mod, names in [
        (ntorch, "tensor zeros ones arange rand randn randint randperm manual_seed no_grad cat "
                 "stack where matmul softmax topk sort multinomial bernoulli poisson normal "
                 "save load device dtype Tensor Size Generator float32 long int64 bfloat16 finfo "
                 "iinfo compile set_float32_matmul_precision autocast inf nan pi"),
        (ntorch.nn, "Module Parameter Linear Conv2d Embedding LayerNorm Dropout RNN LSTM GRU "
                    "RNNCell LSTMCell GRUCell MultiheadAttention TransformerEncoderLayer "
                    "TransformerEncoder TransformerDecoderLayer Transformer Upsample Sequential "
                    "ModuleList ModuleDict CrossEntropyLoss NLLLoss"),
        (ntorch.nn.functional, "relu gelu softmax log_softmax cross_entropy nll_loss one_hot "
                               "embedding interpolate layer_norm dropout "
                               "scaled_dot_product_attention normalize pad linear"),
        (ntorch.nn.utils, "clip_grad_norm_ clip_grad_value_ parameters_to_vector "
                          "vector_to_parameters"),
        (ntorch.optim, "SGD Adam AdamW Adadelta Adagrad RMSprop Adamax NAdam RAdam LBFGS "
                       "Optimizer"),
        (ntorch.optim.lr_scheduler, "LRScheduler StepLR MultiStepLR ExponentialLR "
                                    "CosineAnnealingLR LinearLR LambdaLR ConstantLR OneCycleLR "
                                    "ReduceLROnPlateau CosineAnnealingWarmRestarts PolynomialLR "
                                    "SequentialLR MultiplicativeLR"),
        (ntorch.utils.data, "Dataset IterableDataset TensorDataset DataLoader random_split "
                            "Subset RandomSampler SequentialSampler BatchSampler"),
        (ntorch.cuda, "is_available device_count manual_seed manual_seed_all synchronize "
                      "memory_allocated max_memory_allocated empty_cache"),
        (ntorch.accelerator, "is_available current_accelerator device_count synchronize"),
    ]:
        for name in names.split():
            assert hasattr(mod, name), f"{mod.__name__}.{name}"


@pytest.mark.parametrize("mod, name, fragment", [
    (ntorch, "jit", "TorchScript"), (ntorch, "LongTensor", r"torch\.tensor\(data"),
    (ntorch, "fft", "not supported"), (ntorch, "no_such_name", "not provided"),
    (ntorch.nn, "Conv1d", "Conv2d"), (ntorch.optim, "SparseAdam", "sparse"),
    (ntorch.optim.lr_scheduler, "ChainedScheduler", "LambdaLR"),
])
def test_names_not_provided_raise_a_typed_attribute_error(mod, name, fragment):
    assert not hasattr(mod, name)
    with pytest.raises(nr.UnsupportedError, match=fragment) as e:
        getattr(mod, name)
    assert isinstance(e.value, AttributeError) and isinstance(e.value, NotImplementedError)


# -- dtypes ----------------------------------------------------------------------------------------
def test_dtype_names():
    assert (ntorch.long, ntorch.int64, ntorch.int, ntorch.int32) == (nr.int32,) * 4
    assert (ntorch.float, ntorch.float32, ntorch.double, ntorch.float64, ntorch.half,
            ntorch.float16, ntorch.bool) == (nr.float32, nr.float32, nr.float64, nr.float64,
                                              nr.float16, nr.float16, nr.bool_)
    assert nr.get_dtype("long") is nr.get_dtype("int64") is nr.int32
    assert isinstance(ntorch.float32, ntorch.dtype)
    for name in ("float", "double", "half", "bool", "long", "int", "float32", "int64"):
        n_dt, t_dt = getattr(ntorch, name), getattr(torch, name)
        assert n_dt.is_floating_point == t_dt.is_floating_point


def test_long_tensors_hold_torch_int64_values_as_int32(device):
    data = [[3, -7, 2 ** 31 - 1], [0, -2 ** 31, 5]]
    for make in (lambda lib: lib.tensor(data, dtype=lib.long, device=_dev(lib, device)),
                 lambda lib: lib.tensor(np.array(data, np.int64), device=_dev(lib, device)),
                 lambda lib: lib.tensor(data, device=_dev(lib, device)).long()):
        x, tx = make(ntorch), make(torch)
        assert x.dtype == ntorch.long and tx.dtype == torch.long
        assert x.tolist() == tx.tolist()
    for make in (lambda lib: lib.arange(5, dtype=lib.long, device=_dev(lib, device)),
                 lambda lib: lib.zeros(2, 3, dtype=lib.int64, device=_dev(lib, device)),
                 lambda lib: lib.full((2,), 7, dtype=lib.long, device=_dev(lib, device)),
                 lambda lib: lib.ones(4, device=_dev(lib, device)).to(lib.long)):
        x, tx = make(ntorch), make(torch)
        assert x.dtype is nr.int32 and x.tolist() == tx.tolist()
    with pytest.raises(nr.DTypeError, match="int32"):
        ntorch.tensor([2 ** 31], dtype=ntorch.long, device=device)


def _dev(lib, device):
    return "cpu" if lib is torch else device


def test_bfloat16_is_numr_web_s_on_the_cpu():
    d = ntorch.bfloat16
    assert d is nr.bfloat16 and nr.get_dtype(d) is d and d.is_floating_point
    for t in (ntorch.zeros(2, dtype=d), ntorch.ones(2).to(d), ntorch.tensor([1.5], dtype=d),
              ntorch.ones(2).bfloat16()):
        assert t.dtype is d


@pytest.mark.parametrize("name", ["uint8", "int8", "int16"])
def test_dtypes_without_storage_raise_dtype_error_when_used(name):
    d = getattr(ntorch, name)
    assert d.name == name and d != ntorch.float32
    for use in (lambda: ntorch.zeros(2, dtype=d), lambda: ntorch.ones(2).to(d),
                lambda: ntorch.tensor([1], dtype=d), lambda: nr.get_dtype(d)):
        with pytest.raises(nr.DTypeError, match=f"dtype {name} is not supported"):
            use()


# -- devices ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [("cpu",), ("cuda",), ("cuda:1",), ("cuda", 1), ("cpu:0",)])
def test_device_objects_match_torch(args):
    d, td = ntorch.device(*args), torch.device(*args)
    assert (d.type, d.index, str(d)) == (td.type, td.index, str(td))
    assert ntorch.device(d) is d and ntorch.device(type=d.type) == d.type
    assert ntorch.device(0) == "cuda:0"          # torch: the current accelerator's index 0


@pytest.mark.parametrize("bad", ["foo", "cuda:x", "cuda:-1"])
def test_bad_device_strings_raise_device_error(bad):
    with pytest.raises(RuntimeError):
        torch.device(bad)
    with pytest.raises(nr.DeviceError):
        ntorch.device(bad)


@pytest.mark.parametrize("bad", [1.5, None, [0]])
def test_device_of_a_wrong_type_raises_a_type_error(bad):
    with pytest.raises(TypeError):
        torch.device(bad)
    with pytest.raises(nr.DTypeError):
        ntorch.device(bad)


def test_device_error_names_torch_only_devices():
    with pytest.raises(nr.DeviceError, match="no 'mps' device"):
        ntorch.device("mps")


def test_device_objects_are_accepted_where_device_strings_are(device):
    dev = ntorch.device(device)
    x = ntorch.tensor([1.0, 2.0], device=dev)
    assert x.device == device and x.device.type == device and isinstance(x.device, ntorch.device)
    assert (x + 1).device.type == device and x.sum().device.type == device
    assert ntorch.zeros(2, device=dev).device == device
    assert ntorch.arange(3, device=dev).device == device
    assert ntorch.randn(2, device=dev).device == device
    y = ntorch.tensor([3.0], device="cpu").to(dev)
    assert y.device == device and y.tolist() == [3.0]
    assert x.cpu().device.type == "cpu" and x.to(ntorch.device("cpu")).tolist() == [1.0, 2.0]
    m = ntorch.nn.Linear(2, 3).to(dev)
    assert m.weight.device.type == device
    assert ntorch.tensor([1], device=dev).to(dev, ntorch.float32).dtype is nr.float32
    assert ntorch.device("cpu") == "cpu"              # a str: t.device == "cpu" keeps working


def test_cuda_method_without_a_gpu_raises_backend_unavailable():
    if nr.backends.probe("cuda")[0]:
        assert ntorch.ones(2).cuda().device.type == "cuda"
        return
    with pytest.raises(nr.BackendUnavailableError):
        ntorch.ones(2).cuda()
    with pytest.raises(nr.BackendUnavailableError):
        ntorch.ones(2).to(ntorch.device("cuda", 0))


# -- torch.max / torch.min -------------------------------------------------------------------------
@pytest.mark.parametrize("fn", ["max", "min"])
def test_max_min_with_dim_give_values_and_indices(device, fn):
    data = [[1.0, 5.0, 5.0, -2.0], [7.0, 2.0, 7.0, 7.0], [0.5, 0.5, 0.5, 0.5]]
    x = ntorch.tensor(data, device=device, requires_grad=True)
    tx = torch.tensor(data, requires_grad=True)
    for dim, keepdim in ((1, False), (0, True), (-1, True)):
        r, tr = getattr(ntorch, fn)(x, dim, keepdim), getattr(torch, fn)(tx, dim, keepdim)
        values, indices = r
        assert values.tolist() == tr.values.tolist() and indices.tolist() == tr.indices.tolist()
        assert r.values is values and r.indices is indices and indices.dtype == ntorch.long
    getattr(ntorch, fn)(x, dim=1).values.sum().backward()
    getattr(torch, fn)(tx, dim=1).values.sum().backward()
    assert x.grad.tolist() == tx.grad.tolist()          # to the index returned, as torch
    assert getattr(ntorch, fn)(x).item() == getattr(torch, fn)(tx).item()
    other = ntorch.zeros(3, 4, device=device)
    assert getattr(ntorch, fn)(x, other).tolist() == getattr(torch, fn)(tx, torch.zeros(3, 4)).tolist()


# -- finfo / iinfo ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["float16", "float32", "float64"])
def test_finfo_matches_torch(name):
    f, tf = ntorch.finfo(getattr(ntorch, name)), torch.finfo(getattr(torch, name))
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(f, attr) == getattr(tf, attr), attr


def test_iinfo_of_long_is_int32s_range():
    i, ti = ntorch.iinfo(ntorch.long), torch.iinfo(torch.int32)
    assert (i.bits, i.min, i.max) == (ti.bits, ti.min, ti.max)
    with pytest.raises(nr.DTypeError):
        ntorch.iinfo(ntorch.float32)


# -- cuda / accelerator / backends -----------------------------------------------------------------
def test_cuda_namespace_answers_as_torch_without_a_gpu():
    if nr.backends.probe("cuda")[0]:
        pytest.skip("this machine has CUDA")
    assert ntorch.cuda.is_available() is torch.cuda.is_available() is False
    assert ntorch.cuda.device_count() == torch.cuda.device_count() == 0
    assert ntorch.cuda.memory_allocated() == torch.cuda.memory_allocated() == 0
    assert ntorch.cuda.max_memory_allocated() == torch.cuda.max_memory_allocated() == 0
    assert ntorch.cuda.is_bf16_supported() is False
    state = nr.get_rng_state()
    ntorch.cuda.manual_seed(5)                 # ignored without a GPU, as torch's
    ntorch.cuda.manual_seed_all(5)
    ntorch.cuda.empty_cache()
    assert nr.get_rng_state() == state
    with pytest.raises(nr.BackendUnavailableError):
        ntorch.cuda.synchronize()


def test_accelerator_is_the_first_gpu_device_found():
    want = next((d for d in ("cuda", "webgpu") if nr.backends.probe(d)[0]), None)
    assert ntorch.accelerator.current_accelerator() == want
    assert ntorch.accelerator.is_available() is (want is not None)
    assert ntorch.accelerator.device_count() == (1 if want else 0)
    if want:
        dev = ntorch.accelerator.current_accelerator()
        assert dev.type == want and isinstance(dev, ntorch.device)
        ntorch.accelerator.synchronize()
        assert ntorch.accelerator.current_device_index() == 0


def test_backends_switches():
    assert ntorch.backends.mps.is_available() is False
    assert ntorch.backends.cudnn.is_available() is False
    ntorch.backends.cudnn.benchmark = True
    ntorch.backends.cuda.matmul.allow_tf32 = False
    assert ntorch.backends.cuda.matmul.allow_tf32 is False
    ntorch.set_float32_matmul_precision("highest")
    assert ntorch.get_float32_matmul_precision() == "highest"
    with pytest.raises(nr.DTypeError):
        ntorch.set_float32_matmul_precision("fast")


def test_compile_autocast_and_default_dtype():
    m = ntorch.nn.Linear(2, 2)
    assert ntorch.compile(m) is m and ntorch.compile(mode="max-autotune")(m) is m
    with ntorch.autocast("cpu", enabled=False):
        assert not nr.is_autocast_enabled("cpu")
    with ntorch.autocast("cpu", dtype=ntorch.float16):      # numr_web.autocast's region
        assert nr.is_autocast_enabled("cpu")
        assert (ntorch.ones(2, 3) @ ntorch.ones(3, 2)).dtype is nr.float16
    assert ntorch.amp.GradScaler is nr.amp.GradScaler
    ntorch.set_default_dtype(ntorch.float32)
    assert ntorch.get_default_dtype() is nr.float32
    with pytest.raises(nr.UnsupportedError):
        ntorch.set_default_dtype(ntorch.float64)


# -- t.data ----------------------------------------------------------------------------------------
def test_in_place_writes_through_data_reach_the_tensor(device):
    """torch code updates parameters with p.data.add_(g, alpha=-lr), p.data.uniform_(), ...:
    .data shares the tensor's storage there, so the write must reach the tensor here too."""
    p = ntorch.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    tp = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    for q in (p, tp):
        (q * q).sum().backward()
        q.data.add_(q.grad, alpha=-0.25)
        q.data.mul_(2.0)
        q.data[0] = 9.0
    assert p.tolist() == tp.tolist() and p.requires_grad and p.is_leaf
    p.data.uniform_(-0.1, 0.1)
    assert all(-0.1 <= v < 0.1 for v in p.tolist())
    d = p.data
    assert d.grad_fn is None and not d.requires_grad and d is not p


# -- torch.nn / torch.nn.functional semantics ------------------------------------------------------
def test_multihead_attention_has_torchs_defaults(device):
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(8, 2)
    m = ntorch.nn.MultiheadAttention(8, 2).to(device)
    assert m.batch_first is tm.batch_first is False
    m.load_state_dict({k: ntorch.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((5, 3, 8)).astype(np.float32)   # (L, N, E)
    kpm = np.zeros((3, 5), bool)
    kpm[1, 3:] = True
    out, w = m(*[ntorch.tensor(x, device=device)] * 3,
               key_padding_mask=ntorch.tensor(kpm, device=device))
    tout, tw = tm(*[torch.tensor(x)] * 3, key_padding_mask=torch.tensor(kpm))
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(nr.UnsupportedError):
        ntorch.nn.MultiheadAttention(8, 2, kdim=4)


def test_functional_one_hot_infers_classes_and_gives_long(device):
    labels = [[0, 3], [2, 1]]
    x, tx = ntorch.tensor(labels, device=device), torch.tensor(labels)
    y, ty = ntorch.nn.functional.one_hot(x), torch.nn.functional.one_hot(tx)
    assert y.dtype == ntorch.long and y.tolist() == ty.tolist()
    assert ntorch.nn.functional.one_hot(x, 6).tolist() == \
        torch.nn.functional.one_hot(tx, 6).tolist()


def test_functional_forms_match_torch(device):
    F, TF = ntorch.nn.functional, torch.nn.functional
    data = [[-1.5, 0.25, 2.0], [0.5, -0.75, 3.0]]
    x, tx = ntorch.tensor(data, device=device), torch.tensor(data)
    for name, args, kw in (("normalize", (), {}), ("normalize", (1.0, 0), {}),
                           ("logsigmoid", (), {}), ("softmin", (1,), {}), ("glu", (0,), {}),
                           ("gelu", (), {"approximate": "tanh"}), ("relu6", (), {}),
                           ("hardtanh", (-0.5, 0.5), {}), ("leaky_relu", (0.2,), {}),
                           ("elu", (0.5,), {})):
        np.testing.assert_allclose(getattr(F, name)(x, *args, **kw).numpy(),
                                   getattr(TF, name)(tx, *args, **kw).numpy(), rtol=1e-6,
                                   atol=1e-7, err_msg=name)
    for name in ("relu", "silu", "elu", "leaky_relu", "hardtanh"):
        y, ty = ntorch.tensor(data, device=device), torch.tensor(data)
        out, tout = getattr(F, name)(y, inplace=True), getattr(TF, name)(ty, inplace=True)
        assert out is y and tout is ty                      # the input object, written
        np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-6, err_msg=name)
    w = ntorch.randn(5, 3, device=device)
    assert F.embedding(ntorch.tensor([4, 0], device=device), w).shape == (2, 3)
    with pytest.raises(nr.UnsupportedError, match="max_norm"):
        F.embedding(ntorch.tensor([1], device=device), w, max_norm=1.0)
    assert F.dropout(x, 0.5, training=False) is x and F.dropout(x, 0.0) is x   # as torch's


def test_torch_code_runs_without_numpy_on_webgpu():
    """What a browser tab does (Pyodide has no numpy, its only device is webgpu): install the
    alias, then ordinary torch code: a DataLoader, an LSTM model, AdamW, a scheduler,
    torch.save / torch.load of a checkpoint."""
    r = _python("""
        import io, sys
        class BlockNumpy:
            def find_spec(self, name, path=None, target=None):
                if name == "numpy" or name.startswith("numpy."):
                    raise ImportError("numpy is blocked for this test")
        sys.meta_path.insert(0, BlockNumpy())
        import os
        os.environ["NUMR_DEVICE"] = "webgpu"
        import numr_web
        numr_web.install_as_torch()
        import torch, torch.nn as nn, torch.nn.functional as F
        from torch.utils.data import DataLoader, TensorDataset
        torch.manual_seed(0)
        x = torch.randint(0, 10, (32, 6), dtype=torch.long)
        y = (x.sum(1) % 2).long()
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb, self.rnn, self.out = nn.Embedding(10, 8), nn.GRU(8, 16), nn.Linear(16, 2)
            def forward(self, ids):
                h, _ = self.rnn(self.emb(ids).transpose(0, 1))
                return self.out(h[-1])
        model = Model()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        sched = torch.optim.lr_scheduler.StepLR(opt, 2)
        losses = []
        for xb, yb in DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True):
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad(); loss.backward(); opt.step(); sched.step()
            losses.append(loss.item())
        buf = io.BytesIO()
        torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
        buf.seek(0)
        ck = torch.load(buf)
        model.load_state_dict(ck["model"])
        assert "numpy" not in sys.modules and x.device.type == "webgpu"
        print(len(losses), all(l == l for l in losses))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["4", "True"]


def test_the_rest_of_readmes_unsupported_table():
    for name in ("linalg", "func", "vmap", "sparse", "fx", "export", "hub", "profiler",
                 "distributed", "quantization", "complex64", "FloatTensor"):
        assert not hasattr(ntorch, name), name
    with pytest.raises(nr.UnsupportedError):
        ntorch.onnx.export(ntorch.nn.Linear(2, 2), ntorch.ones(1, 2), "m.onnx")
    with pytest.raises(TypeError, match="out"):
        ntorch.add(ntorch.ones(2), ntorch.ones(2), out=ntorch.zeros(2))
    with pytest.raises(nr.UnsupportedError, match="max_norm"):
        ntorch.nn.Embedding(3, 2, max_norm=1.0)
    with pytest.raises(nr.UnsupportedError, match="compose"):
        class Square(ntorch.autograd.Function):          # noqa: F841
            @staticmethod
            def forward(ctx, x):
                return x * x
    with pytest.raises(nr.UnsupportedError, match="pad the sequences"):
        ntorch.nn.utils.rnn.pack_padded_sequence(ntorch.ones(3, 2, 1), [3, 2])
    with pytest.raises(nr.UnsupportedError):
        ntorch.nn.LSTM(2, 4, proj_size=2)
    with pytest.raises(nr.UnsupportedError):
        ntorch.nn.MultiheadAttention(4, 2, add_bias_kv=True)
    with pytest.raises(nr.UnsupportedError):
        ntorch.nn.functional.embedding(ntorch.tensor([0]), ntorch.ones(2, 2),
                                       scale_grad_by_freq=True)
    seqs = [ntorch.ones(3, 2), ntorch.zeros(1, 2)]
    tseqs = [torch.ones(3, 2), torch.zeros(1, 2)]
    for kw in (dict(), dict(batch_first=True, padding_value=-1.0)):
        assert ntorch.nn.utils.rnn.pad_sequence(seqs, **kw).tolist() == \
            torch.nn.utils.rnn.pad_sequence(tseqs, **kw).tolist()


def test_autograd_namespace_matches_torch():
    x = ntorch.tensor([1.0, 2.0], requires_grad=True)
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    g, = ntorch.autograd.grad((x ** 3).sum(), [x], create_graph=True)
    tg, = torch.autograd.grad((tx ** 3).sum(), [tx], create_graph=True)
    assert g.tolist() == tg.tolist()
    ntorch.autograd.backward([g.sum()])
    torch.autograd.backward([tg.sum()])
    assert x.grad.tolist() == tx.grad.tolist()
    with ntorch.autograd.no_grad():
        assert not (x * 2).requires_grad


def test_module_half_and_cuda():
    m, tm = ntorch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    assert m.half() is m and m.weight.dtype == ntorch.half and tm.half().weight.dtype == torch.half
    if nr.backends.probe("cuda")[0]:
        assert m.cuda().weight.device.type == "cuda"
    else:
        with pytest.raises(nr.BackendUnavailableError):
            m.cuda()


def test_where_and_embedding_take_torchs_arguments(device):
    data = [[1.0, -2.0], [3.0, 0.0]]
    x, tx = ntorch.tensor(data, device=device), torch.tensor(data)
    assert [t.tolist() for t in ntorch.where(x > 0)] == [t.tolist() for t in torch.where(tx > 0)]
    assert ntorch.where(x > 0, x, 0.0).tolist() == torch.where(tx > 0, tx, 0.0).tolist()
    w, tw = ntorch.eye(3, device=device), torch.eye(3)
    assert ntorch.embedding(w, ntorch.tensor([2, 0], device=device)).tolist() == \
        torch.embedding(tw, torch.tensor([2, 0])).tolist()
