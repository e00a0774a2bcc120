"""The webgpu backend's pure layers, without a GPU: the stride algebra of its views (against numpy's
own views of the same buffer), binding ranges and chunks, the contract's layouts, and the
loop-budget invariant of the reduction and GEMM schedules."""
import itertools

import numpy as np
import pytest

from numr_web import dtypes
from numr_web.backends.webgpu import contract, dispatch, launch_gemm, launch_reduce, views
from numr_web.backends.webgpu.views import GPUArray

F32 = dtypes.float32
rng = np.random.default_rng(0)


class FakeStorage:
    def __init__(self, n):
        self.raw, self.nbytes = None, 4 * n


def base(shape):
    """A dense GPUArray of `shape` and the numpy array of its element indices."""
    n = int(np.prod(shape))
    return GPUArray(FakeStorage(max(n, 1)), shape, F32), np.arange(n).reshape(shape)


def gather(h):
    """The element indices (into the storage) a GPUArray addresses, in row-major order."""
    idx = np.full(h.shape, h.offset, dtype=np.int64)
    for d, (s, st) in enumerate(zip(h.shape, h.strides)):
        shape = [1] * len(h.shape)
        shape[d] = s
        idx = idx + np.arange(s).reshape(shape) * st
    return idx


def random_views(count=300):
    """(GPUArray, numpy view of indices) pairs: transposes, stepped slices, int indices, broadcasts."""
    for _ in range(count):
        shape = tuple(int(s) for s in rng.integers(1, 5, rng.integers(1, 5)))
        h, a = base(shape)
        for _ in range(rng.integers(0, 4)):
            op = rng.integers(0, 3)
            if op == 0:
                perm = tuple(rng.permutation(len(a.shape)))
                h, a = views.permuted(h, perm), a.transpose(perm)
            elif op == 1 and a.ndim:
                idx, np_idx = [], []
                for s in a.shape:
                    if s > 1 and rng.random() < 0.2:
                        k = int(rng.integers(0, s))
                        idx.append(k)
                        np_idx.append(k)
                    else:
                        start = int(rng.integers(0, s + 1))
                        stop = int(rng.integers(start, s + 1))
                        step = int(rng.integers(1, 3))
                        idx.append((start, stop, step))
                        np_idx.append(slice(start, stop, step))
                h, a = views.sliced(h, idx), a[tuple(np_idx)]
            elif op == 2:
                shape = tuple(int(rng.integers(2, 4)) if s == 1 and rng.random() < 0.5 else s
                              for s in a.shape)
                if rng.random() < 0.3:
                    shape = (2,) + shape
                h, a = views.expanded(h, shape), np.broadcast_to(a, shape)
        yield h, a


def test_views_address_what_numpy_addresses():
    for h, a in random_views():
        assert h.shape == a.shape
        assert np.array_equal(gather(h), a)
        assert h.size == a.size
        if h.size:
            dense = np.array_equal(gather(h).ravel(), h.offset + np.arange(h.size))
            assert h.is_contiguous == dense
            assert h.span() == gather(h).max() - h.offset + 1


def test_dense_strides_and_broadcast_shapes():
    for shape in [(), (3,), (2, 3, 4), (1, 5, 1)]:
        assert views.dense_strides(shape) == tuple(s // 8 for s in np.zeros(shape).strides)
    assert views.dense_strides((0, 3)) == (3, 1)
    for shapes in [((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((5,), ()), ((1, 1), (7, 1, 1))]:
        assert views.broadcast_shapes(*shapes) == np.broadcast_shapes(*shapes)


def test_coalesce_keeps_every_operands_addresses():
    for (h1, _), (h2, _) in zip(random_views(200), random_views(200)):
        shape = views.broadcast_shapes(h1.shape, h2.shape)
        e1, e2 = views.expanded(h1, shape), views.expanded(h2, shape)
        cs, (s1, s2) = views.coalesce(shape, [e1.strides, e2.strides])
        assert len(cs) <= len(shape) and all(s != 1 for s in cs)
        for e, s in ((e1, s1), (e2, s2)):
            merged = GPUArray(e.storage, cs, F32, s, e.offset)
            assert np.array_equal(gather(merged).ravel(), gather(e).ravel())


def test_reshape_is_a_view_exactly_when_numpy_makes_one():
    for h, a in random_views(400):
        if not a.size:
            continue
        sizes = [d for d in range(1, a.size + 1) if a.size % d == 0]
        for _ in range(3):
            first = int(rng.choice(sizes))
            newshape = (first, a.size // first) if rng.random() < 0.6 else \
                (a.size // first, 1, first)
            try:
                want = np.reshape(a, newshape, copy=False)
            except ValueError:
                want = None
            got = views.reshaped(h, newshape)
            if want is None:
                assert got is None, (a.shape, a.strides, newshape)
            else:
                assert got is not None and np.array_equal(gather(got), want)


def test_joined_views_are_the_concatenation_exactly_where_the_pieces_lie_side_by_side():
    """views.joined: the pieces of a split along any axis join back into a view addressing what
    numpy's concatenate of their indices holds; pieces out of order, with a gap, of another
    buffer or with other strides do not join."""
    h, a = base((2, 3, 12))
    for axis, cuts in ((2, (0, 4, 8, 12)), (1, (0, 1, 3)), (0, (0, 1, 2))):
        idx = lambda lo, hi: [(lo, hi, 1) if d == axis else (0, n, 1) for d, n in enumerate(a.shape)]
        pieces = [views.sliced(h, idx(lo, hi)) for lo, hi in zip(cuts, cuts[1:])]
        j = views.joined(pieces, axis)
        want = np.concatenate([gather(p) for p in pieces], axis)
        np.testing.assert_array_equal(gather(j), want)
        assert views.joined(pieces[::-1], axis) is None
    p = [views.sliced(h, [(0, 2, 1), (0, 3, 1), (lo, lo + 4, 1)]) for lo in (0, 8)]
    assert views.joined(p, 2) is None                                   # a gap
    other, _ = base((2, 3, 12))
    assert views.joined([p[0], views.sliced(other, [(0, 2, 1), (0, 3, 1), (4, 8, 1)])], 2) is None
    assert views.joined([views.sliced(h, [(0, 2, 1), (0, 3, 1), (0, 4, 2)]),
                         views.sliced(h, [(0, 2, 1), (0, 3, 1), (4, 8, 1)])], 2) is None


def test_a_permutation_undone_gives_back_the_array_permuted():
    h, _ = base((2, 3, 4))
    for perm in itertools.permutations(range(3)):
        inv = tuple(np.argsort(perm))
        assert views.permuted(views.permuted(h, perm), inv) is h
    t = views.permuted(h, (1, 0, 2))
    assert views.permuted(t, (0, 2, 1)) is not h                      # not the inverse


def test_slices_of_every_kind():
    h, a = base((4, 6, 5))
    for idx, np_idx in [(((1, 4, 2), 3, (4, 0, 1)), (slice(1, 4, 2), 3, slice(4, 0))),
                        ((2,), (2,)), (((0, 4, 3), (5, 6, 1)), (slice(0, 4, 3), slice(5, 6))),
                        ((1, 2, 3), (1, 2, 3))]:
        v = views.sliced(h, idx)
        assert v.shape == a[np_idx].shape and np.array_equal(gather(v), a[np_idx])
        assert v.view
    idx = views.full_index((2, 3))
    assert idx == [(0, 2, 1), (0, 3, 1)]


def test_byte_range_covers_the_elements_within_the_alignment():
    for _ in range(500):
        itemsize = int(rng.choice([2, 4]))
        n = int(rng.integers(1, 5000))
        lo = int(rng.integers(0, n))
        span = int(rng.integers(0, n - lo + 1))
        align = int(rng.choice([4, 32, 256]))
        nbytes = n * itemsize + int(rng.integers(0, 64)) // 4 * 4
        start, size, rel = views.byte_range(lo, span, itemsize, align, nbytes)
        assert start % align == 0 and start <= lo * itemsize
        assert start + size >= (lo + max(span, 1)) * itemsize or start + size == nbytes
        assert start + size <= nbytes and (size % 16 == 0 or start + size == nbytes)
        assert rel == lo - start // itemsize and rel >= 0


def test_chunk_rows_fit_the_room():
    for _ in range(300):
        nd = int(rng.integers(1, 4))
        shape = [int(s) for s in rng.integers(1, 40, nd)]
        strides = [[int(x) for x in rng.integers(0, 50, nd)] for _ in range(int(rng.integers(1, 4)))]
        sizes = [int(rng.choice([2, 4])) for _ in strides]
        room = int(rng.integers(16, 20000))
        rows = views.chunk_rows(shape, strides, sizes, room)
        inner = [1 + sum((d - 1) * st for d, st in zip(shape[1:], s[1:])) for s in strides]
        if rows is None:
            assert any(i * z > room for i, z in zip(inner, sizes))
            continue
        assert 1 <= rows <= shape[0]
        for s, i, z in zip(strides, inner, sizes):
            assert ((rows - 1) * s[0] + i) * z <= room or rows == 1


def test_split_leading_axis():
    h, _ = base((1, 3, 4, 5))
    assert views.split_leading(h) == (1, 4 * 20)
    t = views.permuted(base((6, 7))[0], (1, 0))
    assert views.split_leading(t) == (0, 4 * 36)


def test_dispatch_grids_stay_within_the_workgroup_limits():
    for n in (0, 1, 255, 257, 65535 * 256, 65535 * 256 + 1, 300_000_000):
        for cap in (3, 65535, 65535 * 64):
            gx, gy, gz = dispatch.grid_1d(n, cap)
            assert 1 <= gx <= 65535 and 1 <= gy <= 65535 and gz == 1
            assert gx * gy * 256 >= min(max(n, 1), cap * 256) and gx * gy <= max(cap, gx)
        gx, gy, _ = dispatch.grid_per_item(n)
        assert gx <= 65535 and gy <= 65535 and gx * gy >= min(max(n, 1), 65535 * 64)


# -- the contract ---------------------------------------------------------------------------------------
def test_layouts_fit_and_do_not_overlap():
    for k in contract.KERNELS.values():
        words = set()
        for name, first, count, _ in k.layout.fields:
            span = set(range(first, first + count))
            assert not span & words, (k.name, name)
            words |= span
            assert getattr(k.layout, name) == first
        assert max(words) < contract.META_WORDS
        assert sorted(s.index for s in k.slots.values()) == \
            list(range(contract.META_BINDING + 1, contract.META_BINDING + 1 + len(k.slots)))
        for entry, used in k.entries.items():
            assert len(set(used)) == len(used) and all(u in k.slots for u in used), entry
    with pytest.raises(ValueError):
        contract.Layout(scalars=[("X", "")], arrays=[(f"A{i}", "") for i in range(8)])


# -- schedules: pure choices that keep every invocation within the loop budget ----------------------------
def loop_iterations(schedule, R, nr, chunks, rc):
    per_elem = 2 + nr
    if schedule == "wg":
        return -(-R // contract.WG) * per_elem + 64
    if schedule in ("two_pass", "tree"):
        return max(rc, chunks if schedule == "two_pass" else 0) * per_elem
    return R * per_elem


@pytest.mark.parametrize("cpu", [False, True])
@pytest.mark.parametrize("budget", [0, 300, 2000, 60000])
def test_reduce_schedules_stay_within_the_loop_budget(budget, cpu):
    seen = set()
    for kind, R, n_out, nr, dense in itertools.product(
            ("reduce", "argmax", "softmax"), (1, 7, 255, 256, 511, 512, 5000, 20000, 1 << 23),
            (1, 3, 4095, 4096, 70000, 1 << 18), (1, 2, 3), (False, True)):
        try:
            schedule, chunks, rc = launch_reduce.plan(kind, R, n_out, nr, dense, budget, cpu)
        except Exception as e:
            assert kind != "reduce" and budget and R * (2 + nr) > budget // 2, e
            assert "loop limit" in str(e)
            continue
        seen.add(schedule)
        if schedule == "dense_first":
            assert kind == "reduce" and nr > 1
            continue
        if schedule in ("two_pass", "tree"):
            assert kind == "reduce" and nr == 1 and chunks > 1 and (chunks - 1) * rc < R <= chunks * rc
        if budget:
            assert loop_iterations(schedule, R, nr, chunks, rc) < budget, (kind, R, n_out, nr, schedule)
    assert {"wg", "thread", "two_pass"} <= seen
    if budget:
        assert {"tree", "dense_first"} <= seen


def test_gemm_k_blocks_and_selection():
    assert launch_gemm.k_block(0) is None
    assert launch_gemm.k_block(60000) == 4096
    for budget in (200, 2000, 60000, 1 << 20):
        kb = launch_gemm.k_block(budget)
        assert kb >= 16 and kb & (kb - 1) == 0
        assert kb * launch_gemm.LOOP_ITERS_PER_K <= max(budget, 16 * launch_gemm.LOOP_ITERS_PER_K)
    sel = launch_gemm.select
    WIDE, NONE, SG = frozenset({"v4w"}), frozenset(), frozenset({"v4w", "sg"})
    assert sel(512, 512, 64, 64, 1, 512, 1, [0, 0], "auto", WIDE)[0] == "gemm_v4"
    assert sel(512, 512, 64, 64, 1, 512, 1, [0, 0], "auto", NONE)[0] == "gemm"
    assert sel(512, 512, 64, 64, 1, 512, 1, [1, 0], "v4", WIDE)[0] == "gemm"      # misaligned
    # transposed operands: gemm_v4 reads them as they lie where their columns are vec4-aligned
    for args, lanes in (((1, 512, 512, 1), (1, 0)), ((64, 1, 1, 64), (0, 1)), ((1, 512, 1, 64), (1, 1))):
        entry, _, _, consts = sel(512, 512, 64, *args, [0, 0], "v4", WIDE)
        assert (entry, consts["A_MLANES"], consts["B_KLANES"]) == ("gemm_v4",) + lanes, args
    assert sel(512, 512, 64, 1, 514, 512, 1, [0, 0], "v4", WIDE)[0] == "gemm"     # a's column stride
    assert sel(510, 512, 64, 1, 512, 512, 1, [0, 0], "v4", WIDE)[0] == "gemm"     # M % 4
    assert sel(512, 512, 64, 64, 1, 512, 1, [0, 0], "v4", WIDE)[3]["A_MLANES"] == 0
    assert sel(64, 512, 64, 64, 1, 512, 1, [0], "128", WIDE)[0] == "gemm"
    entry, tm, tn, consts = sel(256, 256, 32, 32, 1, 256, 1, [0], "128", WIDE)
    assert (entry, tm, tn, consts["CHECK"]) == ("gemm_big", 128, 128, 0)
    assert sel(100, 256, 32, 1, 100, 256, 1, [0], "64", WIDE)[3]["A_MLANES"] == 1
    # the subgroup tile only when the adapter has it (else v4w), and only for vec4-aligned operands
    assert sel(512, 512, 64, 64, 1, 512, 1, [0, 0], "sg", SG)[0] == "gemm_sg"
    assert sel(512, 512, 64, 64, 1, 512, 1, [0, 0], "sg", WIDE)[:3] == ("gemm_v4", 128, 128)
    assert sel(512, 512, 64, 1, 512, 512, 1, [0, 0], "sg", SG)[3]["A_MLANES"] == 1   # a column-major
    assert sel(512, 512, 64, 64, 1, 512, 1, [2, 0], "sg", SG)[0] == "gemm"           # misaligned
