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
import torch.nn as nn
import triton
import triton.language as tl

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

BLOCK = 64  # the attention block of the spec (tokens), also the tile's rows and columns
ROPE_BASE = 10000.0  # the spec's rotary base


@triton.jit
def _block_prefix_sums(OFFSETS, BLOCK_OFFSETS, n_seq, BLOCK: tl.constexpr, CHUNK: tl.constexpr):
    """BLOCK_OFFSETS[b] = number of 64-token blocks in sequences 0 .. b-1 (BLOCK_OFFSETS[0] = 0)."""
    running = tl.zeros([], dtype=tl.int64)
    tl.store(BLOCK_OFFSETS, running)
    for c0 in range(0, n_seq, CHUNK):
        i = c0 + tl.arange(0, CHUNK)
        live = i < n_seq
        start = tl.load(OFFSETS + i, mask=live, other=0)
        end = tl.load(OFFSETS + i + 1, mask=live, other=0)
        blocks = (end - start + BLOCK - 1) // BLOCK
        total = tl.cumsum(blocks, 0) + running
        tl.store(BLOCK_OFFSETS + 1 + i, total, mask=live)
        running += tl.sum(blocks, 0)


@triton.jit
def _find_block(OFFSETS, BLOCK_OFFSETS, n_seq, pid, SEARCH_STEPS: tl.constexpr, BLOCK: tl.constexpr):
    """(first row, rows, position of the first row in its sequence) of global block `pid`: the sequence b with BLOCK_OFFSETS[b] <= pid <
    BLOCK_OFFSETS[b + 1] by binary search (empty sequences are skipped by the strict bound)."""
    lo = tl.zeros([], dtype=tl.int32)
    hi = tl.zeros([], dtype=tl.int32) + n_seq
    for _ in tl.static_range(SEARCH_STEPS):
        mid = (lo + hi) // 2
        right = tl.load(BLOCK_OFFSETS + mid) <= pid
        lo = tl.where(right, mid, lo)
        hi = tl.where(right, hi, mid)
    seq_start = tl.load(OFFSETS + lo)
    seq_end = tl.load(OFFSETS + lo + 1)
    within = pid - tl.load(BLOCK_OFFSETS + lo)
    row0 = seq_start + within * BLOCK
    return row0, tl.minimum(seq_end - row0, BLOCK), within * BLOCK


@triton.jit
def _rotate(x1, x2, cos, sin):
    """Rotate-half RoPE of the two halves (fp32 in, fp32 out); sin -> -sin is the inverse."""
    return x1 * cos - x2 * sin, x2 * cos + x1 * sin


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
    if HEADS_INNER:
        head_group = tl.program_id(0)
        pid = tl.program_id(1)
    else:
        pid = tl.program_id(0)
        head_group = tl.program_id(1)
    if pid >= tl.load(BLOCK_OFFSETS + n_seq):
        return  # the grid is an upper bound on the block count
    row0, n_rows, pos0 = _find_block(OFFSETS, BLOCK_OFFSETS, n_seq, pid, SEARCH_STEPS, BLOCK)

    offs = tl.arange(0, BLOCK)
    offs_h = tl.arange(0, BLOCK_HALF)
    offs_d = tl.arange(0, BLOCK_D)
    rows = row0 + offs
    live = offs < n_rows
    if EVEN_D:
        half_mask = live[:, None]
        io_mask = live[:, None]
    else:
        half_mask = live[:, None] & (offs_h < half)[None, :]
        io_mask = live[:, None] & (offs_d < 2 * half)[None, :]
    inv_freq = tl.exp2(offs_h.to(tl.float32) * neg_log2_base_over_half)
    angle = (pos0 + offs).to(tl.float32)[:, None] * inv_freq[None, :]
    cos = tl.cos(angle)
    sin = tl.sin(angle)
    for hh in tl.static_range(HEADS_PER_PROGRAM):
        h = head_group * HEADS_PER_PROGRAM + hh
        q_ptrs = Q + rows[:, None] * stride_qt + h * stride_qh + offs_h[None, :] * stride_qd
        k_ptrs = K + rows[:, None] * stride_kt + h * stride_kh + offs_h[None, :] * stride_kd
        v = tl.load(V + rows[:, None] * stride_vt + h * stride_vh + offs_d[None, :] * stride_vd, mask=io_mask, other=0.0)
        do = tl.load(DO + rows[:, None] * stride_dot + h * stride_doh + offs_d[None, :] * stride_dod, mask=io_mask, other=0.0)
        rq1, rq2 = _rotate(
            tl.load(q_ptrs, mask=half_mask, other=0.0).to(tl.float32),
            tl.load(q_ptrs + half * stride_qd, mask=half_mask, other=0.0).to(tl.float32), cos, sin,
        )
        rk1, rk2 = _rotate(
            tl.load(k_ptrs, mask=half_mask, other=0.0).to(tl.float32),
            tl.load(k_ptrs + half * stride_kd, mask=half_mask, other=0.0).to(tl.float32), cos, sin,
        )
        rq1, rq2, rk1, rk2 = rq1.to(v.dtype), rq2.to(v.dtype), rk1.to(v.dtype), rk2.to(v.dtype)

        # P from the complete score tile: nothing saved by the forward is needed.
        s = tl.dot(rq1, tl.trans(rk1))
        s = tl.dot(rq2, tl.trans(rk2), s)
        s = tl.where(live[None, :], s, float("-inf"))
        m = tl.max(s, 1)
        p = tl.exp2((s - m[:, None]) * (sm_scale * 1.4426950408889634))
        p = p / tl.sum(p, 1)[:, None]

        dv = tl.dot(tl.trans(p.to(do.dtype)), do)
        dp = tl.dot(do, tl.trans(v))
        delta = tl.sum(p * dp, 1)
        ds = (p * (dp - delta[:, None]) * sm_scale).to(v.dtype)
        # Gradients of the rotated halves, then the rotation's backward (angle -theta) in the epilogue.
        dq1, dq2 = _rotate(tl.dot(ds, rk1), tl.dot(ds, rk2), cos, -sin)
        dk1, dk2 = _rotate(tl.dot(tl.trans(ds), rq1), tl.dot(tl.trans(ds), rq2), cos, -sin)

        dq_ptrs = DQ + rows[:, None] * stride_dqt + h * stride_dqh + offs_h[None, :] * stride_dqd
        dk_ptrs = DK + rows[:, None] * stride_dkt + h * stride_dkh + offs_h[None, :] * stride_dkd
        tl.store(dq_ptrs, dq1.to(DQ.dtype.element_ty), mask=half_mask)
        tl.store(dq_ptrs + half * stride_dqd, dq2.to(DQ.dtype.element_ty), mask=half_mask)
        tl.store(dk_ptrs, dk1.to(DK.dtype.element_ty), mask=half_mask)
        tl.store(dk_ptrs + half * stride_dkd, dk2.to(DK.dtype.element_ty), mask=half_mask)
        tl.store(DV + rows[:, None] * stride_dvt + h * stride_dvh + offs_d[None, :] * stride_dvd, dv.to(DV.dtype.element_ty), mask=io_mask)


def block_prefix_sums(offsets: torch.Tensor) -> torch.Tensor:
    """[BATCH + 1] int64 running count of 64-token blocks before each sequence."""
    n_seq = offsets.numel() - 1
    out = torch.empty(n_seq + 1, dtype=torch.int64, device=offsets.device)
    chunk = min(4096, max(16, triton.next_power_of_2(max(n_seq, 1))))
    _block_prefix_sums[(1,)](offsets, out, n_seq, BLOCK=BLOCK, CHUNK=chunk)
    return out


def check_inputs(name: str, offsets: torch.Tensor, *tensors: torch.Tensor) -> None:
    shape = tensors[0].shape
    if any(t.dim() != 3 or t.shape != shape for t in tensors):
        raise ValueError(f"{name}: q, k, v (and dO) must share one [TOKENS, HEADS, HEAD_DIM] shape, got {[tuple(t.shape) for t in tensors]}")
    if offsets.dim() != 1 or offsets.numel() < 1 or offsets.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{name}: offsets must be a 1-D integer tensor of BATCH + 1 entries, got {tuple(offsets.shape)} {offsets.dtype}")


def block_diag_attention_rope_bwd(q, k, v, do, offsets):
    """(dq, dk, dv) of block-diagonal attention with RoPE on q and k, with respect to the unrotated q and k."""
    check_inputs("block_diag_attention_rope_bwd", offsets, q, k, v, do)
    tokens, heads, head_dim = q.shape
    if head_dim % 2:
        raise ValueError(f"block_diag_attention_rope_bwd: the rotary embedding pairs halves of HEAD_DIM, which must be even (got {head_dim})")
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    n_seq = offsets.numel() - 1
    if tokens == 0 or heads == 0:
        return dq, dk, dv
    if n_seq == 0:
        raise ValueError("block_diag_attention_rope_bwd: no sequences (offsets has one entry) but TOKENS > 0")
    offsets = offsets.to(torch.int64)
    block_offsets = block_prefix_sums(offsets)
    half = head_dim // 2
    block_half = max(16, triton.next_power_of_2(half))
    block_d = max(16, triton.next_power_of_2(head_dim))
    max_blocks = tokens // BLOCK + n_seq  # sum of ceil(len / 64) never exceeds it
    per_program = CONFIG["HEADS_PER_PROGRAM"]
    while heads % per_program:
        per_program //= 2
    groups = heads // per_program
    heads_inner = CONFIG["HEADS_INNER"] and max_blocks < 65536  # grid axis 1 holds at most 65535
    grid = (groups, max_blocks) if heads_inner else (max_blocks, groups)
    _block_diag_rope_bwd[grid](
        q, k, v, do, dq, dk, dv, offsets, block_offsets,
        *q.stride(), *k.stride(), *v.stride(), *do.stride(), *dq.stride(), *dk.stride(), *dv.stride(),
        n_seq, half, 1.0 / math.sqrt(head_dim), -math.log2(ROPE_BASE) / half,
        BLOCK=BLOCK,
        BLOCK_HALF=block_half,
        BLOCK_D=block_d,
        EVEN_D=block_half == half and block_d == head_dim,
        SEARCH_STEPS=max(1, math.ceil(math.log2(n_seq + 1))),
        HEADS_INNER=heads_inner,
        HEADS_PER_PROGRAM=per_program,
        num_warps=CONFIG["num_warps"],
        num_stages=CONFIG["num_stages"],
    )
    return dq, dk, dv


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v, do, offsets):
        return block_diag_attention_rope_bwd(q, k, v, do, offsets)
