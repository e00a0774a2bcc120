"""DistributedSampler with torch's semantics: each of num_replicas ranks gets a disjoint, equally long
slice of the (optionally shuffled) indices 0..n-1. Without drop_last the index list is padded by
repeating its start so it divides evenly; with drop_last the tail is dropped instead. The shuffle
depends on seed + epoch only (call set_epoch(e) each epoch), so every rank draws the same order.
The permutation comes from Python's random module (torch's generator is not reproduced)."""
from __future__ import annotations

import math
import random

from ..errors import DistributedError


class DistributedSampler:
    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        """dataset: its length (an int) or anything with len()."""
        if num_replicas is None or rank is None:
            from . import world
            num_replicas = world.world_size() if num_replicas is None else num_replicas
            rank = world.rank() if rank is None else rank
        if not isinstance(num_replicas, int) or num_replicas < 1:
            raise DistributedError(f"num_replicas must be a positive int, got {num_replicas!r}")
        if not isinstance(rank, int) or not 0 <= rank < num_replicas:
            raise DistributedError(f"invalid rank {rank!r}: must be in 0..{num_replicas - 1}")
        self.dataset_len = dataset if isinstance(dataset, int) else len(dataset)
        self.num_replicas, self.rank = num_replicas, rank
        self.shuffle, self.seed, self.drop_last, self.epoch = shuffle, seed, drop_last, 0
        n = self.dataset_len
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def __len__(self):
        return self.num_samples

    def __iter__(self):
        indices = list(range(self.dataset_len))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(indices)
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            else:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])
