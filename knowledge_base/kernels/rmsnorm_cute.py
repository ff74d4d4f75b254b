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

The kernel is compiled once per (shape, dtype, plan) with `cute.compile` and kept in `_COMPILED`:
sizes and strides are static, so the compiler proves the 16-byte alignment of every vector access
(tensors are handed over with `assumed_align=16`). Rows must be a multiple of 32 vectors (256
bf16 values), the case for every shape of specs/rmsnorm.yaml; other lengths are refused with a
ValueError rather than computed wrongly. Launched on the caller's current CUDA stream.
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
    "max_vecs_per_thread": 8,
    "max_cluster": 8,
}

TUNABLES = {
    "vecs_per_block": [1024, 2048, 4096],
    "max_threads": [256, 512, 1024],
    "max_vecs_per_thread": [8, 16],
    "max_cluster": [4, 8],
}

_DTYPES = {torch.bfloat16: cutlass.BFloat16, torch.float16: cutlass.Float16, torch.float32: cutlass.Float32}
_COMPILED = {}


def row_plan(n: int, vec: int, config: dict) -> tuple[int, int, int]:
    """(cluster_n, threads, iters): every vector of a row owned by exactly one thread of one block."""
    if n % (32 * vec):
        raise ValueError(f"rmsnorm_cute: a row of {n} values is not a multiple of {32 * vec} (32 vectors of {vec})")
    n_vecs = n // vec
    cluster = 1
    while n_vecs // cluster > config["vecs_per_block"] and 2 * cluster <= config["max_cluster"] and n_vecs % (64 * cluster) == 0:
        cluster *= 2
    per_block = n_vecs // cluster
    threads = max(t for t in range(32, config["max_threads"] + 1, 32) if per_block % t == 0)
    iters = per_block // threads
    if iters > config["max_vecs_per_thread"]:
        raise ValueError(f"rmsnorm_cute: a row of {n} values needs {iters} vectors per thread (more than max_vecs_per_thread)")
    return cluster, threads, iters


@cute.jit
def _load_peer(slot: cute.Tensor, rank: cutlass.Int32) -> cutlass.Float32:
    """slot[0] of block `rank` of this cluster: its shared-memory address mapped into the cluster's
    window (mapa), read with ld.shared::cluster."""
    addr = cute.arch.map_dsmem_ptr(slot.iterator, rank).toint()
    return cute.arch.load(llvm.inttoptr(llvm.PointerType.get(3), addr.ir_value()), cutlass.Float32, ss="cluster")


@cute.kernel
def _rmsnorm_kernel(
    mX: cute.Tensor,
    mW: cute.Tensor,
    mY: cute.Tensor,
    eps: cutlass.Float32,
    threads: cutlass.Constexpr,
    iters: cutlass.Constexpr,
    cluster_n: cutlass.Constexpr,
    vec: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    row, rank, _ = cute.arch.block_idx()
    warp = tidx // 32
    lane = tidx % 32
    num_warps = threads // 32
    n = cute.size(mX, mode=[1])

    smem = cutlass.utils.SmemAllocator()
    warp_sums = smem.allocate_tensor(cutlass.Float32, cute.make_layout(num_warps), byte_alignment=16)
    block_sum = smem.allocate_tensor(cutlass.Float32, cute.make_layout(4), byte_alignment=16)

    # Row `row` as vectors: mode 0 the vec values of one 128-bit access, mode 1 the vector index.
    gX = cute.zipped_divide(mX[row, None], (vec,))
    gY = cute.zipped_divide(mY[row, None], (vec,))
    gW = cute.zipped_divide(mW, (vec,))
    load_x = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=128)
    load_w = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mW.element_type, num_bits_per_copy=128)
    store_y = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mY.element_type, num_bits_per_copy=128)

    x = cute.make_rmem_tensor(cute.make_layout((vec, iters)), mX.element_type)
    w = cute.make_rmem_tensor(cute.make_layout((vec, iters)), mW.element_type)
    first = rank * (threads * iters) + tidx  # consecutive threads take consecutive vectors
    for i in cutlass.range_constexpr(iters):
        cute.copy(load_x, gX[(None, first + i * threads)], x[(None, i)])

    xf = x.load().to(cutlass.Float32)
    total = cute.arch.warp_reduction_sum((xf * xf).reduce(cute.ReductionOp.ADD, 0.0, 0))
    if lane == 0:
        warp_sums[warp] = total
    cute.arch.barrier()
    total = cutlass.Float32(0.0)
    for k in cutlass.range_constexpr(num_warps):
        total = total + warp_sums[k]

    if cutlass.const_expr(cluster_n > 1):
        if tidx == 0:
            block_sum[0] = total
        cute.arch.cluster_arrive()
        cute.arch.cluster_wait()
        total = cutlass.Float32(0.0)
        for r in cutlass.range_constexpr(cluster_n):
            total = total + _load_peer(block_sum, r)
        cute.arch.cluster_arrive()  # done reading the peers: they may leave once all have arrived

    # The weight (read by every row, from L2) only now: fewer registers live during the reduction.
    for i in cutlass.range_constexpr(iters):
        cute.copy(load_w, gW[(None, first + i * threads)], w[(None, i)])
    rstd = cute.math.rsqrt(total / cutlass.Float32(n) + eps)
    y = cute.make_rmem_tensor(cute.make_layout((vec, iters)), mY.element_type)
    y.store((xf * rstd * w.load().to(cutlass.Float32)).to(mY.element_type))
    for i in cutlass.range_constexpr(iters):
        cute.copy(store_y, y[(None, i)], gY[(None, first + i * threads)])

    if cutlass.const_expr(cluster_n > 1):
        cute.arch.cluster_wait()


@cute.jit
def _rmsnorm_launch(
    mX: cute.Tensor,
    mW: cute.Tensor,
    mY: cute.Tensor,
    eps: cutlass.Float32,
    stream: cuda.CUstream,
    threads: cutlass.Constexpr,
    iters: cutlass.Constexpr,
    cluster_n: cutlass.Constexpr,
    vec: cutlass.Constexpr,
):
    _rmsnorm_kernel(mX, mW, mY, eps, threads, iters, cluster_n, vec).launch(
        grid=[cute.size(mX, mode=[0]), cluster_n, 1],
        block=[threads, 1, 1],
        cluster=[1, cluster_n, 1] if cutlass.const_expr(cluster_n > 1) else None,
        stream=stream,
    )


def rmsnorm_forward(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    n = x.shape[-1]
    x2 = x.reshape(-1, n)
    if not x2.is_contiguous():
        x2 = x2.contiguous()
    # A Parameter requires grad, and dlpack exports no such tensor: its data, detached (this is a forward).
    w = weight.detach()
    w = w if w.dtype == x.dtype and w.is_contiguous() else w.to(x.dtype).contiguous()
    y = torch.empty_like(x2)
    dtype = _DTYPES[x.dtype]
    vec = 128 // dtype.width
    cluster_n, threads, iters = row_plan(n, vec, CONFIG)
    key = (tuple(x2.shape), x.dtype, cluster_n, threads, iters)
    args = [from_dlpack(t, assumed_align=16) for t in (x2, w, y)]
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    if key not in _COMPILED:
        _COMPILED[key] = cute.compile(_rmsnorm_launch, *args, eps, stream, threads, iters, cluster_n, vec)
    _COMPILED[key](*args, eps, stream)
    return y.view(x.shape)


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        # Not all ones, so that a correctness check exercises the weight.
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rmsnorm_forward(x, self.weight, self.eps)
