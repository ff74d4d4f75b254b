"""Reference: PFFN, InterFormer's personalised feed-forward block, KernelBench convention.

Every sample b has its own weights (generated upstream from its features):
    X [B, N, D], W1 [B, D, K], W2 [B, K, D]
    H   = RMSNorm_K(GELU(X @ W1 + b1)) * g1       [B, N, K]
    out = RMSNorm_D(H @ W2 + b2) * g2             [B, N, D]
b1, g1 [K] and b2, g2 [D] are shared parameters; GELU is the exact (erf) one; RMSNorm has eps
EPS and computes in float32 (or wider), returning the input dtype.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

B = 1024
N = 200
D = 256
K = 160
EPS = 1e-6


def _rmsnorm(h: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    acc = torch.promote_types(h.dtype, torch.float32)
    hf = h.to(acc)
    hf = hf * torch.rsqrt(hf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (hf * weight.to(acc)).to(h.dtype)


class Model(nn.Module):
    def __init__(self, d: int, k: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.b1 = nn.Parameter(0.1 * torch.randn(k))
        self.g1 = nn.Parameter(1.0 + 0.1 * torch.randn(k))
        self.b2 = nn.Parameter(0.1 * torch.randn(d))
        self.g2 = nn.Parameter(1.0 + 0.1 * torch.randn(d))

    def forward(self, x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
        h = _rmsnorm(F.gelu(torch.bmm(x, w1) + self.b1), self.g1, self.eps)
        return _rmsnorm(torch.bmm(h, w2) + self.b2, self.g2, self.eps)


def get_inputs():
    x = torch.randn(B, N, D)
    w1 = torch.randn(B, D, K) / D ** 0.5
    w2 = torch.randn(B, K, D) / K ** 0.5
    return [x, w1, w2]


def get_init_inputs():
    return [D, K, EPS]
