"""Embedding: a (num_embeddings, embedding_dim) table indexed by int32 ids (weight ~ N(0, 1) as
torch's; models such as GPT re-initialise it)."""
from __future__ import annotations

from . import _core
from . import functional as F
from .module import Module, Parameter


class Embedding(Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None, seed=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Parameter(_core.randn((num_embeddings, embedding_dim), seed=seed,
                                            device=device, dtype=dtype))

    def forward(self, ids):
        return F.embedding(ids, self.weight)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"

