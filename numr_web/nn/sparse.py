"""Embedding: a (num_embeddings, embedding_dim) table indexed by int32 ids (weight ~ N(0, 1) as
torch's; models such as GPT re-initialise it)."""
from __future__ import annotations

from . import _core
from . import functional as F
from ..errors import ShapeError, UnsupportedError
from ..ops.indexing import padding_index
from .module import Module, Parameter


class Embedding(Module):
    """torch.nn.Embedding's arguments; max_norm (renormalising rows in place at each lookup) and
    scale_grad_by_freq=True raise UnsupportedError; sparse=True gives dense gradients (the
    same values). _weight: the table to use (a Parameter unless _freeze)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None, seed=None):
        super().__init__()
        if max_norm is not None or scale_grad_by_freq:
            raise UnsupportedError("nn.Embedding(max_norm=..., scale_grad_by_freq=True) is not "
                                   "supported: clip the weights explicitly")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_index(padding_idx, num_embeddings)
        self.max_norm, self.norm_type, self.scale_grad_by_freq = None, norm_type, False
        self.sparse = sparse
        if _weight is not None:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ShapeError(f"nn.Embedding: _weight has shape {tuple(_weight.shape)}, "
                                 f"expected ({num_embeddings}, {embedding_dim})")
            self.weight = Parameter(_weight.detach(), requires_grad=not _freeze)
            return
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

