"""Reference: OptimizedFM (WuKong's factorization-machine block), KernelBench convention.

X [B, N, D] (N embeddings of width D per sample), Y [B, N, K] -> out [B, N, K] = X @ (X^T @ Y).
Two chained batched matmuls; PyTorch materialises the [B, D, K] intermediate in HBM.
"""

import torch
import torch.nn as nn

B = 1024
N = 24
D = 224
K = 2198


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.bmm(x, torch.bmm(x.transpose(1, 2), y))


def get_inputs():
    # Scaled so that out stays O(1) whatever N and D: each bmm sums N or D products.
    x = torch.randn(B, N, D) / (N * D) ** 0.25
    y = torch.randn(B, N, K)
    return [x, y]


def get_init_inputs():
    return []
