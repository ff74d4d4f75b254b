"""Reference: scaled dot-product attention forward on [batch, heads, seq, head_dim] (KernelBench style).

Queries, keys and values share one shape; the softmax scale is 1/sqrt(head_dim) and CAUSAL=1
masks keys after the query position. A spec shape overrides the constants below.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 4
HEADS = 32
SEQ_LEN = 4096
HEAD_DIM = 128
CAUSAL = 0


class Model(nn.Module):
    def __init__(self, causal: bool = False):
        super().__init__()
        self.causal = bool(causal)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


def get_inputs():
    shape = (BATCH, HEADS, SEQ_LEN, HEAD_DIM)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return [bool(CAUSAL)]
