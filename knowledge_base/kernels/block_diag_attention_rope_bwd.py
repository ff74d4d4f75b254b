"""
---
title: Block-diagonal attention backward with the rotary-embedding backward fused (jagged, one 64x64 tile)
kind: kernels
family: [block_diag_attention_rope_bwd, block_diag_attention_rope, block_diag_attention, attention]
tags: [attention, backward, rope, rotary, fusion, epilogue, block-diagonal, jagged, variable-length, tile-map, tensor-core, bf16]
hardware: [any]
spec: block_diag_attention_rope_bwd
---
dQ, dK, dV of block-diagonal attention whose Q and K are rotated (RoPE, rotate-half, positions from
each sequence's start), with respect to the unrotated Q and K: block_diag_attention_bwd's kernel
(one program per (64-token block, head), P recomputed from the complete tile, Delta from its own dP
tile, no preprocessing, no atomics) with the rotation applied to Q and K in registers after their
loads and its backward (the transpose rotation, angle -theta) applied to dQ and dK in the epilogue
before the stores. Unfused, the rotation's backward is one more pass reading dQ', dK' and writing
dQ, dK, and the forward's rotated Q, K would have been stored for the backward or rotated again.

Q and K are handled as halves [64, D/2] (rotate-half pairs element i with i + D/2): the scores are
q1' k1'^T + q2' k2'^T, dQ' = dS K' and dK' = dS^T Q' are computed per half, then
dQ1 = dQ1' cos + dQ2' sin, dQ2 = dQ2' cos - dQ1' sin (likewise dK).
"""

import math

import torch
import triton
import triton.language as tl
from _block_diag import ROPE_BASE, BlockDiagModule, block_program, block_rows, check_inputs, dim_block, find_block, launch_plan, load_tile, rope_tile, rotate, softmax_grads, store_tile, tile_exp, tile_ptrs

CONFIG = {
    "num_warps": 4,  # warps a (block, head) program (the plain backward: 4 beat 8 on an H200)
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
def _block_diag_rope_bwd(
    Q, K, V, DO, DQ, DK, DV, OFFSETS, BLOCK_OFFSETS,
    stride_qt, stride_qh, stride_qd,
    stride_kt, stride_kh, stride_kd,
    stride_vt, stride_vh, stride_vd,
    stride_dot, stride_doh, stride_dod,
    stride_dqt, stride_dqh, stride_dqd,
    stride_dkt, stride_dkh, stride_dkd,
    stride_dvt, stride_dvh, stride_dvd,
    n_seq, half, sm_scale, neg_log2_base_over_half,
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
    for hh in tl.static_range(HEADS_PER_PROGRAM):
        h = head_group * HEADS_PER_PROGRAM + hh
        q_ptrs = tile_ptrs(Q, rows, h, offs_h, stride_qt, stride_qh, stride_qd)
        k_ptrs = tile_ptrs(K, rows, h, offs_h, stride_kt, stride_kh, stride_kd)
        v = load_tile(V, rows, h, offs_d, stride_vt, stride_vh, stride_vd, io_mask)
        do = load_tile(DO, rows, h, offs_d, stride_dot, stride_doh, stride_dod, io_mask)
        rq1, rq2 = rotate(
            tl.load(q_ptrs, mask=half_mask, other=0.0).to(tl.float32),
            tl.load(q_ptrs + half * stride_qd, mask=half_mask, other=0.0).to(tl.float32), cos, sin,
        )
        rk1, rk2 = rotate(
            tl.load(k_ptrs, mask=half_mask, other=0.0).to(tl.float32),
            tl.load(k_ptrs + half * stride_kd, mask=half_mask, other=0.0).to(tl.float32), cos, sin,
        )
        rq1, rq2, rk1, rk2 = rq1.to(v.dtype), rq2.to(v.dtype), rk1.to(v.dtype), rk2.to(v.dtype)

        # P from the complete score tile: nothing saved by the forward is needed.
        s = tl.dot(rq1, tl.trans(rk1))
        p = tile_exp(tl.dot(rq2, tl.trans(rk2), s), live, sm_scale * 1.4426950408889634)
        p = p / tl.sum(p, 1)[:, None]

        dv, ds = softmax_grads(p, do, v, sm_scale)
        ds = ds.to(v.dtype)
        # Gradients of the rotated halves, then the rotation's backward (angle -theta) in the epilogue.
        dq1, dq2 = rotate(tl.dot(ds, rk1), tl.dot(ds, rk2), cos, -sin)
        dk1, dk2 = rotate(tl.dot(tl.trans(ds), rq1), tl.dot(tl.trans(ds), rq2), cos, -sin)

        dq_ptrs = tile_ptrs(DQ, rows, h, offs_h, stride_dqt, stride_dqh, stride_dqd)
        dk_ptrs = tile_ptrs(DK, rows, h, offs_h, stride_dkt, stride_dkh, stride_dkd)
        tl.store(dq_ptrs, dq1.to(DQ.dtype.element_ty), mask=half_mask)
        tl.store(dq_ptrs + half * stride_dqd, dq2.to(DQ.dtype.element_ty), mask=half_mask)
        tl.store(dk_ptrs, dk1.to(DK.dtype.element_ty), mask=half_mask)
        tl.store(dk_ptrs + half * stride_dkd, dk2.to(DK.dtype.element_ty), mask=half_mask)
        store_tile(DV, dv, rows, h, offs_d, stride_dvt, stride_dvh, stride_dvd, io_mask)


def block_diag_attention_rope_bwd(q, k, v, do, offsets):
    """(dq, dk, dv) of block-diagonal attention with RoPE on q and k, with respect to the unrotated q and k."""
    check_inputs("block_diag_attention_rope_bwd", offsets, q, k, v, do, rope=True)
    tokens, heads, head_dim = q.shape
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    if tokens == 0 or heads == 0:
        return dq, dk, dv
    offsets, block_offsets, n_seq, grid, meta = launch_plan("block_diag_attention_rope_bwd", offsets, tokens, heads, CONFIG)
    half = head_dim // 2
    block_half, block_d = dim_block(half), dim_block(head_dim)
    _block_diag_rope_bwd[grid](
        q, k, v, do, dq, dk, dv, offsets, block_offsets,
        *q.stride(), *k.stride(), *v.stride(), *do.stride(), *dq.stride(), *dk.stride(), *dv.stride(),
        n_seq, half, 1.0 / math.sqrt(head_dim), -math.log2(ROPE_BASE) / half,
        BLOCK_HALF=block_half, BLOCK_D=block_d, EVEN_D=block_half == half and block_d == head_dim, **meta,
    )
    return dq, dk, dv


class ModelNew(BlockDiagModule):
    def forward(self, q, k, v, do, offsets):
        return block_diag_attention_rope_bwd(q, k, v, do, offsets)
