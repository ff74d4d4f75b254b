"""
---
title: Cross-entropy forward (per-row loss) with one-pass online logsumexp
kind: kernels
family: [cross_entropy]
tags: [reduction, memory-bound, cross-entropy, logsumexp, online-softmax, row-wise, one-pass, exp2, ignore-index]
hardware: [any]
spec: cross_entropy
---
loss[i] = logsumexp(logits[i, :]) - logits[i, target[i]] for logits [M, V] (bf16, fp16 or fp32)
and int64 targets [M]; fp32 arithmetic, fp32 losses, as
F.cross_entropy(logits.float(), target, reduction="none", ignore_index=-100). A row whose target
is -100 gets loss 0; a target outside [0, V) gets NaN (no out-of-bounds read). The mean loss
over kept rows is loss.sum() / (target != -100).sum(), left to the caller.

Only the logits are big and they are read exactly once. The launcher picks one of three kernels:

* `_ce_tile_kernel` when next_power_of_2(V) <= CONFIG["single_block_max_n"]: a program owns
  [ROWS, BLOCK_V] (several short rows per program, CONFIG["tile_elems"] elements); row max, sum
  of exp2 and the target logit in one go.
* `_ce_chunk_kernel` for longer rows when CONFIG["chunk_n"] > 0: one program per
  (row, chunk of chunk_n columns) computes the chunk's max and sum of exp and publishes them
  (store, barrier, atomic arrival counter with release/acquire); the row's last program to
  arrive merges them into logsumexp and writes the loss. Many short programs keep enough loads
  in flight; nobody waits for anybody, so any launch order works (the interpreter too).
* `_ce_split_kernel` when chunk_n = 0 (the default): one program per row loops over column
  tiles; CONFIG["split_programs_per_sm"] > 0 makes the grid persistent.
Running max and sum (chunk and split kernels) are kept per lane with ONE exp2 per element
(d = x - m; exp2(-|d|) is the rescale factor when x is a new max, s = s*e + 1, else the term,
s = s + e); lanes are combined once per chunk or row. Tiles are CONFIG["split_block_n"] wide with
CONFIG["split_num_warps"] warps; CONFIG["num_stages"] > 1 software-pipelines the loads. The
target logit is one scalar load per row.

On an H200 the tile kernel is several times faster than torch.compile at mid-size V and loses
bandwidth at V = 256 (many short rows, per-row overheads). For long rows narrow tiles win: the
split kernel with 2048-wide tiles and 8 warps, faster than torch.compile; the chunked kernel was
slower there. Still below the copy rate: a read-only stream that needs more loads in flight per
SM is the next thing to try. Rows of at least CONFIG["long_n"] use the split kernel with
CONFIG["long_split_block_n"]-wide tiles and CONFIG["long_split_num_warps"] warps (H200, V = 262144:
3219 GB/s against 2799 with the 2048 / 8 of shorter rows, which lose with them: 2804 against 2921
at V = 65536, bench/results/reductions/h200/2026-11-23_peers_and_cute_kernels/peers_run2.md). Short rows (V = 256, 524288 rows) stay at
~2.6 TB/s whatever the tile CONFIG (2367-2603 GB/s in that sweep): the CuTe DSL kernel reached
2573 GB/s with 32 threads a row holding one 16-byte vector each, and 3597 with 8 threads a row holding
four (16 rows a block, reductions within 8-lane groups): at short rows what counts is the bytes each
thread has in flight, which Triton's layout for a [BLOCK_M, 256] tile does not let a kernel set. The numbers, with their dates and versions:
bench/results/all_operators/h200/2026-11-21_reference_kernels/README.md and the tables beside it.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl
from _row_io import arrive_last, chunk_coords, combine, merged_max_sum, online_update, publish_max_sum, row_ptr, split_coords, split_row
from _launch_heuristics import chunk_launch, pipeline_stages, row_plan, split_launch, unit_stride_rows

CONFIG = {
    "single_block_max_n": 8192,
    "tile_elems": 4096,
    "elems_per_thread": 32,
    "max_warps": 16,
    "chunk_n": 0,
    "split_block_n": 2048,
    "split_num_warps": 8,
    "split_programs_per_sm": 0,
    "num_stages": 1,
    "long_n": 131072,
    "long_split_block_n": 4096,
    "long_split_num_warps": 16,
}

TUNABLES = {
    "single_block_max_n": [1024, 2048, 4096, 8192, 16384, 32768],
    "tile_elems": [1024, 2048, 4096, 8192, 16384],
    "elems_per_thread": [4, 8, 16, 32],
    "max_warps": [4, 8, 16, 32],
    "chunk_n": [0, 2048, 4096, 8192, 16384, 32768],
    "split_block_n": [1024, 2048, 4096, 8192, 16384],
    "split_num_warps": [4, 8, 16, 32],
    "split_programs_per_sm": [0, 1, 2, 4, 8],
    "num_stages": [1, 2, 3],
    "long_n": [65536, 131072, 262144, 1073741824],
    "long_split_block_n": [2048, 4096, 8192],
    "long_split_num_warps": [8, 16, 32],
}

IGNORE_INDEX = -100


@triton.jit
def _target_logit(x_row, target, n_cols, keep):
    """logits[row, target] in log2 units; NaN for a kept row whose target is out of range."""
    in_range = (target >= 0) & (target < n_cols)
    x_t = tl.load(x_row + tl.where(in_range, target, 0), mask=keep & in_range, other=0.0)
    return tl.where(keep & ~in_range, float("nan"), x_t.to(tl.float32) * 1.4426950408889634)


@triton.jit
def _store_loss(x_row, target_ptr, loss_ptr, row, row_ok, lse2, n_cols, stride_t, ignore_index):
    # loss = logsumexp - the target's logit, 0 for an ignored row; back from log2 to natural
    # units: ln(v) = log2(v) / log2(e). `row` may be one row or a block of them.
    target = tl.load(target_ptr + row * stride_t, mask=row_ok, other=ignore_index)
    keep = row_ok & (target != ignore_index)
    x_t = _target_logit(x_row, target, n_cols, keep)
    tl.store(loss_ptr + row, tl.where(keep, (lse2 - x_t) * 0.6931471805599453, 0.0), mask=row_ok)


@triton.jit
def _ce_tile_kernel(
    x_ptr, target_ptr, loss_ptr, n_rows, n_cols, stride_x, stride_t, ignore_index,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < n_rows
    mask = row_ok[:, None] & (cols < n_cols)[None, :]
    x_rows = x_ptr + rows * stride_x
    x = tl.load(x_rows[:, None] + cols[None, :], mask=mask, other=float("-inf"))
    x = x.to(tl.float32) * 1.4426950408889634
    # Padding rows (past n_rows) are all -inf; give them a finite max so they compute quietly.
    row_max = tl.where(row_ok, tl.max(x, axis=1), 0.0)
    lse2 = row_max + tl.log2(tl.sum(tl.exp2(x - row_max[:, None]), axis=1))
    _store_loss(x_rows, target_ptr, loss_ptr, rows, row_ok, lse2, n_cols, stride_t, ignore_index)


@triton.jit
def _ce_split_kernel(
    x_ptr, target_ptr, loss_ptr, n_rows, n_cols, stride_x, stride_t, ignore_index, n_programs, rows_per_program,
    BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr,
):
    pid, cols, n_tiles = split_coords(n_cols, BLOCK_N)  # rows pid, pid + n_programs, ...
    for r in range(0, rows_per_program):
        row, limit = split_row(pid, r, n_programs, n_rows, n_cols)
        x_row = row_ptr(x_ptr, row, stride_x)
        m = tl.full([BLOCK_N], float("-inf"), tl.float32)
        s = tl.zeros([BLOCK_N], dtype=tl.float32)
        for t in tl.range(0, n_tiles, num_stages=NUM_STAGES):
            c = t * BLOCK_N + cols
            x = tl.load(x_row + c, mask=c < limit, other=float("-inf"))
            x = x.to(tl.float32) * 1.4426950408889634
            m, s = online_update(m, s, x)
        row_max, total = combine(m, s)
        _store_loss(x_row, target_ptr, loss_ptr, row, row < n_rows, row_max + tl.log2(total), n_cols, stride_t, ignore_index)


@triton.jit
def _ce_chunk_kernel(
    x_ptr, target_ptr, loss_ptr, part_max_ptr, part_sum_ptr, arrived_ptr, n_cols, stride_x, stride_t, ignore_index, n_chunks,
    CHUNK: tl.constexpr, BLOCK_N: tl.constexpr, MAX_CHUNKS: tl.constexpr, NUM_STAGES: tl.constexpr,
):
    # Program (row, chunk) finds max and sum of exp over CHUNK columns and publishes them; the
    # row's last program to arrive merges the partials into logsumexp and writes the loss.
    # Nobody waits for anybody, so any launch order works.
    pid, row, chunk, cols = chunk_coords(n_chunks, BLOCK_N)
    x_row = row_ptr(x_ptr, row, stride_x)
    m = tl.full([BLOCK_N], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_N], dtype=tl.float32)
    for t in tl.range(0, CHUNK // BLOCK_N, num_stages=NUM_STAGES):
        c = chunk * CHUNK + t * BLOCK_N + cols
        x = tl.load(x_row + c, mask=c < n_cols, other=float("-inf"))
        x = x.to(tl.float32) * 1.4426950408889634
        m, s = online_update(m, s, x)
    publish_max_sum(part_max_ptr, part_sum_ptr, pid, m, s)
    if arrive_last(arrived_ptr, row, n_chunks):  # the last of the row's programs
        row_max, total = merged_max_sum(part_max_ptr, part_sum_ptr, row, n_chunks, MAX_CHUNKS)
        row_ok = tl.full([], 1, tl.int1)  # a chunk program's row always exists
        _store_loss(x_row, target_ptr, loss_ptr, row, row_ok, row_max + tl.log2(total), n_cols, stride_t, ignore_index)


def cross_entropy_forward(logits: torch.Tensor, target: torch.Tensor, ignore_index: int = IGNORE_INDEX) -> torch.Tensor:
    """Per-row cross-entropy losses (fp32) with the CONFIG in force at call time."""
    if logits.dim() != 2 or target.shape != logits.shape[:1]:
        raise ValueError(f"cross_entropy: expected logits [M, V] and target [M], got {tuple(logits.shape)} and {tuple(target.shape)}")
    x = unit_stride_rows(logits)  # rows read in place, through their stride; target likewise
    m, n = x.shape
    loss = torch.empty(m, dtype=torch.float32, device=x.device)
    if m == 0:
        return loss
    if n == 0:
        raise ValueError("cross_entropy: logits have no classes (V = 0)")
    cfg, strides = CONFIG, (x.stride(0), target.stride(0))
    if n >= cfg["long_n"]:  # very long rows: wider tiles, more warps in the split kernel
        cfg = {**cfg, "split_block_n": cfg["long_split_block_n"], "split_num_warps": cfg["long_split_num_warps"]}
    if tile := row_plan(m, n, cfg):
        block_m, block_n, warps = tile
        _ce_tile_kernel[(triton.cdiv(m, block_m),)](
            x, target, loss, m, n, *strides, ignore_index, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps
        )
    elif cfg["chunk_n"] > 0:
        chunk, block, n_chunks, arrived = chunk_launch(m, n, cfg, x.device)
        partials = torch.empty(2, m * n_chunks, dtype=torch.float32, device=x.device)
        _ce_chunk_kernel[(m * n_chunks,)](
            x, target, loss, partials[0], partials[1], arrived, n, *strides, ignore_index, n_chunks,
            CHUNK=chunk, BLOCK_N=block, MAX_CHUNKS=triton.next_power_of_2(n_chunks),
            NUM_STAGES=pipeline_stages(cfg["num_stages"], block * x.element_size()), num_warps=cfg["split_num_warps"],
        )
    else:
        block, stages, programs = split_launch(m, n, cfg, x.element_size(), x.device)
        _ce_split_kernel[(programs,)](
            x, target, loss, m, n, *strides, ignore_index, programs, triton.cdiv(m, programs),
            BLOCK_N=block, NUM_STAGES=stages, num_warps=cfg["split_num_warps"],
        )
    return loss


class ModelNew(nn.Module):
    def __init__(self, ignore_index: int = IGNORE_INDEX):
        super().__init__()
        self.ignore_index = ignore_index

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return cross_entropy_forward(logits, target, self.ignore_index)
