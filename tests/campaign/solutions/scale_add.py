import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _axpy(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(x_ptr + offs, mask=ok)
    y = tl.load(y_ptr + offs, mask=ok)
    tl.store(out_ptr + offs, alpha * x + y, mask=ok)


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x, y):
        out = torch.empty_like(x)
        n = x.numel()
        _axpy[(triton.cdiv(n, 1024),)](x.contiguous(), y.contiguous(), out, self.alpha, n, BLOCK=1024)
        return out
