"""RMSNorm over the last dimension (LLaMA-style), KernelBench convention.

y = x * rsqrt(mean(x^2, -1) + eps) * weight, computed in fp32 (or wider) and returned in x's dtype.
"""

import torch
import torch.nn as nn

M = 32768  # rows (tokens)
N = 4096  # hidden size
EPS = 1e-6


class Model(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        # Not all ones, so that a correctness check exercises the weight.
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        acc = torch.promote_types(x.dtype, torch.float32)
        h = x.to(acc)
        h = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (h * self.weight.to(acc)).to(x.dtype)


def get_inputs():
    return [torch.randn(M, N)]


def get_init_inputs():
    return [N, EPS]
