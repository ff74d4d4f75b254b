"""
---
title: Block-diagonal attention forward with rotary embedding fused into the Q/K loads (jagged, one 64x64 tile)
kind: kernels
family: [block_diag_attention_rope, block_diag_attention, attention]
tags: [attention, rope, rotary, fusion, block-diagonal, jagged, variable-length, tile-map, binary-search, tensor-core, bf16]
hardware: [any]
spec: block_diag_attention_rope
---
block_diag_attention's kernel (packed [TOKENS, H, D] with int64 offsets, 64-token blocks from each
sequence's start, one program per (block, head), block prefix sums + binary search, a grid over an
upper bound of the block count) with the rotary position embedding applied to Q and K in
registers right after they are loaded: no separate rotation kernel writing rotated copies of Q and K
to memory and reading them back (two full passes over Q and K saved).

The rotation (rotate-half convention) pairs element i with element i + D/2, so Q and K are loaded
as their two halves [64, D/2]; the angle is position * base^(-2i/D), the position within the
sequence = (block number within the sequence) * 64 + row, computed in fp32 with tl.cos/tl.sin; the
rotated halves are rounded to the input dtype (as a model storing rotated Q/K would) and the
scores are the sum of two half-width products, q1 k1^T + q2 k2^T. V is not rotated.
"""

import math

import torch
import triton
import triton.language as tl
from _block_diag import LOG2E, ROPE_BASE, BlockDiagModule, block_program, block_rows, check_inputs, dim_block, find_block, launch_plan, load_tile, rope_tile, store_tile, tile_exp, tile_ptrs

CONFIG = {
    "num_warps": 4,  # warps a (block, head) program
    "num_stages": 1,  # no loop to pipeline; kept for the compiler's load scheduling
    "HEADS_INNER": True,  # grid (heads, blocks) instead of (blocks, heads): neighbours share a block's rows
    "HEADS_PER_PROGRAM": 1,  # heads one program handles in turn (halved until it divides the head count)
}

TUNABLES = {
    "num_warps": [2, 4, 8],
    "num_stages": [1, 2],
    "HEADS_INNER": [False, True],
    "HEADS_PER_PROGRAM": [1, 2, 4],
}


@triton.jit
def _block_diag_rope_fwd(
    Q, K, V, O, OFFSETS, BLOCK_OFFSETS,
    stride_qt, stride_qh, stride_qd,
    stride_kt, stride_kh, stride_kd,
    stride_vt, stride_vh, stride_vd,
    stride_ot, stride_oh, stride_od,
    n_seq, half, qk_scale, neg_log2_base_over_half,
    BLOCK: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    BLOCK_D: tl.constexpr,
    EVEN_D: tl.constexpr,
    SEARCH_STEPS: tl.constexpr,
    HEADS_INNER: tl.constexpr,
    HEADS_PER_PROGRAM: tl.constexpr,
):
    head_group, pid = block_program(HEADS_INNER)
    if pid >= tl.load(BLOCK_OFFSETS + n_seq):
        return  # the grid is an upper bound on the block count
    row0, n_rows, pos0 = find_block(OFFSETS, BLOCK_OFFSETS, n_seq, pid, SEARCH_STEPS, BLOCK)
    offs, offs_d, rows, live, io_mask = block_rows(row0, n_rows, 2 * half, BLOCK, BLOCK_D, EVEN_D)
    offs_h, half_mask, cos, sin = rope_tile(offs, live, pos0, half, neg_log2_base_over_half, BLOCK_HALF, EVEN_D)
    for hh in tl.static_range(HEADS_PER_PROGRAM):  # the block's rows for a group of heads
        h = head_group * HEADS_PER_PROGRAM + hh
        q_ptrs = tile_ptrs(Q, rows, h, offs_h, stride_qt, stride_qh, stride_qd)
        k_ptrs = tile_ptrs(K, rows, h, offs_h, stride_kt, stride_kh, stride_kd)
        q1 = tl.load(q_ptrs, mask=half_mask, other=0.0).to(tl.float32)
        q2 = tl.load(q_ptrs + half * stride_qd, mask=half_mask, other=0.0).to(tl.float32)
        k1 = tl.load(k_ptrs, mask=half_mask, other=0.0).to(tl.float32)
        k2 = tl.load(k_ptrs + half * stride_kd, mask=half_mask, other=0.0).to(tl.float32)
        v = load_tile(V, rows, h, offs_d, stride_vt, stride_vh, stride_vd, io_mask)
        # Rotate-half RoPE in registers, rounded to the input dtype like stored rotated Q/K.
        rq1 = (q1 * cos - q2 * sin).to(v.dtype)
        rq2 = (q2 * cos + q1 * sin).to(v.dtype)
        rk1 = (k1 * cos - k2 * sin).to(v.dtype)
        rk2 = (k2 * cos + k1 * sin).to(v.dtype)

        # The whole score row of a block is this one tile: exact softmax, no running max.
        s = tl.dot(rq1, tl.trans(rk1))
        p = tile_exp(tl.dot(rq2, tl.trans(rk2), s), live, qk_scale)
        l = tl.sum(p, 1)
        o = tl.dot(p.to(v.dtype), v) / l[:, None]
        store_tile(O, o, rows, h, offs_d, stride_ot, stride_oh, stride_od, io_mask)


def block_diag_attention_rope(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Block-diagonal attention of packed [TOKENS, H, D] q, k, v with RoPE on q and k (positions from each sequence's start)."""
    check_inputs("block_diag_attention_rope", offsets, q, k, v, rope=True)
    tokens, heads, head_dim = q.shape
    out = torch.empty_like(q)
    if tokens == 0 or heads == 0:
        return out
    offsets, block_offsets, n_seq, grid, meta = launch_plan("block_diag_attention_rope", offsets, tokens, heads, CONFIG)
    half = head_dim // 2
    block_half, block_d = dim_block(half), dim_block(head_dim)
    _block_diag_rope_fwd[grid](
        q, k, v, out, offsets, block_offsets,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        n_seq, half, 1.0 / math.sqrt(head_dim) * LOG2E, -math.log2(ROPE_BASE) / half,
        BLOCK_HALF=block_half, BLOCK_D=block_d, EVEN_D=block_half == half and block_d == head_dim, **meta,
    )
    return out


class ModelNew(BlockDiagModule):
    def forward(self, q, k, v, offsets):
        return block_diag_attention_rope(q, k, v, offsets)
