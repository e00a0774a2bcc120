"""Embedding: a (num_embeddings, embedding_dim) table indexed by int32 ids (weight ~ N(0, 1) as
torch's; models such as GPT re-initialise it)."""
from __future__ import annotations

from . import _core
from . import functional as F
from ..ops.indexing import padding_index
from .module import Module, Parameter


class Embedding(Module):
    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, device=None, dtype=None,
                 seed=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_index(padding_idx, num_embeddings)
        weight = _core.randn((num_embeddings, embedding_dim), seed=seed, device=device,
                             dtype=dtype)
        if self.padding_idx is not None:               # torch zeroes the padding row
            weight[self.padding_idx] = 0.0
        self.weight = Parameter(weight)

    def forward(self, ids):
        return F.embedding(ids, self.weight, padding_idx=self.padding_idx)

    def extra_repr(self):
        pad = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"

