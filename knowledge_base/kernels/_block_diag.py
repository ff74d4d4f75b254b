"""Shared parts of the block-diagonal attention kernels (forward, backward, and their fused-RoPE
variants): the jagged tile map (a prefix sum of 64-token blocks per sequence, then a binary search
per program), the tile's rows and masks, strided [64, D] loads and stores, the tile's softmax, the
rotary angles, and the host's input checks and launch plan.

Imported as `from _block_diag import ...` (knowledge_base/kernels is on the candidates' import path;
Triton inlines @triton.jit helpers into the kernels that call them).
"""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 64  # the attention block of the specs (tokens), also the tile's rows and columns
LOG2E = 1.4426950408889634  # scores are scaled into the exp2 domain
ROPE_BASE = 10000.0  # the RoPE specs' rotary base


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
def block_program(HEADS_INNER: tl.constexpr):
    """(head group, global block) of this program; HEADS_INNER puts the heads on grid axis 0."""
    if HEADS_INNER:
        head_group = tl.program_id(0)
        pid = tl.program_id(1)
    else:
        pid = tl.program_id(0)
        head_group = tl.program_id(1)
    return head_group, pid


@triton.jit
def find_block(OFFSETS, BLOCK_OFFSETS, n_seq, pid, SEARCH_STEPS: tl.constexpr, BLOCK: tl.constexpr):
    """(first row, rows, position of the first row in its sequence) of global block `pid`: the
    sequence b with BLOCK_OFFSETS[b] <= pid < BLOCK_OFFSETS[b + 1] by binary search (empty
    sequences are skipped by the strict bound)."""
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
def block_rows(row0, n_rows, head_dim, BLOCK: tl.constexpr, BLOCK_D: tl.constexpr, EVEN_D: tl.constexpr):
    """(tile row index, column index, token rows, live rows, [BLOCK, BLOCK_D] load/store mask)."""
    offs = tl.arange(0, BLOCK)
    offs_d = tl.arange(0, BLOCK_D)
    rows = row0 + offs
    live = offs < n_rows
    if EVEN_D:
        io_mask = live[:, None]
    else:
        io_mask = live[:, None] & (offs_d < head_dim)[None, :]
    return offs, offs_d, rows, live, io_mask


@triton.jit
def tile_ptrs(PTR, rows, h, cols, stride_t, stride_h, stride_d):
    """Addresses of head h's [rows, cols] elements in a strided [TOKENS, HEADS, D] tensor."""
    return PTR + rows[:, None] * stride_t + h * stride_h + cols[None, :] * stride_d


@triton.jit
def load_tile(PTR, rows, h, cols, stride_t, stride_h, stride_d, mask):
    return tl.load(tile_ptrs(PTR, rows, h, cols, stride_t, stride_h, stride_d), mask=mask, other=0.0)


@triton.jit
def store_tile(PTR, value, rows, h, cols, stride_t, stride_h, stride_d, mask):
    tl.store(tile_ptrs(PTR, rows, h, cols, stride_t, stride_h, stride_d), value.to(PTR.dtype.element_ty), mask=mask)


@triton.jit
def tile_exp(s, live, scale):
    """exp2((s - row max) * scale) of a complete score tile, padded key columns at zero."""
    s = tl.where(live[None, :], s, float("-inf"))
    m = tl.max(s, 1)
    return tl.exp2((s - m[:, None]) * scale)


@triton.jit
def softmax_grads(p, do, v, sm_scale):
    """(dV, dS in fp32) from the normalised P: Delta = rowsum(P * dP) from the dP tile in registers."""
    dv = tl.dot(tl.trans(p.to(do.dtype)), do)
    dp = tl.dot(do, tl.trans(v))
    delta = tl.sum(p * dp, 1)  # rowsum(dO * O), from the tile already in registers
    return dv, p * (dp - delta[:, None]) * sm_scale


@triton.jit
def rope_tile(offs, live, pos0, half, neg_log2_base_over_half, BLOCK_HALF: tl.constexpr, EVEN_D: tl.constexpr):
    """(half-width column index, [BLOCK, BLOCK_HALF] mask, cos, sin) of the block's rows, shared by
    every head: angle = position * base^(-2i/D), the position counted from the sequence's start."""
    offs_h = tl.arange(0, BLOCK_HALF)
    if EVEN_D:
        half_mask = live[:, None]
    else:
        half_mask = live[:, None] & (offs_h < half)[None, :]
    inv_freq = tl.exp2(offs_h.to(tl.float32) * neg_log2_base_over_half)
    angle = (pos0 + offs).to(tl.float32)[:, None] * inv_freq[None, :]
    return offs_h, half_mask, tl.cos(angle), tl.sin(angle)


@triton.jit
def rotate(x1, x2, cos, sin):
    """Rotate-half RoPE of the two halves (fp32 in, fp32 out); sin -> -sin is the inverse."""
    return x1 * cos - x2 * sin, x2 * cos + x1 * sin


class BlockDiagModule(nn.Module):
    """The block-diagonal specs' Model(): no parameters, constructed without arguments; a ModelNew
    subclasses it and says only which launcher its forward calls."""

    def __init__(self):
        super().__init__()


def block_prefix_sums(offsets: torch.Tensor) -> torch.Tensor:
    """[BATCH + 1] int64 running count of 64-token blocks before each sequence."""
    n_seq = offsets.numel() - 1
    out = torch.empty(n_seq + 1, dtype=torch.int64, device=offsets.device)
    chunk = min(4096, max(16, triton.next_power_of_2(max(n_seq, 1))))
    _block_prefix_sums[(1,)](offsets, out, n_seq, BLOCK=BLOCK, CHUNK=chunk)
    return out


def check_inputs(name: str, offsets: torch.Tensor, *tensors: torch.Tensor, rope: bool = False) -> None:
    shape = tensors[0].shape
    if any(t.dim() != 3 or t.shape != shape for t in tensors):
        raise ValueError(f"{name}: q, k, v (and dO) must share one [TOKENS, HEADS, HEAD_DIM] shape, got {[tuple(t.shape) for t in tensors]}")
    if offsets.dim() != 1 or offsets.numel() < 1 or offsets.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{name}: offsets must be a 1-D integer tensor of BATCH + 1 entries, got {tuple(offsets.shape)} {offsets.dtype}")
    if rope and shape[2] % 2:
        raise ValueError(f"{name}: the rotary embedding pairs halves of HEAD_DIM, which must be even (got {shape[2]})")


def dim_block(n: int) -> int:
    """Columns of a tile holding n elements (a power of two, at least 16 for tl.dot)."""
    return max(16, triton.next_power_of_2(n))


def launch_plan(name: str, offsets: torch.Tensor, tokens: int, heads: int, config: dict):
    """(int64 offsets, block prefix sums, BATCH, grid, launch keywords) for a kernel with one program per
    (64-token block, group of heads); the grid is the upper bound TOKENS // 64 + BATCH on the block
    count, known without reading the offsets back (no device sync)."""
    n_seq = offsets.numel() - 1
    if n_seq == 0:
        raise ValueError(f"{name}: no sequences (offsets has one entry) but TOKENS > 0")
    offsets = offsets.to(torch.int64)
    block_offsets = block_prefix_sums(offsets)
    max_blocks = tokens // BLOCK + n_seq  # sum of ceil(len / 64) never exceeds it
    per_program = config["HEADS_PER_PROGRAM"]
    while heads % per_program:
        per_program //= 2
    groups = heads // per_program
    heads_inner = config["HEADS_INNER"] and max_blocks < 65536  # grid axis 1 holds at most 65535
    grid = (groups, max_blocks) if heads_inner else (max_blocks, groups)
    meta = {
        "BLOCK": BLOCK,
        "SEARCH_STEPS": max(1, math.ceil(math.log2(n_seq + 1))),
        "HEADS_INNER": heads_inner,
        "HEADS_PER_PROGRAM": per_program,
        "num_warps": config["num_warps"],
        "num_stages": config["num_stages"],
    }
    return offsets, block_offsets, n_seq, grid, meta
