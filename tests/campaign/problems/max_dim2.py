"""Max over the last dimension (values only)."""

import torch
import torch.nn as nn

batch_size = 16
dim1 = 1024
dim2 = 2048


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max(x, dim=2).values


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return []
