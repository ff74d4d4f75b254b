"""Test reference with an int64 input (KernelBench convention): out = table[idx]."""

import torch
import torch.nn as nn

ROWS = 50
DIM = 40
PICKS = 13


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, table, idx):
        return table[idx]


def get_inputs():
    return [torch.randn(ROWS, DIM), torch.randint(0, ROWS, (PICKS,), dtype=torch.int64)]


def get_init_inputs():
    return []
