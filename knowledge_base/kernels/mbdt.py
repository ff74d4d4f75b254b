"""
---
title: MBDT (merge bucketized dense transform) - vectorised branch-free binary search per feature, int64 bin + per-feature offset
kind: kernels
family: [mbdt, bucketize]
tags: [bucketize, searchsorted, binary-search, embedding, recommendation, memory-bound, elementwise, int64]
hardware: [any]
spec: mbdt
---
values [BATCH, F] (float), borders [F, NB] (each row sorted ascending), offsets [F] int64 ->
out [BATCH, F] int64 = offsets[f] + #{j : borders[f, j] < values[b, f]} (searchsorted, left
side; NaN goes to the last bucket, as searchsorted puts it).

One program owns BLOCK_B rows x BLOCK_F features of values (features contiguous: coalesced loads
and int64 stores). With CONFIG["tile_borders"] (binary search, features fastest) it first loads
its features' border rows once into a [NB, BLOCK_F] on-chip table and every search step is a
tl.gather from that table. Without it each step gathers from memory, one border row per lane: a
warp's lanes cover 32 features, so one cache line per lane (measured 0.377 ms at 65536 x 512 x 64
on an H200 against torch.compile's 0.300 ms). CONFIG["rows_fastest"] arranges the tile
[BLOCK_F, BLOCK_B] so that a warp's lanes share one feature's border row instead; measured
slower (0.60 ms): the values loads and int64 stores then stride across rows. Two ways to find the bin, CONFIG["search"]:
* "binary": branch-free binary lifting. Starting from pos = 0, for step = 2^k, ..., 2, 1 (2^(k+1) > NB):
  move to pos + step when that is <= NB and borders[f, pos + step - 1] < value. Every element
  takes the same log2(NB) + 1 steps; each step is one gathered load from the feature's border
  row (F * NB * 4 bytes: 128 KB at F = 512, NB = 64, so it stays in L1/L2).
* "linear": count the borders below the value, walking the NB borders of the tile's BLOCK_F
  features in order (one coalesced [BLOCK_F] load per border, broadcast over the tile's rows).
  NB compares per element instead of log2(NB) + 1 dependent gathers: better for small NB.
Bytes: values read once (4 B), indices written once (8 B): the int64 output is two thirds of the
traffic, so the kernel is memory-bound at GPU-sized shapes; the published MTIA shapes (BATCH
<= 2048, F = 2, NB <= 4) are one launch and launch-bound.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

CONFIG = {
    "BLOCK_B": 64,
    "BLOCK_F": 64,
    "search": "binary",
    "tile_borders": True,
    "rows_fastest": False,
    "num_warps": 8,
    "row_blocks": 1,
    "linear_max_borders": 0,
}

TUNABLES = {
    "BLOCK_B": [8, 16, 32, 64, 128],
    "BLOCK_F": [32, 64, 128, 256],
    "search": ["binary", "linear"],
    "tile_borders": [True, False],
    "rows_fastest": [False, True],
    "num_warps": [4, 8, 16],
    # BLOCK_B-row blocks one program walks with its features' border table loaded once (the
    # table is [NB, BLOCK_F] floats: at NB = 64 a third of a 64 x 64 tile's own traffic).
    "row_blocks": [1, 2, 4, 8, 16],
    # Use the linear count instead of the binary search when NB is at most this (0: never).
    "linear_max_borders": [0, 4, 8, 16, 32],
}


@triton.jit
def _mbdt_kernel(
    values_ptr, borders_ptr, offsets_ptr, out_ptr, n_rows, n_feat, n_borders, tiles_f,
    stride_vb, stride_vf, stride_bf, stride_bj, stride_ob, stride_of,
    BLOCK_B: tl.constexpr, BLOCK_F: tl.constexpr, FIRST_STEP: tl.constexpr, N_STEPS: tl.constexpr,
    LINEAR: tl.constexpr, ROWS_FASTEST: tl.constexpr, TILE_BORDERS: tl.constexpr, NB_TILE: tl.constexpr,
    ROW_BLOCKS: tl.constexpr,
):
    pid = tl.program_id(0)
    feats = (pid % tiles_f) * BLOCK_F + tl.arange(0, BLOCK_F)
    row0 = (pid // tiles_f).to(tl.int64) * (BLOCK_B * ROW_BLOCKS)
    # The tile as [BLOCK_F, BLOCK_B] puts a warp's lanes along rows of one feature, so a gather
    # step reads one border row (a few cache lines) instead of one line per lane.
    if ROWS_FASTEST:
        f2 = feats[:, None]
    else:
        f2 = feats[None, :]
    f_ok = f2 < n_feat
    row_of_f = borders_ptr + f2 * stride_bf
    offset = tl.load(offsets_ptr + f2, mask=f_ok, other=0)
    if TILE_BORDERS and not ROWS_FASTEST and not LINEAR:
        # The tile's border rows, loaded once as [NB_TILE, BLOCK_F] (feature f in column f): each
        # search step gathers from this on-chip copy (tl.gather along axis 0), not from memory.
        j = tl.arange(0, NB_TILE)
        table = tl.load(borders_ptr + j[:, None] * stride_bj + f2 * stride_bf,
                        mask=(j[:, None] < n_borders) & f_ok, other=0.0)
    for rb in range(ROW_BLOCKS):  # row blocks of this program share the border table
        rows = row0 + rb * BLOCK_B + tl.arange(0, BLOCK_B)
        if ROWS_FASTEST:
            r2 = rows[None, :]
        else:
            r2 = rows[:, None]
        mask = (r2 < n_rows) & f_ok
        v = tl.load(values_ptr + r2 * stride_vb + f2 * stride_vf, mask=mask, other=0.0)
        pos = tl.zeros(v.shape, dtype=tl.int32)
        if LINEAR:
            for jj in range(0, n_borders):
                border = tl.load(row_of_f + jj * stride_bj, mask=f_ok, other=0.0)
                pos += (border < v).to(tl.int32)
        elif TILE_BORDERS and not ROWS_FASTEST:
            for i in tl.static_range(N_STEPS):
                cand = pos + (FIRST_STEP >> i)
                ok = mask & (cand <= n_borders)
                border = tl.gather(table, tl.where(ok, cand - 1, 0), axis=0)
                pos = tl.where(ok & (border < v), cand, pos)
        else:
            for i in tl.static_range(N_STEPS):  # unrolled: step = FIRST_STEP, FIRST_STEP / 2, ..., 1
                cand = pos + (FIRST_STEP >> i)
                ok = mask & (cand <= n_borders)
                border = tl.load(row_of_f + (cand - 1) * stride_bj, mask=ok, other=0.0)
                pos = tl.where(ok & (border < v), cand, pos)
        pos = tl.where(v != v, n_borders, pos)  # NaN sorts last
        tl.store(out_ptr + r2 * stride_ob + f2 * stride_of, pos.to(tl.int64) + offset, mask=mask)


def mbdt_forward(values: torch.Tensor, borders: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """offsets[f] + searchsorted(borders[f], values[:, f]) as int64, with the CONFIG in force."""
    n_rows, n_feat = values.shape
    if borders.dim() != 2 or borders.shape[0] != n_feat or offsets.shape != (n_feat,):
        raise ValueError(f"mbdt: values {tuple(values.shape)}, borders {tuple(borders.shape)}, "
                         f"offsets {tuple(offsets.shape)}: need borders [F, NB] and offsets [F]")
    n_borders = borders.shape[1]
    out = torch.empty(n_rows, n_feat, dtype=torch.int64, device=values.device)
    if out.numel() == 0:
        return out
    cfg = CONFIG
    block_f = max(2, min(cfg["BLOCK_F"], triton.next_power_of_2(n_feat)))
    block_b = max(1, min(cfg["BLOCK_B"], triton.next_power_of_2(n_rows)))
    tiles_f = triton.cdiv(n_feat, block_f)
    first_step = triton.next_power_of_2(n_borders + 1) // 2  # 2^k with 2^(k+1) > NB; 0 when NB = 0
    # Row blocks per program: never more than the rows need.
    row_blocks = max(1, min(cfg["row_blocks"], triton.cdiv(n_rows, block_b)))
    linear = cfg["search"] == "linear" or n_borders <= cfg["linear_max_borders"]
    _mbdt_kernel[(triton.cdiv(n_rows, block_b * row_blocks) * tiles_f,)](
        values, borders, offsets, out, n_rows, n_feat, n_borders, tiles_f,
        *values.stride(), *borders.stride(), *out.stride(),
        BLOCK_B=block_b, BLOCK_F=block_f, FIRST_STEP=first_step, N_STEPS=first_step.bit_length(), LINEAR=linear,
        # Triton 3.6 fails to compile the tl.gather for narrow tiles (BLOCK_F = 2 on the H200).
        ROWS_FASTEST=cfg["rows_fastest"], TILE_BORDERS=cfg["tile_borders"] and block_f >= 32,
        NB_TILE=max(1, triton.next_power_of_2(n_borders)), ROW_BLOCKS=row_blocks,
        num_warps=cfg["num_warps"],
    )
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, values: torch.Tensor, borders: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return mbdt_forward(values, borders, offsets)
