"""A knowledge base of our own for the offline-operator tests, so that they do not depend on
the tuned values of the shipped reference kernels (which change as they are re-measured)."""

import pytest

from kernelevolve.knowledge import KnowledgeBase
from tests.seeding import seed  # noqa: F401  (autouse: every draw seeded, the seed printed on failure)

KERNEL = '''"""
---
title: RMSNorm test kernel, one program per row
kind: kernels
family: [rmsnorm]
tags: [test]
hardware: [any]
spec: rmsnorm
---
y = x * rsqrt(mean(x^2) + eps) * weight, one program per row (rows up to BLOCK_N long).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

CONFIG = {"tile_elems": 4096, "max_warps": 16, "split_block_n": 4096, "num_stages": 1, "l2_hints": True}

TUNABLES = {
    "tile_elems": [1024, 2048, 4096, 8192, 16384],
    "max_warps": [4, 8, 16, 32],
    "split_block_n": [1024, 2048, 4096, 8192, 16384],
    "num_stages": [1, 2, 3],
    "l2_hints": [True, False],
}


@triton.jit
def _row_kernel(x_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    ok = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=ok, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    y = x * tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps) * w
    tl.store(y_ptr + row * n_cols + cols, y.to(y_ptr.dtype.element_ty), mask=ok)


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))

    def forward(self, x):
        n = x.shape[-1]
        x2 = x.reshape(-1, n).contiguous()
        y = torch.empty_like(x2)
        warps = min(CONFIG["max_warps"], max(1, triton.next_power_of_2(n) // 256))
        _row_kernel[(x2.shape[0],)](x2, self.weight, y, n, self.eps, BLOCK_N=triton.next_power_of_2(n), num_warps=warps)
        return y.view(x.shape)
'''


@pytest.fixture
def test_kb(tmp_path):
    """(KnowledgeBase holding only kernels/rmsnorm.py = KERNEL, the kernel source)."""
    (tmp_path / "kb" / "kernels").mkdir(parents=True)
    (tmp_path / "kb" / "kernels" / "rmsnorm.py").write_text(KERNEL)
    return KnowledgeBase.load(tmp_path / "kb", fresh=True), KERNEL
