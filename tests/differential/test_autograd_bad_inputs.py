"""Autograd semantics against torch, and a catalogue of bad calls, each expecting one NumrError
subclass, run on every device."""
import math

import numpy as np
import pytest
import torch

import numr_web as nr


def test_accumulation_retain_graph_create_graph(device):
    x = nr.tensor([1.5, -2.0], device=device, requires_grad=True)
    tx = torch.tensor([1.5, -2.0], requires_grad=True)
    y, ty = (x ** 3).sum(), (tx ** 3).sum()
    y.backward(retain_graph=True)
    ty.backward(retain_graph=True)
    y.backward()
    ty.backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)   # accumulated twice
    (g,) = nr.grad((x ** 3).sum(), [x], create_graph=True)
    g.sum().backward()
    (tg,) = torch.autograd.grad((tx ** 3).sum(), [tx], create_graph=True)
    tx.grad = None
    tg.sum().backward()
    np.testing.assert_allclose(x.grad.numpy() - 2 * 3 * np.array([1.5, -2.0]) ** 2,
                               tx.grad.numpy(), rtol=1e-6)


def test_grads_are_fresh_writable_buffers(device):
    a = nr.tensor([1.0, 2.0], device=device, requires_grad=True)
    b = nr.tensor([3.0, 4.0], device=device, requires_grad=True)
    g = nr.tensor([1.0, 1.0], device=device)
    (a + b).backward(g)
    ga = a.grad.numpy()
    ga[0] = 9
    assert b.grad.tolist() == [1.0, 1.0] and g.tolist() == [1.0, 1.0]


def test_non_leaf_and_hooks(device):
    x = nr.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = x * 2
    assert not y.is_leaf and y.grad is None
    seen = []
    h = x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    y.sum().backward()
    assert seen == [[2.0, 2.0]] and y.grad is None
    h.remove()
    (x * 1).sum().backward()
    assert len(seen) == 1 and x.grad.tolist() == [3.0, 3.0]
    with pytest.raises(nr.GradientError):
        y.requires_grad = False


def test_backward_gradient_of_another_dtype_is_cast(device):
    x = nr.tensor([1.0, 2.0], device=device, requires_grad=True)
    (x * 2).backward(nr.tensor([1, 1], dtype="int32", device=device))
    assert x.grad.dtype is nr.float32 and x.grad.tolist() == [2.0, 2.0]


def test_pow_gradient_at_zero(device):
    x = nr.tensor([0.0, 2.0], device=device, requires_grad=True)
    (x ** 0).sum().backward()
    tx = torch.tensor([0.0, 2.0], requires_grad=True)
    (tx ** 0).sum().backward()
    assert x.grad.tolist() == tx.grad.tolist()


def _T(device):
    return lambda *a, **k: nr.tensor(*a, device=device, **k)


def catalogue(d):
    T = _T(d)
    x = lambda: nr.ones((2, 3), device=d)              # noqa: E731
    v = lambda: nr.ones(3, device=d)                   # noqa: E731
    S, D, G, L = nr.ShapeError, nr.DTypeError, nr.GradientError, nr.BackendLimitError
    rows = [
        ("nan_to_int", lambda: T([math.nan], dtype="int32"), D),
        ("inf_to_int", lambda: T(math.inf, dtype="int32"), D),
        ("np_nan_to_int", lambda: T(np.array([np.nan]), dtype="int32"), D),
        ("big_int", lambda: T([2 ** 40]), D),
        ("np_big_int", lambda: T(np.array([2 ** 40])), D),
        ("str_data", lambda: T(["a"]), D),
        ("none_data", lambda: T(None), D),
        ("ragged", lambda: T([[1, 2], [3]]), S),
        ("dict_data", lambda: T({"a": 1}), D),
        ("unknown_dtype", lambda: T([1.0], dtype="float128"), D),
        ("complex_np", lambda: T(np.array([1j])), D),
        ("full_none", lambda: nr.full((2,), None, device=d), D),
        ("full_str", lambda: nr.full((2,), "a", device=d), D),
        ("full_nan_int", lambda: nr.full((2,), math.nan, dtype="int32", device=d), D),
        ("full_big_int", lambda: nr.full((2,), 2 ** 40, dtype="int32", device=d), D),
        ("zeros_neg", lambda: nr.zeros((2, -1), device=d), S),
        ("zeros_float", lambda: nr.zeros((2.5,), device=d), S),
        ("zeros_huge", lambda: nr.zeros(2 ** 41, device=d), L),
        ("zeros_2_62", lambda: nr.zeros(2 ** 62, device=d), L),
        ("zeros_product_huge", lambda: nr.zeros((2 ** 31, 2 ** 31), device=d), L),
        ("ones_bool_shape", lambda: nr.ones((True,), device=d), S),
        ("arange_nan", lambda: nr.arange(math.nan, device=d), nr.NumrError),
        ("arange_inf", lambda: nr.arange(0, math.inf, device=d), nr.NumrError),
        ("arange_step0", lambda: nr.arange(0, 5, 0, device=d), nr.NumrError),
        ("arange_str", lambda: nr.arange("a", device=d), D),
        ("arange_huge", lambda: nr.arange(0, 2 ** 45, device=d), nr.NumrError),
        ("arange_beyond_int32", lambda: nr.arange(0, 2 ** 40, 2 ** 35, device=d), D),
        ("rand_int", lambda: nr.rand((2,), dtype="int32", device=d), D),
        ("rand_seed", lambda: nr.rand((2,), seed=-1, device=d), nr.NumrError),
        ("broadcast", lambda: x() + nr.ones((2, 4), device=d), S),
        ("add_str", lambda: x() + "a", D),
        ("add_none", lambda: x() + None, D),
        ("add_int_overflow", lambda: T([1]) + 2 ** 40, D),
        ("bool_sub", lambda: T([True]) - T([False]), D),
        ("bool_sub_scalar", lambda: T([True]) - True, D),
        ("bool_neg", lambda: -T([True]), D),
        ("int_neg_pow", lambda: T([2]) ** -1, D),
        ("bool_pow_bool", lambda: T([True]) ** T([True]), D),
        ("bitwise_float", lambda: T([1.0]) & T([1.0]), D),
        ("invert_float", lambda: ~T([1.0]), D),
        ("sum_axis_float", lambda: x().sum(1.5), S),
        ("sum_axis_oob", lambda: x().sum(2), S),
        ("sum_axis_str", lambda: x().sum("a"), S),
        ("sum_axis_repeat", lambda: x().sum((1, 1)), S),
        ("sum_dim_and_axis", lambda: x().sum(dim=0, axis=0), S),
        ("mean_int", lambda: T([1, 2]).mean(), D),
        ("max_empty", lambda: nr.zeros((0,), device=d).max(), S),
        ("max_empty_dim", lambda: nr.zeros((2, 0), device=d).max(1), S),
        ("argmax_empty_dim", lambda: nr.zeros((0, 3), device=d).argmax(0), S),
        ("argmax_empty", lambda: nr.zeros((0,), device=d).argmax(), S),
        ("argmax_float_dim", lambda: x().argmax(0.5), S),
        ("softmax_dim_oob", lambda: nr.softmax(x(), 2), S),
        ("reshape_bad", lambda: x().reshape(4, 2), S),
        ("reshape_two_neg", lambda: x().reshape(-1, -1), S),
        ("reshape_float", lambda: x().reshape(2.0, 3), S),
        ("reshape_neg2", lambda: x().reshape(-2, -3), S),
        ("expand_neg2", lambda: v().expand(-2, 3), S),
        ("expand_float", lambda: v().expand(2.5, 3), S),
        ("expand_bad", lambda: x().expand(4, 3), S),
        ("expand_fewer", lambda: x().expand(3), S),
        ("transpose_oob", lambda: v().transpose(0, 7), S),
        ("transpose_float", lambda: x().transpose(0.0, 1), S),
        ("permute_dup", lambda: x().permute(0, 0), S),
        ("permute_short", lambda: x().permute(0), S),
        ("squeeze_oob", lambda: x().squeeze(5), S),
        ("unsqueeze_oob", lambda: x().unsqueeze(5), S),
        ("index_oob", lambda: x()[5], S),
        ("index_neg_oob", lambda: x()[-3], S),
        ("index_too_many", lambda: x()[0, 0, 0], S),
        ("index_step0", lambda: x()[::0], S),
        ("index_neg_step", lambda: x()[::-1], S),
        ("index_float", lambda: x()[0.5], S),
        ("index_str", lambda: x()["a"], S),
        ("index_two_ellipsis", lambda: x()[..., ...], S),
        ("index_float_tensor", lambda: x()[T([0.5])], D),
        ("matmul_inner", lambda: x() @ x(), S),
        ("matmul_0d", lambda: T(1.0) @ x(), S),
        ("fused_inner", lambda: nr.matmul_bias_activation(x(), x()), S),
        ("fused_bias", lambda: nr.matmul_bias_activation(x(), nr.ones((3, 4), device=d),
                                                         nr.ones(5, device=d)), S),
        ("fused_act", lambda: nr.matmul_bias_activation(x(), nr.ones((3, 4), device=d), None,
                                                        "swish2"), nr.NumrError),
        ("fused_act_type", lambda: nr.matmul_bias_activation(x(), nr.ones((3, 4), device=d),
                                                             None, 3), nr.NumrError),
        ("fused_int", lambda: nr.matmul_bias_activation(T([[1]]), T([[1]])), D),
        ("fused_1d", lambda: nr.matmul_bias_activation(v(), v()), S),
        ("activation_unknown", lambda: nr.activation(v(), "nope"), nr.NumrError),
        ("one_hot_oor", lambda: nr.one_hot(T([0, 5]), 3), S),
        ("one_hot_neg", lambda: nr.one_hot(T([0, -1]), 3), S),
        ("one_hot_float", lambda: nr.one_hot(T([0.0, 1.0]), 3), D),
        ("one_hot_huge", lambda: nr.one_hot(T([0, 1]), 2 ** 40), L),
        ("one_hot_depth0", lambda: nr.one_hot(T([0]), 0), S),
        ("ce_labels_oor", lambda: nr.cross_entropy(x(), T([0, 3])), S),
        ("ce_labels_neg", lambda: nr.cross_entropy(x(), T([0, -2])), S),
        ("ce_labels_shape", lambda: nr.cross_entropy(x(), T([0])), S),
        ("ce_reduction", lambda: nr.cross_entropy(x(), T([0, 1]), reduction="avg"),
         nr.NumrError),
        ("ce_smoothing", lambda: nr.cross_entropy(x(), T([0, 1]), label_smoothing=2.0),
         nr.NumrError),
        ("concat_shapes", lambda: nr.concat([x(), nr.ones((3, 4), device=d)], axis=0), S),
        ("concat_empty", lambda: nr.concat([]), nr.NumrError),
        ("stack_shapes", lambda: nr.stack([x(), v()]), S),
        ("where_shape", lambda: nr.where(T([True, False]), x(), x()), S),
        ("clamp_str", lambda: nr.clamp(v(), "a", 1), D),
        ("split_zero", lambda: nr.split(v(), 0), nr.NumrError),
        ("narrow_oob", lambda: nr.narrow(v(), 0, 2, 5), S),
        ("gather_float_idx", lambda: nr.gather(x(), 1, T([[0.5]])), D),
        ("item_many", lambda: v().item(), S),
        ("bool_many", lambda: bool(v()), S),
        ("len_0d", lambda: len(T(1.0)), S),
        ("index_float_tensor_op", lambda: [1, 2][T(1.0)], D),
        ("backward_nonscalar", lambda: (nr.ones(3, device=d, requires_grad=True) * 2).backward(),
         G),
        ("backward_shape", lambda: (nr.ones(3, device=d, requires_grad=True) * 2).backward(
            nr.ones(2, device=d)), G),
        ("backward_no_graph", lambda: v().backward(), G),
        ("int_requires_grad", lambda: T([1], requires_grad=True), G),
        ("requires_grad_str", lambda: setattr(v(), "requires_grad", "yes"), G),
        ("nonleaf_requires_grad", lambda: setattr(nr.ones(2, device=d, requires_grad=True) * 2,
                                                  "requires_grad", False), G),
        ("grad_wrong_shape", lambda: setattr(nr.ones(2, device=d, requires_grad=True), "grad",
                                             nr.ones(3, device=d)), G),
        ("grad_not_tensor", lambda: setattr(nr.ones(2, device=d, requires_grad=True), "grad",
                                            [1.0, 2.0]), G),
        ("hook_not_callable", lambda: nr.ones(2, device=d, requires_grad=True)
         .register_post_accumulate_grad_hook(3), nr.NumrError),
        ("hook_nonleaf", lambda: (nr.ones(2, device=d, requires_grad=True) * 2)
         .register_post_accumulate_grad_hook(print), G),
        ("unknown_device", lambda: nr.zeros(2, device="tpu"), nr.DeviceError),
        ("to_unknown", lambda: v().to("tpu"), nr.DeviceError),
        ("astype_unknown", lambda: v().astype("complex64"), D),
        ("tensor_ctor", lambda: nr.Tensor(), nr.NumrError),
        ("layer_norm_shape", lambda: nr.layer_norm(x(), (4,)), S),
        ("dropout_p", lambda: nr.dropout(x(), 1.5), nr.NumrError),
        ("embedding_float", lambda: nr.embedding(T([0.5]), x()), D),
        ("tril_1d", lambda: nr.tril(v()), S),
        ("flip_oob", lambda: nr.flip(x(), (3,)), S),
        ("chunk_zero", lambda: nr.chunk(v(), 0), nr.NumrError),
        ("index_select_float", lambda: nr.index_select(x(), 0, T([0.0])), D),
        ("masked_fill_float_mask", lambda: nr.masked_fill(v(), T([1.0, 0.0, 1.0]), 0.0), D),
        ("std_int", lambda: T([1, 2]).std(), D),
        ("sum_of_list", lambda: nr.sum([1, 2]), D),
        ("sigmoid_of_np_int", lambda: nr.sigmoid(np.int64(1)), D),
        ("softmax_of_none", lambda: nr.softmax(None, 0), D),
        ("concat_of_none", lambda: nr.concat(None), D),
        ("stack_of_ints", lambda: nr.stack((1, 2)), D),
        ("reshape_of_list", lambda: nr.reshape([1, 2], 2), D),
        ("split_0d", lambda: nr.split(T(1.0), 1), S),
        ("chunk_0d", lambda: nr.chunk(T(1.0), 2), S),
        ("gather_0d", lambda: nr.gather(T(1.0), 0, T([0])), S),
        ("index_select_0d", lambda: nr.index_select(T(1.0), 0, T([0])), S),
        ("dropout_p_str", lambda: nr.dropout(x(), "a"), D),
        ("dropout_p_none", lambda: nr.dropout(x(), None), D),
        ("embedding_weight_none", lambda: nr.embedding(T([0]), None), D),
        ("expand_beyond_any_device", lambda: T(1.0).expand(2 ** 40, 2 ** 40), L),
        ("sum_np_float_axis", lambda: x().sum(np.float64(1.0)), S),
        ("reshape_np_float", lambda: x().reshape(np.float32(6)), S),
    ]
    if d == "webgpu":
        rows.append(("float64_on_webgpu", lambda: T([1.0], dtype="float64"), D))
    else:
        rows.append(("float16_big_ok_not_error", None, None))
    return rows


def _ids():
    return [r[0] for r in catalogue("cpu")]


@pytest.mark.parametrize("row", range(len(catalogue("cpu"))), ids=_ids())
def test_bad_input_catalogue(device, row):
    rows = catalogue(device)
    name, make, etype = rows[row] if row < len(rows) else (None, None, None)
    if make is None:
        return
    with pytest.raises(etype) as info:
        out = make()
        if isinstance(out, nr.Tensor):   # webgpu checks label ranges on the device: at the read
            out.tolist()
    assert isinstance(info.value, nr.NumrError), (name, type(info.value))
    assert len(str(info.value)) > 15, (name, str(info.value))


def test_numpy_integer_dims_accepted(device):
    x = nr.ones((2, 3), device=device)
    assert x.sum(np.int64(1)).shape == (2,)
    assert x.reshape(np.int64(6)).shape == (6,)
    assert x.transpose(np.int32(0), np.int64(1)).shape == (3, 2)
    assert nr.zeros((np.int64(2), np.int32(3)), device=device).shape == (2, 3)
    assert x.argmax(dim=np.int64(1)).tolist() == [0, 0]
    assert nr.zeros((0, 3), device=device).argmax(1).shape == (0,)


def test_float16_overflow_rounds_to_inf(device):
    assert nr.tensor([70000.0, -1e6], dtype="float16", device=device).tolist() == \
        [math.inf, -math.inf]


def test_softmax_of_0d_and_empty(device):
    assert nr.softmax(nr.tensor(1.5, device=device), 0).item() == 1.0
    assert nr.softmax(nr.zeros((0, 3), device=device), -1).shape == (0, 3)
    assert nr.softmax(nr.zeros((3, 0), device=device), -1).shape == (3, 0)


def _all_subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


def test_every_error_class_lives_in_errors_with_an_example_message():
    import numr_web.nn  # noqa: F401  (defines nothing of its own: StateDictError is in errors)
    classes = set(_all_subclasses(nr.NumrError)) | {nr.NumrError}
    for cls in classes:
        assert cls.__module__ == "numr_web.errors", cls
        doc = cls.__doc__ or ""
        assert cls is nr.NumrError or f"{cls.__name__}: " in doc, (cls, "no example message")
        assert cls.__name__ in nr.errors.__doc__, (cls, "missing from the module's tree")
