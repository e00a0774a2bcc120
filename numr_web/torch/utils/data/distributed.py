"""torch.utils.data.distributed: numr_web.distributed's DistributedSampler."""
from ....distributed.sampler import DistributedSampler  # noqa: F401
