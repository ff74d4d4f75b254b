"""Elementwise a * x + y with a scalar from the constructor."""

import torch
import torch.nn as nn

N = 1 << 22
ALPHA = 0.5


class Model(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.alpha * x + y


def get_inputs():
    return [torch.randn(N), torch.randn(N)]


def get_init_inputs():
    return [ALPHA]
