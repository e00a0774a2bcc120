"""numr_web.torch.utils.data (numr_web.data.loader) against torch.utils.data: the same batches,
shapes and dtypes in order (sequential sampling), permutations when shuffling (torch's streams
are not reproduced: the orders are checked as permutations and for reproducibility), the same
lengths and argument errors."""
import collections

import numpy as np
import pytest
import torch
import torch.utils.data as tdata

import numr_web as nr
import numr_web.torch.utils.data as ndata


def _as_lists(batch):
    if isinstance(batch, (list, tuple)):
        return [_as_lists(b) for b in batch]
    if isinstance(batch, dict):
        return {k: _as_lists(v) for k, v in batch.items()}
    return batch.tolist() if hasattr(batch, "tolist") else batch


class Squares:
    """A map-style data set written once for both libraries: (float array, int, dict)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return np.array([i, i * i], np.float32), i % 3, {"name": f"s{i}", "half": i / 2}


@pytest.mark.parametrize("kw", [dict(batch_size=4), dict(batch_size=4, drop_last=True),
                                dict(batch_size=1), dict(batch_size=10)])
def test_sequential_batches_match_torch(kw):
    ours = list(ndata.DataLoader(Squares(10), **kw))
    ref = list(tdata.DataLoader(Squares(10), **kw))
    assert len(ours) == len(ref) == len(ndata.DataLoader(Squares(10), **kw))
    for a, b in zip(ours, ref):
        x, y, d = a
        tx, ty, td = b
        assert x.dtype == nr.float32 and tx.dtype == torch.float32
        assert y.dtype == nr.long and ty.dtype == torch.long     # numr's long is int32
        assert x.tolist() == tx.tolist() and y.tolist() == ty.tolist()
        assert d["name"] == list(td["name"]) or tuple(d["name"]) == td["name"]
        assert d["half"].tolist() == td["half"].tolist()     # floats: float32 here, float64 there


def test_default_collate_matches_torch_structure():
    batch = [(1, 2.5, True, "a", [1, 2]), (3, 4.5, False, "b", [3, 4])]
    ours, ref = ndata.default_collate(batch), tdata.default_collate(batch)
    assert type(ours) is type(ref) is list
    assert _as_lists(ours) == _as_lists(ref)
    assert (ours[0].dtype, ours[2].dtype) == (nr.long, nr.bool_)
    Point = collections.namedtuple("Point", "x y")
    pts = [Point(np.float32(1), 2), Point(np.float32(3), 4)]
    ours, ref = ndata.default_collate(pts), tdata.default_collate(pts)
    assert type(ours).__name__ == type(ref).__name__ == "Point"
    assert _as_lists(ours) == _as_lists(ref)
    t = [nr.ones(2, 3), nr.zeros(2, 3)]
    assert ndata.default_collate(t).shape == (2, 2, 3)
    with pytest.raises(nr.ShapeError):
        ndata.default_collate([[1, 2], [3]])


def test_tensor_dataset_subset_concat():
    x, y = nr.arange(10).reshape(5, 2), nr.tensor([0, 1, 0, 1, 1])
    tx, ty = torch.arange(10).reshape(5, 2), torch.tensor([0, 1, 0, 1, 1])
    ds, tds = ndata.TensorDataset(x, y), tdata.TensorDataset(tx, ty)
    assert len(ds) == len(tds) == 5
    assert _as_lists(ds[3]) == _as_lists(tds[3])
    sub, tsub = ndata.Subset(ds, [4, 0]), tdata.Subset(tds, [4, 0])
    assert _as_lists(sub[0]) == _as_lists(tsub[0]) and len(sub) == 2
    cat, tcat = ds + sub, tds + tsub
    assert len(cat) == len(tcat) == 7
    for i in (0, 5, 6, -1):
        assert _as_lists(cat[i]) == _as_lists(tcat[i])
    batches = [_as_lists(b) for b in ndata.DataLoader(ds, batch_size=2)]
    assert batches == [_as_lists(b) for b in tdata.DataLoader(tds, batch_size=2)]
    with pytest.raises(nr.ShapeError):
        ndata.TensorDataset(nr.ones(3), nr.ones(4))


def test_shuffle_is_a_permutation_each_epoch_and_follows_the_seed():
    loader = ndata.DataLoader(list(range(20)), batch_size=6, shuffle=True)
    nr.manual_seed(0)
    epoch1 = [i for b in loader for i in b.tolist()]
    epoch2 = [i for b in loader for i in b.tolist()]
    assert sorted(epoch1) == sorted(epoch2) == list(range(20))
    assert epoch1 != epoch2 and epoch1 != list(range(20))
    nr.manual_seed(0)
    assert [i for b in loader for i in b.tolist()] == epoch1
    g = nr.Generator().manual_seed(1)
    own = ndata.DataLoader(list(range(20)), batch_size=20, shuffle=True, generator=g)
    first = next(iter(own)).tolist()
    g.manual_seed(1)
    assert next(iter(own)).tolist() == first


def test_samplers():
    data = list(range(10))
    assert list(ndata.SequentialSampler(data)) == list(tdata.SequentialSampler(data))
    nr.manual_seed(0)
    rs = list(ndata.RandomSampler(data))
    assert sorted(rs) == data and len(ndata.RandomSampler(data)) == 10
    more = list(ndata.RandomSampler(data, num_samples=25))
    assert len(more) == 25 and sorted(more[:20]) == sorted(data * 2)
    repl = list(ndata.RandomSampler(data, replacement=True, num_samples=30))
    assert len(repl) == 30 and set(repl) <= set(data)
    sub = list(ndata.SubsetRandomSampler([3, 5, 7]))
    assert sorted(sub) == [3, 5, 7]
    w = list(ndata.WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 100))
    assert set(w) <= {1, 3} and w.count(3) > w.count(1)
    assert sorted(ndata.WeightedRandomSampler([1.0, 1.0, 0.0], 2, replacement=False)) == [0, 1]
    bs, tbs = ndata.BatchSampler(range(7), 3, False), tdata.BatchSampler(range(7), 3, False)
    assert list(bs) == list(tbs) and len(bs) == len(tbs) == 3
    assert list(ndata.BatchSampler(range(7), 3, True)) == list(tdata.BatchSampler(range(7), 3,
                                                                                    True))
    for bad in (0, -1, "3"):
        with pytest.raises(ValueError):
            tdata.BatchSampler(range(7), bad, False)
        with pytest.raises(nr.ShapeError):
            ndata.BatchSampler(range(7), bad, False)


def test_loader_with_sampler_batch_sampler_collate_fn():
    data = list(range(10))
    loader = ndata.DataLoader(data, batch_size=3, sampler=[9, 8, 7, 1])
    assert [b.tolist() for b in loader] == [b.tolist() for b in
                                            tdata.DataLoader(data, batch_size=3,
                                                             sampler=[9, 8, 7, 1])]
    loader = ndata.DataLoader(data, batch_sampler=[[0, 1], [5]])
    assert [b.tolist() for b in loader] == [[0, 1], [5]] and len(loader) == 2
    loader = ndata.DataLoader(data, batch_size=4, collate_fn=lambda b: sum(b))
    assert list(loader) == list(tdata.DataLoader(data, batch_size=4, collate_fn=lambda b: sum(b)))
    assert list(ndata.DataLoader(data[:3], batch_size=None)) == [0, 1, 2]
    # num_workers / pin_memory / persistent_workers are accepted: the batches are the same
    loader = ndata.DataLoader(data, batch_size=5, num_workers=2, pin_memory=True,
                              persistent_workers=True)
    assert [b.tolist() for b in loader] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]


class Stream(ndata.IterableDataset):
    def __iter__(self):
        return iter(range(7))


class TorchStream(tdata.IterableDataset):
    def __iter__(self):
        return iter(range(7))


def test_iterable_dataset():
    for kw in (dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None)):
        ours = [_as_lists(b) for b in ndata.DataLoader(Stream(), **kw)]
        assert ours == [_as_lists(b) for b in tdata.DataLoader(TorchStream(), **kw)]
    with pytest.raises(ValueError):
        tdata.DataLoader(TorchStream(), shuffle=True)
    with pytest.raises(nr.ShapeError):
        ndata.DataLoader(Stream(), shuffle=True)
    assert ndata.get_worker_info() is None


@pytest.mark.parametrize("lengths", [[3, 7], [0.3, 0.7], [0.33, 0.33, 0.34], [10]])
def test_random_split_lengths_match_torch_and_cover_the_data(lengths):
    nr.manual_seed(0)
    parts = ndata.random_split(range(10), lengths)
    ref = tdata.random_split(range(10), lengths, generator=torch.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [len(p) for p in ref]
    items = sorted(i for p in parts for i in p)
    assert items == list(range(10))
    with pytest.raises(nr.ShapeError):
        ndata.random_split(range(10), [3, 3])


@pytest.mark.parametrize("kw", [dict(shuffle=True, sampler=[0]),
                                dict(batch_sampler=[[0]], batch_size=2),
                                dict(batch_size=None, drop_last=True)])
def test_exclusive_arguments_raise_value_errors_as_torch(kw):
    with pytest.raises(ValueError):
        tdata.DataLoader(list(range(4)), **kw)
    with pytest.raises(nr.ShapeError):
        ndata.DataLoader(list(range(4)), **kw)


def test_loader_batches_on_other_devices(device):
    """Batches come out on the default device; .to(device) moves them as torch code does."""
    x = nr.arange(12, dtype=nr.float32).reshape(6, 2)
    for xb, yb in ndata.DataLoader(ndata.TensorDataset(x, nr.arange(6)), batch_size=4):
        xb, yb = xb.to(nr.torch.device(device)), yb.to(device)
        assert xb.device.type == device and yb.dtype == nr.long
        assert (xb.sum(1) - 2 * yb.float() * 2 - 1).abs().max().item() == 0.0
