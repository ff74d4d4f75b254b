"""
---
title: Cross-entropy forward in CuTe DSL - online logsumexp, long rows split over a thread-block cluster and reduced through distributed shared memory
kind: kernels
language: cute
family: [cross_entropy]
tags: [cute, cutlass, cluster, dsmem, distributed-shared-memory, reduction, memory-bound, cross-entropy, logsumexp, online-softmax, row-wise, long-row, 128-bit, one-pass, ignore-index]
hardware: [h100, h200, b200]
spec: cross_entropy
---
loss[i] = logsumexp(logits[i, :]) - logits[i, target[i]] for logits [M, V] (bf16, fp16 or fp32)
and int64 targets [M], fp32 arithmetic and losses, as F.cross_entropy(logits.float(), target,
reduction="none", ignore_index=-100): a row whose target is the ignore index gets 0, a target
outside [0, V) gets NaN (no out-of-bounds read). Written in CuTe DSL (nvidia-cutlass-dsl; needs an
sm_90 or newer GPU: there is no CPU interpreter for it).

The logits are read exactly once, with 128-bit loads (8 bf16/fp16, 4 fp32 values per thread and
access), nothing is written back but the loss. `row_plan` gives each row `cluster_n` blocks of
`threads` threads; each thread walks `chunks` chunks of `vecs` vectors (the loads of one chunk are
issued together, so vecs x 16 bytes per thread are in flight) and keeps a running max and sum of
exp2 in fp32 (online logsumexp: the sum is rescaled when the max grows). A row longer than
CONFIG["vecs_per_block"] vectors is split over a thread-block cluster (grid y, cluster shape
(1, cluster_n, 1), at most CONFIG["max_cluster"] blocks) so that long rows are spread over more
SMs. The row max, then the rescaled sums, are reduced over the warp (shuffles), the block (shared
memory) and the cluster: each block writes its partial into its own shared slot, a cluster barrier
publishes it and every block reads all peers' slots through distributed shared memory (mapa +
ld.shared::cluster) in rank order. Block 0 of the cluster, thread 0, reads the target logit and
writes the loss. A final cluster arrive after the last peer read, and its wait before the block
exits, keep each block's shared memory alive while a peer may still read it.

Compiled once per (shape, dtype, plan, ignore index) with `cute.compile` and kept in `_COMPILED`
by _cute_rows.run_compiled (static sizes and strides: the 16-byte alignment of every vector access
is proven). Rows must be a multiple of 32 vectors (256 bf16 values), the case for every shape of
specs/cross_entropy.yaml; other lengths are refused with a ValueError. Launched on the caller's
current CUDA stream.
"""

import torch
import torch.nn as nn
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from _cute_rows import BIG, LOG2E, cluster_plan, launch_rows, load_vectors, reduction_smem, row_matrix, row_reduce, run_compiled, wait_for_peers

CONFIG = {
    "vecs_per_block": 4096,
    "max_threads": 512,
    "max_vecs_per_chunk": 8,
    "max_cluster": 8,
}

TUNABLES = {
    "vecs_per_block": [1024, 2048, 4096, 8192],
    "max_threads": [256, 512, 1024],
    "max_vecs_per_chunk": [4, 8, 16],
    "max_cluster": [2, 4, 8],
}

_COMPILED = {}
_LN2 = 0.6931471805599453


def row_plan(n: int, vec: int, config: dict) -> tuple[int, int, int, int]:
    """(cluster_n, threads, vecs, chunks): every vector of a row read by exactly one thread of one block."""
    cluster, threads, per_thread = cluster_plan(n, vec, config, "cross_entropy_cute")
    vecs = max(v for v in range(1, config["max_vecs_per_chunk"] + 1) if per_thread % v == 0)
    return cluster, threads, vecs, per_thread // vecs


@cute.kernel
def _cross_entropy_kernel(
    mX: cute.Tensor, mT: cute.Tensor, mLoss: cute.Tensor, cluster_n: cutlass.Constexpr, threads: cutlass.Constexpr,
    vecs: cutlass.Constexpr, chunks: cutlass.Constexpr, vec: cutlass.Constexpr, ignore_index: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    row, rank, _ = cute.arch.block_idx()
    n = cute.size(mX, mode=[1])
    warp_max, warp_sum, block_slots = reduction_smem(threads, 2)

    # Row `row` as vectors: mode 0 the vec values of one 128-bit access, mode 1 the vector index.
    gX = cute.zipped_divide(mX[row, None], (vec,))
    x = cute.make_rmem_tensor(cute.make_layout((vec, vecs)), mX.element_type)
    first = rank * (threads * vecs * chunks) + tidx  # consecutive threads take consecutive vectors

    # Online logsumexp in base 2 over this thread's chunks.
    m = cutlass.Float32(-BIG)
    s = cutlass.Float32(0.0)
    for c in cutlass.range(chunks, unroll=1):
        load_vectors(gX, x, first, threads, vecs, c)
        xf = x.load().to(cutlass.Float32) * LOG2E
        m_new = cute.arch.fmax(m, xf.reduce(cute.ReductionOp.MAX, -BIG, 0))
        s = s * cute.math.exp2(m - m_new, fastmath=True) + cute.math.exp2(xf - m_new, fastmath=True).reduce(
            cute.ReductionOp.ADD, 0.0, 0
        )
        m = m_new

    # Row max over the warp, the block and the cluster; then each thread's sum rescaled to it.
    top = row_reduce(m, warp_max, block_slots, 0, threads, cluster_n, True, False)
    total = row_reduce(s * cute.math.exp2(m - top, fastmath=True), warp_sum, block_slots, 1, threads, cluster_n, False, True)

    if tidx == 0:
        if rank == 0:
            target = cutlass.Int32(mT[row])
            loss = cutlass.Float32(0.0)
            if target != ignore_index:
                loss = cutlass.Float32(float("nan"))
                if target >= 0:
                    if target < n:
                        picked = mX[row, target].to(cutlass.Float32)
                        loss = (top + cute.math.log2(total, fastmath=False)) * _LN2 - picked
            mLoss[row] = loss

    wait_for_peers(cluster_n)


@cute.jit
def _cross_entropy_launch(
    mX: cute.Tensor, mT: cute.Tensor, mLoss: cute.Tensor, stream: cuda.CUstream, cluster_n: cutlass.Constexpr,
    threads: cutlass.Constexpr, vecs: cutlass.Constexpr, chunks: cutlass.Constexpr, vec: cutlass.Constexpr, ignore_index: cutlass.Constexpr,
):
    kernel = _cross_entropy_kernel(mX, mT, mLoss, cluster_n, threads, vecs, chunks, vec, ignore_index)
    launch_rows(kernel, cute.size(mX, mode=[0]), threads, cluster_n, stream)


def cross_entropy_forward(logits: torch.Tensor, target: torch.Tensor, ignore_index: int) -> torch.Tensor:
    x2, vec = row_matrix(logits)
    t = target.reshape(-1).contiguous()
    loss = torch.empty(x2.shape[0], dtype=torch.float32, device=logits.device)
    plan = row_plan(x2.shape[1], vec, CONFIG)
    run_compiled(_COMPILED, _cross_entropy_launch, [x2], [t, loss], (*plan, vec, ignore_index))
    return loss.view(target.shape)


class ModelNew(nn.Module):
    def __init__(self, ignore_index: int = -100):
        super().__init__()
        self.ignore_index = ignore_index

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return cross_entropy_forward(logits, target, self.ignore_index)
