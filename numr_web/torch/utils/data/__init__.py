"""torch.utils.data: numr_web.data.loader's data sets, samplers and DataLoader (see there for
what differs from torch: the random streams, and loading in the calling process)."""
from ....data.loader import (BatchSampler, ConcatDataset, DataLoader, Dataset,  # noqa: F401
                             IterableDataset, RandomSampler, Sampler, SequentialSampler, Subset,
                             SubsetRandomSampler, TensorDataset, WeightedRandomSampler,
                             default_collate, default_convert, get_worker_info, random_split)
from . import distributed  # noqa: F401
from ....distributed.sampler import DistributedSampler  # noqa: F401
