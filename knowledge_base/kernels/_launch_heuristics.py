"""Host-side launch heuristics shared by the reference kernels (one file per kernel, one helper).

Kernels import it as `from _launch_heuristics import ...`: the evaluator puts knowledge_base/kernels
on every candidate's import path, so LLM-written candidates may use it too. Host code only: no
@triton.jit functions here (Triton resolves those through the kernel's own module).

Candidates stored in experiment databases import these names: a function keeps its signature and
meaning once released (resuming an old run re-evaluates its kernels' children); add new ones beside.
"""

import math
import os
from dataclasses import dataclass

import torch

# Shared memory a pipelined loop may fill with its stages (H100/H200 allow 227 KiB per block;
# the rest is left for the compiler's own scratch).
PIPELINE_SMEM_BYTES = 160 * 1024

# The cooperative row kernels (RMSNorm, softmax): load the next row's chunk before waiting (an
# experiment switch, not a tunable), and how many polls a program may spend waiting over all its rows.
COOP_PREFETCH = True
SPIN_LIMIT = 1 << 22


def pow2_at_least(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 << max(0, n - 1).bit_length()


def unit_stride_rows(x: torch.Tensor) -> torch.Tensor:
    """`x` as a [rows, last dimension] matrix for the row kernels, which take the row stride as an
    argument: a view wherever the leading dimensions merge (x[:, :N] of a wider tensor included).
    Copied only when a row's elements are not adjacent (x[..., ::2]), which the kernels need."""
    x2 = x.reshape(-1, x.shape[-1])
    return x2 if x2.stride(-1) == 1 or x2.shape[-1] <= 1 else x2.contiguous()


def rows_and_output(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, tuple[int, int]]:
    """(x as unit_stride_rows, a fresh row-major output of that shape and x's dtype, the two row
    strides) for a row kernel whose output is shaped like its input."""
    x2 = unit_stride_rows(x)
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    return x2, y, (x2.stride(0), y.stride(0))


def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of `device`; a small number under the CPU interpreter, which
    still exercises a persistent grid's loop."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


def pipeline_stages(wanted: int, bytes_per_stage: int, budget: int = PIPELINE_SMEM_BYTES) -> int:
    """Pipelined loads are staged in shared memory: drop stages that would not fit."""
    while wanted > 1 and wanted * bytes_per_stage > budget:
        wanted -= 1
    return wanted


def tma_ok(t: torch.Tensor) -> bool:
    """Whether a tensor descriptor (TMA) can address `t`: contiguous, 16-byte aligned base and rows."""
    return t.is_contiguous() and t.data_ptr() % 16 == 0 and (t.shape[-1] * t.element_size()) % 16 == 0


# Shared memory the attention launchers allow for the Q tile plus the pipelined K/V tiles
# (H100/H200: 227 KB per SM).
ATTENTION_SMEM_BYTES = 200 * 1024


@dataclass
class AttentionPlan:
    k: object  # K as the kernel takes it: the tensor, or a TMA descriptor over its [rows, D] view
    v: object
    qk_scale: float  # 1/sqrt(D) times log2(e): the kernels' softmax uses exp2
    meta: dict  # the launch's shared constexprs and options: BLOCK_D, EVEN_D, USE_TMA, num_warps, num_stages


def attention_plan(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_m: int, block_n: int, config: dict) -> AttentionPlan:
    """How an attention kernel over [..., D] tensors launches with a [block_m, D] Q tile and
    [block_n, D] K/V tiles: num_stages capped so the Q tile and the pipelined K/V tile pairs fit
    ATTENTION_SMEM_BYTES; K and V as tensor descriptors (TMA) where config["USE_TMA"] asks and
    they allow it (contiguous, 16-byte aligned rows and base)."""
    head_dim = q.shape[-1]
    block_d = max(16, pow2_at_least(head_dim))
    tile_bytes = q.element_size() * block_d
    stages = pipeline_stages(config["num_stages"], 2 * block_n * tile_bytes, ATTENTION_SMEM_BYTES - block_m * tile_bytes)
    use_tma = bool(config["USE_TMA"]) and tma_ok(k) and tma_ok(v)
    if use_tma:
        from triton.tools.tensor_descriptor import TensorDescriptor

        rows = k.numel() // head_dim
        k, v = (TensorDescriptor(t, [rows, head_dim], [head_dim, 1], [block_n, block_d]) for t in (k, v))
    meta = dict(BLOCK_D=block_d, EVEN_D=head_dim == block_d, USE_TMA=use_tma, num_warps=config["num_warps"], num_stages=stages)
    return AttentionPlan(k, v, 1.0 / math.sqrt(head_dim) * 1.4426950408889634, meta)


def cooperative_grid(m: int, n_chunks: int, device: torch.device) -> tuple[int, int] | None:
    """(row groups, iterations) for a persistent grid whose n_chunks programs per row wait for each
    other, or None where that grid could deadlock.

    The grid is groups * n_chunks <= SM count programs, so every program is resident at once on an
    idle GPU (one small block per SM always fits) and a spin-wait on a row's peers always ends.
    Groups are balanced so the last iteration is not mostly empty. Under the CPU interpreter
    programs run one after another, so waiting is only allowed when there is nobody to wait for
    (n_chunks == 1).
    """
    interpreted = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
    if n_chunks > 1 and (device.type != "cuda" or interpreted):
        return None
    sms = sm_count(device)
    if n_chunks > sms:
        return None
    groups = min(m, sms // n_chunks)
    iters = -(-m // groups)
    return -(-m // iters), iters


def cooperative_plan(m: int, n: int, chunk_n: int, device: torch.device) -> tuple[int, int, int, int] | None:
    """(chunk, n_chunks, row groups, iterations) for a cooperative kernel over m rows of n, or None
    where it must not run (see cooperative_grid)."""
    chunk = min(chunk_n, pow2_at_least(n))
    n_chunks = -(-n // chunk)
    grid = cooperative_grid(m, n_chunks, device)
    return None if grid is None else (chunk, n_chunks, *grid)


def row_plan(m: int, n: int, config: dict) -> tuple[int, int, int] | None:
    """(rows per program, padded row length, warps) for a kernel whose program owns a [rows, padded
    row] tile of short rows, or None when a padded row is longer than config["single_block_max_n"]."""
    block_n = pow2_at_least(n)
    if block_n > config["single_block_max_n"]:
        return None
    block_m, warps = row_tile(m, block_n, config)
    return block_m, block_n, warps


def row_tile(m: int, block_n: int, config: dict) -> tuple[int, int]:
    """(rows per program, warps) for a kernel whose program owns a [rows, block_n] tile of short
    rows: about config["tile_elems"] elements a program (so N = 256 still moves enough bytes), and
    config["elems_per_thread"] elements a thread, at most config["max_warps"] warps."""
    block_m = min(max(1, config["tile_elems"] // block_n), pow2_at_least(m))
    tile = block_m * block_n
    per_warp = 32 * config["elems_per_thread"]
    warps = min(config["max_warps"], pow2_at_least(tile // per_warp))
    return block_m, warps


def split_launch(m: int, n: int, config: dict, stage_bytes_per_elem: int, device: torch.device) -> tuple[int, int, int]:
    """(tile width, pipeline stages, programs) for a kernel that loops over a long row in tiles of
    config["split_block_n"]: one program a row, or config["split_programs_per_sm"] per SM taking
    rows in turn; `stage_bytes_per_elem` is what one column of a pipeline stage holds in shared memory."""
    block = min(config["split_block_n"], pow2_at_least(n))
    stages = pipeline_stages(config["num_stages"], block * stage_bytes_per_elem)
    per_sm = config["split_programs_per_sm"]
    return block, stages, m if per_sm == 0 else min(m, per_sm * sm_count(device))


def chunk_launch(m: int, n: int, config: dict, device: torch.device) -> tuple[int, int, int, torch.Tensor]:
    """(columns a chunk program owns, its tile width, chunks a row, the rows' zeroed arrival
    counters) for a kernel whose programs each reduce config["chunk_n"] columns of one row."""
    chunk = min(config["chunk_n"], pow2_at_least(n))
    block = min(config["split_block_n"], chunk)
    return chunk, block, -(-n // chunk), torch.zeros(m, dtype=torch.int32, device=device)
