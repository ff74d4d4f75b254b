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
(static sizes and strides: the 16-byte alignment of every vector access is proven). Rows must be
a multiple of 32 vectors (256 bf16 values), the case for every shape of specs/cross_entropy.yaml;
other lengths are refused with a ValueError. Launched on the caller's current CUDA stream.
"""

import torch
import torch.nn as nn
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass._mlir.dialects import llvm
from cutlass.cute.runtime import from_dlpack

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

_DTYPES = {torch.bfloat16: cutlass.BFloat16, torch.float16: cutlass.Float16, torch.float32: cutlass.Float32}
_COMPILED = {}
_LOG2E = 1.4426950408889634
_LN2 = 0.6931471805599453
_BIG = 3.0e38  # finite "minus infinity" start of a max: exp2 of a real value minus it is never NaN


def row_plan(n: int, vec: int, config: dict) -> tuple[int, int, int, int]:
    """(cluster_n, threads, vecs, chunks): every vector of a row read by exactly one thread of one block."""
    if n % (32 * vec):
        raise ValueError(f"cross_entropy_cute: a row of {n} values is not a multiple of {32 * vec} (32 vectors of {vec})")
    n_vecs = n // vec
    cluster = 1
    while n_vecs // cluster > config["vecs_per_block"] and 2 * cluster <= config["max_cluster"] and n_vecs % (64 * cluster) == 0:
        cluster *= 2
    per_block = n_vecs // cluster
    threads = max(t for t in range(32, config["max_threads"] + 1, 32) if per_block % t == 0)
    per_thread = per_block // threads
    vecs = max(v for v in range(1, config["max_vecs_per_chunk"] + 1) if per_thread % v == 0)
    return cluster, threads, vecs, per_thread // vecs


@cute.jit
def _load_peer(slot: cute.Tensor, k: cutlass.Constexpr, rank: cutlass.Int32) -> cutlass.Float32:
    """slot[k] of block `rank` of this cluster: its shared-memory address mapped into the cluster's
    window (mapa), read with ld.shared::cluster."""
    addr = cute.arch.map_dsmem_ptr(slot.iterator + k, rank).toint()
    return cute.arch.load(llvm.inttoptr(llvm.PointerType.get(3), addr.ir_value()), cutlass.Float32, ss="cluster")


@cute.jit
def _cluster_combine(slot: cute.Tensor, k: cutlass.Constexpr, value: cutlass.Float32, cluster_n: cutlass.Constexpr, is_max: cutlass.Constexpr) -> cutlass.Float32:
    """Every block's `value` combined over the cluster (max or sum), through slot[k] of each block."""
    tidx, _, _ = cute.arch.thread_idx()
    if tidx == 0:
        slot[k] = value
    cute.arch.cluster_arrive()
    cute.arch.cluster_wait()
    out = _load_peer(slot, k, 0)
    for r in cutlass.range_constexpr(1, cluster_n):
        if cutlass.const_expr(is_max):
            out = cute.arch.fmax(out, _load_peer(slot, k, r))
        else:
            out = out + _load_peer(slot, k, r)
    return out


@cute.kernel
def _cross_entropy_kernel(
    mX: cute.Tensor,
    mT: cute.Tensor,
    mLoss: cute.Tensor,
    cluster_n: cutlass.Constexpr,
    threads: cutlass.Constexpr,
    vecs: cutlass.Constexpr,
    chunks: cutlass.Constexpr,
    vec: cutlass.Constexpr,
    ignore_index: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    row, rank, _ = cute.arch.block_idx()
    warp = tidx // 32
    lane = tidx % 32
    num_warps = threads // 32
    n = cute.size(mX, mode=[1])

    smem = cutlass.utils.SmemAllocator()
    warp_max = smem.allocate_tensor(cutlass.Float32, cute.make_layout(num_warps), byte_alignment=16)
    warp_sum = smem.allocate_tensor(cutlass.Float32, cute.make_layout(num_warps), byte_alignment=16)
    block_slots = smem.allocate_tensor(cutlass.Float32, cute.make_layout(4), byte_alignment=16)

    # Row `row` as vectors: mode 0 the vec values of one 128-bit access, mode 1 the vector index.
    gX = cute.zipped_divide(mX[row, None], (vec,))
    load_x = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=128)
    x = cute.make_rmem_tensor(cute.make_layout((vec, vecs)), mX.element_type)
    first = rank * (threads * vecs * chunks) + tidx  # consecutive threads take consecutive vectors

    # Online logsumexp in base 2 over this thread's chunks.
    m = cutlass.Float32(-_BIG)
    s = cutlass.Float32(0.0)
    for c in cutlass.range(chunks, unroll=1):
        for i in cutlass.range_constexpr(vecs):
            cute.copy(load_x, gX[(None, first + (c * vecs + i) * threads)], x[(None, i)])
        xf = x.load().to(cutlass.Float32) * _LOG2E
        m_new = cute.arch.fmax(m, xf.reduce(cute.ReductionOp.MAX, -_BIG, 0))
        s = s * cute.math.exp2(m - m_new, fastmath=True) + cute.math.exp2(xf - m_new, fastmath=True).reduce(
            cute.ReductionOp.ADD, 0.0, 0
        )
        m = m_new

    # Row max over the warp, the block and the cluster; then each thread's sum rescaled to it.
    top = cute.arch.warp_reduction_max(m)
    if lane == 0:
        warp_max[warp] = top
    cute.arch.barrier()
    top = warp_max[0]
    for k in cutlass.range_constexpr(1, num_warps):
        top = cute.arch.fmax(top, warp_max[k])
    if cutlass.const_expr(cluster_n > 1):
        top = _cluster_combine(block_slots, 0, top, cluster_n, True)
    total = cute.arch.warp_reduction_sum(s * cute.math.exp2(m - top, fastmath=True))
    if lane == 0:
        warp_sum[warp] = total
    cute.arch.barrier()
    total = cutlass.Float32(0.0)
    for k in cutlass.range_constexpr(num_warps):
        total = total + warp_sum[k]
    if cutlass.const_expr(cluster_n > 1):
        total = _cluster_combine(block_slots, 1, total, cluster_n, False)
        cute.arch.cluster_arrive()  # done reading the peers: they may leave once all have arrived

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

    if cutlass.const_expr(cluster_n > 1):
        cute.arch.cluster_wait()


@cute.jit
def _cross_entropy_launch(
    mX: cute.Tensor,
    mT: cute.Tensor,
    mLoss: cute.Tensor,
    stream: cuda.CUstream,
    cluster_n: cutlass.Constexpr,
    threads: cutlass.Constexpr,
    vecs: cutlass.Constexpr,
    chunks: cutlass.Constexpr,
    vec: cutlass.Constexpr,
    ignore_index: cutlass.Constexpr,
):
    _cross_entropy_kernel(mX, mT, mLoss, cluster_n, threads, vecs, chunks, vec, ignore_index).launch(
        grid=[cute.size(mX, mode=[0]), cluster_n, 1],
        block=[threads, 1, 1],
        cluster=[1, cluster_n, 1] if cutlass.const_expr(cluster_n > 1) else None,
        stream=stream,
    )


def cross_entropy_forward(logits: torch.Tensor, target: torch.Tensor, ignore_index: int) -> torch.Tensor:
    n = logits.shape[-1]
    x2 = logits.reshape(-1, n)
    if not x2.is_contiguous():
        x2 = x2.contiguous()
    t = target.reshape(-1).contiguous()
    loss = torch.empty(x2.shape[0], dtype=torch.float32, device=logits.device)
    dtype = _DTYPES[logits.dtype]
    vec = 128 // dtype.width
    plan = row_plan(n, vec, CONFIG)
    key = (tuple(x2.shape), logits.dtype, t.dtype, plan, ignore_index)
    args = [from_dlpack(x2, assumed_align=16), from_dlpack(t), from_dlpack(loss)]
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    if key not in _COMPILED:
        _COMPILED[key] = cute.compile(_cross_entropy_launch, *args, stream, *plan, vec, ignore_index)
    _COMPILED[key](*args, stream)
    return loss.view(target.shape)


class ModelNew(nn.Module):
    def __init__(self, ignore_index: int = -100):
        super().__init__()
        self.ignore_index = ignore_index

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return cross_entropy_forward(logits, target, self.ignore_index)
