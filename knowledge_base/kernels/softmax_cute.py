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

One pass from DRAM at every row length: a row is read once and written once. A row of N values is
cut into 128-bit vectors (8 bf16/fp16, 4 fp32); `row_plan` gives each row `cluster_n` blocks of
`threads` threads, each thread holding `iters` vectors in registers. While a row fits
CONFIG["vecs_per_block"] vectors one block owns it; a longer row is split over a thread-block
cluster (grid y, cluster shape (1, cluster_n, 1), at most CONFIG["max_cluster"] blocks). Two
reductions, each over the warp (shuffles), the block (one fp32 per warp in shared memory) and the
cluster: the row maximum, then the sum of exp(x - max). For the cluster step each block writes its
partial into its own shared slot (slot 0 the max, slot 1 the sum), a cluster barrier publishes it,
and every block reads all peers' slots through distributed shared memory (mapa +
ld.shared::cluster), combining them in rank order so all blocks agree bit for bit. A final
cluster arrive after the last peer read, and its wait just before the block exits, keep each
block's shared memory alive while a peer may still read it. exp is exp2 of x * log2(e).

Compiled once per (shape, dtype, plan) with `cute.compile` and kept in `_COMPILED`
(_cute_rows.run_compiled): sizes and strides are static, so the 16-byte alignment of every vector
access is proven (tensors handed over with `assumed_align=16`). Rows must be a multiple of 32
vectors (256 bf16 values), the case for every shape of specs/softmax.yaml; other lengths are
refused with a ValueError. Launched on the caller's current CUDA stream.
"""

import torch
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from _cute_rows import BIG, LOG2E, cluster_plan, launch_rows, load_vectors, reduction_smem, row_matrix, row_reduce, run_compiled, store_vectors, wait_for_peers
from _row_models import SoftmaxModule

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
    return cluster_plan(n, vec, config, "softmax_cute", config["max_vecs_per_thread"])


@cute.kernel
def _softmax_kernel(mX: cute.Tensor, mY: cute.Tensor, threads: cutlass.Constexpr, iters: cutlass.Constexpr, cluster_n: cutlass.Constexpr, vec: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    row, rank, _ = cute.arch.block_idx()
    warp_max, warp_sum, block_slots = reduction_smem(threads, 2)

    # Row `row` as vectors: mode 0 the vec values of one 128-bit access, mode 1 the vector index.
    gX = cute.zipped_divide(mX[row, None], (vec,))
    gY = cute.zipped_divide(mY[row, None], (vec,))
    x = cute.make_rmem_tensor(cute.make_layout((vec, iters)), mX.element_type)
    first = rank * (threads * iters) + tidx  # consecutive threads take consecutive vectors
    load_vectors(gX, x, first, threads, iters, 0)
    xf = x.load().to(cutlass.Float32) * LOG2E

    # Row maximum (of x * log2(e)), then the sum of exp(x - max).
    top = row_reduce(xf.reduce(cute.ReductionOp.MAX, -BIG, 0), warp_max, block_slots, 0, threads, cluster_n, True, False)
    e = cute.math.exp2(xf - top, fastmath=True)
    total = row_reduce(e.reduce(cute.ReductionOp.ADD, 0.0, 0), warp_sum, block_slots, 1, threads, cluster_n, False, True)

    store_vectors(e * (cutlass.Float32(1.0) / total), gY, first, threads, vec, iters)
    wait_for_peers(cluster_n)


@cute.jit
def _softmax_launch(mX: cute.Tensor, mY: cute.Tensor, stream: cuda.CUstream, threads: cutlass.Constexpr, iters: cutlass.Constexpr, cluster_n: cutlass.Constexpr, vec: cutlass.Constexpr):
    launch_rows(_softmax_kernel(mX, mY, threads, iters, cluster_n, vec), cute.size(mX, mode=[0]), threads, cluster_n, stream)


def softmax_forward(x: torch.Tensor) -> torch.Tensor:
    x2, vec = row_matrix(x)
    y = torch.empty_like(x2)
    cluster_n, threads, iters = row_plan(x2.shape[1], vec, CONFIG)
    run_compiled(_COMPILED, _softmax_launch, [x2, y], [], (threads, iters, cluster_n, vec))
    return y.view(x.shape)


class ModelNew(SoftmaxModule):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_forward(x)
