"""Shared parts of the CuTe DSL row kernels (rmsnorm_cute, softmax_cute, cross_entropy_cute): their
launch plan, their host launcher's compile cache, and the device steps all three take.

A row of N values is cut into 128-bit vectors; each row gets `cluster_n` blocks of `threads`
threads, thread t of block `rank` owning vectors first + i * threads (first = rank * vectors per
block + t). A reduction goes over the warp (shuffles), the block (one fp32 per warp in shared
memory) and, for a cluster, over its blocks: each writes its partial into its own shared slot, a
cluster barrier publishes it, every block reads all peers' slots through distributed shared memory
(mapa + ld.shared::cluster) and combines them in rank order, so all blocks agree bit for bit.

The kernels launch through RowPlan (row_layout: the CONFIG heuristic that picks cluster size,
threads per block, threads per row, so several short rows share a block, and the copy width;
launch_consts: the launch options), with reduce_row / row_total (rows of up to 32 threads reduce in
the warp alone) and the cluster exchange through mbarriers and st.async (exchange_reduce; the
kernels' default) or through cluster barriers as above. row_shared / stage_slice / read_staged keep
a block's slice in shared memory (cp.async) instead of registers; row_max_sum merges (max, sum)
pairs in one exchange (online softmax). cluster_plan, load_vectors, store_vectors and row_reduce
are the earlier one-row-per-block plan's helpers, kept for candidates stored with them.

Imported as `from _cute_rows import ...` (knowledge_base/kernels is on the candidates' import
path). A @cute.jit helper called from a kernel is traced inline into it: no call at run time.
"""

from typing import NamedTuple

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
def cluster_plan(
    n: int, vec: int, config: dict, kernel: str, max_per_thread: int | None = None,
) -> tuple[int, int, int]:
    """(cluster_n, threads, vectors per thread) for rows of n values in vectors of `vec`: one block
    while a row fits config["vecs_per_block"] vectors, else a cluster of up to config["max_cluster"]
    blocks; the most threads (a multiple of 32, at most config["max_threads"]) that split a block's
    vectors evenly. Rows that are not 32 vectors long, or need more than `max_per_thread` vectors a
    thread, are refused with a ValueError naming `kernel`."""
    if n % (32 * vec):
        raise ValueError(f"{kernel}: a row of {n} values is not a multiple of {32 * vec} (32 vectors of {vec})")
    n_vecs = n // vec
    cluster = 1
    while (
        n_vecs // cluster > config["vecs_per_block"]
        and 2 * cluster <= config["max_cluster"]
        and n_vecs % (64 * cluster) == 0
    ):
        cluster *= 2
    per_block = n_vecs // cluster
    threads = max(t for t in range(32, config["max_threads"] + 1, 32) if per_block % t == 0)
    per_thread = per_block // threads
    if max_per_thread is not None and per_thread > max_per_thread:
        raise ValueError(
            f"{kernel}: a row of {n} values needs {per_thread} vectors per thread (more than max_vecs_per_thread)"
        )
    return cluster, threads, per_thread


MAX_VECS_IN_REGISTERS = 32  # a thread's whole slice in registers: at most this many vectors (256 bf16)


class RowPlan(NamedTuple):
    """How a launch covers rows of n values: each row gets `cluster_n` blocks (a thread-block cluster
    when > 1) and `row_threads` threads in each of them; a block of `threads` threads holds
    threads // row_threads rows (several only when cluster_n == 1). Each thread owns `vecs * chunks`
    vectors of `vec` values (`bits` per global access): thread t of block `rank` owns vectors
    rank * row_threads * vecs * chunks + t + j * row_threads, j < vecs * chunks."""

    cluster_n: int
    threads: int
    row_threads: int
    vecs: int  # vectors a thread loads together (one chunk); 1 chunk: its whole slice in registers
    chunks: int
    vec: int  # values per vector
    bits: int  # bits per global load/store: vec * the dtype's width

    @property
    def rows_per_block(self) -> int:
        return self.threads // self.row_threads


def _most_threads(per_block: int, limit: int) -> int | None:
    """The most threads (a multiple of 32, at most `limit`) that split per_block vectors evenly; when
    those are fewer than limit / 2, the fewest above `limit` (up to twice it) that do, if any
    (4000 vectors at limit 128: 160 threads, not 32)."""
    fits = [t for t in range(32, limit + 1, 32) if per_block % t == 0]
    if fits and 2 * max(fits) >= limit:
        return max(fits)
    above = [t for t in range(limit + 32, 2 * limit + 1, 32) if per_block % t == 0]
    return min(above) if above else (max(fits) if fits else None)


def row_layout(n: int, width: int, config: dict, kernel: str, chunk_vecs: int | None = None) -> RowPlan:
    """The launch plan for rows of n values of `width` bits, from the CuTe row kernels' CONFIG:

    - vectors of config["copy_bits"] bits;
    - short rows (a row's vectors fit config["vecs_per_thread"] per thread over fewer than
      config["short_threads"] threads): several rows per block of short_threads threads, each row
      on the fewest threads (a power of two, at least config["min_row_threads"]) that hold it with
      at most vecs_per_thread vectors each (rows of 32 or fewer threads reduce in the warp alone);
    - longer rows: one row per block of about config["threads"] threads (_most_threads: a multiple
      of 32 that splits it evenly), over the smallest cluster (a power of two, at most config["max_cluster"] blocks)
      that leaves each thread at most vecs_per_thread vectors (config["cluster_vecs_per_thread"]
      once a cluster is needed, vecs_per_thread where absent); where none does, the plan with the
      fewest vectors per thread (refused beyond MAX_VECS_IN_REGISTERS unless chunked).

    `chunk_vecs` (a streaming kernel, cross-entropy): a thread's vectors are loaded in chunks of at
    most that many, any number of chunks. Rows that cannot be tiled exactly are refused with a
    ValueError naming `kernel`."""
    bits = config["copy_bits"]
    vec = bits // width
    if bits % width or vec < 1 or n % vec:
        raise ValueError(f"{kernel}: a row of {n} values is not a whole number of {bits}-bit vectors")
    n_vecs, per = n // vec, config["vecs_per_thread"]
    small, tpr = config["short_threads"], config["min_row_threads"]
    while tpr < small and n_vecs // tpr > per:
        tpr *= 2
    if tpr < small and n_vecs % tpr == 0 and n_vecs // tpr <= per:
        return _with_chunks(RowPlan(1, small, tpr, n_vecs // tpr, 1, vec, bits), chunk_vecs)
    best = None
    for cluster in (c for c in (1, 2, 4, 8, 16) if c <= config["max_cluster"]):
        threads = _most_threads(n_vecs // cluster, config["threads"]) if n_vecs % cluster == 0 else None
        if threads is None:
            continue
        plan = RowPlan(cluster, threads, threads, n_vecs // cluster // threads, 1, vec, bits)
        if plan.vecs <= (per if cluster == 1 else config.get("cluster_vecs_per_thread", per)):
            return _with_chunks(plan, chunk_vecs)
        if best is None or plan.vecs < best.vecs:
            best = plan
    if best is None:
        raise ValueError(
            f"{kernel}: a row of {n_vecs} vectors splits over no cluster of at most {config['max_cluster']} blocks of a multiple of 32 threads"
        )
    if chunk_vecs is None and best.vecs > MAX_VECS_IN_REGISTERS:
        raise ValueError(
            f"{kernel}: a row of {n} values needs {best.vecs} vectors per thread (more than {MAX_VECS_IN_REGISTERS})"
        )
    return _with_chunks(best, chunk_vecs)


def _with_chunks(plan: RowPlan, chunk_vecs: int | None) -> RowPlan:
    """A streaming kernel's plan: the thread's vectors in chunks of at most chunk_vecs (dividing them)."""
    if chunk_vecs is None:
        return plan
    vecs = max(v for v in range(1, min(chunk_vecs, plan.vecs) + 1) if plan.vecs % v == 0)
    return plan._replace(vecs=vecs, chunks=plan.vecs // vecs)


def plan_consts(plan: RowPlan, rows: int) -> tuple:
    """A plan as the kernels' compile-time constants: (cluster_n, threads, row_threads, vecs, chunks,
    vec, bits, ragged), ragged when the rows do not fill the last block."""
    return (*plan, rows % plan.rows_per_block != 0)


def launch_consts(plan: RowPlan, rows: int, config: dict) -> tuple:
    """plan_consts, then the launch options every row kernel takes after them: (mbarrier: the cluster
    exchange through mbarriers, min_blocks: config["min_blocks_per_sm"]); absent keys read as off."""
    return (*plan_consts(plan, rows), bool(config.get("mbarrier", False)), int(config.get("min_blocks_per_sm", 0)))


def launch_row_blocks(kernel, rows, threads: int, rows_per_block: int, cluster_n: int, stream, min_blocks: int = 0) -> None:
    """`kernel` on a grid of ceil(rows / rows_per_block) x cluster_n blocks of `threads` threads, the
    cluster_n blocks of a row as one cluster. `min_blocks` > 0: ask the compiler for that many
    resident blocks per SM (it caps the registers per thread to fit; may spill). Called inside a
    @cute.jit launcher."""
    extra = {"min_blocks_per_mp": min_blocks} if min_blocks > 0 else {}
    kernel.launch(
        grid=[(rows + rows_per_block - 1) // rows_per_block, cluster_n, 1],
        block=[threads, 1, 1],
        cluster=[1, cluster_n, 1] if cluster_n > 1 else None,
        stream=stream,
        **extra,
    )


def row_matrix(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """x as a contiguous [rows, N] matrix (a view where it can be), and the values one 128-bit vector holds."""
    x2 = x.reshape(-1, x.shape[-1])
    if not x2.is_contiguous():
        x2 = x2.contiguous()
    return x2, 128 // DTYPES[x.dtype].width


def _tvm_ffi() -> bool:
    """Whether compiled launchers can take torch tensors through Apache TVM FFI (apache-tvm-ffi)."""
    try:
        import tvm_ffi  # noqa: F401
    except Exception:  # not installed, or its native library will not load here: the plain launchers
        return False
    return True


TVM_FFI = _tvm_ffi()


def run_compiled(cache: dict, launch, aligned: list, others: list, consts: tuple) -> None:
    """launch(*aligned, *others, stream, *consts) on the caller's current CUDA stream, compiled by
    cute.compile once per shapes, dtypes and consts (sizes and strides are static, so the compiler
    proves the alignment of every vector access). `aligned`: tensors handed over as 16-byte aligned;
    `others`: tensors without that promise, and scalars (passed at run time, not in the key).

    With apache-tvm-ffi installed the launcher is compiled for TVM FFI and called with the torch
    tensors themselves: no DLPack conversion per call, and the argument checks are compiled in. The
    per-call conversions otherwise cost host time that a kernel of tens of microseconds waits on."""
    tensors = [*aligned, *(t for t in others if isinstance(t, torch.Tensor))]
    key = (*((tuple(t.shape), t.dtype) for t in tensors), *consts)
    if key not in cache:
        cache[key] = _compile(launch, aligned, others, consts)
    cache[key](aligned, others)


def _dlpack(aligned: list, others: list, tvm_ffi: bool = False) -> list:
    """The launcher's arguments as CuTe tensors (scalars as they are); `aligned` ones promised 16-byte aligned."""
    kw = {"enable_tvm_ffi": True} if tvm_ffi else {}  # a keyword older CuTe DSL releases lack
    args = [from_dlpack(t, assumed_align=16, **kw) for t in aligned]
    return args + [from_dlpack(t, **kw) if isinstance(t, torch.Tensor) else t for t in others]


def _compile(launch, aligned: list, others: list, consts: tuple):
    """The compiled launcher for these tensors, as a call taking (aligned, others)."""
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    if TVM_FFI:
        try:
            ffi_fn = cute.compile(launch, *_dlpack(aligned, others, True), stream, *consts, options="--enable-tvm-ffi")
            return lambda aligned, others: ffi_fn(
                *aligned, *others, cuda.CUstream(torch.cuda.current_stream().cuda_stream)
            )
        except Exception:  # a TVM FFI build this DSL version refuses: the plain launcher below
            pass
    fn = cute.compile(launch, *_dlpack(aligned, others), stream, *consts)

    def call(aligned: list, others: list) -> None:
        fn(*_dlpack(aligned, others), cuda.CUstream(torch.cuda.current_stream().cuda_stream))

    return call


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
    per_warp = [
        smem.allocate_tensor(cutlass.Float32, cute.make_layout(threads // 32), byte_alignment=16)
        for _ in range(reductions)
    ]
    return (*per_warp, smem.allocate_tensor(cutlass.Float32, cute.make_layout(4), byte_alignment=16))


@cute.jit
def load_vectors(g: cute.Tensor, regs: cute.Tensor, first, threads: cutlass.Constexpr, count: cutlass.Constexpr, chunk):
    """regs[:, i] = g[:, first + (chunk * count + i) * threads] for i < count, with 128-bit loads
    (g: a row as vectors, zipped_divide(row, (vec,)); chunk: which `count` of this thread's vectors)."""
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), g.element_type, num_bits_per_copy=128)
    for i in cutlass.range_constexpr(count):
        cute.copy(atom, g[(None, first + (chunk * count + i) * threads)], regs[(None, i)])


@cute.jit
def store_vectors(
    values, g: cute.Tensor, first, threads: cutlass.Constexpr, vec: cutlass.Constexpr, count: cutlass.Constexpr,
):
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
def cluster_combine(
    slot: cute.Tensor, k: cutlass.Constexpr, value: cutlass.Float32, cluster_n: cutlass.Constexpr,
    is_max: cutlass.Constexpr,
) -> cutlass.Float32:
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


# -- device, plans with several rows per block (RowPlan) --------------------------------------------
def row_smem(threads: int, reductions: int) -> tuple:
    """reduction_smem under a RowPlan's name: `reductions` arrays of one fp32 per warp, then 4 cluster slots."""
    return reduction_smem(threads, reductions)


@cute.jit
def row_coords(m, threads: cutlass.Constexpr, row_threads: cutlass.Constexpr, ragged: cutlass.Constexpr):
    """(row this thread works on, the row it may load: the last row for the padding threads of a
    ragged last block, thread index within its row, block rank within the row's cluster)."""
    tidx, _, _ = cute.arch.thread_idx()
    bidx, rank, _ = cute.arch.block_idx()
    row = bidx * (threads // row_threads) + tidx // row_threads
    load_row = row
    if cutlass.const_expr(ragged):
        load_row = cutlass.min(row, m - 1)
    return row, load_row, tidx % row_threads, rank


@cute.jit
def load_strided(
    g: cute.Tensor, regs: cute.Tensor, first, stride: cutlass.Constexpr, count: cutlass.Constexpr, chunk,
    bits: cutlass.Constexpr,
):
    """regs[:, i] = g[:, first + (chunk * count + i) * stride] for i < count, `bits` per access
    (g: a row as vectors, zipped_divide(row, (vec,))). All `count` loads are issued before any use."""
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), g.element_type, num_bits_per_copy=bits)
    for i in cutlass.range_constexpr(count):
        cute.copy(atom, g[(None, first + (chunk * count + i) * stride)], regs[(None, i)])


@cute.jit
def store_strided(
    values, g: cute.Tensor, first, stride: cutlass.Constexpr, vec: cutlass.Constexpr, count: cutlass.Constexpr,
    bits: cutlass.Constexpr,
):
    """g[:, first + i * stride] = values[:, i] for i < count (values: fp32 [vec, count], converted to
    g's dtype), `bits` per access."""
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), g.element_type, num_bits_per_copy=bits)
    out = cute.make_rmem_tensor(cute.make_layout((vec, count)), g.element_type)
    out.store(values.to(g.element_type))
    for i in cutlass.range_constexpr(count):
        cute.copy(atom, out[(None, i)], g[(None, first + i * stride)])


@cute.jit
def reduce_row(
    value: cutlass.Float32, per_warp: cute.Tensor, slots: cute.Tensor, k: cutlass.Constexpr,
    row_threads: cutlass.Constexpr, cluster_n: cutlass.Constexpr, is_max: cutlass.Constexpr, last: cutlass.Constexpr,
) -> cutlass.Float32:
    """Each thread's `value` reduced (max or sum) over its row: rows of at most 32 threads within
    their warp (butterfly shuffles: every lane ends with the same bits), longer rows then over
    their warps (one fp32 each in per_warp, read back by the lanes, shuffled again), then the
    cluster (one row per block there) through slots[k] as row_reduce does. `last`: the row's last
    cluster reduction (arrive at the barrier wait_for_peers waits on)."""
    if cutlass.const_expr(is_max):
        out = cute.arch.warp_reduction(value, cute.arch.fmax, threads_in_group=min(row_threads, 32))
    else:
        out = cute.arch.warp_reduction(value, lambda a, b: a + b, threads_in_group=min(row_threads, 32))
    if cutlass.const_expr(row_threads > 32):
        tidx, _, _ = cute.arch.thread_idx()
        warp = tidx // 32
        lane = tidx % 32
        if lane == 0:
            per_warp[warp] = out
        cute.arch.barrier()
        mine = cutlass.Float32(-BIG) if cutlass.const_expr(is_max) else cutlass.Float32(0.0)
        if lane < row_threads // 32:
            mine = per_warp[warp - warp % (row_threads // 32) + lane]
        if cutlass.const_expr(is_max):
            out = cute.arch.warp_reduction(mine, cute.arch.fmax)
        else:
            out = cute.arch.warp_reduction(mine, lambda a, b: a + b)
    if cutlass.const_expr(cluster_n > 1):
        out = cluster_combine(slots, k, out, cluster_n, is_max)
        if cutlass.const_expr(last):
            cute.arch.cluster_arrive()  # done reading the peers: they may leave once all have arrived
    return out


# -- device, a cluster's reductions through mbarriers (config["mbarrier"]) ----------------------------
# The barrier exchange above (row_reduce / reduce_row) costs two cluster barriers per reduction plus
# one before exit. Here each warp pushes its partial into every peer's shared memory with st.async
# (ld-free, fire-and-forget), the bytes completing a transaction count on the receiver's mbarrier;
# a block waits only on its own mbarrier, and never reads a peer, so it may exit without waiting.
def row_reductions(threads: int, cluster_n: int, reductions: int, mbarrier: bool) -> tuple:
    """Shared memory for `reductions` row reductions: reduction_smem's, or with `mbarrier` (and a
    cluster) one fp32 per (warp, cluster rank) per reduction, then one mbarrier per reduction."""
    if not (mbarrier and cluster_n > 1):
        return reduction_smem(threads, reductions)
    smem = cutlass.utils.SmemAllocator()
    layout = cute.make_layout((threads // 32) * cluster_n)
    bufs = [smem.allocate_tensor(cutlass.Float32, layout, byte_alignment=16) for _ in range(reductions)]
    return (*bufs, smem.allocate_array(cutlass.Int64, num_elems=reductions, byte_alignment=8))


@cute.jit
def init_exchange(mbar: cute.Pointer, reductions: cutlass.Constexpr):
    """Thread 0 sets up the mbarriers (one arrival each: its own expect_tx); the relaxed cluster
    arrive is waited on (first_wait) before any peer's mbarrier is written."""
    tidx, _, _ = cute.arch.thread_idx()
    if tidx == 0:
        for k in cutlass.range_constexpr(reductions):
            cute.arch.mbarrier_init(mbar + k, 1)
    cute.arch.mbarrier_init_fence()
    cute.arch.cluster_arrive_relaxed()


@cute.jit
def exchange_reduce(
    value: cutlass.Float32, buf: cute.Tensor, mbar: cute.Pointer, rank, first_wait: cutlass.Constexpr,
    threads: cutlass.Constexpr, cluster_n: cutlass.Constexpr, is_max: cutlass.Constexpr,
) -> cutlass.Float32:
    """`value` (each thread's) reduced over the row's whole cluster (one row per block): the warp
    (shuffles), then lane r of every warp stores the warp's partial into slot (warp, own rank) of
    block r (st.async, completing bytes on block r's mbarrier); once its mbarrier has all
    warps x cluster_n slots, each block combines them (lanes, then shuffles): the same slots in
    the same places everywhere, so every block gets the same bits."""
    tidx, _, _ = cute.arch.thread_idx()
    warp = tidx // 32
    lane = tidx % 32
    if cutlass.const_expr(is_max):
        out = cute.arch.warp_reduction(value, cute.arch.fmax)
    else:
        out = cute.arch.warp_reduction(value, lambda a, b: a + b)
    slots: cutlass.Constexpr = (threads // 32) * cluster_n
    if tidx == 0:
        cute.arch.mbarrier_arrive_and_expect_tx(mbar, slots * 4)
    if cutlass.const_expr(first_wait):
        cute.arch.cluster_wait()  # every peer's mbarriers are initialised
    if lane < cluster_n:
        bits = cutlass.Int32(llvm.bitcast(cutlass.Int32.mlir_type, out.ir_value()))
        cute.arch.store_async_dsmem(buf.iterator + (warp * cluster_n + rank), bits, mbar, lane)
    cute.arch.mbarrier_wait(mbar, 0)
    mine = cutlass.Float32(-BIG) if cutlass.const_expr(is_max) else cutlass.Float32(0.0)
    for i in cutlass.range_constexpr((slots + 31) // 32):
        if lane + i * 32 < slots:
            if cutlass.const_expr(is_max):
                mine = cute.arch.fmax(mine, buf[lane + i * 32])
            else:
                mine = mine + buf[lane + i * 32]
    if cutlass.const_expr(is_max):
        return cute.arch.warp_reduction(mine, cute.arch.fmax)
    return cute.arch.warp_reduction(mine, lambda a, b: a + b)


def row_total(
    value, smem: tuple, k: int, threads: int, row_threads: int, cluster_n: int, is_max: bool, last: bool,
    mbarrier: bool,
):
    """Reduction k of a row (traced inline from a kernel; plain Python: it only picks the path):
    exchange_reduce when `mbarrier` and a cluster, else reduce_row. `smem`: row_reductions'."""
    if mbarrier and cluster_n > 1:
        rank = cute.arch.block_idx()[1]
        return exchange_reduce(value, smem[k], smem[-1] + k, rank, k == 0, threads, cluster_n, is_max)
    return reduce_row(value, smem[k], smem[-1], k, row_threads, cluster_n, is_max, last)


def row_setup(smem: tuple, reductions: int, cluster_n: int, mbarrier: bool) -> None:
    """A kernel's first step after allocating row_reductions: the mbarriers' set-up where used."""
    if mbarrier and cluster_n > 1:
        init_exchange(smem[-1], reductions)


def row_exit(cluster_n: int, mbarrier: bool) -> None:
    """A kernel's last step: with the barrier exchange, wait until the peers are done reading."""
    if not (mbarrier and cluster_n > 1):
        wait_for_peers(cluster_n)


# -- device, a block's slice staged in shared memory (rows of at least config["stage_min_n"]) ------
# cp.async copies the slice from global into shared memory without holding registers; the kernel
# reads it back into registers for each pass (reduction, output), so nothing but the running
# partials stays live across a reduction: fewer registers, more resident blocks per SM.
def row_shared(threads: int, cluster_n: int, reductions: int, mbarrier: bool, dtype=None, vecs: int = 0, vec: int = 0):
    """(row_reductions' tuple, the staging tensor or None): with `dtype`, a [vec, threads * vecs]
    shared tensor (each 16-byte vector contiguous; thread t's i-th at column i * threads + t)
    allocated first, from the same allocator as the reduction buffers."""
    if dtype is None:
        return row_reductions(threads, cluster_n, reductions, mbarrier), None
    smem = cutlass.utils.SmemAllocator()
    staged = smem.allocate_tensor(dtype, cute.make_layout((vec, threads * vecs)), byte_alignment=16)
    if mbarrier and cluster_n > 1:
        layout = cute.make_layout((threads // 32) * cluster_n)
        bufs = [smem.allocate_tensor(cutlass.Float32, layout, byte_alignment=16) for _ in range(reductions)]
        return (*bufs, smem.allocate_array(cutlass.Int64, num_elems=reductions, byte_alignment=8)), staged
    per_warp = [smem.allocate_tensor(cutlass.Float32, cute.make_layout(threads // 32), byte_alignment=16) for _ in range(reductions)]
    return (*per_warp, smem.allocate_tensor(cutlass.Float32, cute.make_layout(4), byte_alignment=16)), staged


@cute.jit
def stage_slice(g: cute.Tensor, s: cute.Tensor, first, stride: cutlass.Constexpr, count: cutlass.Constexpr, threads: cutlass.Constexpr, bits: cutlass.Constexpr):
    """cp.async g[:, first + i * stride] -> s[:, i * threads + tidx] for i < count, then commit the group."""
    tidx, _, _ = cute.arch.thread_idx()
    atom = cute.make_copy_atom(cute.nvgpu.cpasync.CopyG2SOp(), g.element_type, num_bits_per_copy=bits)
    for i in cutlass.range_constexpr(count):
        cute.copy(atom, g[(None, first + i * stride)], s[(None, i * threads + tidx)])
    cute.arch.cp_async_commit_group()


@cute.jit
def read_staged(s: cute.Tensor, regs: cute.Tensor, count: cutlass.Constexpr, threads: cutlass.Constexpr, bits: cutlass.Constexpr):
    """regs[:, i] = s[:, i * threads + tidx]: this thread's own staged vectors (its cp.async copies,
    waited for with cp_async_wait_group: no barrier needed)."""
    tidx, _, _ = cute.arch.thread_idx()
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), s.element_type, num_bits_per_copy=bits)
    for i in cutlass.range_constexpr(count):
        cute.copy(atom, s[(None, i * threads + tidx)], regs[(None, i)])


def global_view(t: cute.Tensor) -> cute.Tensor:
    """`t` (a kernel argument from from_dlpack: a generic-address tensor) with a global-memory pointer
    (same address, same layout, 16-byte aligned): cp.async takes only global sources."""
    ptr = cute.make_ptr(t.element_type, t.iterator.toint(), cute.AddressSpace.gmem, assumed_align=16)
    return cute.make_tensor(ptr, t.layout)



# -- device, online softmax: (max, sum) reduced together in one exchange (config["online"]) ----------
@cute.jit
def merge_max_sum(m: cutlass.Float32, s: cutlass.Float32, m2: cutlass.Float32, s2: cutlass.Float32):
    """Two (max, sum of exp2(x - max)) partials as one. Symmetric to the bit (a max, and a sum of
    two products added in either order), so butterfly partners agree."""
    top = cute.arch.fmax(m, m2)
    return top, s * cute.math.exp2(m - top, fastmath=True) + s2 * cute.math.exp2(m2 - top, fastmath=True)


@cute.jit
def warp_max_sum(m: cutlass.Float32, s: cutlass.Float32, group: cutlass.Constexpr):
    """merge_max_sum over `group` lanes (a power of two, at most 32) by butterfly shuffles."""
    for i in cutlass.range_constexpr(group.bit_length() - 1):
        offset = group >> (i + 1)
        m2 = cute.arch.shuffle_sync_bfly(m, offset=offset)
        s2 = cute.arch.shuffle_sync_bfly(s, offset=offset)
        m, s = merge_max_sum(m, s, m2, s2)
    return m, s


@cute.jit
def block_max_sum(m: cutlass.Float32, s: cutlass.Float32, warp_m: cute.Tensor, warp_s: cute.Tensor, row_threads: cutlass.Constexpr):
    """Warp partials merged over the row's warps (one (max, sum) per warp in shared memory)."""
    tidx, _, _ = cute.arch.thread_idx()
    warp = tidx // 32
    lane = tidx % 32
    if lane == 0:
        warp_m[warp] = m
        warp_s[warp] = s
    cute.arch.barrier()
    mm = cutlass.Float32(-BIG)
    ss = cutlass.Float32(0.0)
    if lane < row_threads // 32:
        mm = warp_m[warp - warp % (row_threads // 32) + lane]
        ss = warp_s[warp - warp % (row_threads // 32) + lane]
    return warp_max_sum(mm, ss, 32)


@cute.jit
def slots_max_sum(m: cutlass.Float32, s: cutlass.Float32, slots: cute.Tensor, cluster_n: cutlass.Constexpr):
    """The block's (max, sum) merged over the cluster through slots 0 and 1 and cluster barriers
    (rank order; the last arrive lets the peers leave once all have read: wait_for_peers)."""
    tidx, _, _ = cute.arch.thread_idx()
    if tidx == 0:
        slots[0] = m
        slots[1] = s
    cute.arch.cluster_arrive()
    cute.arch.cluster_wait()
    m = load_peer(slots, 0, 0)
    s = load_peer(slots, 1, 0)
    for r in cutlass.range_constexpr(1, cluster_n):
        m, s = merge_max_sum(m, s, load_peer(slots, 0, r), load_peer(slots, 1, r))
    cute.arch.cluster_arrive()
    return m, s


@cute.jit
def exchange_max_sum(
    m: cutlass.Float32, s: cutlass.Float32, buf_m: cute.Tensor, buf_s: cute.Tensor, mbar: cute.Pointer, rank,
    threads: cutlass.Constexpr, cluster_n: cutlass.Constexpr,
):
    """Warp pairs merged over the cluster through one mbarrier: lane r of every warp pushes the
    warp's (max, sum) into slot (warp, own rank) of block r's two buffers (8 bytes a slot), as
    exchange_reduce does with one value; the first exchange of the kernel (waits for the set-up)."""
    tidx, _, _ = cute.arch.thread_idx()
    warp = tidx // 32
    lane = tidx % 32
    count: cutlass.Constexpr = (threads // 32) * cluster_n
    if tidx == 0:
        cute.arch.mbarrier_arrive_and_expect_tx(mbar, count * 8)
    cute.arch.cluster_wait()  # every peer's mbarriers are initialised
    if lane < cluster_n:
        slot = warp * cluster_n + rank
        cute.arch.store_async_dsmem(buf_m.iterator + slot, cutlass.Int32(llvm.bitcast(cutlass.Int32.mlir_type, m.ir_value())), mbar, lane)
        cute.arch.store_async_dsmem(buf_s.iterator + slot, cutlass.Int32(llvm.bitcast(cutlass.Int32.mlir_type, s.ir_value())), mbar, lane)
    cute.arch.mbarrier_wait(mbar, 0)
    mm = cutlass.Float32(-BIG)
    ss = cutlass.Float32(0.0)
    for i in cutlass.range_constexpr((count + 31) // 32):
        if lane + i * 32 < count:
            mm, ss = merge_max_sum(mm, ss, buf_m[lane + i * 32], buf_s[lane + i * 32])
    return warp_max_sum(mm, ss, 32)


def row_max_sum(m, s, smem: tuple, threads: int, row_threads: int, cluster_n: int, mbarrier: bool):
    """Each thread's (max, sum of exp2(x - max)) merged over its row in one pass (online softmax):
    one cluster exchange instead of two. `smem`: row_reductions(threads, cluster_n, 2, mbarrier)'s
    (the two reductions' buffers hold the maxima and the sums). Traced inline (plain Python: it only
    picks the path)."""
    if mbarrier and cluster_n > 1:
        m, s = warp_max_sum(m, s, 32)
        return exchange_max_sum(m, s, smem[0], smem[1], smem[-1], cute.arch.block_idx()[1], threads, cluster_n)
    m, s = warp_max_sum(m, s, min(row_threads, 32))
    if row_threads > 32:
        m, s = block_max_sum(m, s, smem[0], smem[1], row_threads)
    if cluster_n > 1:
        m, s = slots_max_sum(m, s, smem[-1], cluster_n)
    return m, s
