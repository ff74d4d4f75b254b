"""Test reference with an integer output (KernelBench convention): the argmax of each row."""

import torch
import torch.nn as nn

ROWS = 6
COLS = 50


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.argmax(x, dim=1)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
