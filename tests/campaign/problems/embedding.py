"""Embedding lookup: integer (int64) indices into a table of rows."""

import torch
import torch.nn as nn

num_embeddings = 65536
embedding_dim = 512
batch_size = 4096


class Model(nn.Module):
    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.table = nn.Embedding(num_embeddings, embedding_dim)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.table(idx)


def get_inputs():
    return [torch.randint(0, num_embeddings, (batch_size,), dtype=torch.int64)]


def get_init_inputs():
    return [num_embeddings, embedding_dim]
