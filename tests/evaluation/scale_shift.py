"""Test reference (KernelBench convention): y = x * weight + bias, over the last dimension."""

import torch
import torch.nn as nn

M = 8
N = 300


class Model(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.bias = nn.Parameter(torch.zeros(n))

    def forward(self, x):
        return x * self.weight + self.bias


def get_inputs():
    return [torch.randn(M, N)]


def get_init_inputs():
    return [N]
