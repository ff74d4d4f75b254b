import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gather_kernel(table_ptr, idx_ptr, out_ptr, dim, BLOCK: tl.constexpr):
    pick = tl.program_id(0)
    row = tl.load(idx_ptr + pick)  # int64 index: the input keeps its dtype
    cols = tl.arange(0, BLOCK)
    mask = cols < dim
    tl.store(out_ptr + pick * dim + cols, tl.load(table_ptr + row * dim + cols, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, table, idx):
        assert idx.dtype == torch.int64, idx.dtype
        out = torch.empty((idx.shape[0], table.shape[1]), dtype=table.dtype, device=table.device)
        gather_kernel[(idx.shape[0],)](table, idx, out, table.shape[1], BLOCK=triton.next_power_of_2(table.shape[1]))
        return out
