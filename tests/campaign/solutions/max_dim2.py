# Deliberately wrong (a minimum instead of a maximum): the campaign tests count it as incorrect.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_min(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=float("inf"))
    tl.store(y_ptr + row, tl.min(x, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        b, d1, d2 = x.shape
        y = torch.empty((b, d1), dtype=x.dtype, device=x.device)
        _row_min[(b * d1,)](x, y, d2, BLOCK=triton.next_power_of_2(d2))
        return y
