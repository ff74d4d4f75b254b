"""
---
title: OptimizedFM (WuKong) out = X @ (X^T @ Y), the [D, K] intermediate kept on chip, two tl.dots per D slice
kind: kernels
family: [optimized_fm, gemm]
tags: [gemm, batched-gemm, chained-gemm, fusion, recommendation, tensor-core, wukong, factorization-machine, bf16]
hardware: [any]
spec: optimized_fm
---
X [B, N, D], Y [B, N, K] -> out [B, N, K] = X @ (X^T @ Y), N small (24 ... 64), D a few hundred,
K up to a few thousand. PyTorch runs two bmms and writes the [B, D, K] intermediate T = X^T @ Y
to HBM and reads it back: with D = 224 and N = 24 that is ~9x the bytes of out itself.

The product is associative over D: with X split into column slices X_s [N, BLOCK_D],
out = sum over s of X_s @ (X_s^T @ Y). One program owns one sample b and one BLOCK_K-wide column
tile of Y and out: it loads its Y tile [N, BLOCK_K] once, then for each D slice computes
T_s = X_s^T @ Y_tile ([BLOCK_D, BLOCK_K], fp32, on chip), rounds it to the input dtype (as the
bmm chain does with its intermediate) and accumulates X_s @ T_s into the fp32 output tile. X
(tiny: N x D per sample) is re-read from L1/L2 by the program's slices and by the sample's other
K tiles, which run next to it. Bytes: X once, Y once, out once.

N is padded to a power of two >= 16 for tl.dot (24 -> 32, 40 and 48 -> 64, masked rows are zero),
and the K tail of K = 2198 is masked.

CONFIG["k_major"] computes the transpose instead, the way flash attention chains its two dots:
T_s^T = Y_tile^T @ X_s ([BLOCK_K, BLOCK_D]) and out^T += T_s^T @ X_s^T. The first dot's
accumulator is then the second's left operand, which Hopper's wgmma reads from registers (no
round trip through shared memory for a layout change), and both dots have M = BLOCK_K rather
than the padded N. Measured on an H200 (bench/results/recsys/h200/2026-11-22_pffn_mbdt_reworked/): with K tiles
of 64 it took N = 24 from 0.36 ms to 0.22 ms (torch.compile: 1.08 ms) and N = 40/48 from
0.087 ms to 0.078-0.081 ms (torch.compile: 0.15 ms), so it is the default.

CONFIG["split_n"] (with k_major) covers the rows with two power-of-two blocks where N padded to
16 is not a power of two (40 and 48: 32 + 16 rows instead of 64), a quarter less MMA
work; with D slices of 32 (224 = 7 x 32) it took N = 40/48 to 0.067/0.071 ms (2.19x/2.12x
torch.compile) and N = 24 to 0.216 ms (5.08x) on an H200 (bench/results/recsys/h200/2026-11-23_conv1d_fm_restructured/).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

CONFIG = {
    "BLOCK_K": 64,
    "BLOCK_D": 32,
    "num_warps": 4,
    "num_stages": 4,
    "k_major": True,
    "split_n": True,
}

TUNABLES = {
    "BLOCK_K": [32, 64, 128, 256],
    "BLOCK_D": [16, 32, 64, 128],
    "num_warps": [2, 4, 8],
    "num_stages": [1, 2, 3, 4],
    "k_major": [False, True],
    # k_major only: N padded to a multiple of 16 and covered by two power-of-two row blocks
    # (N = 40, 48: 32 + 16 rows instead of 64), a quarter less MMA work than the padded block.
    "split_n": [False, True],
}


@triton.jit
def _fm_kernel(
    x_ptr, y_ptr, out_ptr, N, D, K, tiles_k,
    stride_xb, stride_xn, stride_xd,
    stride_yb, stride_yn, stride_yk,
    stride_ob, stride_on, stride_ok,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_K: tl.constexpr, NUM_STAGES: tl.constexpr,
    K_MAJOR: tl.constexpr,
):
    pid = tl.program_id(0)
    b = pid // tiles_k  # a sample's K tiles are adjacent: its X stays in L2
    pid_k = pid % tiles_k
    rows = tl.arange(0, BLOCK_N)
    cols = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    row_ok = rows < N
    col_ok = cols < K
    y = tl.load(y_ptr + b.to(tl.int64) * stride_yb + rows[:, None] * stride_yn + cols[None, :] * stride_yk,
                mask=row_ok[:, None] & col_ok[None, :], other=0.0)
    x_base = x_ptr + b.to(tl.int64) * stride_xb
    if K_MAJOR:
        # Transposed, as in flash attention: T^T slice = Y^T @ X_s is the accumulator of the first
        # dot and feeds the second (out^T += T^T @ X_s^T) as its left operand, straight from
        # registers; M of both dots is BLOCK_K instead of the padded N.
        acc_t = tl.zeros([BLOCK_K, BLOCK_N], dtype=tl.float32)
        y_t = tl.trans(y)
        for d0 in tl.range(0, D, BLOCK_D, num_stages=NUM_STAGES):
            d = d0 + tl.arange(0, BLOCK_D)
            x = tl.load(x_base + rows[:, None] * stride_xn + d[None, :] * stride_xd,
                        mask=row_ok[:, None] & (d < D)[None, :], other=0.0)
            t_t = tl.dot(y_t, x)  # [BLOCK_K, BLOCK_D]
            acc_t = tl.dot(t_t.to(x.dtype), tl.trans(x), acc_t)
        acc = tl.trans(acc_t)
    else:
        acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
        for d0 in tl.range(0, D, BLOCK_D, num_stages=NUM_STAGES):
            d = d0 + tl.arange(0, BLOCK_D)
            x = tl.load(x_base + rows[:, None] * stride_xn + d[None, :] * stride_xd,
                        mask=row_ok[:, None] & (d < D)[None, :], other=0.0)
            t = tl.dot(tl.trans(x), y)  # [BLOCK_D, BLOCK_K] slice of X^T @ Y, never written out
            acc = tl.dot(x, t.to(x.dtype), acc)
    out = out_ptr + b.to(tl.int64) * stride_ob + rows[:, None] * stride_on + cols[None, :] * stride_ok
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])


@triton.jit
def _fm_split_kernel(
    x_ptr, y_ptr, out_ptr, N, D, K, tiles_k,
    stride_xb, stride_xn, stride_xd,
    stride_yb, stride_yn, stride_yk,
    stride_ob, stride_on, stride_ok,
    BLOCK_N1: tl.constexpr, BLOCK_N2: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_K: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    # k_major with the rows in two blocks, [0, BLOCK_N1) and [BLOCK_N1, BLOCK_N1 + BLOCK_N2): the
    # first dot contracts both (two dots into one accumulator), the second writes two accumulators.
    pid = tl.program_id(0)
    b = pid // tiles_k
    pid_k = pid % tiles_k
    rows_a = tl.arange(0, BLOCK_N1)
    rows_b = BLOCK_N1 + tl.arange(0, BLOCK_N2)
    cols = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    col_ok = cols < K
    y_base = y_ptr + b.to(tl.int64) * stride_yb
    y_t_a = tl.trans(tl.load(y_base + rows_a[:, None] * stride_yn + cols[None, :] * stride_yk,
                             mask=(rows_a < N)[:, None] & col_ok[None, :], other=0.0))
    y_t_b = tl.trans(tl.load(y_base + rows_b[:, None] * stride_yn + cols[None, :] * stride_yk,
                             mask=(rows_b < N)[:, None] & col_ok[None, :], other=0.0))
    x_base = x_ptr + b.to(tl.int64) * stride_xb
    acc_a = tl.zeros([BLOCK_K, BLOCK_N1], dtype=tl.float32)
    acc_b = tl.zeros([BLOCK_K, BLOCK_N2], dtype=tl.float32)
    for d0 in tl.range(0, D, BLOCK_D, num_stages=NUM_STAGES):
        d = d0 + tl.arange(0, BLOCK_D)
        d_ok = d < D
        x_a = tl.load(x_base + rows_a[:, None] * stride_xn + d[None, :] * stride_xd,
                      mask=(rows_a < N)[:, None] & d_ok[None, :], other=0.0)
        x_b = tl.load(x_base + rows_b[:, None] * stride_xn + d[None, :] * stride_xd,
                      mask=(rows_b < N)[:, None] & d_ok[None, :], other=0.0)
        t_t = tl.dot(y_t_a, x_a)
        t_t = tl.dot(y_t_b, x_b, t_t).to(x_a.dtype)  # [BLOCK_K, BLOCK_D]
        acc_a = tl.dot(t_t, tl.trans(x_a), acc_a)
        acc_b = tl.dot(t_t, tl.trans(x_b), acc_b)
    out_base = out_ptr + b.to(tl.int64) * stride_ob
    tl.store(out_base + rows_a[:, None] * stride_on + cols[None, :] * stride_ok,
             tl.trans(acc_a).to(out_ptr.dtype.element_ty), mask=(rows_a < N)[:, None] & col_ok[None, :])
    tl.store(out_base + rows_b[:, None] * stride_on + cols[None, :] * stride_ok,
             tl.trans(acc_b).to(out_ptr.dtype.element_ty), mask=(rows_b < N)[:, None] & col_ok[None, :])


def optimized_fm(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """x @ (x^T @ y) for x [B, N, D], y [B, N, K], with the CONFIG in force at call time."""
    batch, n, d = x.shape
    if y.dim() != 3 or y.shape[:2] != (batch, n):
        raise ValueError(f"optimized_fm: x {tuple(x.shape)} and y {tuple(y.shape)} need the same [B, N]")
    k = y.shape[2]
    out = torch.empty(batch, n, k, dtype=y.dtype, device=y.device)
    if out.numel() == 0:
        return out
    if d == 0:
        return out.zero_()
    cfg = CONFIG
    block_n = max(16, triton.next_power_of_2(n))
    block_k = max(16, min(cfg["BLOCK_K"], triton.next_power_of_2(k)))
    block_d = max(16, min(cfg["BLOCK_D"], triton.next_power_of_2(d)))
    tiles_k = triton.cdiv(k, block_k)
    n16 = triton.cdiv(n, 16) * 16
    if cfg["split_n"] and cfg["k_major"] and n16 != block_n:
        block_n1 = block_n // 2
        block_n2 = triton.next_power_of_2(n16 - block_n1)
        if block_n2 < block_n1:
            _fm_split_kernel[(batch * tiles_k,)](
                x, y, out, n, d, k, tiles_k,
                *x.stride(), *y.stride(), *out.stride(),
                BLOCK_N1=block_n1, BLOCK_N2=block_n2, BLOCK_D=block_d, BLOCK_K=block_k,
                NUM_STAGES=cfg["num_stages"], num_warps=cfg["num_warps"],
            )
            return out
    _fm_kernel[(batch * tiles_k,)](
        x, y, out, n, d, k, tiles_k,
        *x.stride(), *y.stride(), *out.stride(),
        BLOCK_N=block_n, BLOCK_D=block_d, BLOCK_K=block_k, NUM_STAGES=cfg["num_stages"], K_MAJOR=cfg["k_major"],
        num_warps=cfg["num_warps"],
    )
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return optimized_fm(x, y)
