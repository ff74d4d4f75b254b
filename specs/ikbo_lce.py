"""Reference: IKBO linear compression embedding (LCE) over candidates that share users.

A ranking request scores B candidates for a few users. Each candidate b belongs to user
cand_to_user[b] (int64, sorted, RATIO candidates per user, the last user may have fewer).
Its input is its user's embeddings followed by its own, compressed along K by one weight:

    user_emb      [NUM_USERS, K_USER, N]    NUM_USERS = ceil(B / RATIO)
    cand_emb      [B, K_CAND, N]
    cand_to_user  [B] int64
    weight        [M, K_USER + K_CAND]      (first K_USER columns act on the user embeddings)
    out           [B, M, N] = weight @ cat(user_emb[cand_to_user], cand_emb, dim=1)

The natural PyTorch broadcasts the user embeddings to every candidate, concatenates and runs one
batched matmul.
"""

import math

import torch
import torch.nn as nn

B = 1024
M = 433
K_USER = 1178
K_CAND = 866
N = 256
RATIO = 70


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, user_emb, cand_emb, cand_to_user, weight):
        x = torch.cat([user_emb[cand_to_user], cand_emb], dim=1)
        return torch.matmul(weight, x)


def get_inputs():
    num_users = math.ceil(B / RATIO)
    user_emb = torch.randn(num_users, K_USER, N)
    cand_emb = torch.randn(B, K_CAND, N)
    cand_to_user = torch.arange(B, dtype=torch.int64) // RATIO
    weight = torch.randn(M, K_USER + K_CAND) / math.sqrt(K_USER + K_CAND)
    return [user_emb, cand_emb, cand_to_user, weight]


def get_init_inputs():
    return []
