"""Data sets, samplers and the DataLoader, shaped like torch.utils.data (numr_web.torch.utils.data
re-exports them): Dataset, IterableDataset, TensorDataset, Subset, ConcatDataset, random_split,
SequentialSampler, RandomSampler, SubsetRandomSampler, WeightedRandomSampler, BatchSampler,
DataLoader(batch_size, shuffle, sampler, batch_sampler, drop_last, collate_fn, generator),
default_collate, default_convert.

Orders and splits are drawn on the host (Python's random module seeded from the numr_web
generator: `nr.manual_seed` or generator= makes them reproducible), so loading reads nothing back
from a device. Differences from torch: the streams are not torch's (a seed gives other orders);
data is loaded in the calling process (num_workers, pin_memory, prefetch_factor and
persistent_workers are accepted and change nothing but speed: the batches are the same);
default_collate makes Python floats float32 (numr_web's default, torch: float64).
"""
from __future__ import annotations

import bisect
import collections.abc
import itertools
import math
import random

from .. import dtypes as dt
from ..creation import tensor
from ..errors import DTypeError, ShapeError
from ..generator import Generator, default_generator
from ..ops.shape_ops import stack
from ..tensor import Tensor


def _rng(generator):
    """A host random.Random seeded from `generator` (default: the default generator)."""
    if generator is not None and not isinstance(generator, Generator):
        raise DTypeError(f"generator must be an nr.Generator, got {type(generator).__name__}")
    return random.Random((generator or default_generator).next_seed())


# -- data sets -------------------------------------------------------------------------------------
class Dataset:
    """A map-style data set: __getitem__(index) and __len__; `a + b` concatenates."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A data set read by iterating (__iter__), e.g. a stream; no indices, no sampler."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class TensorDataset(Dataset):
    """Sample i is (t[i] for t in tensors); the tensors share their first dim."""

    def __init__(self, *tensors):
        if not tensors or not all(isinstance(t, Tensor) for t in tensors):
            raise DTypeError("TensorDataset takes one or more Tensors")
        n = tensors[0].shape[0] if tensors[0].ndim else None
        if any(not t.ndim or t.shape[0] != n for t in tensors):
            raise ShapeError(f"TensorDataset: size mismatch between tensors (first dims "
                             f"{[t.shape[0] if t.ndim else None for t in tensors]}); they must "
                             "all have the same first dim")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class Subset(Dataset):
    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ShapeError("ConcatDataset needs at least one data set")
        if any(isinstance(d, IterableDataset) for d in self.datasets):
            raise DTypeError("ConcatDataset does not take IterableDatasets")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise IndexError("absolute value of index should not exceed dataset length")
            idx += len(self)
        i = bisect.bisect_right(self.cumulative_sizes, idx)
        return self.datasets[i][idx - (self.cumulative_sizes[i - 1] if i else 0)]


def random_split(dataset, lengths, generator=None):
    """Disjoint random Subsets of the given lengths (ints summing to len(dataset), or fractions
    summing to 1: floors, the remainder given out one each from the first)."""
    n = len(dataset)
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        sizes = [int(math.floor(n * f)) for f in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        lengths = sizes
    if sum(lengths) != n:
        raise ShapeError(f"random_split: the lengths {lengths} sum to {sum(lengths)}, not to the "
                         f"data set's length {n}")
    perm = list(range(n))
    _rng(generator).shuffle(perm)
    out, start = [], 0
    for k in lengths:
        out.append(Subset(dataset, perm[start:start + k]))
        start += k
    return out


# -- samplers --------------------------------------------------------------------------------------
class Sampler:
    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation each epoch, or num_samples draws with replacement."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        if not isinstance(replacement, bool):
            raise DTypeError(f"replacement should be a boolean value, got {replacement!r}")
        if num_samples is not None and (not isinstance(num_samples, int) or num_samples <= 0):
            raise ShapeError(f"num_samples should be a positive integer, got {num_samples!r}")
        self.data_source, self.replacement = data_source, replacement
        self._num_samples, self.generator = num_samples, generator

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, rng = len(self.data_source), _rng(self.generator)
        if self.replacement:
            return iter([rng.randrange(n) for _ in range(self.num_samples)])
        out = []
        for _ in range(self.num_samples // n):
            perm = list(range(n))
            rng.shuffle(perm)
            out += perm
        perm = list(range(n))
        rng.shuffle(perm)
        return iter(out + perm[:self.num_samples % n])

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self):
        order = list(range(len(self.indices)))
        _rng(self.generator).shuffle(order)
        return iter([self.indices[i] for i in order])

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    def __init__(self, weights, num_samples, replacement=True, generator=None):
        w = weights.tolist() if isinstance(weights, Tensor) else list(weights)
        if any(not isinstance(x, (int, float)) or x < 0 or x != x for x in w) or not any(w):
            raise ShapeError("WeightedRandomSampler: weights must be non-negative numbers, "
                             "not all zero")
        if not replacement and num_samples > sum(1 for x in w if x > 0):
            raise ShapeError("WeightedRandomSampler: not enough categories of positive weight "
                             f"to draw {num_samples} without replacement")
        self.weights, self.num_samples = [float(x) for x in w], num_samples
        self.replacement, self.generator = replacement, generator

    def __iter__(self):
        rng = _rng(self.generator)
        if self.replacement:
            return iter(rng.choices(range(len(self.weights)), self.weights, k=self.num_samples))
        keys = [(rng.random() ** (1.0 / w) if w > 0 else -1.0, i)    # Efraimidis-Spirakis
                for i, w in enumerate(self.weights)]
        return iter([i for _, i in sorted(keys, reverse=True)[:self.num_samples]])

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ShapeError(f"batch_size should be a positive integer value, got {batch_size!r}")
        if not isinstance(drop_last, bool):
            raise DTypeError(f"drop_last should be a boolean value, got {drop_last!r}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


# -- collation -------------------------------------------------------------------------------------
def _is_array(x):
    return hasattr(x, "__array_interface__") and hasattr(x, "dtype") and hasattr(x, "shape")


def default_convert(data):
    """Arrays become tensors (also inside lists, tuples and dicts); the rest stays as it is."""
    if _is_array(data) and getattr(data, "ndim", 0) and data.dtype.kind in "biuf":
        return tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return type(data)({k: default_convert(v) for k, v in data.items()}) \
            if not isinstance(data, dict) or type(data) is dict else \
            {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, (list, tuple)):
        return type(data)(default_convert(d) for d in data)
    return data


def default_collate(batch):
    """torch's default_collate: tensors and arrays are stacked into a new leading dim; numbers
    become a 1-D tensor (bool, int32 for ints, float32 for floats); strings are returned as the
    batch holds them; mappings, named tuples and sequences are collated field by field."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if _is_array(elem):
        if elem.dtype.kind not in "biuf":
            raise DTypeError(f"default_collate: arrays of dtype {elem.dtype} cannot become "
                             "tensors")
        return stack([tensor(b) for b in batch], 0)
    if isinstance(elem, bool) or (hasattr(elem, "dtype") and getattr(elem, "ndim", 1) == 0):
        return tensor(list(batch)) if not hasattr(elem, "dtype") else \
            tensor([b.item() for b in batch], dtype=dt.get_dtype(elem.dtype))
    if isinstance(elem, (int, float)):
        return tensor(list(batch))
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        return {k: default_collate([d[k] for d in batch]) for k in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(e) != len(elem) for e in batch):
            raise ShapeError("default_collate: each element in list of batch should be of "
                             "equal size")
        return [default_collate(s) for s in zip(*batch)]
    raise DTypeError(f"default_collate: batch must contain tensors, arrays, numbers, dicts or "
                     f"lists; found {type(elem).__name__}")


# -- the loader ------------------------------------------------------------------------------------
class DataLoader:
    """Batches from a data set (torch's arguments and checks; see the module for what the
    worker and memory-pinning arguments do here)."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ShapeError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing")
        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            if shuffle not in (None, False):
                raise ShapeError(f"DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None or batch_sampler is not None:
                raise ShapeError("DataLoader with IterableDataset: expected unspecified sampler "
                                 "and batch_sampler options")
        if sampler is not None and shuffle:
            raise ShapeError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ShapeError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ShapeError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None and not iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else \
                SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler, self.batch_sampler, self.generator = sampler, batch_sampler, generator
        self.num_workers, self.pin_memory, self.timeout = num_workers, pin_memory, timeout
        self.worker_init_fn, self.prefetch_factor = worker_init_fn, prefetch_factor
        self.persistent_workers = persistent_workers
        auto = batch_size is not None or batch_sampler is not None
        self.collate_fn = collate_fn or (default_collate if auto else default_convert)
        self._iterable = iterable

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None or (self._iterable and self.batch_size is not None)

    def __iter__(self):
        ds, collate = self.dataset, self.collate_fn
        if self._iterable:
            if self.batch_size is None:
                return (collate(x) for x in ds)
            return self._iter_stream(iter(ds))
        if self.batch_sampler is not None:
            return (collate([ds[i] for i in batch]) for batch in self.batch_sampler)
        return (collate(ds[i]) for i in self.sampler)

    def _iter_stream(self, it):
        while True:
            batch = list(itertools.islice(it, self.batch_size))
            if not batch or (self.drop_last and len(batch) < self.batch_size):
                return
            yield self.collate_fn(batch)

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)          # TypeError when the stream has no length, as torch
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)


def get_worker_info():
    """None: data is loaded in the calling process (torch's answer outside a worker)."""
    return None
