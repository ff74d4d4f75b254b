"""Softmax over the last dimension, KernelBench convention."""

import torch
import torch.nn as nn

M = 32768  # rows
N = 4096  # softmax length


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    # A wide spread of logits, so the max subtraction matters.
    return [4.0 * torch.randn(M, N)]


def get_init_inputs():
    return []
