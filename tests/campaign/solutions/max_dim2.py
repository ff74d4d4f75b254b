# Deliberately wrong (a minimum instead of a maximum): the campaign tests count it as incorrect.
# One program per batch element, all its rows at once: under the interpreter each program costs
# milliseconds, and one per row (512 at the interpreter's shape) made this the campaign's slowest file.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rows_min(x_ptr, y_ptr, d1, d2, BLOCK_R: tl.constexpr, BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK)
    ok = (rows[:, None] < d1) & (cols[None, :] < d2)
    x = tl.load(x_ptr + (b * d1 + rows[:, None]) * d2 + cols[None, :], mask=ok, other=float("inf"))
    tl.store(y_ptr + b * d1 + rows, tl.min(x, axis=1), mask=rows < d1)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        b, d1, d2 = x.shape
        y = torch.empty((b, d1), dtype=x.dtype, device=x.device)
        _rows_min[(b,)](x, y, d1, d2, BLOCK_R=triton.next_power_of_2(d1), BLOCK=triton.next_power_of_2(d2))
        return y
