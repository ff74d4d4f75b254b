"""
---
title: Softmax forward in CuTe DSL - a long row split over a thread-block cluster, max and sum reduced through distributed shared memory
kind: kernels
language: cute
family: [softmax]
tags: [cute, cutlass, cluster, dsmem, distributed-shared-memory, reduction, memory-bound, softmax, row-wise, long-row, 128-bit, single-pass]
hardware: [h100, h200, b200]
spec: softmax
---
softmax(x) over the last dimension in fp32 (max, exp, sum), written in x's dtype, in CuTe DSL
(nvidia-cutlass-dsl; needs an sm_90 or newer GPU: there is no CPU interpreter for it).

One pass from DRAM at every row length: a row is read once and written once, the thread's slice of
it kept in registers between the reductions and the store.

A row of N values is cut into vectors of CONFIG["copy_bits"] bits (128: 8 bf16/fp16, 4 fp32).
`row_plan` (_cute_rows.row_layout, a small heuristic over CONFIG) picks the launch per row length:
short rows share a block of CONFIG["short_threads"] threads, each row on the fewest threads (a power
of two, at least CONFIG["min_row_threads"]) that hold it with at most CONFIG["vecs_per_thread"]
vectors each (a row of at most 32 threads reduces in its warp alone, no shared memory, no barrier);
longer rows get one block of about CONFIG["threads"] threads each (a multiple of 32 that splits the
row evenly), split over the smallest power-of-two thread-block cluster (grid y, cluster shape (1,
cluster_n, 1), at most CONFIG["max_cluster"] blocks; 16 is a non-portable size that Hopper allows)
that leaves each thread at most vecs_per_thread vectors. With the defaults: N = 256 four rows per
128-thread block, N = 4096 two, N = 16384 one 256-thread block, N = 65536 a cluster of 8 blocks of
256 threads holding 32 bf16 values each (CONFIG["cluster_vecs_per_thread"] = 4 vectors once a
cluster is needed) and N = 262144 a cluster of 16 holding 64. Rows of at least CONFIG["stage_min_n"]
values may go through shared memory instead (cp.async, read back for each pass, the exponentials
computed twice); off by default: on the H200 it was slower for softmax (3385 against 3743 GB/s at N
= 262144); CONFIG["min_blocks_per_sm"] asks the compiler for that many resident blocks per SM.

Two reductions, each over the warp (shuffles), the row's warps (one fp32 each in shared memory) and,
for a cluster, its blocks: the row maximum, then the sum of exp(x - max); exp is exp2 of x *
log2(e). The cluster's reductions go one of two ways (CONFIG["mbarrier"], True by default: on the
H200 it was 1.2-1.7x faster at N = 65536 and 262144, bench/results/reductions/h200/2026-11-23_peers_and_cute_kernels/README.md). False:
each block writes its partial into its own shared slot, a cluster barrier publishes it, every block
reads all peers' slots through distributed shared memory (mapa + ld.shared::cluster) in rank order,
and a last cluster arrive / wait keeps each block's shared memory alive until its peers are done
reading. True: every warp pushes its partial into each peer's shared memory with st.async, the bytes
completing on the receiver's mbarrier; a block waits only for its own mbarrier and reads only its
own shared memory, so no cluster barrier is needed after the set-up. Either way all blocks combine
the same partials in the same order and agree bit for bit. CONFIG["online"] (on, for rows split
over a cluster; H200 run 4: 3965 GB/s at N = 262144 and 4022 at 65536, against 3746 / 3922 without) merges each thread's (max, sum of exp relative to it)
over the row in one pass instead (_cute_rows.row_max_sum: one cluster exchange instead of two, as
QuACK does), the exponentials rescaled by exp2(local max - row max) at the store.

Compiled once per (shape, dtype, plan, exchange) with `cute.compile` and kept in `_COMPILED`
(_cute_rows.run_compiled): sizes and strides are static, so the 16-byte alignment of every vector
access is proven (tensors handed over with `assumed_align=16`). Rows must tile exactly (a whole
number of vectors, split evenly over threads that are a multiple of 32, or a power of two from 8 for
short rows), the case for every shape of specs/softmax.yaml; other lengths are refused with a
ValueError. Launched on the caller's current CUDA stream.
"""

import torch
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from _cute_rows import (
    global_view,
    BIG,
    LOG2E,
    launch_row_blocks,
    load_strided,
    launch_consts,
    row_coords,
    row_layout,
    row_matrix,
    row_max_sum,
    row_exit,
    row_shared,
    row_setup,
    row_total,
    read_staged,
    run_compiled,
    stage_slice,
    store_strided,
)
from _row_models import SoftmaxModule

CONFIG = {
    "copy_bits": 128,
    "threads": 256,
    "short_threads": 128,
    "min_row_threads": 32,
    "vecs_per_thread": 8,
    "max_cluster": 16,
    "mbarrier": True,
    "min_blocks_per_sm": 0,
    "cluster_vecs_per_thread": 4,
    "stage_min_n": 1073741824,
    "online": True,  # for rows split over a cluster (run 4 on an H200: +6% at N = 262144, +3% at 65536)
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
    "online": [False, True],
}

_COMPILED = {}


def row_plan(n: int, width: int, config: dict):
    """The RowPlan of rows of n values of `width` bits (_cute_rows.row_layout): one chunk, the
    thread's whole slice in registers."""
    return row_layout(n, width, config, "softmax_cute")


@cute.kernel
def _softmax_kernel(
    mX: cute.Tensor,
    mY: cute.Tensor,
    cluster_n: cutlass.Constexpr,
    threads: cutlass.Constexpr,
    row_threads: cutlass.Constexpr,
    iters: cutlass.Constexpr,
    chunks: cutlass.Constexpr,
    vec: cutlass.Constexpr,
    bits: cutlass.Constexpr,
    ragged: cutlass.Constexpr,
    mbarrier: cutlass.Constexpr,
    stage: cutlass.Constexpr,
    online: cutlass.Constexpr,
):
    m = cute.size(mX, mode=[0])
    row, load_row, t, rank = row_coords(m, threads, row_threads, ragged)
    smem, staged = row_shared(threads, cluster_n, 2, mbarrier, mX.element_type if stage else None, iters, vec)
    row_setup(smem, 2, cluster_n, mbarrier)

    # The row as vectors: mode 0 the vec values of one access, mode 1 the vector index.
    gX = cute.zipped_divide((global_view(mX) if stage else mX)[load_row, None], (vec,))
    gY = cute.zipped_divide(mY[load_row, None], (vec,))
    x = cute.make_rmem_tensor(cute.make_layout((vec, iters)), mX.element_type)
    first = rank * (row_threads * iters) + t  # consecutive threads take consecutive vectors
    if cutlass.const_expr(stage):
        # Through shared memory (cp.async), read back for each pass: only the partials stay live
        # across a reduction (the exponentials are computed twice).
        stage_slice(gX, staged, first, row_threads, iters, threads, bits)
        cute.arch.cp_async_wait_group(0)
        read_staged(staged, x, iters, threads, bits)
    else:
        load_strided(gX, x, first, row_threads, iters, 0, bits)
    xf = x.load().to(cutlass.Float32) * LOG2E

    if cutlass.const_expr(online):
        # Online: each thread's max and sum of exp relative to it, merged over the row in one pass.
        local = xf.reduce(cute.ReductionOp.MAX, -BIG, 0)
        e = cute.math.exp2(xf - local, fastmath=True)
        top, total = row_max_sum(
            local, e.reduce(cute.ReductionOp.ADD, 0.0, 0), smem, threads, row_threads, cluster_n, mbarrier
        )
        scale = cute.math.exp2(local - top, fastmath=True) / total
    else:
        # Row maximum (of x * log2(e)), then the sum of exp(x - max).
        top = row_total(
            xf.reduce(cute.ReductionOp.MAX, -BIG, 0), smem, 0, threads, row_threads, cluster_n, True, False, mbarrier
        )
        if cutlass.const_expr(stage):
            read_staged(staged, x, iters, threads, bits)
            xf = x.load().to(cutlass.Float32) * LOG2E
        e = cute.math.exp2(xf - top, fastmath=True)
        total = row_total(
            e.reduce(cute.ReductionOp.ADD, 0.0, 0), smem, 1, threads, row_threads, cluster_n, False, True, mbarrier
        )
        if cutlass.const_expr(stage):
            read_staged(staged, x, iters, threads, bits)
            e = cute.math.exp2(x.load().to(cutlass.Float32) * LOG2E - top, fastmath=True)
        scale = cutlass.Float32(1.0) / total

    if row < m:
        store_strided(e * scale, gY, first, row_threads, vec, iters, bits)
    row_exit(cluster_n, mbarrier)


@cute.jit
def _softmax_launch(
    mX: cute.Tensor,
    mY: cute.Tensor,
    stream: cuda.CUstream,
    cluster_n: cutlass.Constexpr,
    threads: cutlass.Constexpr,
    row_threads: cutlass.Constexpr,
    iters: cutlass.Constexpr,
    chunks: cutlass.Constexpr,
    vec: cutlass.Constexpr,
    bits: cutlass.Constexpr,
    ragged: cutlass.Constexpr,
    mbarrier: cutlass.Constexpr,
    min_blocks: cutlass.Constexpr,
    stage: cutlass.Constexpr,
    online: cutlass.Constexpr,
):
    kernel = _softmax_kernel(
        mX, mY, cluster_n, threads, row_threads, iters, chunks, vec, bits, ragged, mbarrier, stage, online
    )
    launch_row_blocks(kernel, cute.size(mX, mode=[0]), threads, threads // row_threads, cluster_n, stream, min_blocks)


def softmax_forward(x: torch.Tensor, config: dict | None = None) -> torch.Tensor:
    x2, _ = row_matrix(x)
    y = torch.empty_like(x2)
    config = config or CONFIG
    plan = row_plan(x2.shape[1], x2.element_size() * 8, config)
    run_compiled(
        _COMPILED,
        _softmax_launch,
        [x2, y],
        [],
        (
            *launch_consts(plan, x2.shape[0], config),
            x2.shape[1] >= config.get("stage_min_n", 1 << 62),
            _online(plan, config),
        ),
    )
    return y.view(x.shape)


def _online(plan, config: dict) -> bool:
    """The one-exchange (max, sum) merge where a row spans a cluster: measured there; rows within one
    block keep the two-pass reduction (the online merge was not timed on them)."""
    return bool(config.get("online", False)) and plan.cluster_n > 1


class ModelNew(SoftmaxModule):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_forward(x)
