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

Compiled once per (shape, dtype, plan) with `cute.compile` and kept in `_COMPILED`: sizes and
strides are static, so the 16-byte alignment of every vector access is proven (tensors handed
over with `assumed_align=16`). Rows must be a multiple of 32 vectors (256 bf16 values), the case
for every shape of specs/softmax.yaml; other lengths are refused with a ValueError. Launched on the
caller's current CUDA stream.
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
_LOG2E = 1.4426950408889634
_BIG = 3.0e38  # finite "minus infinity" start of a max: exp2 of a real value minus it is never NaN


def row_plan(n: int, vec: int, config: dict) -> tuple[int, int, int]:
    """(cluster_n, threads, iters): every vector of a row owned by exactly one thread of one block."""
    if n % (32 * vec):
        raise ValueError(f"softmax_cute: a row of {n} values is not a multiple of {32 * vec} (32 vectors of {vec})")
    n_vecs = n // vec
    cluster = 1
    while n_vecs // cluster > config["vecs_per_block"] and 2 * cluster <= config["max_cluster"] and n_vecs % (64 * cluster) == 0:
        cluster *= 2
    per_block = n_vecs // cluster
    threads = max(t for t in range(32, config["max_threads"] + 1, 32) if per_block % t == 0)
    iters = per_block // threads
    if iters > config["max_vecs_per_thread"]:
        raise ValueError(f"softmax_cute: a row of {n} values needs {iters} vectors per thread (more than max_vecs_per_thread)")
    return cluster, threads, iters


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
def _softmax_kernel(
    mX: cute.Tensor,
    mY: cute.Tensor,
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

    smem = cutlass.utils.SmemAllocator()
    warp_max = smem.allocate_tensor(cutlass.Float32, cute.make_layout(num_warps), byte_alignment=16)
    warp_sum = smem.allocate_tensor(cutlass.Float32, cute.make_layout(num_warps), byte_alignment=16)
    block_slots = smem.allocate_tensor(cutlass.Float32, cute.make_layout(4), byte_alignment=16)

    # Row `row` as vectors: mode 0 the vec values of one 128-bit access, mode 1 the vector index.
    gX = cute.zipped_divide(mX[row, None], (vec,))
    gY = cute.zipped_divide(mY[row, None], (vec,))
    load_x = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=128)
    store_y = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mY.element_type, num_bits_per_copy=128)

    x = cute.make_rmem_tensor(cute.make_layout((vec, iters)), mX.element_type)
    first = rank * (threads * iters) + tidx  # consecutive threads take consecutive vectors
    for i in cutlass.range_constexpr(iters):
        cute.copy(load_x, gX[(None, first + i * threads)], x[(None, i)])
    xf = x.load().to(cutlass.Float32) * _LOG2E

    # Row maximum (of x * log2(e)).
    top = cute.arch.warp_reduction_max(xf.reduce(cute.ReductionOp.MAX, -_BIG, 0))
    if lane == 0:
        warp_max[warp] = top
    cute.arch.barrier()
    top = warp_max[0]
    for k in cutlass.range_constexpr(1, num_warps):
        top = cute.arch.fmax(top, warp_max[k])
    if cutlass.const_expr(cluster_n > 1):
        top = _cluster_combine(block_slots, 0, top, cluster_n, True)

    # Sum of exp(x - max).
    e = cute.math.exp2(xf - top, fastmath=True)
    total = cute.arch.warp_reduction_sum(e.reduce(cute.ReductionOp.ADD, 0.0, 0))
    if lane == 0:
        warp_sum[warp] = total
    cute.arch.barrier()
    total = cutlass.Float32(0.0)
    for k in cutlass.range_constexpr(num_warps):
        total = total + warp_sum[k]
    if cutlass.const_expr(cluster_n > 1):
        total = _cluster_combine(block_slots, 1, total, cluster_n, False)
        cute.arch.cluster_arrive()  # done reading the peers: they may leave once all have arrived

    y = cute.make_rmem_tensor(cute.make_layout((vec, iters)), mY.element_type)
    y.store((e * (cutlass.Float32(1.0) / total)).to(mY.element_type))
    for i in cutlass.range_constexpr(iters):
        cute.copy(store_y, y[(None, i)], gY[(None, first + i * threads)])

    if cutlass.const_expr(cluster_n > 1):
        cute.arch.cluster_wait()


@cute.jit
def _softmax_launch(
    mX: cute.Tensor,
    mY: cute.Tensor,
    stream: cuda.CUstream,
    threads: cutlass.Constexpr,
    iters: cutlass.Constexpr,
    cluster_n: cutlass.Constexpr,
    vec: cutlass.Constexpr,
):
    _softmax_kernel(mX, mY, threads, iters, cluster_n, vec).launch(
        grid=[cute.size(mX, mode=[0]), cluster_n, 1],
        block=[threads, 1, 1],
        cluster=[1, cluster_n, 1] if cutlass.const_expr(cluster_n > 1) else None,
        stream=stream,
    )


def softmax_forward(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[-1]
    x2 = x.reshape(-1, n)
    if not x2.is_contiguous():
        x2 = x2.contiguous()
    y = torch.empty_like(x2)
    dtype = _DTYPES[x.dtype]
    vec = 128 // dtype.width
    cluster_n, threads, iters = row_plan(n, vec, CONFIG)
    key = (tuple(x2.shape), x.dtype, cluster_n, threads, iters)
    args = [from_dlpack(t, assumed_align=16) for t in (x2, y)]
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    if key not in _COMPILED:
        _COMPILED[key] = cute.compile(_softmax_launch, *args, stream, threads, iters, cluster_n, vec)
    _COMPILED[key](*args, stream)
    return y.view(x.shape)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_forward(x)
