import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gather_rows(idx_ptr, table_ptr, out_ptr, dim, BLOCK: tl.constexpr):
    i = tl.program_id(0)
    row = tl.load(idx_ptr + i)
    cols = tl.arange(0, BLOCK)
    ok = cols < dim
    v = tl.load(table_ptr + row * dim + cols, mask=ok)
    tl.store(out_ptr + i * dim + cols, v, mask=ok)


class ModelNew(nn.Module):
    def __init__(self, num_embeddings, embedding_dim):
        super().__init__()
        self.table = nn.Embedding(num_embeddings, embedding_dim)

    def forward(self, idx):
        idx = idx.contiguous()
        weight = self.table.weight
        dim = weight.shape[1]
        out = torch.empty((*idx.shape, dim), dtype=weight.dtype, device=weight.device)
        _gather_rows[(idx.numel(),)](idx, weight, out, dim, BLOCK=triton.next_power_of_2(dim))
        return out
