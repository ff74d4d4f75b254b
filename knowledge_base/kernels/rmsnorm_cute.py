"""
---
title: RMSNorm forward in CuTe DSL - a long row split over a thread-block cluster, reduced through distributed shared memory
kind: kernels
language: cute
family: [rmsnorm]
tags: [cute, cutlass, cluster, dsmem, distributed-shared-memory, reduction, memory-bound, normalization, row-wise, long-row, 128-bit, single-pass]
hardware: [h100, h200, b200]
spec: rmsnorm
---
y = x * rsqrt(mean(x^2) + eps) * weight over the last dimension, written in CuTe DSL
(nvidia-cutlass-dsl; needs an sm_90 or newer GPU: there is no CPU interpreter for it).

One pass from DRAM at every row length: a row is read once and written once, the thread's slice of
it kept on chip (registers, or shared memory for long rows) between the reduction and the store.

A row of N values is cut into vectors of CONFIG["copy_bits"] bits (128: 8 bf16/fp16, 4 fp32).
`row_plan` (_cute_rows.row_layout, a small heuristic over CONFIG) picks the launch per row length:
short rows share a block of CONFIG["short_threads"] threads, each row on the fewest threads (a power
of two, at least CONFIG["min_row_threads"]) that hold it with at most CONFIG["vecs_per_thread"]
vectors each (a row of at most 32 threads reduces in its warp alone, no shared memory, no barrier);
longer rows get one block of about CONFIG["threads"] threads each (a multiple of 32 that splits the
row evenly), split over the smallest power-of-two thread-block cluster (grid y, cluster shape (1,
cluster_n, 1), at most CONFIG["max_cluster"] blocks; 16 is a non-portable size that Hopper allows)
that leaves each thread at most vecs_per_thread vectors. With the defaults: N = 256 four rows per
128-thread block, N = 4096 two, N = 16384 one 256-thread block, N = 65536 a cluster of 4 and N =
262144 of 16 blocks of 256 threads, 64 bf16 values per thread. Rows of at least
CONFIG["stage_min_n"] values (65536) go through shared memory instead: cp.async copies the slice
there (the weight meanwhile into registers) and each pass reads it back, so that only partials stay
live across a reduction (58 registers a thread instead of 111 compiled for sm_90a, twice the
resident blocks; on the H200 3973 / 4036 GB/s at N = 65536 / 262144 against 3565 / 3284 kept in
registers); CONFIG["min_blocks_per_sm"] asks the compiler for that many resident blocks per SM.

The sum of squares is reduced over the warp (shuffles), the row's warps (one fp32 each in shared
memory) and, for a cluster, its blocks. The cluster's reductions go one of two ways
(CONFIG["mbarrier"], True by default: on the H200 it was 1.2-1.7x faster at N = 65536 and 262144,
bench/results/reductions/h200/2026-11-23_peers_and_cute_kernels/README.md). False: each block writes its partial into its own shared slot,
a cluster barrier publishes it, every block reads all peers' slots through distributed shared memory
(mapa + ld.shared::cluster) in rank order, and a last cluster arrive / wait keeps each block's
shared memory alive until its peers are done reading. True: every warp pushes its partial into each
peer's shared memory with st.async, the bytes completing on the receiver's mbarrier; a block waits
only for its own mbarrier and reads only its own shared memory, so no cluster barrier is needed
after the set-up. Either way all blocks combine the same partials in the same order and agree bit
for bit.

The kernel is compiled once per (shape, dtype, plan, exchange) with `cute.compile` and kept in
`_COMPILED` (_cute_rows.run_compiled): sizes and strides are static, so the compiler proves the
16-byte alignment of every vector access (tensors are handed over with `assumed_align=16`). Rows
must tile exactly (a whole number of vectors, split evenly over threads that are a multiple of 32,
or a power of two from 8 for short rows), the case for every shape of specs/rmsnorm.yaml; other
lengths are refused with a ValueError. Launched on the caller's current CUDA stream.
"""

import torch
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from _cute_rows import global_view, launch_row_blocks, load_strided, launch_consts, row_coords, row_layout, row_matrix, row_exit, row_shared, row_setup, row_total, read_staged, run_compiled, stage_slice, store_strided
from _row_models import RMSNormModule

CONFIG = {
    "copy_bits": 128,
    "threads": 256,
    "short_threads": 128,
    "min_row_threads": 32,
    "vecs_per_thread": 16,
    "max_cluster": 16,
    "mbarrier": True,
    "min_blocks_per_sm": 0,
    "cluster_vecs_per_thread": 8,
    "stage_min_n": 65536,
}

TUNABLES = {
    "copy_bits": [64, 128],
    "threads": [128, 256, 512],
    "short_threads": [64, 128, 256],
    "min_row_threads": [8, 16, 32],
    "vecs_per_thread": [4, 8, 16],
    "max_cluster": [8, 16],
    "mbarrier": [False, True],
    "min_blocks_per_sm": [0, 2, 3, 4],
    "cluster_vecs_per_thread": [4, 8, 16],
    "stage_min_n": [0, 16384, 65536, 1073741824],
}

_COMPILED = {}


def row_plan(n: int, width: int, config: dict):
    """The RowPlan of rows of n values of `width` bits (_cute_rows.row_layout): one chunk, the
    thread's whole slice in registers."""
    return row_layout(n, width, config, "rmsnorm_cute")


@cute.kernel
def _rmsnorm_kernel(
    mX: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor, eps: cutlass.Float32, cluster_n: cutlass.Constexpr,
    threads: cutlass.Constexpr, row_threads: cutlass.Constexpr, iters: cutlass.Constexpr, chunks: cutlass.Constexpr,
    vec: cutlass.Constexpr, bits: cutlass.Constexpr, ragged: cutlass.Constexpr, mbarrier: cutlass.Constexpr, stage: cutlass.Constexpr,
):
    m = cute.size(mX, mode=[0])
    n = cute.size(mX, mode=[1])
    row, load_row, t, rank = row_coords(m, threads, row_threads, ragged)
    smem, staged = row_shared(threads, cluster_n, 1, mbarrier, mX.element_type if stage else None, iters, vec)
    row_setup(smem, 1, cluster_n, mbarrier)

    # The row as vectors: mode 0 the vec values of one access, mode 1 the vector index.
    gX = cute.zipped_divide((global_view(mX) if stage else mX)[load_row, None], (vec,))
    gY = cute.zipped_divide(mY[load_row, None], (vec,))
    gW = cute.zipped_divide(mW, (vec,))
    x = cute.make_rmem_tensor(cute.make_layout((vec, iters)), mX.element_type)
    w = cute.make_rmem_tensor(cute.make_layout((vec, iters)), mW.element_type)
    first = rank * (row_threads * iters) + t  # consecutive threads take consecutive vectors
    if cutlass.const_expr(stage):
        # x through shared memory (cp.async, no registers held); the weight meanwhile, into registers.
        stage_slice(gX, staged, first, row_threads, iters, threads, bits)
        load_strided(gW, w, first, row_threads, iters, 0, bits)
        cute.arch.cp_async_wait_group(0)
        read_staged(staged, x, iters, threads, bits)
    else:
        load_strided(gX, x, first, row_threads, iters, 0, bits)

    xf = x.load().to(cutlass.Float32)
    squares = (xf * xf).reduce(cute.ReductionOp.ADD, 0.0, 0)
    total = row_total(squares, smem, 0, threads, row_threads, cluster_n, False, True, mbarrier)

    if cutlass.const_expr(stage):
        read_staged(staged, x, iters, threads, bits)  # again: x was not kept live across the reduction
    else:
        # The weight (read by every row, from L2) only now: fewer registers live during the reduction.
        load_strided(gW, w, first, row_threads, iters, 0, bits)
    rstd = cute.math.rsqrt(total / cutlass.Float32(n) + eps)
    y = x.load().to(cutlass.Float32) * rstd * w.load().to(cutlass.Float32)
    if row < m:
        store_strided(y, gY, first, row_threads, vec, iters, bits)
    row_exit(cluster_n, mbarrier)


@cute.jit
def _rmsnorm_launch(
    mX: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor, eps: cutlass.Float32, stream: cuda.CUstream,
    cluster_n: cutlass.Constexpr, threads: cutlass.Constexpr, row_threads: cutlass.Constexpr, iters: cutlass.Constexpr,
    chunks: cutlass.Constexpr, vec: cutlass.Constexpr, bits: cutlass.Constexpr, ragged: cutlass.Constexpr,
    mbarrier: cutlass.Constexpr, min_blocks: cutlass.Constexpr, stage: cutlass.Constexpr,
):
    kernel = _rmsnorm_kernel(mX, mW, mY, eps, cluster_n, threads, row_threads, iters, chunks, vec, bits, ragged, mbarrier, stage)
    launch_row_blocks(kernel, cute.size(mX, mode=[0]), threads, threads // row_threads, cluster_n, stream, min_blocks)


def rmsnorm_forward(x: torch.Tensor, weight: torch.Tensor, eps: float, config: dict | None = None) -> torch.Tensor:
    x2, _ = row_matrix(x)
    # A Parameter requires grad, and dlpack exports no such tensor: its data, detached (this is a forward).
    w = weight.detach()
    w = w if w.dtype == x.dtype and w.is_contiguous() else w.to(x.dtype).contiguous()
    y = torch.empty_like(x2)
    config = config or CONFIG
    plan = row_plan(x2.shape[1], x2.element_size() * 8, config)
    run_compiled(_COMPILED, _rmsnorm_launch, [x2, w, y], [eps], (*launch_consts(plan, x2.shape[0], config), x2.shape[1] >= config.get("stage_min_n", 1 << 62)))
    return y.view(x.shape)


class ModelNew(RMSNormModule):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rmsnorm_forward(x, self.weight, self.eps)
