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

One pass from DRAM at every row length: a row is read once and written once. A row of N values is
cut into 128-bit vectors (8 bf16/fp16, 4 fp32); `row_plan` gives each row `cluster_n` blocks of
`threads` threads, each thread holding `iters` vectors in registers. While a row fits
CONFIG["vecs_per_block"] vectors, one block owns it (cluster_n = 1). A longer row is split over a
thread-block cluster (grid y, cluster shape (1, cluster_n, 1), at most CONFIG["max_cluster"]
blocks): each block reduces its slice (warp shuffles, then one fp32 per warp in shared memory),
writes the block's sum of squares into its own shared slot, and after a cluster barrier reads every
peer's slot through distributed shared memory (`map_dsmem_ptr`), adding them in rank order so all
blocks agree bit for bit. A second cluster arrive right after those reads, and its wait just
before the block exits, keep each block's shared memory alive while a peer may still read it.

The kernel is compiled once per (shape, dtype, plan) with `cute.compile` and kept in `_COMPILED`
(_cute_rows.run_compiled): sizes and strides are static, so the compiler proves the 16-byte
alignment of every vector access (tensors are handed over with `assumed_align=16`). Rows must be a
multiple of 32 vectors (256 bf16 values), the case for every shape of specs/rmsnorm.yaml; other
lengths are refused with a ValueError rather than computed wrongly. Launched on the caller's
current CUDA stream.
"""

import torch
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from _cute_rows import cluster_plan, launch_rows, load_vectors, reduction_smem, row_matrix, row_reduce, run_compiled, store_vectors, wait_for_peers
from _row_models import RMSNormModule

CONFIG = {
    "vecs_per_block": 4096,
    "max_threads": 512,
    "max_vecs_per_thread": 8,
    "max_cluster": 8,
}

TUNABLES = {
    "vecs_per_block": [1024, 2048, 4096],
    "max_threads": [256, 512, 1024],
    "max_vecs_per_thread": [8, 16],
    "max_cluster": [4, 8],
}

_COMPILED = {}


def row_plan(n: int, vec: int, config: dict) -> tuple[int, int, int]:
    """(cluster_n, threads, iters): every vector of a row owned by exactly one thread of one block."""
    return cluster_plan(n, vec, config, "rmsnorm_cute", config["max_vecs_per_thread"])


@cute.kernel
def _rmsnorm_kernel(
    mX: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor, eps: cutlass.Float32,
    threads: cutlass.Constexpr, iters: cutlass.Constexpr, cluster_n: cutlass.Constexpr, vec: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    row, rank, _ = cute.arch.block_idx()
    n = cute.size(mX, mode=[1])
    warp_sums, block_sum = reduction_smem(threads, 1)

    # Row `row` as vectors: mode 0 the vec values of one 128-bit access, mode 1 the vector index.
    gX = cute.zipped_divide(mX[row, None], (vec,))
    gY = cute.zipped_divide(mY[row, None], (vec,))
    gW = cute.zipped_divide(mW, (vec,))
    x = cute.make_rmem_tensor(cute.make_layout((vec, iters)), mX.element_type)
    w = cute.make_rmem_tensor(cute.make_layout((vec, iters)), mW.element_type)
    first = rank * (threads * iters) + tidx  # consecutive threads take consecutive vectors
    load_vectors(gX, x, first, threads, iters, 0)

    xf = x.load().to(cutlass.Float32)
    total = row_reduce((xf * xf).reduce(cute.ReductionOp.ADD, 0.0, 0), warp_sums, block_sum, 0, threads, cluster_n, False, True)

    # The weight (read by every row, from L2) only now: fewer registers live during the reduction.
    load_vectors(gW, w, first, threads, iters, 0)
    rstd = cute.math.rsqrt(total / cutlass.Float32(n) + eps)
    store_vectors(xf * rstd * w.load().to(cutlass.Float32), gY, first, threads, vec, iters)
    wait_for_peers(cluster_n)


@cute.jit
def _rmsnorm_launch(
    mX: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor, eps: cutlass.Float32, stream: cuda.CUstream,
    threads: cutlass.Constexpr, iters: cutlass.Constexpr, cluster_n: cutlass.Constexpr, vec: cutlass.Constexpr,
):
    launch_rows(_rmsnorm_kernel(mX, mW, mY, eps, threads, iters, cluster_n, vec), cute.size(mX, mode=[0]), threads, cluster_n, stream)


def rmsnorm_forward(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x2, vec = row_matrix(x)
    # A Parameter requires grad, and dlpack exports no such tensor: its data, detached (this is a forward).
    w = weight.detach()
    w = w if w.dtype == x.dtype and w.is_contiguous() else w.to(x.dtype).contiguous()
    y = torch.empty_like(x2)
    cluster_n, threads, iters = row_plan(x2.shape[1], vec, CONFIG)
    run_compiled(_COMPILED, _rmsnorm_launch, [x2, w, y], [eps], (threads, iters, cluster_n, vec))
    return y.view(x.shape)


class ModelNew(RMSNormModule):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rmsnorm_forward(x, self.weight, self.eps)
