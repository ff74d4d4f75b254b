"""Flash-attention forward for Hopper (sm_90) written in Gluon (Triton 3.6's explicit-layout dialect),
shared by flash_attention.py and int8_mqa_prefill.py (its bf16 multi-query kernel after the prepass).

Why Gluon: in Triton 3.6 the `tl.dot` loop waits for every wgmma right after issuing it
(`warp_group_dot_wait pendings=0`), so within a program the softmax never runs while the tensor
cores work, and `tl.range(..., warp_specialize=True)` does not compile for sm_90. Gluon exposes the
asynchronous wgmma (`warpgroup_mma(..., is_async=True)` / `warpgroup_mma_wait(n)`), TMA copies and
mbarriers, so the loop is software-pipelined by hand (FlashAttention-3's intra-warpgroup overlap):

    iteration j:  issue S_j = Q K_j^T            (tensor cores)
                  O *= alpha_{j-1}               (O is not in flight here)
                  issue O += P_{j-1} V_{j-1}     (tensor cores, queued behind S_j)
                  wait until S_j is done (1 group left in flight)
                  softmax of S_j -> P_j, alpha_j       <- overlaps P_{j-1} V_{j-1}
                  wait for P_{j-1} V_{j-1}; P_j to bf16; refill the freed K/V stages by TMA

so the exponentials of one tile run while the previous tile's P V product is on the tensor cores.
ptxas hoists a plain `wgmma.wait_group` to the top of its basic block, above the softmax it should
overlap (seen in the sm_90a SASS: DEPBAR before the MUFU.EX2s); _wait_after puts the wait behind a
branch on the row sums, which keeps the exponentials first.
K/V tiles come in by TMA into STAGES-deep ring buffers (one mbarrier per buffer); a stage is refilled
only after every warp has passed the wait for the wgmma that read it (the compiler's thread barrier
before each TMA write into a buffer that a wgmma read).
With num_warps = 8 the two warpgroups each own half of the BLOCK_M rows and share the K/V tiles.

Not runnable under the Triton interpreter (Gluon has no interpreter): the callers use it only on a
CUDA device of compute capability 9.x and keep their tl kernels for everything else.

This file: the one-program-a-block kernel (_flash_fwd_hopper), hopper_config and the launcher (attention) of
both kernels. The warp-specialised persistent kernel (HOPPER_WS) is in _flash_hopper_ws.py, the softmax pieces
both use in _flash_hopper_softmax.py.
"""

import os

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from _flash_hopper_softmax import scores_to_p as _scores_to_p
from _flash_hopper_softmax import store_normalised as _store_normalised
from _flash_hopper_ws import _flash_fwd_hopper_ws
from _hopper_gluon import tma_load as _tma_load
from _hopper_gluon import wgmma_wait_behind as _wait_after


def usable(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """True where the Gluon kernel can run: a Hopper GPU (not the interpreter), 16-bit contiguous
    tensors, head dim 64 or 128 (TMA rows of 128 or 256 bytes), 16-byte aligned bases."""
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return False
    if not (q.is_cuda and torch.cuda.get_device_capability(q.device)[0] == 9):
        return False
    if q.dtype not in (torch.bfloat16, torch.float16) or k.dtype != q.dtype or v.dtype != q.dtype:
        return False
    if q.shape[-1] not in (64, 128) or k.shape[-1] != q.shape[-1] or v.shape[-1] != q.shape[-1]:
        return False
    return all(t.is_contiguous() and t.data_ptr() % 16 == 0 for t in (q, k, v))


@gluon.jit
def _flash_fwd_hopper(
    q_desc,
    k_desc,
    v_desc,
    O,
    seq_len,
    kv_group,
    qk_scale,
    CAUSAL: gl.constexpr,
    BLOCK_M: gl.constexpr,
    BLOCK_N: gl.constexpr,
    HEAD_D: gl.constexpr,
    STAGES: gl.constexpr,
    Q_IN_REGS: gl.constexpr,
    num_warps: gl.constexpr,
):
    """One program: BLOCK_M query rows of one query head (rows pid_bh * S + m0 ... of the [B*H*S, D]
    Q view) against its KV head's rows (pid_bh // kv_group) * S ... of the K, V views."""
    dtype: gl.constexpr = q_desc.dtype
    # Accumulator layouts of the two products: rows over warps, wgmma n = the tile width.
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BLOCK_N, 16]
    )
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, HEAD_D, 16]
    )
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)  # P from registers
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

    if CAUSAL:
        pid_m = gl.num_programs(0) - 1 - gl.program_id(0)  # heaviest query blocks first
    else:
        pid_m = gl.program_id(0)
    pid_bh = gl.program_id(1)
    m0 = pid_m * BLOCK_M
    q_row0 = pid_bh * seq_len + m0
    kv_row0 = (pid_bh // kv_group) * seq_len
    if CAUSAL:
        hi = gl.minimum(m0 + BLOCK_M, seq_len)
        n_full = m0 // BLOCK_N  # key tiles wholly left of the diagonal: no mask
    else:
        hi = seq_len
        n_full = seq_len // BLOCK_N
    n_tiles = gl.cdiv(hi, BLOCK_N)

    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_D], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_D], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_D], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_bars.index(i), count=1)
        mbarrier.init(v_bars.index(i), count=1)

    # Q, then the first STAGES K/V tiles. Rows past this head (a ragged block) read the next head's
    # rows or TMA's zero fill: their scores are masked, their outputs not stored.
    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    _tma_load(q_desc, [q_row0, 0], q_bar, q_smem)
    for i in gl.static_range(STAGES):
        live = i < n_tiles
        mbarrier.expect(k_bars.index(i), k_desc.block_type.nbytes, pred=live)
        _tma_load(k_desc, [kv_row0 + i * BLOCK_N, 0], k_bars.index(i), k_smem.index(i), pred=live)
        mbarrier.expect(v_bars.index(i), v_desc.block_type.nbytes, pred=live)
        _tma_load(v_desc, [kv_row0 + i * BLOCK_N, 0], v_bars.index(i), v_smem.index(i), pred=live)

    offs_m = m0 + gl.arange(0, BLOCK_M, layout=row_s)
    offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, layout=row_s)
    l_i = gl.full([BLOCK_M], 0.0, gl.float32, layout=row_s)
    s_zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_layout)
    o = gl.zeros([BLOCK_M, HEAD_D], gl.float32, layout=o_layout)

    # Tile 0, peeled: its P V product is issued in the first loop step.
    mbarrier.wait(q_bar, 0)
    if Q_IN_REGS:  # Q K^T with Q as wgmma's register operand: only K is read from shared memory each step
        q_op = q_smem.load(gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2))
    else:
        q_op = q_smem
    mbarrier.wait(k_bars.index(0), 0)
    s = warpgroup_mma(q_op, k_smem.index(0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    s = warpgroup_mma_wait(0, deps=[s])
    p, alpha, m_i, l_i = _scores_to_p(s, m_i, l_i, offs_m, offs_n, seq_len, qk_scale, n_full <= 0, CAUSAL, False)
    p_op = gl.convert_layout(p.to(dtype), p_layout)
    live = STAGES < n_tiles
    mbarrier.expect(k_bars.index(0), k_desc.block_type.nbytes, pred=live)
    _tma_load(k_desc, [kv_row0 + STAGES * BLOCK_N, 0], k_bars.index(0), k_smem.index(0), pred=live)

    for j in range(1, n_tiles):
        stage = j % STAGES
        prev = (j - 1) % STAGES
        mbarrier.wait(k_bars.index(stage), (j // STAGES) & 1)
        s = warpgroup_mma(q_op, k_smem.index(stage).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        # O to the running max of tile j-1 before P_{j-1} V_{j-1} adds to it (O is not in flight here).
        o = o * gl.convert_layout(alpha, row_o)[:, None]
        mbarrier.wait(v_bars.index(prev), ((j - 1) // STAGES) & 1)
        o = warpgroup_mma(p_op, v_smem.index(prev), o, is_async=True)
        s = warpgroup_mma_wait(1, deps=[s])  # S_j done, P_{j-1} V_{j-1} still in flight
        p, alpha, m_i, l_i = _scores_to_p(
            s, m_i, l_i, offs_m, offs_n + j * BLOCK_N, seq_len, qk_scale, j >= n_full, CAUSAL, False
        )
        l_i = _wait_after(l_i)  # the real wait, behind the exponentials (l_i sums them)
        o, p_op = warpgroup_mma_wait(0, deps=[o, p_op])  # for the compiler; p_op's registers live until here
        p_op = gl.convert_layout(p.to(dtype), p_layout)
        # K stage of tile j and V stage of tile j-1 are free once every warp has passed the waits above:
        # the compiler puts a thread barrier before each TMA write into a buffer a wgmma has read.
        # Both expects, then both copies: the compiler's barriers (one before the expects, after the waits
        # on these mbarriers; one before the copies, after the expects) are not repeated per buffer.
        live_k = j + STAGES < n_tiles
        live_v = j - 1 + STAGES < n_tiles
        mbarrier.expect(k_bars.index(stage), k_desc.block_type.nbytes, pred=live_k)
        mbarrier.expect(v_bars.index(prev), v_desc.block_type.nbytes, pred=live_v)
        k_row = kv_row0 + (j + STAGES) * BLOCK_N
        v_row = kv_row0 + (j - 1 + STAGES) * BLOCK_N
        _tma_load(k_desc, [k_row, 0], k_bars.index(stage), k_smem.index(stage), pred=live_k)
        _tma_load(v_desc, [v_row, 0], v_bars.index(prev), v_smem.index(prev), pred=live_v)

    last = (n_tiles - 1) % STAGES
    o = o * gl.convert_layout(alpha, row_o)[:, None]
    mbarrier.wait(v_bars.index(last), ((n_tiles - 1) // STAGES) & 1)
    o = warpgroup_mma(p_op, v_smem.index(last), o, is_async=True)
    o, p_op = warpgroup_mma_wait(0, deps=[o, p_op])
    mbarrier.invalidate(q_bar)
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(k_bars.index(i))
        mbarrier.invalidate(v_bars.index(i))

    _store_normalised(O, o, l_i, pid_bh * seq_len + m0, m0, seq_len)


def hopper_config(config: dict) -> dict:
    """The Gluon kernel's tiles from a kernel file's CONFIG (its HOPPER_* keys)."""
    return {
        "BLOCK_M": config["HOPPER_BLOCK_M"],
        "BLOCK_N": config["HOPPER_BLOCK_N"],
        "num_warps": config["HOPPER_WARPS"],
        "num_stages": config["HOPPER_STAGES"],
        "Q_IN_REGS": config.get("HOPPER_Q_IN_REGS", False),
        "WS": config.get("HOPPER_WS", False),
        "PERSISTENT": config.get("HOPPER_PERSISTENT", False),
        "PERSISTENT_FULL": config.get("HOPPER_PERSISTENT_FULL"),
        "PINGPONG": config.get("HOPPER_PINGPONG", False),
        "LAZY": config.get("HOPPER_LAZY", False),
    }


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, causal: bool, config: dict
) -> torch.Tensor:
    """out[b, h] = softmax(q[b, h] k[b, h // G]^T / sqrt(D)) v[b, h // G] for contiguous q, out
    [B, H, S, D] and k, v [B, H / G, S, D] (or [B, S, D] for one KV head); usable() must hold."""
    head_dim = q.shape[-1]
    seq_len = q.shape[-2]
    bh = q.numel() // (seq_len * head_dim)
    kv_group = bh // (k.numel() // (seq_len * head_dim))
    block_m, block_n, stages = config["BLOCK_M"], config["BLOCK_N"], config["num_stages"]
    gdt = gl.bfloat16 if q.dtype == torch.bfloat16 else gl.float16

    def desc(t, rows):
        flat = t.view(-1, head_dim)
        layout = gl.NVMMASharedLayout.get_default_for([rows, head_dim], gdt)
        return TensorDescriptor(flat, list(flat.shape), list(flat.stride()), [rows, head_dim], layout)

    qk_scale = 1.4426950408889634 / head_dim**0.5
    if config.get("WS", False):  # loader warp + two consumer warpgroups of 64 rows: 128-row blocks
        n_m = triton.cdiv(seq_len, 128)
        n_blocks = n_m * bh
        programs, n_units = n_blocks, n_blocks
        persistent = int(config.get("PERSISTENT", 0))  # 0 (False), 1 (True): per-block loop, 2: one flat loop
        if not causal and config.get("PERSISTENT_FULL") is not None:  # full attention's own setting
            persistent = int(config["PERSISTENT_FULL"])
        if persistent:  # at most one program an SM, each taking work units in turn
            n_units = bh * (triton.cdiv(n_m, 2) if causal else n_m)
            programs = config.get("PROGRAMS") or torch.cuda.get_device_properties(q.device).multi_processor_count
            programs = min(n_units, programs)
        if persistent == 2:  # two Q buffers (64 KB): two K/V stages fit in shared memory, not three
            stages = 2
        _flash_fwd_hopper_ws[(programs,)](
            desc(q, 128), desc(k, block_n), desc(v, block_n), out, seq_len, kv_group, qk_scale, n_m, n_units,
            CAUSAL=bool(causal), BLOCK_N=block_n, HEAD_D=head_dim, STAGES=stages, PERSISTENT=persistent,
            PINGPONG=bool(config.get("PINGPONG", False)), LAZY=bool(config.get("LAZY", False)), num_warps=4,
        )  # fmt: skip
        return out
    grid = (triton.cdiv(seq_len, block_m), bh)
    _flash_fwd_hopper[grid](
        desc(q, block_m),
        desc(k, block_n),
        desc(v, block_n),
        out,
        seq_len,
        kv_group,
        qk_scale,
        CAUSAL=bool(causal),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        HEAD_D=head_dim,
        STAGES=stages,
        Q_IN_REGS=bool(config.get("Q_IN_REGS", False)),
        num_warps=config["num_warps"],
    )
    return out
