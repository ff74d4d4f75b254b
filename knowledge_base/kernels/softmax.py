"""
---
title: Softmax over the last dimension, one tile per row or online two-pass (or chunked) over long rows
kind: kernels
family: [softmax]
tags: [reduction, memory-bound, softmax, online-softmax, row-wise, two-pass, chunked, atomics, persistent, l2-reuse, exp2, cooperative, spin-wait]
hardware: [any]
spec: softmax
---
y = softmax(x, dim=-1); x is bf16, fp16 or fp32 with any leading shape; max, exponentials and
sums in fp32, y stored in x's dtype. Rows of -inf give NaN, as torch does.

The launcher `softmax_forward` picks one of four kernels:

* `_softmax_tile_kernel` when next_power_of_2(N) <= CONFIG["single_block_max_n"]: a program
  owns [ROWS, BLOCK_N] (several short rows per program, CONFIG["tile_elems"] elements), reads x
  once, writes y once. One exp2 per element.
* `_softmax_chunk_kernel` for longer rows when CONFIG["chunk_n"] > 0: one program
  per (row, chunk of chunk_n columns) computes the chunk's max and sum of exp and publishes them
  (store, barrier, atomic arrival counter with release/acquire); the last program of the row to
  arrive merges the partials (rescaling each sum to the row max) and writes the whole row. The
  chunks of a row are read at about the same time, so that second read mostly hits L2. No
  program waits for another: no deadlock whatever the launch order, and the interpreter runs it.
* `_softmax_split_kernel` when chunk_n = 0 (the default): one program per row, two passes over
  column tiles, the second in reverse; CONFIG["split_programs_per_sm"] > 0 makes the grid
  persistent. On long rows much of its re-read comes from DRAM.
* `_softmax_coop_kernel` when CONFIG["cooperative"] and chunk_n > 0, on a GPU (or under the
  interpreter when a row is one chunk): single pass from DRAM. A persistent grid of at most one
  program per SM (all resident, so waiting cannot deadlock); program (group, chunk) keeps its chunk
  in registers, publishes max and sum of exp as one int64 in a zeroed slot (never 0 once written:
  no fence, no counter), loads the next row's chunk, spins (bounded: a timeout writes NaN) until
  the row's slots are written, then exponentiates again and stores. Correct, but limited by
  bytes in flight (one block per SM; bigger chunks spill) and slower than the two-pass default,
  so off by default (measurements: bench/results/reductions/h200/2026-11-21_long_rows/README.md).

On an H200 the tile kernel runs close to the copy rate for N = 256 ... 16384; for long rows the
chunked kernel measured slower than the two-pass one, so the default is two-pass with 8192-wide
tiles, 16 warps and num_stages=3, faster than torch.compile; the re-read is what keeps it off the
copy rate. The numbers, with their dates and versions: bench/results/all_operators/h200/2026-11-21_reference_kernels/README.md and the tables beside it.

Running max and sum (chunk and split kernels) are kept per lane with ONE exp2 per element: with
d = x - m, exp(-|d|) is both the rescale factor when x is the new max (s = s*e + 1) and the term
to add otherwise (s = s + e); lanes are combined once per chunk or row. Long-row loads walk tiles
of CONFIG["split_block_n"] with CONFIG["split_num_warps"] warps; CONFIG["num_stages"] > 1
software-pipelines them (stages clamped to fit shared memory); CONFIG["l2_hints"] asks L2 to keep
first-pass lines and drop second-pass ones.

Exponentials are exp2 on x * log2(e) (the hardware instruction). The long-row kernels read x
twice; with one exp2 per element in each pass the special-function unit stays well under its
limit at HBM speed.
"""

import torch
import triton
import triton.language as tl
from _bf16_pairs import pack_bf16x2, unpack_bf16x2
from _row_io import arrive_last, chunk_coords, combine, coop_coords, current_chunk, load_chunk, load_hinted, merged_max_sum, online_update, publish_max_sum, row_ptr, split_coords, split_row, store_streaming, tile_index, wait_slots
from _launch_heuristics import COOP_PREFETCH, SPIN_LIMIT, chunk_launch, cooperative_plan, pipeline_stages, row_plan, rows_and_output, split_launch
from _row_models import SoftmaxModule

CONFIG = {
    "single_block_max_n": 16384,
    "tile_elems": 1024,
    "elems_per_thread": 16,
    "max_warps": 16,
    "chunk_n": 0,
    "split_block_n": 8192,
    "split_num_warps": 16,
    "split_programs_per_sm": 0,
    "num_stages": 3,
    "reverse_second_pass": True,
    "l2_hints": True,
    "cooperative": False,
}

TUNABLES = {
    "single_block_max_n": [1024, 2048, 4096, 8192, 16384, 32768],
    "tile_elems": [1024, 2048, 4096, 8192, 16384],
    "elems_per_thread": [4, 8, 16, 32],
    "max_warps": [4, 8, 16, 32],
    "chunk_n": [0, 4096, 8192, 16384, 32768],
    "split_block_n": [1024, 2048, 4096, 8192, 16384],
    "split_num_warps": [4, 8, 16, 32],
    "split_programs_per_sm": [0, 1, 2, 4, 8],
    "num_stages": [1, 2, 3],
    "reverse_second_pass": [True, False],
    "l2_hints": [True, False],
    "cooperative": [False, True],
}

@triton.jit
def _write_row(
    x_row, y_row, cols, n_tiles, limit, row_max, inv_sum,
    BLOCK_N: tl.constexpr, REVERSE: tl.constexpr, L2_HINTS: tl.constexpr, NUM_STAGES: tl.constexpr,
):
    # The second pass: y = exp(x - max) / sum over the row's first `limit` columns, tile by tile,
    # once its max (log2 units) and 1/sum are known.
    for i in tl.range(0, n_tiles, num_stages=NUM_STAGES):
        c = tile_index(i, n_tiles, REVERSE) * BLOCK_N + cols
        ok = c < limit
        x = load_hinted(x_row + c, ok, float("-inf"), L2_HINTS, "evict_first")
        y = (tl.exp2(x.to(tl.float32) * 1.4426950408889634 - row_max) * inv_sum).to(y_row.dtype.element_ty)
        store_streaming(y_row + c, y, ok, L2_HINTS)


@triton.jit
def _softmax_tile_kernel(x_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < n_rows
    mask = row_ok[:, None] & (cols < n_cols)[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=float("-inf"))
    x = x.to(tl.float32) * 1.4426950408889634
    # Padding rows (past n_rows) are all -inf; give them a finite max so they compute quietly.
    row_max = tl.where(row_ok, tl.max(x, axis=1), 0.0)
    e = tl.exp2(x - row_max[:, None])
    y = e * (1.0 / tl.sum(e, axis=1))[:, None]
    tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_split_kernel(
    x_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y, n_programs, rows_per_program,
    BLOCK_N: tl.constexpr, REVERSE: tl.constexpr, L2_HINTS: tl.constexpr, NUM_STAGES: tl.constexpr,
):
    pid, cols, n_tiles = split_coords(n_cols, BLOCK_N)  # rows pid, pid + n_programs, ...
    for r in range(0, rows_per_program):
        row, limit = split_row(pid, r, n_programs, n_rows, n_cols)
        x_row, y_row = row_ptr(x_ptr, row, stride_x), row_ptr(y_ptr, row, stride_y)
        m = tl.full([BLOCK_N], float("-inf"), tl.float32)  # running max per lane (log2 units)
        s = tl.zeros([BLOCK_N], dtype=tl.float32)  # running sum of exp2(x - m) per lane
        for t in tl.range(0, n_tiles, num_stages=NUM_STAGES):
            c = t * BLOCK_N + cols
            ok = c < limit
            x = load_hinted(x_row + c, ok, float("-inf"), L2_HINTS, "evict_last")
            x = x.to(tl.float32) * 1.4426950408889634
            m, s = online_update(m, s, x)
        row_max, total = combine(m, s)
        _write_row(x_row, y_row, cols, n_tiles, limit, row_max, 1.0 / total, BLOCK_N, REVERSE, L2_HINTS, NUM_STAGES)


@triton.jit
def _softmax_chunk_kernel(
    x_ptr, y_ptr, part_max_ptr, part_sum_ptr, arrived_ptr, n_cols, stride_x, stride_y, n_chunks,
    CHUNK: tl.constexpr, BLOCK_N: tl.constexpr, MAX_CHUNKS: tl.constexpr, L2_HINTS: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    # Program (row, chunk) finds max and sum of exp over CHUNK columns and publishes them; the
    # row's last program to arrive merges the partials and writes the whole row, whose lines are
    # still in L2 because all its chunks were read moments ago. Nobody waits for anybody.
    pid, row, chunk, cols = chunk_coords(n_chunks, BLOCK_N)
    x_row, y_row = row_ptr(x_ptr, row, stride_x), row_ptr(y_ptr, row, stride_y)
    m = tl.full([BLOCK_N], float("-inf"), tl.float32)  # running max per lane (log2 units)
    s = tl.zeros([BLOCK_N], dtype=tl.float32)  # running sum of exp2(x - m) per lane
    for t in tl.range(0, CHUNK // BLOCK_N, num_stages=NUM_STAGES):
        c = chunk * CHUNK + t * BLOCK_N + cols
        x = load_hinted(x_row + c, c < n_cols, float("-inf"), L2_HINTS, "evict_last")
        x = x.to(tl.float32) * 1.4426950408889634
        m, s = online_update(m, s, x)
    publish_max_sum(part_max_ptr, part_sum_ptr, pid, m, s)
    if arrive_last(arrived_ptr, row, n_chunks):  # the last of the row's programs
        row_max, total = merged_max_sum(part_max_ptr, part_sum_ptr, row, n_chunks, MAX_CHUNKS)
        n_tiles = tl.cdiv(n_cols, BLOCK_N)
        _write_row(x_row, y_row, cols, n_tiles, n_cols, row_max, 1.0 / total, BLOCK_N, False, L2_HINTS, NUM_STAGES)


@triton.jit
def _softmax_coop_kernel(
    x_ptr, y_ptr, slot_ptr, n_rows, n_cols, stride_x, stride_y, n_chunks, n_groups, n_iters,
    CHUNK: tl.constexpr, MAX_CHUNKS: tl.constexpr, PACKED: tl.constexpr, PREFETCH: tl.constexpr,
    SPIN_LIMIT: tl.constexpr,
):
    # Persistent: program (group, chunk) owns columns [chunk * CHUNK, +CHUNK) of rows group,
    # group + n_groups, ...; the chunk stays in registers, in x's dtype, from load to store (with
    # PACKED the host passes bf16 tensors as int32 views: two elements a word, half the registers).
    # The chunk's max and sum go out as ONE int64 (max bits high, sum bits low) into a zeroed
    # slot: never 0 once written (sum >= 1 unless the max is -inf), so no fence and no counter;
    # the program waits until all of the row's slots are written, then exponentiates again and stores.
    group, chunk, c, col_ok, k, k_ok = coop_coords(n_chunks, n_cols, CHUNK, MAX_CHUNKS)
    if PACKED:
        pad = -8323200  # 0xFF80FF80: two bf16 -inf
    else:
        pad = float("-inf")
    x_next = load_chunk(x_ptr, group, n_rows, stride_x, c, col_ok, pad)
    tries = tl.full([], 0, tl.int32)  # polls so far, over all rows: a bound, never a hang
    for it in range(0, n_iters):
        row = group + it * n_groups
        x = current_chunk(x_next, x_ptr, row, n_rows, stride_x, c, col_ok, pad, PREFETCH)
        if PACKED:
            lo, hi = unpack_bf16x2(x)
            lo *= 1.4426950408889634
            hi *= 1.4426950408889634
            c_max = tl.maximum(tl.max(lo, axis=0), tl.max(hi, axis=0))
            safe_max = tl.where(c_max == float("-inf"), 0.0, c_max)  # a chunk of -inf sums to 0
            c_sum = tl.sum(tl.exp2(lo - safe_max) + tl.exp2(hi - safe_max), axis=0)
        else:
            xs = x.to(tl.float32) * 1.4426950408889634
            c_max = tl.max(xs, axis=0)
            c_sum = tl.sum(tl.exp2(xs - tl.where(c_max == float("-inf"), 0.0, c_max)), axis=0)
        hi_bits = c_max.to(tl.int32, bitcast=True).to(tl.int64) << 32
        lo_bits = c_sum.to(tl.int32, bitcast=True).to(tl.uint32, bitcast=True).to(tl.int64)
        tl.atomic_xchg(slot_ptr + row * n_chunks + chunk, hi_bits | lo_bits, sem="relaxed")
        if PREFETCH:  # next row's chunk is in flight while we wait
            nxt = row + n_groups
            x_next = load_chunk(x_ptr, nxt, n_rows, stride_x, c, col_ok, pad)
        slots = slot_ptr + row * n_chunks + k
        v, ready, tries = wait_slots(slots, k_ok, tries, SPIN_LIMIT)
        p_max = tl.where(k_ok, (v >> 32).to(tl.int32).to(tl.float32, bitcast=True), float("-inf"))
        p_sum = v.to(tl.int32).to(tl.float32, bitcast=True)
        row_max, total = combine(p_max, p_sum)
        inv_total = tl.where(ready != 0, 1.0 / total, float("nan"))  # gave up waiting: say so in y
        # exp2 again rather than keeping fp32 exponentials across the wait (registers for a bigger
        # chunk); a row of -inf gives exp2(NaN) = NaN, as torch does.
        out = row_ptr(y_ptr, row, stride_y) + c
        if PACKED:
            # x ^ (ready - 1) is x once the wait succeeded, but the compiler cannot know it: it
            # widens x again here instead of keeping the fp32 halves alive across the wait.
            lo, hi = unpack_bf16x2(x ^ (ready - 1))
            y_lo = tl.exp2(lo * 1.4426950408889634 - row_max) * inv_total
            y_hi = tl.exp2(hi * 1.4426950408889634 - row_max) * inv_total
            tl.store(out, pack_bf16x2(y_lo, y_hi), mask=col_ok & (row < n_rows))
        else:
            y = tl.exp2(x.to(tl.float32) * 1.4426950408889634 - row_max) * inv_total
            tl.store(out, y.to(y_ptr.dtype.element_ty), mask=col_ok & (row < n_rows))

def softmax_forward(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of `x` with the CONFIG in force at call time."""
    x2, y, strides = rows_and_output(x)  # x's rows read in place, through their stride
    m, n = x2.shape
    if y.numel() == 0:
        return y.view(x.shape)
    cfg = CONFIG
    if tile := row_plan(m, n, cfg):
        block_m, block_n, warps = tile
        _softmax_tile_kernel[(triton.cdiv(m, block_m),)](
            x2, y, m, n, *strides, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps
        )
    elif cfg["chunk_n"] > 0 and (coop := cfg["cooperative"] and cooperative_plan(m, n, cfg["chunk_n"], x.device)):
        chunk, n_chunks, n_groups, n_iters = coop
        slots = torch.zeros(n_groups * n_iters * n_chunks, dtype=torch.int64, device=x.device)
        # bf16 pairs as int32 words on the GPU (the interpreter keeps plain elements): rows must
        # start on whole words.
        packed = (x.is_cuda and x2.dtype == torch.bfloat16 and n % 2 == 0
                  and x2.stride(0) % 2 == 0 and x2.storage_offset() % 2 == 0)
        xs, ys, unit = (x2.view(torch.int32), y.view(torch.int32), 2) if packed else (x2, y, 1)
        _softmax_coop_kernel[(n_groups * n_chunks,)](
            xs, ys, slots, m, n // unit, *(s // unit for s in strides), n_chunks, n_groups, n_iters,
            CHUNK=chunk // unit, MAX_CHUNKS=triton.next_power_of_2(n_chunks), PACKED=packed, PREFETCH=COOP_PREFETCH,
            SPIN_LIMIT=SPIN_LIMIT, num_warps=cfg["split_num_warps"],
        )
    elif cfg["chunk_n"] > 0:
        chunk, block, n_chunks, arrived = chunk_launch(m, n, cfg, x.device)
        partials = torch.empty(2, m * n_chunks, dtype=torch.float32, device=x.device)
        _softmax_chunk_kernel[(m * n_chunks,)](
            x2, y, partials[0], partials[1], arrived, n, *strides, n_chunks,
            CHUNK=chunk, BLOCK_N=block, MAX_CHUNKS=triton.next_power_of_2(n_chunks), L2_HINTS=cfg["l2_hints"],
            NUM_STAGES=pipeline_stages(cfg["num_stages"], block * x2.element_size()), num_warps=cfg["split_num_warps"],
        )
    else:
        block, stages, programs = split_launch(m, n, cfg, x2.element_size(), x.device)
        _softmax_split_kernel[(programs,)](
            x2, y, m, n, *strides, programs, triton.cdiv(m, programs),
            BLOCK_N=block, REVERSE=cfg["reverse_second_pass"], L2_HINTS=cfg["l2_hints"], NUM_STAGES=stages,
            num_warps=cfg["split_num_warps"],
        )
    return y.view(x.shape)


class ModelNew(SoftmaxModule):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_forward(x)
