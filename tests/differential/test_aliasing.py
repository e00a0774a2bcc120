"""Aliasing honesty: an op whose torch result has storage of its own returns a new tensor here too
(not its input object), so an in-place write to the result leaves the input as it was.

Each case runs on torch first: where torch's result shares no storage with the input, numr's
must not be the input, and `y.fill_(v)` must leave x unchanged. Ops that return a view in torch
(reshape to the same shape, expand, t() of a vector) or the input itself (contiguous, float() of
a float tensor, dropout with p = 0) are not held to this (README: views do not see writes here).
The inputs are the edge cases that tempt an early `return x`: 0-d tensors, size-1 and empty
dims, shifts that are multiples of the size, zero padding, n = 0."""
import numpy as np
import pytest
import torch

import numr_web as nr
import numr_web.nn.functional as NF
import torch.nn.functional as TF


def _ns(x):
    return (nr, NF) if isinstance(x, nr.Tensor) else (torch, TF)


CASES = {
    "roll by the size": lambda x: x.roll(x.shape[0] if x.ndim else 1, 0) if x.ndim else x.roll(1),
    "roll by 0": lambda x: x.roll(0),
    "roll dims=None": lambda x: x.roll(0),
    "roll two dims": lambda x: x.reshape(1, -1).roll((1, 0), (0, 1)),
    "flip": lambda x: x.flip(0),
    "diff n=0": lambda x: x.diff(n=0),
    "pad zeros": lambda x: _ns(x)[1].pad(x, (0, 0)),
    "pad zeros 2 dims": lambda x: _ns(x)[1].pad(x.reshape(1, -1), (0, 0, 0, 0)),
    "sum": lambda x: x.sum(),
    "sum dim 0": lambda x: x.sum(0),
    "mean": lambda x: x.float().mean(),
    "prod": lambda x: x.prod(),
    "amax": lambda x: x.amax(),
    "amin": lambda x: x.amin(),
    "max": lambda x: x.max(),
    "min": lambda x: x.min(),
    "logsumexp": lambda x: x.float().logsumexp(0),
    "cumsum": lambda x: x.cumsum(0),
    "cumprod": lambda x: x.cumprod(0),
    "tile ones": lambda x: x.tile((1,)),
    "repeat ones": lambda x: x.repeat(*([1] * max(x.ndim, 1))),
    "repeat_interleave 1": lambda x: x.repeat_interleave(1),
    "cat of one": lambda x: _ns(x)[0].cat([x.reshape(-1)]),
    "stack of one": lambda x: _ns(x)[0].stack([x]),
    "clone": lambda x: x.clone(),
    "sort": lambda x: x.sort()[0],
    "topk all": lambda x: x.reshape(-1).topk(x.numel())[0],
    "where": lambda x: _ns(x)[0].where(x == x, x, x),
    "masked_fill nothing": lambda x: x.masked_fill(x != x, 0),
    "clamp no-op": lambda x: x.float().clamp(min=-1e30),
    "index_select all": lambda x: x.reshape(-1).index_select(
        0, _ns(x)[0].arange(x.numel(), device=x.device)),
    "narrow + clone": lambda x: x.reshape(-1).narrow(0, 0, x.numel()).clone(),
    "tril": lambda x: x.reshape(1, -1).tril(5),
    "triu": lambda x: x.reshape(1, -1).triu(-5),
    "nan_to_num": lambda x: x.float().nan_to_num(),
    "trunc": lambda x: x.trunc(),
    "round": lambda x: x.round(),
    "abs": lambda x: x.abs(),
    "mul 1": lambda x: x * 1,
    "add 0": lambda x: x + 0,
    "softmax": lambda x: x.float().softmax(-1) if x.ndim else x.float().softmax(0),
    "relu": lambda x: x.relu(),
    "one_hot-free gather": lambda x: x.reshape(-1).gather(0, _ns(x)[0].arange(x.numel(), device=x.device)),
}


INPUTS = {"vector": [1.5, -2.0, 3.0], "0-d": 2.5, "one element": [4.0], "size-1 dim": [[1.0], [2.0]]}


def _torch_makes_new_storage(name, data):
    """Whether torch takes this input and returns a result with storage of its own."""
    tx = torch.tensor(data)
    try:
        ty = CASES[name](tx)
    except (RuntimeError, IndexError, ValueError, TypeError):
        return False
    return ty.untyped_storage().data_ptr() != tx.untyped_storage().data_ptr()


PAIRS = [pytest.param(name, data, id=f"{name}-{label}") for name in sorted(CASES)
         for label, data in INPUTS.items() if _torch_makes_new_storage(name, data)]


def test_every_case_is_held_to_it():
    """The table's ops make new storage in torch for most inputs (so the pairs test them)."""
    assert {p.values[0] for p in PAIRS} == set(CASES)


@pytest.mark.parametrize("name, data", PAIRS)
def test_result_is_a_new_tensor_where_torch_makes_one(device, name, data):
    f = CASES[name]
    ty = f(torch.tensor(data))
    x = nr.tensor(data, device=device)
    before = x.numpy().copy()
    y = f(x)
    assert y is not x, f"{name} returned its input object"
    np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-6)
    if y.numel():
        y.fill_(7)
        np.testing.assert_array_equal(x.numpy(), before)   # the input kept its values


def test_roll_in_generation_loop_keeps_callers_tensor(device):
    """The loop that found it: idx = roll(idx, 1, 1); idx[:, 0] = v at a time when the shift is
    a multiple of the width must not write into the caller's tensor."""
    start = [[1, 2, 3]]
    x, tx = nr.tensor(start, device=device), torch.tensor(start)
    for t in range(4):
        x2, tx2 = x.roll(3 * t, 1), tx.roll(3 * t, 1)
        x2[:, 0] = 9
        tx2[:, 0] = 9
        assert x.tolist() == tx.tolist() == start
        assert x2.tolist() == tx2.tolist()


def test_aliasing_keeps_gradients(device):
    """The copies are ops of the graph: gradients still flow through them."""
    x = nr.tensor(2.0, device=device, requires_grad=True)
    for f in (lambda v: v.sum(), lambda v: v.roll(0), lambda v: v.flip(0), lambda v: v.amax()):
        x.grad = None
        (f(x) * 3).backward()
        assert x.grad.item() == 3.0


def test_unary_plus_of_bool_is_refused_like_torch():
    with pytest.raises(RuntimeError):
        +torch.tensor([True])  # noqa: B018
    with pytest.raises(nr.DTypeError):
        +nr.tensor([True])  # noqa: B018
    x = nr.tensor([1.0])
    assert +x is x                      # torch's +x of a number tensor is x itself
