"""Reference: IKBO target attention, candidates attending to the history of the user they belong to.

    q             [NUM_CANDIDATES, HEADS, Q_LEN, HEAD_DIM]   per-candidate queries
    k, v          [NUM_USERS, HEADS, KV_LEN, HEAD_DIM]       per-user history keys/values
    cand_to_user  [NUM_CANDIDATES] int64, sorted; NUM_CANDIDATES / NUM_USERS candidates per user
    out           [NUM_CANDIDATES, HEADS, Q_LEN, HEAD_DIM] = softmax(q k_u^T / sqrt(HEAD_DIM)) v_u

The natural PyTorch gathers (broadcasts) each user's K/V to its candidates and calls SDPA.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

NUM_CANDIDATES = 2048
NUM_USERS = 32
HEADS = 2
HEAD_DIM = 128
Q_LEN = 64
KV_LEN = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v, cand_to_user):
        return F.scaled_dot_product_attention(q, k[cand_to_user], v[cand_to_user])


def get_inputs():
    q = torch.randn(NUM_CANDIDATES, HEADS, Q_LEN, HEAD_DIM)
    k = torch.randn(NUM_USERS, HEADS, KV_LEN, HEAD_DIM)
    v = torch.randn(NUM_USERS, HEADS, KV_LEN, HEAD_DIM)
    cand_to_user = torch.arange(NUM_CANDIDATES, dtype=torch.int64) * NUM_USERS // NUM_CANDIDATES
    return [q, k, v, cand_to_user]


def get_init_inputs():
    return []
