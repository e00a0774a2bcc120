"""Hypothesis: broadcasting and reductions agree with numpy for arbitrary shapes."""
import numpy as np
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import numr_web as nr


@settings(max_examples=60, deadline=None)
@given(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4))
def test_broadcasting_matches_numpy(shapes):
    sa, sb = shapes.input_shapes
    a = np.arange(np.prod(sa), dtype=np.float64).reshape(sa) / 7 - 1
    b = np.arange(np.prod(sb), dtype=np.float64).reshape(sb) / 5 + 0.5
    ta = nr.tensor(a, dtype="float64", requires_grad=True)
    tb = nr.tensor(b, dtype="float64", requires_grad=True)
    out = ta * tb + ta
    np.testing.assert_allclose(out.numpy(), a * b + a)
    assert out.shape == shapes.result_shape
    out.sum().backward()
    np.testing.assert_allclose(ta.grad.numpy(), _sum_to(np.broadcast_to(b + 1, shapes.result_shape), sa), atol=1e-12)
    np.testing.assert_allclose(tb.grad.numpy(), _sum_to(np.broadcast_to(a, shapes.result_shape), sb), atol=1e-12)


def _sum_to(g, shape):
    while g.ndim > len(shape):
        g = g.sum(0)
    for i, d in enumerate(shape):
        if d == 1 and g.shape[i] != 1:
            g = g.sum(i, keepdims=True)
    return g


@settings(max_examples=60, deadline=None)
@given(hnp.array_shapes(min_dims=1, max_dims=4, max_side=4), st.data())
def test_reductions_match_numpy(shape, data):
    x = np.random.default_rng(0).normal(size=shape)
    axes = data.draw(st.one_of(st.none(), st.lists(st.integers(0, len(shape) - 1), unique=True,
                                                   min_size=1).map(tuple)))
    keep = data.draw(st.booleans())
    t = nr.tensor(x, dtype="float64")
    for op in ("sum", "mean", "max", "min"):
        got = getattr(t, op)(axis=axes, keepdims=keep).numpy()
        np.testing.assert_allclose(got, getattr(np, op)(x, axis=axes, keepdims=keep), rtol=1e-12)
    if axes is not None and len(axes) == 1:
        np.testing.assert_array_equal(t.argmax(axis=axes[0], keepdims=keep).numpy(),
                                      np.argmax(x, axis=axes[0], keepdims=keep))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 40)), min_size=1, max_size=4),
       st.lists(st.integers(0, 60), min_size=2, max_size=3))
def test_disjoint_alike_never_claims_views_that_overlap(dims, offsets):
    """shapes.disjoint_alike (whether the attention backward may write dq, dk, dv into one array
    where q, k, v lie) is only ever True for views that share no element (by enumeration)."""
    from numr_web.shapes import disjoint_alike
    shape, strides = [n for n, _ in dims], [s for _, s in dims]
    cells = [{o + sum(i * s for i, s in zip(idx, strides)) for idx in np.ndindex(*shape)}
             for o in offsets]
    overlap = any(cells[i] & cells[j] for i in range(len(cells)) for j in range(i))
    if disjoint_alike(shape, strides, offsets):
        assert not overlap


def test_disjoint_alike_finds_the_heads_of_a_fused_projection():
    from numr_web.shapes import disjoint_alike
    B, T, H, D = 2, 5, 3, 4
    C = H * D
    heads = ((B, H, T, D), (T * 3 * C, D, 3 * C, 1))           # (B, T, 3C) split, (B, H, T, D)
    assert disjoint_alike(*heads, (0, C, 2 * C))
    assert not disjoint_alike(*heads, (0, 0, 2 * C))           # q is k
    assert not disjoint_alike(*heads, (0, 1, 2 * C))           # rows that interleave
    assert disjoint_alike((4,), (1,), (0, 4, 8)) and not disjoint_alike((4,), (1,), (0, 3, 8))
