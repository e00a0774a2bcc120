"""Reductions against torch: sum/mean/max/min/argmax/argmin/softmax/logsumexp over random dims with
keepdim, on shapes with 0-size axes and 0-d tensors, and on views."""
import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import numr_web as nr

from _diff import HYPOTHESIS, dtypes_on


@st.composite
def case(draw, device):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    dtype = draw(st.sampled_from([d for d in dtypes_on(device) if d != "bool"]))
    if dtype == "int32":
        a = draw(hnp.arrays(np.int32, shape, elements=st.integers(-100, 100)))
    else:
        a = draw(hnp.arrays(np.dtype(dtype), shape, elements=st.floats(-100, 100, width=16 if
                                                                        dtype == "float16" else 32)))
    ndim = len(shape)
    dim = draw(st.none() | st.integers(-max(ndim, 1), max(ndim, 1) - 1)) if ndim else None
    keep = draw(st.booleans())
    op = draw(st.sampled_from(["sum", "mean", "max", "min", "argmax", "argmin", "softmax",
                               "logsumexp"]))
    return op, a, dim, keep


def _torch(op, t, dim, keep):
    if op in ("softmax",):
        return torch.softmax(t, dim if dim is not None else -1) if t.ndim else torch.softmax(t, 0)
    if op == "logsumexp":
        return torch.logsumexp(t, dim if dim is not None else tuple(range(t.ndim)), keepdim=keep)
    if dim is None:
        r = getattr(torch, op)(t)
        return r.reshape((1,) * t.ndim) if keep else r
    r = getattr(torch, op)(t, dim=dim, keepdim=keep)
    return r.values if op in ("max", "min") else r


def _nr(op, x, dim, keep):
    if op == "softmax":
        return nr.softmax(x, dim if dim is not None else -1)
    if op == "logsumexp":
        return nr.logsumexp(x, dim, keepdim=keep)
    r = getattr(x, op)(dim=dim, keepdim=keep)
    if op in ("max", "min") and dim is not None:      # torch's (values, indices) for dim=
        assert r._fields == ("values", "indices") and r.indices.dtype is nr.int32
        return r.values
    return r


def test_reductions_against_torch(device):
    @HYPOTHESIS
    @given(case(device))
    def run(c):
        op, a, dim, keep = c
        t = torch.from_numpy(a.copy())
        if op in ("softmax", "logsumexp") and a.dtype.kind != "f":
            return
        try:
            want = _torch(op, t, dim, keep)
        except (RuntimeError, IndexError):
            with pytest.raises(nr.NumrError):
                _nr(op, nr.tensor(a, device=device), dim, keep).tolist()
            return
        got = _nr(op, nr.tensor(a, device=device), dim, keep)
        assert got.shape == tuple(want.shape), (op, a.shape, dim, keep, got.shape, want.shape)
        w = want.numpy()
        if op in ("argmax", "argmin"):
            # ties: any index of an extreme value is right; compare the values they pick
            if a.size and dim is not None:
                picked = np.take_along_axis(a, np.expand_dims(got.numpy(), dim) if not keep
                                            else got.numpy(), axis=dim)
                best = np.take_along_axis(a, np.expand_dims(w, dim) if not keep else w, axis=dim)
                np.testing.assert_array_equal(picked, best)
            return
        g = got.numpy()
        if a.dtype.kind == "f":
            rtol = {np.float16: 2e-3, np.float32: 2e-6, np.float64: 1e-13}[a.dtype.type]
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                                       atol=rtol * max(1, a.shape[dim] if dim is not None and
                                                       a.ndim else a.size) * 100)
        else:
            np.testing.assert_array_equal(g, w.astype(g.dtype))
    run()


@pytest.mark.parametrize("kind", ["T", "slice", "expand"])
def test_reductions_of_views(device, kind):
    a = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    x, t = nr.tensor(a, device=device), torch.from_numpy(a)
    v = {"T": lambda z: z.transpose(0, 1), "slice": lambda z: z[::2, 1:],
         "expand": lambda z: z[:1].expand(3, 4)}[kind]
    for dim in (None, 0, 1):
        for op in ("sum", "max", "argmin"):
            got = getattr(v(x), op)() if dim is None else getattr(v(x), op)(dim)
            want = getattr(v(t), op)() if dim is None else getattr(v(t), op)(dim)
            want = want.values if op == "max" and dim is not None else want
            np.testing.assert_array_equal(got.numpy(), want.numpy())
