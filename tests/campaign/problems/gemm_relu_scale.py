"""Level-2 style fused operator: Linear (GEMM + bias), ReLU, then a scale."""

import torch
import torch.nn as nn

batch_size = 1024
in_features = 4096
out_features = 2048
scale = 0.5


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x)) * self.scale


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
