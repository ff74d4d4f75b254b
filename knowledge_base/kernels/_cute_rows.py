"""Shared parts of the CuTe DSL row kernels (rmsnorm_cute, softmax_cute, cross_entropy_cute): their
launch plan, their host launcher's compile cache, and the device steps all three take.

A row of N values is cut into 128-bit vectors; each row gets `cluster_n` blocks of `threads`
threads, thread t of block `rank` owning vectors first + i * threads (first = rank * vectors per
block + t). A reduction goes over the warp (shuffles), the block (one fp32 per warp in shared
memory) and, for a cluster, over its blocks: each writes its partial into its own shared slot, a
cluster barrier publishes it, every block reads all peers' slots through distributed shared memory
(mapa + ld.shared::cluster) and combines them in rank order, so all blocks agree bit for bit.

Imported as `from _cute_rows import ...` (knowledge_base/kernels is on the candidates' import
path). A @cute.jit helper called from a kernel is traced inline into it: no call at run time.
"""

import torch
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass._mlir.dialects import llvm
from cutlass.cute.runtime import from_dlpack

DTYPES = {torch.bfloat16: cutlass.BFloat16, torch.float16: cutlass.Float16, torch.float32: cutlass.Float32}
LOG2E = 1.4426950408889634
BIG = 3.0e38  # finite "minus infinity" start of a max: exp2 of a real value minus it is never NaN


# -- host ------------------------------------------------------------------------------------------
def cluster_plan(n: int, vec: int, config: dict, kernel: str, max_per_thread: int | None = None) -> tuple[int, int, int]:
    """(cluster_n, threads, vectors per thread) for rows of n values in vectors of `vec`: one block
    while a row fits config["vecs_per_block"] vectors, else a cluster of up to config["max_cluster"]
    blocks; the most threads (a multiple of 32, at most config["max_threads"]) that split a block's
    vectors evenly. Rows that are not 32 vectors long, or need more than `max_per_thread` vectors a
    thread, are refused with a ValueError naming `kernel`."""
    if n % (32 * vec):
        raise ValueError(f"{kernel}: a row of {n} values is not a multiple of {32 * vec} (32 vectors of {vec})")
    n_vecs = n // vec
    cluster = 1
    while n_vecs // cluster > config["vecs_per_block"] and 2 * cluster <= config["max_cluster"] and n_vecs % (64 * cluster) == 0:
        cluster *= 2
    per_block = n_vecs // cluster
    threads = max(t for t in range(32, config["max_threads"] + 1, 32) if per_block % t == 0)
    per_thread = per_block // threads
    if max_per_thread is not None and per_thread > max_per_thread:
        raise ValueError(f"{kernel}: a row of {n} values needs {per_thread} vectors per thread (more than max_vecs_per_thread)")
    return cluster, threads, per_thread


def row_matrix(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """x as a contiguous [rows, N] matrix (a view where it can be), and the values one 128-bit vector holds."""
    x2 = x.reshape(-1, x.shape[-1])
    if not x2.is_contiguous():
        x2 = x2.contiguous()
    return x2, 128 // DTYPES[x.dtype].width


def run_compiled(cache: dict, launch, aligned: list, others: list, consts: tuple) -> None:
    """launch(*aligned, *others, stream, *consts) on the caller's current CUDA stream, compiled by
    cute.compile once per shapes, dtypes and consts (sizes and strides are static, so the compiler
    proves the alignment of every vector access). `aligned`: tensors handed over as 16-byte aligned;
    `others`: tensors without that promise, and scalars (passed at run time, not in the key)."""
    tensors = [*aligned, *(t for t in others if isinstance(t, torch.Tensor))]
    key = (*((tuple(t.shape), t.dtype) for t in tensors), *consts)
    args = [from_dlpack(t, assumed_align=16) for t in aligned]
    args += [from_dlpack(t) if isinstance(t, torch.Tensor) else t for t in others]
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    if key not in cache:
        cache[key] = cute.compile(launch, *args, stream, *consts)
    cache[key](*args, stream)


def launch_rows(kernel, rows, threads: int, cluster_n: int, stream) -> None:
    """`kernel` (a @cute.kernel applied to its arguments) on a grid of `rows` x cluster_n blocks of
    `threads` threads, the cluster_n blocks of a row as one cluster. Called inside a @cute.jit launcher."""
    kernel.launch(
        grid=[rows, cluster_n, 1],
        block=[threads, 1, 1],
        cluster=[1, cluster_n, 1] if cluster_n > 1 else None,
        stream=stream,
    )


# -- device ----------------------------------------------------------------------------------------
def reduction_smem(threads: int, reductions: int) -> tuple:
    """Shared memory for `reductions` block reductions (one fp32 per warp each), then the block's
    4 cluster slots (slot k holds the k-th reduction's partial for the peers)."""
    smem = cutlass.utils.SmemAllocator()
    per_warp = [smem.allocate_tensor(cutlass.Float32, cute.make_layout(threads // 32), byte_alignment=16) for _ in range(reductions)]
    return (*per_warp, smem.allocate_tensor(cutlass.Float32, cute.make_layout(4), byte_alignment=16))


@cute.jit
def load_vectors(g: cute.Tensor, regs: cute.Tensor, first, threads: cutlass.Constexpr, count: cutlass.Constexpr, chunk):
    """regs[:, i] = g[:, first + (chunk * count + i) * threads] for i < count, with 128-bit loads
    (g: a row as vectors, zipped_divide(row, (vec,)); chunk: which `count` of this thread's vectors)."""
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), g.element_type, num_bits_per_copy=128)
    for i in cutlass.range_constexpr(count):
        cute.copy(atom, g[(None, first + (chunk * count + i) * threads)], regs[(None, i)])


@cute.jit
def store_vectors(values, g: cute.Tensor, first, threads: cutlass.Constexpr, vec: cutlass.Constexpr, count: cutlass.Constexpr):
    """g[:, first + i * threads] = values[:, i] for i < count (values: fp32 [vec, count], converted
    to g's dtype), with 128-bit stores."""
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), g.element_type, num_bits_per_copy=128)
    out = cute.make_rmem_tensor(cute.make_layout((vec, count)), g.element_type)
    out.store(values.to(g.element_type))
    for i in cutlass.range_constexpr(count):
        cute.copy(atom, out[(None, i)], g[(None, first + i * threads)])


@cute.jit
def load_peer(slot: cute.Tensor, k: cutlass.Constexpr, rank: cutlass.Int32) -> cutlass.Float32:
    """slot[k] of block `rank` of this cluster: its shared-memory address mapped into the cluster's
    window (mapa), read with ld.shared::cluster."""
    addr = cute.arch.map_dsmem_ptr(slot.iterator + k, rank).toint()
    return cute.arch.load(llvm.inttoptr(llvm.PointerType.get(3), addr.ir_value()), cutlass.Float32, ss="cluster")


@cute.jit
def cluster_combine(slot: cute.Tensor, k: cutlass.Constexpr, value: cutlass.Float32, cluster_n: cutlass.Constexpr, is_max: cutlass.Constexpr) -> cutlass.Float32:
    """Every block's `value` combined over the cluster (max or sum), through slot[k] of each block."""
    tidx, _, _ = cute.arch.thread_idx()
    if tidx == 0:
        slot[k] = value
    cute.arch.cluster_arrive()
    cute.arch.cluster_wait()
    out = load_peer(slot, k, 0)
    for r in cutlass.range_constexpr(1, cluster_n):
        if cutlass.const_expr(is_max):
            out = cute.arch.fmax(out, load_peer(slot, k, r))
        else:
            out = out + load_peer(slot, k, r)
    return out


@cute.jit
def row_reduce(
    value: cutlass.Float32, per_warp: cute.Tensor, slots: cute.Tensor, k: cutlass.Constexpr, threads: cutlass.Constexpr,
    cluster_n: cutlass.Constexpr, is_max: cutlass.Constexpr, last: cutlass.Constexpr,
) -> cutlass.Float32:
    """Each thread's `value` reduced (max or sum) over the row: the warp, the block (through
    per_warp), then the cluster (through slots[k]). `last`: the row's last cluster reduction, after
    which this block arrives at the cluster barrier its peers wait on (wait_for_peers) before they exit."""
    tidx, _, _ = cute.arch.thread_idx()
    warp = tidx // 32
    lane = tidx % 32
    if cutlass.const_expr(is_max):
        out = cute.arch.warp_reduction_max(value)
    else:
        out = cute.arch.warp_reduction_sum(value)
    if lane == 0:
        per_warp[warp] = out
    cute.arch.barrier()
    if cutlass.const_expr(is_max):
        out = per_warp[0]
        for w in cutlass.range_constexpr(1, threads // 32):
            out = cute.arch.fmax(out, per_warp[w])
    else:
        out = cutlass.Float32(0.0)
        for w in cutlass.range_constexpr(threads // 32):
            out = out + per_warp[w]
    if cutlass.const_expr(cluster_n > 1):
        out = cluster_combine(slots, k, out, cluster_n, is_max)
        if cutlass.const_expr(last):
            cute.arch.cluster_arrive()  # done reading the peers: they may leave once all have arrived
    return out


@cute.jit
def wait_for_peers(cluster_n: cutlass.Constexpr):
    """A clustered block's last step: keeps its shared memory alive until every peer is done reading it."""
    if cutlass.const_expr(cluster_n > 1):
        cute.arch.cluster_wait()
