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
loss[i] = logsumexp(logits[i, :]) - logits[i, target[i]] for logits [M, V] (bf16, fp16 or fp32) and
int64 targets [M], fp32 arithmetic and losses, as F.cross_entropy(logits.float(), target,
reduction="none", ignore_index=-100): a row whose target is the ignore index gets 0, a target
outside [0, V) gets NaN (no out-of-bounds read). Written in CuTe DSL (nvidia-cutlass-dsl; needs an
sm_90 or newer GPU: there is no CPU interpreter for it).

The logits are read exactly once (nothing is written back but the loss). A row of N values is cut
into vectors of CONFIG["copy_bits"] bits (128: 8 bf16/fp16, 4 fp32). `row_plan`
(_cute_rows.row_layout, a small heuristic over CONFIG) picks the launch per row length: short rows
share a block of CONFIG["short_threads"] threads, each row on the fewest threads (a power of two, at
least CONFIG["min_row_threads"]) that hold it with at most CONFIG["vecs_per_thread"] vectors each (a
row of at most 32 threads reduces in its warp alone, no shared memory, no barrier); longer rows get
one block of about CONFIG["threads"] threads each (a multiple of 32 that splits the row evenly),
split over the smallest power-of-two thread-block cluster (grid y, cluster shape (1, cluster_n, 1),
at most CONFIG["max_cluster"] blocks; 16 is a non-portable size that Hopper allows) that leaves each
thread at most vecs_per_thread vectors. With the defaults (128 threads, 16 vectors a thread in
chunks of 8, 32 once a cluster is needed: CONFIG["cluster_vecs_per_thread"]): V = 256 sixteen rows
per block on 8 threads of 4 vectors each, V = 4096 four rows on 32 threads, V = 16384 one row per
block, V = 32000 one block of 160 threads (5 chunks of 5 vectors), V = 65536 a cluster of 2 and V =
262144 of 8 blocks, 4 chunks a thread. Here a thread's vectors are loaded in chunks of at most
CONFIG["chunk_vecs"] (all of a chunk's loads issued together), and the thread keeps a running max
and sum of exp2 in fp32 (online logsumexp: the sum is rescaled when the max grows); with
CONFIG["prefetch"] the chunk loop is unrolled (up to 16 chunks) and chunk c + 1's loads are issued
before chunk c's math.

The row max, then the rescaled sums, are reduced over the warp, the row's warps and the cluster. The
cluster's reductions go one of two ways (CONFIG["mbarrier"]). False: each block writes its partial
into its own shared slot, a cluster barrier publishes it, every block reads all peers' slots through
distributed shared memory (mapa + ld.shared::cluster) in rank order, and a last cluster arrive /
wait keeps each block's shared memory alive until its peers are done reading. True: every warp
pushes its partial into each peer's shared memory with st.async, the bytes completing on the
receiver's mbarrier; a block waits only for its own mbarrier and reads only its own shared memory,
so no cluster barrier is needed after the set-up. Either way all blocks combine the same partials in
the same order and agree bit for bit. The row's first thread (block 0 of its cluster) reads the
target logit and writes the loss.

Compiled once per (shape, dtype, plan, ignore index) with `cute.compile` and kept in `_COMPILED` by
_cute_rows.run_compiled (static sizes and strides: the 16-byte alignment of every vector access is
proven). Rows must tile exactly (a whole number of vectors, split evenly over threads that are a
multiple of 32, or a power of two from 8 for short rows), the case for every shape of
specs/cross_entropy.yaml; other lengths are refused with a ValueError. Launched on the caller's
current CUDA stream.
"""

import torch
import torch.nn as nn
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from _cute_rows import BIG, LOG2E, launch_row_blocks, load_strided, launch_consts, row_coords, row_layout, row_matrix, row_exit, row_reductions, row_setup, row_total, run_compiled

CONFIG = {
    "copy_bits": 128,
    "threads": 128,
    "short_threads": 128,
    "min_row_threads": 8,
    "vecs_per_thread": 16,
    "chunk_vecs": 8,
    "prefetch": True,
    "max_cluster": 16,
    "mbarrier": True,
    "min_blocks_per_sm": 0,
    "cluster_vecs_per_thread": 32,
}

TUNABLES = {
    "copy_bits": [64, 128],
    "threads": [128, 256, 512],
    "short_threads": [64, 128, 256],
    "min_row_threads": [8, 16, 32],
    "vecs_per_thread": [4, 8, 16, 32],
    "chunk_vecs": [4, 8, 16],
    "prefetch": [False, True],
    "max_cluster": [8, 16],
    "mbarrier": [False, True],
    "min_blocks_per_sm": [0, 2, 3, 4],
    "cluster_vecs_per_thread": [8, 16, 32],
}

_COMPILED = {}
_LN2 = 0.6931471805599453
_UNROLL_CHUNKS = 16  # prefetching unrolls the chunk loop: up to this many chunks


def row_plan(n: int, width: int, config: dict):
    """The RowPlan of rows of n values of `width` bits (_cute_rows.row_layout), a thread's vectors
    in chunks of at most config["chunk_vecs"]."""
    return row_layout(n, width, config, "cross_entropy_cute", config["chunk_vecs"])


@cute.jit
def _online_step(x: cute.Tensor, m: cutlass.Float32, s: cutlass.Float32):
    """(max, sum of exp2 relative to it) after one more chunk of values (x * log2(e) in base 2)."""
    xf = x.load().to(cutlass.Float32) * LOG2E
    m_new = cute.arch.fmax(m, xf.reduce(cute.ReductionOp.MAX, -BIG, 0))
    s = s * cute.math.exp2(m - m_new, fastmath=True) + cute.math.exp2(xf - m_new, fastmath=True).reduce(
        cute.ReductionOp.ADD, 0.0, 0
    )
    return m_new, s


@cute.kernel
def _cross_entropy_kernel(
    mX: cute.Tensor, mT: cute.Tensor, mLoss: cute.Tensor, cluster_n: cutlass.Constexpr, threads: cutlass.Constexpr,
    row_threads: cutlass.Constexpr, vecs: cutlass.Constexpr, chunks: cutlass.Constexpr, vec: cutlass.Constexpr,
    bits: cutlass.Constexpr, ragged: cutlass.Constexpr, mbarrier: cutlass.Constexpr, prefetch: cutlass.Constexpr,
    ignore_index: cutlass.Constexpr,
):
    m = cute.size(mX, mode=[0])
    n = cute.size(mX, mode=[1])
    row, load_row, t, rank = row_coords(m, threads, row_threads, ragged)
    smem = row_reductions(threads, cluster_n, 2, mbarrier)
    row_setup(smem, 2, cluster_n, mbarrier)

    # The row as vectors: mode 0 the vec values of one access, mode 1 the vector index.
    gX = cute.zipped_divide(mX[load_row, None], (vec,))
    first = rank * (row_threads * vecs * chunks) + t  # consecutive threads take consecutive vectors

    # Online logsumexp in base 2 over this thread's chunks.
    mx = cutlass.Float32(-BIG)
    s = cutlass.Float32(0.0)
    if cutlass.const_expr(prefetch and 1 < chunks <= _UNROLL_CHUNKS):
        # Unrolled, two register buffers: chunk c + 1's loads are issued before chunk c's math.
        bufs = [cute.make_rmem_tensor(cute.make_layout((vec, vecs)), mX.element_type) for _ in range(2)]
        load_strided(gX, bufs[0], first, row_threads, vecs, 0, bits)
        for c in cutlass.range_constexpr(chunks):
            if cutlass.const_expr(c + 1 < chunks):
                load_strided(gX, bufs[(c + 1) % 2], first, row_threads, vecs, c + 1, bits)
            mx, s = _online_step(bufs[c % 2], mx, s)
    else:
        x = cute.make_rmem_tensor(cute.make_layout((vec, vecs)), mX.element_type)
        for c in cutlass.range(chunks, unroll=1):
            load_strided(gX, x, first, row_threads, vecs, c, bits)
            mx, s = _online_step(x, mx, s)

    # Row max over the warp, the block and the cluster; then each thread's sum rescaled to it.
    top = row_total(mx, smem, 0, threads, row_threads, cluster_n, True, False, mbarrier)
    rescaled = s * cute.math.exp2(mx - top, fastmath=True)
    total = row_total(rescaled, smem, 1, threads, row_threads, cluster_n, False, True, mbarrier)

    if t == 0:
        if rank == 0:
            if row < m:
                target = cutlass.Int32(mT[row])
                loss = cutlass.Float32(0.0)
                if target != ignore_index:
                    loss = cutlass.Float32(float("nan"))
                    if target >= 0:
                        if target < n:
                            picked = mX[row, target].to(cutlass.Float32)
                            loss = (top + cute.math.log2(total, fastmath=False)) * _LN2 - picked
                mLoss[row] = loss

    row_exit(cluster_n, mbarrier)


@cute.jit
def _cross_entropy_launch(
    mX: cute.Tensor, mT: cute.Tensor, mLoss: cute.Tensor, stream: cuda.CUstream, cluster_n: cutlass.Constexpr,
    threads: cutlass.Constexpr, row_threads: cutlass.Constexpr, vecs: cutlass.Constexpr, chunks: cutlass.Constexpr,
    vec: cutlass.Constexpr, bits: cutlass.Constexpr, ragged: cutlass.Constexpr, mbarrier: cutlass.Constexpr,
    min_blocks: cutlass.Constexpr, prefetch: cutlass.Constexpr, ignore_index: cutlass.Constexpr,
):
    kernel = _cross_entropy_kernel(
        mX, mT, mLoss, cluster_n, threads, row_threads, vecs, chunks, vec, bits, ragged, mbarrier, prefetch, ignore_index
    )
    launch_row_blocks(kernel, cute.size(mX, mode=[0]), threads, threads // row_threads, cluster_n, stream, min_blocks)


def cross_entropy_forward(
    logits: torch.Tensor, target: torch.Tensor, ignore_index: int, config: dict | None = None,
) -> torch.Tensor:
    config = config or CONFIG
    x2, _ = row_matrix(logits)
    t = target.reshape(-1).contiguous()
    loss = torch.empty(x2.shape[0], dtype=torch.float32, device=logits.device)
    plan = row_plan(x2.shape[1], x2.element_size() * 8, config)
    consts = (*launch_consts(plan, x2.shape[0], config), bool(config["prefetch"]), ignore_index)
    run_compiled(_COMPILED, _cross_entropy_launch, [x2], [t, loss], consts)
    return loss.view(target.shape)


class ModelNew(nn.Module):
    def __init__(self, ignore_index: int = -100):
        super().__init__()
        self.ignore_index = ignore_index

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return cross_entropy_forward(logits, target, self.ignore_index)
