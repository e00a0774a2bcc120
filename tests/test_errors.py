"""Bad input: a typed NumrError whose message names the problem and what is expected."""
import pytest

import numr_web as nr


def T(*a, **k):
    return nr.tensor(*a, **k)


BAD = [
    ("broadcast", lambda: T([[1.0, 2, 3]]) + T([[1.0, 2]]), nr.ShapeError, "cannot be broadcast"),
    ("inner_dim", lambda: T([[1.0, 2]]) @ T([[1.0, 2]]), nr.ShapeError, "inner dimensions"),
    # 1-D operands: the message names the shapes given, not the promoted (1, K) / (K, 1)
    ("inner_dim_1d", lambda: nr.ones(3) @ nr.ones(4), nr.ShapeError,
     r"a has shape \(3,\) \(K=3\) but b has shape \(4,\) \(K=4\); a's last dimension must equal "
     r"b's first \(b is 1-D\)$"),
    ("inner_dim_1d_a", lambda: nr.ones(3) @ nr.ones((4, 5)), nr.ShapeError,
     r"a has shape \(3,\) \(K=3\) but b has shape \(4, 5\) \(K=4\)"),
    ("inner_dim_1d_b", lambda: nr.ones((2, 3)) @ nr.ones(4), nr.ShapeError,
     r"a has shape \(2, 3\) \(K=3\) but b has shape \(4,\) \(K=4\)"),
    ("fused_inner", lambda: nr.matmul_bias_activation(nr.ones((2, 3)), nr.ones((4, 5)), nr.ones(5)),
     nr.ShapeError, "inner dimensions"),
    ("bias_shape", lambda: nr.matmul_bias_activation(nr.ones((2, 3)), nr.ones((3, 5)), nr.ones(4)),
     nr.ShapeError, r"bias must have shape \(5,\)"),
    ("bias_rank", lambda: nr.matmul_bias_activation(nr.ones((2, 3)), nr.ones((3, 5)), nr.ones((1, 5))),
     nr.ShapeError, "bias must have shape"),
    ("unknown_act", lambda: nr.matmul_bias_activation(nr.ones((2, 3)), nr.ones((3, 5)), None, "swish2"),
     nr.NumrError, "unknown activation 'swish2'"),
    ("mixed_dtypes_fused", lambda: nr.matmul_bias_activation(nr.ones((2, 3)), nr.ones((3, 5), dtype="float64")),
     nr.DTypeError, "one dtype"),
    ("int_fused", lambda: nr.matmul_bias_activation(nr.ones((2, 3), dtype="int32"), nr.ones((3, 5), dtype="int32")),
     nr.DTypeError, "floating-point"),
    ("unknown_dtype", lambda: nr.zeros(3, dtype="float128"), nr.DTypeError, "unknown dtype"),
    ("unknown_device", lambda: nr.zeros(3, device="tpu"), nr.DeviceError, "unknown device 'tpu'"),
    ("ragged", lambda: T([[1.0, 2.0], [3.0]]), nr.ShapeError, "ragged"),
    ("non_numeric", lambda: T([1.0, "a"]), nr.DTypeError, "non-numeric"),
    ("bad_axis", lambda: nr.ones((2, 3)).sum(axis=2), nr.ShapeError, "out of range"),
    ("repeated_axis", lambda: nr.ones((2, 3)).sum(axis=(1, -1)), nr.ShapeError, "repeated axis"),
    ("backward_nonscalar", lambda: (nr.ones(3, requires_grad=True) * 2).backward(), nr.GradientError,
     "non-scalar"),
    ("grad_shape", lambda: (nr.ones(3, requires_grad=True) * 2).backward(nr.ones(2)), nr.GradientError,
     "gradient has shape"),
    ("int_requires_grad", lambda: nr.tensor([1, 2], requires_grad=True), nr.GradientError,
     "floating-point"),
    ("backward_no_graph", lambda: nr.ones(1).backward(), nr.GradientError, "does not require grad"),
    ("reshape", lambda: nr.ones((2, 3)).reshape(4, 2), nr.ShapeError, "cannot reshape"),
    ("bad_permute", lambda: nr.ones((2, 3)).permute(0, 0), nr.ShapeError, "not a permutation"),
    ("bad_expand", lambda: nr.ones((2, 3)).expand(4, 3), nr.ShapeError, "cannot expand"),
    ("index_oob", lambda: nr.ones((2, 3))[5], nr.ShapeError, "out of bounds"),
    ("index_tensors_not_broadcastable", lambda: nr.ones((2, 3))[[0, 1], [1, 2, 0]],
     nr.ShapeError, "broadcast"),
    ("float_index", lambda: nr.ones((2, 3))[nr.tensor([0.5])], nr.DTypeError, "int32 or bool"),
    ("labels_range", lambda: nr.cross_entropy(nr.ones((2, 3)), [0, 3]), nr.ShapeError, r"\[0, 3\)"),
    ("labels_shape", lambda: nr.cross_entropy(nr.ones((2, 3)), [0]), nr.ShapeError, "target must have shape"),
    ("labels_dtype", lambda: nr.cross_entropy(nr.ones((2, 3)), nr.tensor([0.0, 1.0])), nr.ShapeError,
     "probability targets must have the logits' shape"),
    ("concat_shapes", lambda: nr.concat([nr.ones((2, 3)), nr.ones((3, 3))], axis=1), nr.ShapeError,
     "differ outside dim"),
    ("bad_shape_arg", lambda: nr.zeros((2, -1)), nr.ShapeError, "non-negative"),
    ("gelu_mode", lambda: nr.gelu(nr.ones(2), approximate="fast"), nr.NumrError, "approximate"),
    ("operand_type", lambda: nr.ones(2) + "x", nr.DTypeError, "unsupported operand"),
]


@pytest.mark.parametrize("make,etype,msg", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input(make, etype, msg):
    with pytest.raises(etype, match=msg):
        make()


def test_errors_are_typed_subclasses():
    assert issubclass(nr.ShapeError, ValueError) and issubclass(nr.ShapeError, nr.NumrError)
    assert issubclass(nr.DTypeError, TypeError) and issubclass(nr.DTypeError, nr.NumrError)
    for e in (nr.DeviceError, nr.BackendUnavailableError, nr.BackendLimitError, nr.GradientError):
        assert issubclass(e, nr.NumrError)


def test_torch_style_except_clauses_catch_the_typed_errors():
    """torch raises RuntimeError for autograd misuse and state_dict mismatches: so do these."""
    import torch
    for make_nr, make_torch in (
            (lambda: nr.ones(3, requires_grad=True).sum().backward() or
             nr.ones(3, requires_grad=True).exp().sum().backward(nr.ones(3)),
             lambda: torch.ones(3, requires_grad=True).exp().sum().backward(torch.ones(3))),
            (lambda: nr.nn.Linear(2, 3).load_state_dict({"weight": nr.zeros((3, 2))}),
             lambda: torch.nn.Linear(2, 3).load_state_dict({"weight": torch.zeros((3, 2))}))):
        with pytest.raises(RuntimeError):
            make_torch()
        with pytest.raises(RuntimeError):
            make_nr()


def test_devices_cannot_be_mixed():
    other = next(d for d in nr.available_devices() if d != "cpu")   # webgpu (lavapipe) in CI
    with pytest.raises(nr.DeviceError, match="different devices"):
        nr.ones(2) + nr.ones(2, device=other)
    with pytest.raises(nr.DeviceError, match="different devices"):
        nr.matmul_bias_activation(nr.ones((2, 2)), nr.ones((2, 2), device=other))
    with pytest.raises(nr.DTypeError, match="float64"):
        nr.zeros(2, dtype="float64", device="webgpu")


def test_more_bad_input():
    import array
    with pytest.raises(nr.DTypeError, match="int32"):
        nr.tensor(array.array("q", [2 ** 40]))
    with pytest.raises(nr.DTypeError, match="bool"):
        -nr.tensor([True, False])
    with pytest.raises(nr.ShapeError, match="new leading"):
        nr.tensor([1.0, 5.0]).expand(-1, 2)
    p = nr.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(nr.GradientError, match="must match"):
        p.grad = nr.tensor([1.0, 1.0], dtype="float64")
    with pytest.raises(nr.GradientError, match="must match"):
        p.grad = nr.ones((2, 2))


def test_edge_inputs_behave_like_pytorch():
    import numpy as np
    t = nr.tensor(np.arange(6, dtype=np.float32).reshape(2, 3).T)     # a transposed buffer
    assert nr.tensor(memoryview(np.ascontiguousarray(t.numpy()).T)).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert nr.tensor(2.0).sum(axis=0).item() == 2.0 and nr.tensor(2.0).sum(axis=-1, keepdims=True).shape == ()
    assert nr.tensor(True).sum().dtype == nr.int32
    with pytest.raises(nr.DTypeError, match="floating"):     # torch: mean needs a float input
        nr.tensor(3).mean()
    x = nr.tensor([0.0, 2.0], requires_grad=True)
    e = nr.tensor([2.0, 2.0], requires_grad=True)
    (x ** e).sum().backward()
    assert e.grad.tolist()[0] == 0.0 and abs(e.grad.tolist()[1] - 4 * np.log(2)) < 1e-5


@pytest.mark.skipif("cuda" in nr.available_devices(), reason="this machine has CUDA")
def test_missing_cuda_says_why():
    with pytest.raises(nr.BackendUnavailableError, match="device 'cuda' is not available here"):
        nr.zeros(2, device="cuda")


@pytest.mark.parametrize("device,msg", [
    ("gpu", "ambiguous: say 'cuda'.*or 'webgpu'"), ("GPU:0", "ambiguous"),
    ("cpu:1", "one cpu device.*index 1 does not exist"),
    ("webgpu:1", "one webgpu device.*index 1 does not exist"),
    ("cpu:", "whole number"), ("cpu:-1", "whole number"), ("cpu:x", "whole number"),
])
def test_device_strings_that_name_no_device_here_are_refused(device, msg):
    """'gpu' could mean cuda or webgpu (an NVIDIA user means cuda): refused, naming both; an
    index that does not exist is refused rather than ignored; nothing reaches a device."""
    for make in (lambda: nr.zeros(2, device=device), lambda: nr.ones(2).to(device),
                 lambda: nr.nn.Linear(2, 3, device=device)):
        with pytest.raises(nr.DeviceError, match=msg):
            make()


def test_index_zero_is_the_device_as_in_torch():
    assert nr.zeros(2, device="cpu:0").device == "cpu"
    assert nr.ones(2).to("CPU:0").device == "cpu"
    if "webgpu" in nr.available_devices():
        assert nr.zeros(2, device="webgpu:0").device == "webgpu"


@pytest.mark.skipif("cuda" not in nr.available_devices(), reason="no CUDA GPU here")
def test_cuda_index_is_the_current_gpu():
    import cupy
    current = cupy.cuda.runtime.getDevice()
    assert nr.zeros(2, device=f"cuda:{current}").device == "cuda"
    other = cupy.cuda.runtime.getDeviceCount()      # an index no GPU has
    with pytest.raises(nr.DeviceError, match=f"current GPU, 'cuda:{current}'"):
        nr.zeros(2, device=f"cuda:{other}")


def test_linear_shape_error_names_the_module_and_the_shapes_given():
    """Not the fused op it runs (matmul_bias_activation) nor the transposed weight (4, 3)."""
    m = nr.nn.Linear(4, 3, activation="gelu")
    for x, got in ((nr.ones((2, 5)), "5"), (nr.ones(5), "5"), (nr.ones((2, 6, 7)), "7")):
        with pytest.raises(nr.ShapeError) as e:
            m(x)
        msg = str(e.value)
        assert msg.startswith("Linear(in_features=4, out_features=3, bias=True, "
                              "activation='gelu')"), msg
        assert f"input of shape {x.shape}" in msg and f"in_features = 4, got {got}" in msg, msg
        assert "matmul_bias_activation" not in msg and "(4, 3)" not in msg, msg
    with pytest.raises(nr.ShapeError, match=r"weight of shape \(3, 4\) \(out_features, in_feat"):
        nr.nn.functional.linear(nr.ones((2, 5)), nr.ones((3, 4)))
