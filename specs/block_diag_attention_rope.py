"""Reference: block-diagonal attention forward with rotary position embedding on Q and K.

Exactly block_diag_attention.py's operator, except that q and k are first rotated (RoPE, the
rotate-half convention: x = [x1, x2] -> [x1 cos - x2 sin, x2 cos + x1 sin]) by the angle
position * ROPE_BASE ** (-2 i / HEAD_DIM), position counted from the token's sequence start.
The rotation is computed in float (float32, or float64 for the check) and rounded to the inputs'
dtype before the attention, as a model would store rotated q and k.

    q, k, v   [TOKENS, HEADS, HEAD_DIM]   every sequence's tokens, one after another
    offsets   [BATCH + 1] int64           sequence b holds rows offsets[b] .. offsets[b + 1] - 1
    out       [TOKENS, HEADS, HEAD_DIM]

Each sequence is cut into blocks of BLOCK = 64 tokens from its own start (the last one may be
shorter); a token attends only to the tokens of its own block: softmax(q k^T / sqrt(HEAD_DIM)) v
per block and head.

Lengths: SPARSITY is the fraction of the padded [BATCH, MAX_LEN] slots that hold no token (the
jagged-batch convention), so the mean length is (1 - SPARSITY) * MAX_LEN; lengths are spread
evenly over [1, 2 * mean - 1] (or [2 * mean - MAX_LEN, MAX_LEN] past half of MAX_LEN) and shuffled
by a fixed seed (LENGTH_SEED), so every trial sees the same batch layout with fresh values.

Under torch.compile on a GPU in bf16/fp16 (the spec's baseline) the forward is what a user would
run: flex_attention, compiled, with a block mask built directly from the block table (each 128-row
query block meets at most three 128-row key blocks). Run eagerly (the correctness check, float64,
the CPU) it is the exact computation on gathered 64-token blocks, which needs no compilation.
"""

import math

import torch
import torch.nn as nn

BATCH = 1152
MAX_LEN = 2000
SPARSITY = 0.7
HEADS = 4
HEAD_DIM = 128
BLOCK = 64
LENGTH_SEED = 0
ROPE_BASE = 10000.0


def sequence_lengths(batch, max_len, sparsity, seed):
    mean = max(1.0, (1.0 - sparsity) * max_len)
    lo, hi = (1.0, 2.0 * mean - 1.0) if 2.0 * mean <= max_len + 1 else (2.0 * mean - max_len, float(max_len))
    spread = lo + (torch.arange(batch, dtype=torch.float64, device="cpu") + 0.5) / batch * (hi - lo)
    order = torch.randperm(batch, generator=torch.Generator(device="cpu").manual_seed(seed), device="cpu")
    return spread.round().clamp(1, max_len).to(torch.int64)[order]


def block_table(offsets, block):
    """(first row, rows) of every block, sequence by sequence, and each row's block number."""
    lengths = offsets[1:] - offsets[:-1]
    per_seq = (lengths + block - 1) // block
    seq = torch.repeat_interleave(torch.arange(len(lengths), device=offsets.device), per_seq)
    first_block = torch.cumsum(per_seq, 0) - per_seq
    within = torch.arange(len(seq), device=offsets.device) - first_block[seq]
    start = offsets[:-1][seq] + within * block
    rows = torch.minimum(offsets[1:][seq] - start, torch.full_like(start, block))
    row_block = torch.repeat_interleave(torch.arange(len(seq), device=offsets.device), rows)
    return start, rows, row_block


def rotary(x, offsets, base):
    """x [TOKENS, H, D] rotated by each token's position within its sequence."""
    tokens, dim = x.shape[0], x.shape[-1]
    lengths = offsets[1:] - offsets[:-1]
    seq = torch.repeat_interleave(torch.arange(len(lengths), device=x.device), lengths)
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    pos = (torch.arange(tokens, device=x.device) - offsets[:-1][seq]).to(wide)
    inv_freq = base ** (-2.0 * torch.arange(dim // 2, device=x.device, dtype=wide) / dim)
    angle = pos[:, None] * inv_freq[None, :]
    cos, sin = angle.cos()[:, None, :], angle.sin()[:, None, :]
    x1, x2 = x[..., : dim // 2].to(wide), x[..., dim // 2 :].to(wide)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).to(x.dtype)


def exact_block_attention(q, k, v, offsets, block):
    """Every block gathered into a [blocks, block, H, D] tensor, padded keys masked."""
    start, rows, _ = block_table(offsets, block)
    pos = torch.arange(block, device=q.device)
    valid = pos[None, :] < rows[:, None]
    idx = torch.where(valid, start[:, None] + pos[None, :], torch.zeros_like(start)[:, None])
    qb, kb, vb = q[idx], k[idx], v[idx]
    scores = torch.einsum("nihd,njhd->nhij", qb, kb) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
    ob = torch.einsum("nhij,njhd->nihd", torch.softmax(scores, dim=-1), vb)
    out = torch.zeros_like(q)
    out[idx[valid]] = ob[valid]
    return out


def flex_block_mask(offsets, block, tokens):
    """flex_attention's BlockMask for [1, H, tokens, D]: each 128-row query block lists the (at most
    three) 128-row key blocks its 64-token blocks reach; mask_mod compares the rows' block numbers."""
    from torch.nn.attention.flex_attention import BlockMask

    mask_block = 128
    _, _, row_block = block_table(offsets, block)

    def same_block(b, h, q_idx, kv_idx):
        return row_block[q_idx] == row_block[kv_idx]

    n_blocks = (tokens + mask_block - 1) // mask_block
    qb = torch.arange(n_blocks, device=offsets.device)
    lo = (qb - 1).clamp(min=0)
    hi = (qb + 1).clamp(max=n_blocks - 1)
    kv_num = (hi - lo + 1).to(torch.int32)
    # Flex's layout: a row of kv_indices per query block, as wide as there are key blocks.
    kv_idx = torch.zeros(n_blocks, n_blocks, dtype=torch.int32, device=offsets.device)
    kv_idx[:, :3] = (lo[:, None] + torch.arange(3, device=offsets.device)[None, :]).clamp(max=n_blocks - 1)
    return BlockMask.from_kv_blocks(
        kv_num[None, None], kv_idx[None, None], BLOCK_SIZE=mask_block, mask_mod=same_block, seq_lengths=(tokens, tokens)
    )


def flex_block_attention(q, k, v, offsets, block):
    """flex_attention over [1, H, TOKENS, D] views with the block mask (fused when compiled)."""
    from torch.nn.attention.flex_attention import flex_attention

    mask = flex_block_mask(offsets, block, q.shape[0])
    view = [t.transpose(0, 1).unsqueeze(0) for t in (q, k, v)]
    return flex_attention(*view, block_mask=mask).squeeze(0).transpose(0, 1)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v, offsets):
        q, k = rotary(q, offsets, ROPE_BASE), rotary(k, offsets, ROPE_BASE)
        if torch.compiler.is_compiling() and q.is_cuda and q.dtype in (torch.bfloat16, torch.float16):
            return flex_block_attention(q, k, v, offsets, BLOCK)
        return exact_block_attention(q, k, v, offsets, BLOCK)


def get_inputs():
    lengths = sequence_lengths(BATCH, MAX_LEN, SPARSITY, LENGTH_SEED)
    offsets = torch.zeros(BATCH + 1, dtype=torch.int64, device="cpu")
    offsets[1:] = torch.cumsum(lengths, 0)
    tokens = int(offsets[-1])
    q = torch.randn(tokens, HEADS, HEAD_DIM)
    k = torch.randn(tokens, HEADS, HEAD_DIM)
    v = torch.randn(tokens, HEADS, HEAD_DIM)
    return [q, k, v, offsets]


def get_init_inputs():
    return []
