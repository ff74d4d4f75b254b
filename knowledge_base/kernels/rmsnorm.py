"""
---
title: RMSNorm forward, one tile per row; long rows in chunks finished by the last program to arrive
kind: kernels
family: [rmsnorm]
tags: [reduction, memory-bound, normalization, row-wise, two-pass, chunked, atomics, persistent, l2-reuse, cooperative, spin-wait]
hardware: [any]
spec: rmsnorm
---
y = x * rsqrt(mean(x^2) + eps) * weight over the last dimension; x is bf16, fp16 or fp32, any
leading shape; all arithmetic in fp32, y stored in x's dtype.

The launcher `rmsnorm_forward` picks one of four kernels:

* `_rmsnorm_tile_kernel` when the padded row length next_power_of_2(N) is at most
  CONFIG["single_block_max_n"]: a program owns a [ROWS, BLOCK_N] tile (several short rows per
  program, so that N = 256 still moves CONFIG["tile_elems"] elements per program), reads x once,
  reduces in registers and writes y once: the fewest bytes possible.
* `_rmsnorm_chunk_kernel` for longer rows when CONFIG["chunk_n"] > 0 (the default): rows are cut
  into chunks of chunk_n columns, one program per (row, chunk). Each program sums x^2 over its
  chunk and publishes the partial (store, barrier, atomic arrival counter with release/acquire);
  the last program of a row to arrive adds the partials and normalises the whole row. All chunks
  of a row are read at about the same time, so more of the second-pass re-read hits L2 than in
  the one-program-per-row kernel below. No program ever waits for another, so there is no
  deadlock whatever the launch order, and the interpreter runs it too.
* `_rmsnorm_split_kernel` when chunk_n = 0: one program per row runs both passes over column
  tiles: pass 1 accumulates x^2 in a per-lane fp32 vector, pass 2 re-reads the row (in reverse,
  so the tiles read last come from L2), scales and stores. CONFIG["split_programs_per_sm"] > 0
  makes the grid persistent to bound the rows in flight. On long rows most of the re-read comes
  from DRAM (up to 1.5x the minimum traffic).
* `_rmsnorm_coop_kernel` when CONFIG["cooperative"] and chunk_n > 0, on a GPU (or under the
  interpreter when a row is one chunk): single pass from DRAM. A persistent grid of at most one
  program per SM (so all are resident and waiting cannot deadlock); program (group, chunk) keeps
  its chunk of a row in registers (bf16 as packed int32 pairs), publishes its sum of squares in a
  zeroed int64 slot with a flag bit (no fence, no counter), loads the next row's chunk, spins
  (bounded: a timeout writes NaN, never hangs) until the row's slots are all written, then
  scales and stores. Correct, but limited by bytes in flight (one block per SM; bigger chunks
  spill): a little faster than the chunked default at the longest rows and slower at N = 65536,
  so off by default (measurements: bench/results/reductions/h200/2026-11-21_long_rows/README.md).

On an H200 the tile kernel runs close to the device-to-device copy rate for N = 256 ... 16384; for
long rows the chunked kernel (chunk_n=32768, 16384-wide tiles, 32 warps) beat the two-pass one,
hence the default. Still short of the copy rate at N = 262144: part of the re-read misses L2. The
numbers, with their dates and versions: bench/results/all_operators/h200/2026-11-21_reference_kernels/README.md and the tables beside it.

In both long-row kernels loads walk tiles of CONFIG["split_block_n"] columns with
CONFIG["split_num_warps"] warps; CONFIG["num_stages"] > 1 software-pipelines those loops
(cp.async through shared memory, stages clamped to fit); with CONFIG["l2_hints"] first-pass loads
ask L2 to keep their lines and second-pass loads and stores to drop theirs.
Warps in the tile kernel: next_power_of_2(tile / (32 * CONFIG["elems_per_thread"])), clamped to
[1, CONFIG["max_warps"]].
"""

import torch
import triton
import triton.language as tl
from _bf16_pairs import pack_bf16x2, unpack_bf16x2
from _row_io import arrive_last, chunk_coords, coop_coords, current_chunk, load_chunk, load_hinted, row_ptr, split_coords, split_row, store_streaming, tile_index, wait_slots
from _launch_heuristics import COOP_PREFETCH, SPIN_LIMIT, chunk_launch, cooperative_plan, pipeline_stages, row_plan, rows_and_output, split_launch
from _row_models import RMSNormModule

CONFIG = {
    "single_block_max_n": 16384,
    "tile_elems": 1024,
    "elems_per_thread": 16,
    "max_warps": 16,
    "chunk_n": 32768,
    "split_block_n": 16384,
    "split_num_warps": 32,
    "split_programs_per_sm": 0,
    "num_stages": 1,
    "reverse_second_pass": True,
    "l2_hints": True,
    "cooperative": False,
}

TUNABLES = {
    # Kept small enough that its best configuration can be measured outright (bench/kernels/rmsnorm/rmsnorm_space.py).
    "single_block_max_n": [4096, 8192, 16384, 32768],
    "tile_elems": [1024, 2048, 4096, 8192],
    "elems_per_thread": [8, 16, 32],
    "max_warps": [8, 16],
    "chunk_n": [0, 16384, 32768],
    "split_block_n": [4096, 8192, 16384],
    "split_num_warps": [8, 16, 32],
    "split_programs_per_sm": [0, 2],
    "num_stages": [1, 2],
    "reverse_second_pass": [True],
    "l2_hints": [True],
    # The cooperative kernel is correct but measured no faster at the spec's shapes
    # (bench/results/reductions/h200/2026-11-21_long_rows/README.md); kept out of the space so that the space stays the one whose
    # best was measured outright (bench/results/rmsnorm/h200/2026-11-21_offline_search/). Set True by hand to try it.
    "cooperative": [False],
}


@triton.jit
def _write_row(
    x_row, w_ptr, y_row, cols, n_tiles, limit, inv_rms, BLOCK_N: tl.constexpr,
    REVERSE: tl.constexpr, L2_HINTS: tl.constexpr, NUM_STAGES: tl.constexpr,
):
    # The second pass: y = x / rms * w over the row's first `limit` columns, tile by tile, once
    # its 1/rms is known (w is read by every row: kept in L2).
    for i in tl.range(0, n_tiles, num_stages=NUM_STAGES):
        c = tile_index(i, n_tiles, REVERSE) * BLOCK_N + cols
        m = c < limit
        x = load_hinted(x_row + c, m, 0.0, L2_HINTS, "evict_first")
        w = tl.load(w_ptr + c, mask=m, other=0.0, eviction_policy="evict_last").to(tl.float32)
        y = (x.to(tl.float32) * inv_rms * w).to(y_row.dtype.element_ty)
        store_streaming(y_row + c, y, m, L2_HINTS)


@triton.jit
def _rmsnorm_tile_kernel(
    x_ptr, w_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y, eps, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < n_cols
    mask = (rows < n_rows)[:, None] & col_ok[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
    y = x * inv_rms[:, None] * w[None, :]
    tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rmsnorm_split_kernel(
    x_ptr, w_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y, eps, n_programs, rows_per_program,
    BLOCK_N: tl.constexpr, REVERSE: tl.constexpr, L2_HINTS: tl.constexpr, NUM_STAGES: tl.constexpr,
):
    pid, cols, n_tiles = split_coords(n_cols, BLOCK_N)  # rows pid, pid + n_programs, ...
    for r in range(0, rows_per_program):
        row, limit = split_row(pid, r, n_programs, n_rows, n_cols)
        x_row, y_row = row_ptr(x_ptr, row, stride_x), row_ptr(y_ptr, row, stride_y)
        acc = tl.zeros([BLOCK_N], dtype=tl.float32)
        for t in tl.range(0, n_tiles, num_stages=NUM_STAGES):
            c = t * BLOCK_N + cols
            m = c < limit
            x = load_hinted(x_row + c, m, 0.0, L2_HINTS, "evict_last")
            x = x.to(tl.float32)
            acc += x * x
        inv_rms = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
        _write_row(x_row, w_ptr, y_row, cols, n_tiles, limit, inv_rms, BLOCK_N, REVERSE, L2_HINTS, NUM_STAGES)


@triton.jit
def _rmsnorm_chunk_kernel(
    x_ptr, w_ptr, y_ptr, partial_ptr, arrived_ptr, n_cols, stride_x, stride_y, eps, n_chunks,
    CHUNK: tl.constexpr, BLOCK_N: tl.constexpr, MAX_CHUNKS: tl.constexpr, L2_HINTS: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    # Program (row, chunk) sums x^2 over CHUNK columns and publishes it; the row's last program
    # to arrive adds the partials and normalises the whole row, whose lines are still in L2
    # because all its chunks were read moments ago. Nobody waits, so any launch order works.
    pid, row, chunk, cols = chunk_coords(n_chunks, BLOCK_N)
    x_row, y_row = row_ptr(x_ptr, row, stride_x), row_ptr(y_ptr, row, stride_y)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for t in tl.range(0, CHUNK // BLOCK_N, num_stages=NUM_STAGES):
        c = chunk * CHUNK + t * BLOCK_N + cols
        x = load_hinted(x_row + c, c < n_cols, 0.0, L2_HINTS, "evict_last")
        x = x.to(tl.float32)
        acc += x * x
    tl.store(partial_ptr + pid, tl.sum(acc, axis=0))
    if arrive_last(arrived_ptr, row, n_chunks):  # the last of the row's programs
        k = tl.arange(0, MAX_CHUNKS)
        # .cg reads L2, never a stale L1 line.
        parts = tl.load(partial_ptr + row * n_chunks + k, mask=k < n_chunks, other=0.0, cache_modifier=".cg")
        inv_rms = tl.rsqrt(tl.sum(parts, axis=0) / n_cols + eps)
        _write_row(x_row, w_ptr, y_row, cols, tl.cdiv(n_cols, BLOCK_N), n_cols, inv_rms, BLOCK_N, False, L2_HINTS, NUM_STAGES)


@triton.jit
def _rmsnorm_coop_kernel(
    x_ptr, w_ptr, y_ptr, slot_ptr, n_rows, n_cols, stride_x, stride_y, n_elems, eps, n_chunks, n_groups, n_iters,
    CHUNK: tl.constexpr, MAX_CHUNKS: tl.constexpr, PACKED: tl.constexpr, PREFETCH: tl.constexpr,
    SPIN_LIMIT: tl.constexpr,
):
    # Persistent: program (group, chunk) owns columns [chunk * CHUNK, +CHUNK) of rows group,
    # group + n_groups, ...; the row's chunk stays in registers from load to store. With PACKED
    # the host passes bf16 tensors as int32 views (two elements a word: n_cols words a row, strides in words), so
    # the chunk waits in half the registers. The partial sum of squares goes to a zeroed int64
    # slot with bit 32 set (so "written" needs no fence and no counter); the program waits until
    # all of the row's slots are written.
    group, chunk, c, col_ok, k, k_ok = coop_coords(n_chunks, n_cols, CHUNK, MAX_CHUNKS)
    w = tl.load(w_ptr + c, mask=col_ok, other=0)  # the same columns for every row
    x_next = load_chunk(x_ptr, group, n_rows, stride_x, c, col_ok, 0)
    tries = tl.full([], 0, tl.int32)  # polls so far, over all rows: a bound, never a hang
    for it in range(0, n_iters):
        row = group + it * n_groups
        x = current_chunk(x_next, x_ptr, row, n_rows, stride_x, c, col_ok, 0, PREFETCH)
        if PACKED:
            lo, hi = unpack_bf16x2(x)
            part = tl.sum(lo * lo + hi * hi, axis=0)
        else:
            xf = x.to(tl.float32)
            part = tl.sum(xf * xf, axis=0)
        flagged = part.to(tl.int32, bitcast=True).to(tl.uint32, bitcast=True).to(tl.int64) | (1 << 32)
        tl.atomic_xchg(slot_ptr + row * n_chunks + chunk, flagged, sem="relaxed")
        if PREFETCH:  # next row's chunk is in flight while we wait
            nxt = row + n_groups
            x_next = load_chunk(x_ptr, nxt, n_rows, stride_x, c, col_ok, 0)
        slots = slot_ptr + row * n_chunks + k
        v, ready, tries = wait_slots(slots, k_ok, tries, SPIN_LIMIT)
        parts = tl.where(k_ok, v.to(tl.int32).to(tl.float32, bitcast=True), 0.0)
        inv_rms = tl.rsqrt(tl.sum(parts, axis=0) / n_elems + eps)
        inv_rms = tl.where(ready != 0, inv_rms, float("nan"))  # gave up waiting: say so in y
        out = row_ptr(y_ptr, row, stride_y) + c
        if PACKED:
            # x ^ (ready - 1) is x once the wait succeeded, but the compiler cannot know it: it
            # widens x again here instead of keeping the fp32 halves alive across the wait.
            lo, hi = unpack_bf16x2(x ^ (ready - 1))
            w_lo, w_hi = unpack_bf16x2(w)
            tl.store(out, pack_bf16x2(lo * inv_rms * w_lo, hi * inv_rms * w_hi), mask=col_ok & (row < n_rows))
        else:
            y = x.to(tl.float32) * inv_rms * w.to(tl.float32)
            tl.store(out, y.to(y_ptr.dtype.element_ty), mask=col_ok & (row < n_rows))

def rmsnorm_forward(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dimension of `x` with the CONFIG in force at call time."""
    n = x.shape[-1]
    if weight.shape != (n,):
        raise ValueError(f"rmsnorm: weight has shape {tuple(weight.shape)}, expected ({n},)")
    x2, y, strides = rows_and_output(x)  # x's rows read in place, through their stride
    m = x2.shape[0]
    if y.numel() == 0:
        return y.view(x.shape)
    w = weight.contiguous()  # read as adjacent elements: a parameter already is (no copy)
    cfg = CONFIG
    if tile := row_plan(m, n, cfg):
        block_m, block_n, warps = tile
        _rmsnorm_tile_kernel[(triton.cdiv(m, block_m),)](
            x2, w, y, m, n, *strides, eps, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps
        )
    elif cfg["chunk_n"] > 0 and (coop := cfg["cooperative"] and cooperative_plan(m, n, cfg["chunk_n"], x.device)):
        chunk, n_chunks, n_groups, n_iters = coop
        slots = torch.zeros(n_groups * n_iters * n_chunks, dtype=torch.int64, device=x.device)
        # bf16 pairs as int32 words on the GPU (the interpreter keeps plain elements): rows must
        # start on whole words.
        packed = (x.is_cuda and x2.dtype == w.dtype == torch.bfloat16 and n % 2 == 0
                  and x2.stride(0) % 2 == 0 and x2.storage_offset() % 2 == 0)
        xs, ws, ys, unit = (x2.view(torch.int32), w.view(torch.int32), y.view(torch.int32), 2) if packed else (x2, w, y, 1)
        _rmsnorm_coop_kernel[(n_groups * n_chunks,)](
            xs, ws, ys, slots, m, n // unit, *(s // unit for s in strides), n, eps, n_chunks, n_groups, n_iters,
            CHUNK=chunk // unit, MAX_CHUNKS=triton.next_power_of_2(n_chunks), PACKED=packed, PREFETCH=COOP_PREFETCH,
            SPIN_LIMIT=SPIN_LIMIT, num_warps=cfg["split_num_warps"],
        )
    elif cfg["chunk_n"] > 0:
        chunk, block, n_chunks, arrived = chunk_launch(m, n, cfg, x.device)
        stages = pipeline_stages(cfg["num_stages"], block * x2.element_size() * 2)
        partial = torch.empty(m * n_chunks, dtype=torch.float32, device=x.device)
        _rmsnorm_chunk_kernel[(m * n_chunks,)](
            x2, w, y, partial, arrived, n, *strides, eps, n_chunks,
            CHUNK=chunk, BLOCK_N=block, MAX_CHUNKS=triton.next_power_of_2(n_chunks), L2_HINTS=cfg["l2_hints"],
            NUM_STAGES=stages, num_warps=cfg["split_num_warps"],
        )
    else:
        block, stages, programs = split_launch(m, n, cfg, x2.element_size() * 2, x.device)
        _rmsnorm_split_kernel[(programs,)](
            x2, w, y, m, n, *strides, eps, programs, triton.cdiv(m, programs),
            BLOCK_N=block, REVERSE=cfg["reverse_second_pass"], L2_HINTS=cfg["l2_hints"], NUM_STAGES=stages,
            num_warps=cfg["split_num_warps"],
        )
    return y.view(x.shape)


class ModelNew(RMSNormModule):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rmsnorm_forward(x, self.weight, self.eps)
