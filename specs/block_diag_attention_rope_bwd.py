"""Reference: block-diagonal attention with rotary embedding, BACKWARD: (dQ, dK, dV) for Q, K, V, dO.

The forward is block_diag_attention_rope's (RoPE rotate-half on Q and K, base ROPE_BASE, positions
from each sequence's start, then block-diagonal attention); the gradients are with respect to the
unrotated Q and K, so a kernel has to undo the rotation on dQ and dK (the rotation's backward is
the inverse rotation). The rest as in block_diag_attention_bwd.py:

    q, k, v, do   [TOKENS, HEADS, HEAD_DIM]   packed sequences (see block_diag_attention.py)
    offsets       [BATCH + 1] int64
    returns       dq, dk, dv, each [TOKENS, HEADS, HEAD_DIM]

The forward is block_diag_attention's: every sequence cut into 64-token blocks from its own start,
a token attending only within its block, scale 1/sqrt(HEAD_DIM). The gradients are autograd's
through that forward, so backward kernels are searched like forward ones.

Under torch.compile on a GPU in bf16/fp16 (the spec's baseline) the forward is flex_attention,
compiled (its backward is compiled too), with a block mask built from the block table; run eagerly
(the correctness check, float64, the CPU) the exact computation on gathered 64-token blocks.
Lengths as in block_diag_attention.py (SPARSITY = empty
fraction of the padded [BATCH, MAX_LEN] layout, spread evenly, shuffled by LENGTH_SEED).
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


def rotary(x, offsets, base, sign=1.0):
    """x [TOKENS, H, D] rotated by each token's position within its sequence (sign=-1: the inverse,
    which is also the rotation's backward)."""
    tokens, dim = x.shape[0], x.shape[-1]
    lengths = offsets[1:] - offsets[:-1]
    seq = torch.repeat_interleave(torch.arange(len(lengths), device=x.device), lengths)
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    pos = (torch.arange(tokens, device=x.device) - offsets[:-1][seq]).to(wide)
    inv_freq = base ** (-2.0 * torch.arange(dim // 2, device=x.device, dtype=wide) / dim)
    angle = sign * pos[:, None] * inv_freq[None, :]
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


def exact_block_gradients(q, k, v, do, offsets, block, chunk=1024):
    """(dq, dk, dv) by autograd through exact_block_attention's computation, `chunk` blocks at a
    time (every token belongs to one block, so each chunk's gradients are final): the float64 check
    at the production shape stays within a few GB."""
    start, rows, _ = block_table(offsets, block)
    pos = torch.arange(block, device=q.device)
    valid = pos[None, :] < rows[:, None]
    idx = torch.where(valid, start[:, None] + pos[None, :], torch.zeros_like(start)[:, None])
    grads = [torch.zeros_like(t) for t in (q, k, v)]
    with torch.enable_grad():
        for c in range(0, len(start), chunk):
            i, ok = idx[c : c + chunk], valid[c : c + chunk]
            qb, kb, vb = (t[i].detach().requires_grad_() for t in (q, k, v))
            scores = torch.einsum("nihd,njhd->nhij", qb, kb) / math.sqrt(q.shape[-1])
            scores = scores.masked_fill(~ok[:, None, None, :], float("-inf"))
            ob = torch.einsum("nhij,njhd->nihd", torch.softmax(scores, dim=-1), vb)
            upstream = do[i] * ok[:, :, None, None]  # padded rows carry no gradient
            for g, out in zip(torch.autograd.grad(ob, (qb, kb, vb), upstream), grads):
                out[i[ok]] = g[ok]
    return tuple(grads)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v, do, offsets):
        with torch.enable_grad():
            if torch.compiler.is_compiling() and q.is_cuda and q.dtype in (torch.bfloat16, torch.float16):
                leaves = [t.detach().requires_grad_() for t in (q, k, v)]
                rq, rk = (rotary(t, offsets, ROPE_BASE) for t in leaves[:2])
                out = flex_block_attention(rq, rk, leaves[2], offsets, BLOCK)
                return torch.autograd.grad(out, leaves, do)
        rq, rk = rotary(q, offsets, ROPE_BASE), rotary(k, offsets, ROPE_BASE)
        drq, drk, dv = exact_block_gradients(rq, rk, v, do, offsets, BLOCK)
        return rotary(drq, offsets, ROPE_BASE, -1.0), rotary(drk, offsets, ROPE_BASE, -1.0), dv


def get_inputs():
    lengths = sequence_lengths(BATCH, MAX_LEN, SPARSITY, LENGTH_SEED)
    offsets = torch.zeros(BATCH + 1, dtype=torch.int64, device="cpu")
    offsets[1:] = torch.cumsum(lengths, 0)
    tokens = int(offsets[-1])
    q = torch.randn(tokens, HEADS, HEAD_DIM)
    k = torch.randn(tokens, HEADS, HEAD_DIM)
    v = torch.randn(tokens, HEADS, HEAD_DIM)
    do = torch.randn(tokens, HEADS, HEAD_DIM)
    return [q, k, v, do, offsets]


def get_init_inputs():
    return []
