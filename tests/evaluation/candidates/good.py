import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_shift_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    if True:
        mask = offs < n_cols
        x = tl.load(x_ptr + row * n_cols + offs, mask=mask).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=mask).to(tl.float32)
        b = tl.load(b_ptr + offs, mask=mask).to(tl.float32)
        tl.store(y_ptr + row * n_cols + offs, (x * w + b).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.bias = nn.Parameter(torch.zeros(n))

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.shape[-1]
        scale_shift_kernel[(x.numel() // n, triton.cdiv(n, 256))](x, self.weight, self.bias, y, n, BLOCK=256)
        return y
