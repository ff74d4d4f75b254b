"""KernelBench-style level 2 problem: Linear, GELU, then softmax over the features."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        x = torch.nn.functional.gelu(x)
        return torch.nn.functional.softmax(x, dim=1)


batch_size = 1024
in_features = 8192
out_features = 8192


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
