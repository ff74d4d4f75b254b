"""
---
title: Flash attention forward (online softmax, causal block skipping)
kind: kernels
family: [flash_attention, attention]
tags: [attention, flash-attention, online-softmax, tensor-core, causal, bf16, fp16]
hardware: [any]
spec: flash_attention
---
Forward pass of softmax(Q K^T / sqrt(D)) V on [B, H, S, D] tensors, causal or not, in the
FlashAttention style: one program owns BLOCK_M query rows of one (batch, head), streams K and V
in BLOCK_N-row tiles and keeps a running row max `m`, row sum `l` and fp32 accumulator, so the
S x S score matrix never leaves registers.

Choices that matter for speed:
- The softmax scale times log2(e) goes into the exponent as one FMA, p = exp2(s * c - m), with the
  running max kept in that scaled domain: no separate pass to scale the score tile, and `exp2` is
  one MUFU instruction. The accumulator's rescale factor is exp2(m_old - m_new).
- The key loop is split in two ranges. Tiles entirely below the diagonal (causal) or entirely
  inside the sequence need no mask; only the diagonal tiles and the ragged last tile pay for the
  `where`. Tiles above the diagonal are never visited (causal block skipping: half the work).
- Causal query blocks are launched last-row-block first, so the longest programs start early and
  the tail of the grid is filled with short ones.
- P is cast to V's dtype before the second dot so both products run on the tensor cores.
- K and V tiles come in through TMA tensor descriptors over the [B*H*S, D] view (USE_TMA): no
  per-element address registers, and the loads pipeline asynchronously (num_stages buffers).
- On Hopper (IMPL "gluon", the default) the kernel is _flash_hopper.py's Gluon version instead:
  the same algorithm with the wgmma issued asynchronously by hand, so that a tile's softmax runs
  while the previous tile's P V product is on the tensor cores (Triton 3.6's tl.dot waits for
  every wgmma at once, and tl.range(warp_specialize=True) does not compile for sm_90), and warp
  specialised (HOPPER_WS: a loader warp, two consumer warpgroups of 64 rows), persistent (one program
  an SM taking equal-cost work units) with ping-pong between the consumers: on an H200 at B4 H32 S4096
  D128, kernelevolve eval 1.008x / 1.007x (full / causal) of the compiled SDPA reference, 1.12x / 1.00x
  of SDPA's cuDNN backend (bench/results/flash_attention/h200/2026-11-23_gluon_ws_kernel/README.md), against 0.86-0.88x for the tl kernel.
  HOPPER_* keys are its settings. Everywhere else (and under the interpreter) the tl kernel below runs.
- Occupancy decides on Hopper for the tl kernel. At head dim 128, BLOCK_M=128 with num_warps=4 (about 255 registers
  per thread, no spills) and num_stages=2 (96 KB of shared memory) lets two programs share an SM;
  num_warps=8 holds the same tile but only one program fits by registers, and measured slower.
  On an H200 this reaches most of SDPA's cuDNN path, causal and not (the numbers, with their
  dates and versions: bench/results/attention/h200/2026-11-21_reference_kernels/reference_kernels.md). The launcher caps
  num_stages so the K/V pipeline fits in shared memory.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl
from _launch_heuristics import attention_plan
from _online_softmax import softmax_step

import _flash_hopper

CONFIG = {
    "BLOCK_M": 128,  # query rows a program owns
    "BLOCK_N": 64,  # keys per inner step
    "num_warps": 4,  # warps a program
    "num_stages": 2,  # K/V tiles in flight (clamped to fit _launch_heuristics.ATTENTION_SMEM_BYTES)
    "USE_TMA": True,  # tensor descriptors for Q/K/V where the GPU has them
    # Rescale acc and l only when a row max grows by more than 2^8 (one branch for the whole tile). H200
    # (bench/results/attention/h200/2026-11-23_int8_mqa_flash_tuning): 3-29% slower at every config tried (the tile-wide max
    # is a cross-warp reduction each step), so off.
    "LAZY_RESCALE": False,
    # tl.range(..., warp_specialize=...) over the key loop (Triton's automatic warp specialisation). Triton
    # 3.6, sm_90: at 4 warps the NVGPUWarpSpecialization pass fails (MLIR assertion "expected non-null
    # blocks" in Dominance.cpp, then "PassManager::run failed"; H200, 2026-11-23); at 8 warps it compiles
    # but creates no partitions (the TTGIR keeps one warp group: the same kernel as without).
    "WARP_SPECIALIZE": False,
    # "gluon": on a Hopper GPU, _flash_hopper.py's kernel (async wgmma, softmax overlapping P V) with the
    # HOPPER_* settings below; elsewhere the tl kernel. "triton": always the tl kernel. H200
    # (bench/results/flash_attention/h200/2026-11-23_gluon_prefill_tuning/README.md): gluon with HOPPER_WS, BLOCK_N
    # 128, 2 stages 1.940 / 1.017 ms full / causal (call 3; tl kernel 2.189 / 1.232, SDPA 1.898 / 1.061)
    # and 1.899 / 1.065 (call 5; SDPA 1.861 / 1.060): 0.98x / 1.00-1.04x SDPA.
    "IMPL": "gluon",
    "HOPPER_BLOCK_M": 128,  # query rows a program (split over the warpgroups: 64 rows each); WS: always 128
    "HOPPER_BLOCK_N": 128,  # keys a step
    "HOPPER_WARPS": 4,  # 4 = one warpgroup, 8 = two sharing each K/V tile (not WS)
    "HOPPER_STAGES": 2,  # K/V tiles in flight (TMA ring buffers)
    "HOPPER_Q_IN_REGS": False,  # Q K^T with Q as the register operand (WS: always)
    # Warp-specialised Gluon kernel: a loader warp issues the TMA copies, two consumer warpgroups (64 rows
    # each of a 128-row block, Q in registers, 240 registers) run on their own (HOPPER_BLOCK_N, _STAGES).
    # Third call: 11% (full) and 17% (causal) faster than the best non-WS configuration.
    "HOPPER_WS": True,
    # HOPPER_WS: 0 = one program a 128-row block; 1 = one program an SM taking work units (causal: a heavy
    # and a light block of one head) in turn, a loop of blocks; 2 = the same with one loop over all of a
    # program's key tiles, the next block's first Q K^T issued with the previous block's last P V (Q a
    # shared-memory wgmma operand, two buffers). H200
    # (bench/results/flash_attention/h200/2026-11-23_gluon_ws_kernel/README.md): all correct (spec and ragged shapes); flash best with 1 +
    # PINGPONG (1.62 / 1.04 ms full / causal, 1.12x / 1.00x cuDNN; kernelevolve eval 1.008x / 1.007x), the
    # int8 prefill with 2 + PINGPONG (0.90x bf16 SDPA; eval 0.93x / 0.95x).
    "HOPPER_PERSISTENT": 1,
    # HOPPER_WS: the two consumer warpgroups take turns issuing their wgmma (FlashAttention-3's ping-pong,
    # named barriers 8 and 9): one warpgroup's softmax runs while the other's products are on the tensor cores.
    # Each turn issues its wgmma (SASS checked by tests/kernels/test_flash_hopper.py); correct on the H200.
    "HOPPER_PINGPONG": True,
    # HOPPER_WS: FlashAttention-4's lazy rescale (a row's running max kept until it grows by more than 8 in
    # log2 units; a warp whose rows all kept theirs skips O's 64 multiplies). H200
    # (bench/results/flash_attention/h200/2026-11-27_gluon_softmax_epilogue/README.md): flash 1.012 -> 1.050x / 1.036 -> 1.054x cuDNN causal / full (A/B in one process).
    "HOPPER_LAZY": True,
}

TUNABLES = {
    "BLOCK_M": [32, 64, 128],
    "BLOCK_N": [32, 64, 128],
    "num_warps": [4, 8],
    "num_stages": [1, 2, 3, 4, 5],
    "USE_TMA": [False, True],
    "LAZY_RESCALE": [False, True],
    "WARP_SPECIALIZE": [False, True],
    "IMPL": ["gluon", "triton"],
    "HOPPER_BLOCK_M": [64, 128],
    "HOPPER_BLOCK_N": [64, 128],
    "HOPPER_WARPS": [4, 8],
    "HOPPER_STAGES": [2, 3],
    "HOPPER_Q_IN_REGS": [False, True],
    "HOPPER_WS": [False, True],
    "HOPPER_PERSISTENT": [0, 1, 2],
    "HOPPER_PINGPONG": [False, True],
    "HOPPER_LAZY": [False, True],
}


@triton.jit
def _load_kv(
    ptrs,
    start_n,
    stride_n,
    cols,
    seq_len,
    d_mask,
    kv_row0,
    SEQ_MASK: tl.constexpr,
    EVEN_D: tl.constexpr,
    USE_TMA: tl.constexpr,
):
    """The K or V tile of rows start_n ... (a descriptor's rows kv_row0 + start_n ... with USE_TMA)."""
    if USE_TMA:
        return ptrs.load([kv_row0 + start_n, 0])
    elif SEQ_MASK:
        kv_mask = cols[:, None] < seq_len
        if not EVEN_D:
            kv_mask = kv_mask & d_mask[None, :]
        return tl.load(ptrs + start_n * stride_n, mask=kv_mask, other=0.0)
    elif EVEN_D:
        return tl.load(ptrs + start_n * stride_n)
    else:
        return tl.load(ptrs + start_n * stride_n, mask=d_mask[None, :], other=0.0)


@triton.jit
def _attend_key_range(
    acc,
    m_i,
    l_i,
    q,
    k_ptrs,
    v_ptrs,
    stride_kn,
    stride_vn,
    offs_m,
    offs_n,
    d_mask,
    lo,
    hi,
    seq_len,
    qk_scale,
    kv_row0,
    BLOCK_N: tl.constexpr,
    CAUSAL_MASK: tl.constexpr,
    SEQ_MASK: tl.constexpr,
    EVEN_D: tl.constexpr,
    USE_TMA: tl.constexpr,
    LAZY_RESCALE: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
):
    """Online-softmax update of (acc, m_i, l_i) with the key tiles starting at lo, lo+BLOCK_N, ... < hi.

    With USE_TMA, k_ptrs/v_ptrs are tensor descriptors over [B*H*S, D] and kv_row0 is this head's
    first row: a ragged last tile reads the next head's rows (or TMA zero fill), which the -inf
    mask on the scores turns into p = 0.
    """
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        cols = start_n + offs_n
        k = _load_kv(k_ptrs, start_n, stride_kn, cols, seq_len, d_mask, kv_row0, SEQ_MASK, EVEN_D, USE_TMA)
        s = tl.dot(q, tl.trans(k))  # raw scores; the scale is folded into the exp2 argument
        acc, m_i, l_i, p = softmax_step(
            acc, m_i, l_i, s, cols, offs_m, seq_len, qk_scale, CAUSAL_MASK, SEQ_MASK, LAZY_RESCALE
        )
        v = _load_kv(v_ptrs, start_n, stride_vn, cols, seq_len, d_mask, kv_row0, SEQ_MASK, EVEN_D, USE_TMA)
        acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, m_i, l_i


@triton.jit
def _flash_attention_fwd(
    Q,
    K,
    V,
    O,
    stride_qb,
    stride_qh,
    stride_qm,
    stride_qd,
    stride_kb,
    stride_kh,
    stride_kn,
    stride_kd,
    stride_vb,
    stride_vh,
    stride_vn,
    stride_vd,
    stride_ob,
    stride_oh,
    stride_om,
    stride_od,
    num_heads,
    seq_len,
    head_dim,
    qk_scale,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    EVEN_M: tl.constexpr,
    EVEN_N: tl.constexpr,
    EVEN_D: tl.constexpr,
    USE_TMA: tl.constexpr,
    LAZY_RESCALE: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
):
    if CAUSAL:
        # Heaviest query blocks (most keys to visit) first.
        pid_m = tl.cdiv(seq_len, BLOCK_M) - 1 - tl.program_id(0)
    else:
        pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // num_heads
    h = pid_bh % num_heads

    m0 = pid_m * BLOCK_M
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < head_dim

    q_ptrs = Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd
    if USE_TMA:
        k_ptrs = K
        v_ptrs = V
    else:
        k_ptrs = K + b * stride_kb + h * stride_kh + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd
        v_ptrs = V + b * stride_vb + h * stride_vh + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd
    kv_row0 = pid_bh * seq_len
    row_mask = offs_m < seq_len
    if EVEN_M and EVEN_D:
        q = tl.load(q_ptrs)
    else:
        q = tl.load(q_ptrs, mask=row_mask[:, None] & d_mask[None, :], other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    if CAUSAL:
        # Key tiles wholly left of this query block: every key visible, no mask.
        full_hi = (m0 // BLOCK_N) * BLOCK_N
        acc, m_i, l_i = _attend_key_range(
            acc,
            m_i,
            l_i,
            q,
            k_ptrs,
            v_ptrs,
            stride_kn,
            stride_vn,
            offs_m,
            offs_n,
            d_mask,
            0,
            full_hi,
            seq_len,
            qk_scale,
            kv_row0,
            BLOCK_N,
            False,
            False,
            EVEN_D,
            USE_TMA,
            LAZY_RESCALE,
            WARP_SPECIALIZE,
        )
        # Tiles that cross the diagonal; everything right of m0 + BLOCK_M is skipped.
        diag_hi = tl.minimum(m0 + BLOCK_M, seq_len)
        acc, m_i, l_i = _attend_key_range(
            acc,
            m_i,
            l_i,
            q,
            k_ptrs,
            v_ptrs,
            stride_kn,
            stride_vn,
            offs_m,
            offs_n,
            d_mask,
            full_hi,
            diag_hi,
            seq_len,
            qk_scale,
            kv_row0,
            BLOCK_N,
            True,
            not EVEN_N,
            EVEN_D,
            USE_TMA,
            LAZY_RESCALE,
            WARP_SPECIALIZE,
        )
    else:
        full_hi = (seq_len // BLOCK_N) * BLOCK_N
        acc, m_i, l_i = _attend_key_range(
            acc,
            m_i,
            l_i,
            q,
            k_ptrs,
            v_ptrs,
            stride_kn,
            stride_vn,
            offs_m,
            offs_n,
            d_mask,
            0,
            full_hi,
            seq_len,
            qk_scale,
            kv_row0,
            BLOCK_N,
            False,
            False,
            EVEN_D,
            USE_TMA,
            LAZY_RESCALE,
            WARP_SPECIALIZE,
        )
        if not EVEN_N:
            acc, m_i, l_i = _attend_key_range(
                acc,
                m_i,
                l_i,
                q,
                k_ptrs,
                v_ptrs,
                stride_kn,
                stride_vn,
                offs_m,
                offs_n,
                d_mask,
                full_hi,
                seq_len,
                seq_len,
                qk_scale,
                kv_row0,
                BLOCK_N,
                False,
                True,
                EVEN_D,
                USE_TMA,
                LAZY_RESCALE,
                WARP_SPECIALIZE,
            )

    out = acc / l_i[:, None]
    o_ptrs = O + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od
    if EVEN_M and EVEN_D:
        tl.store(o_ptrs, out.to(O.dtype.element_ty))
    else:
        tl.store(o_ptrs, out.to(O.dtype.element_ty), mask=row_mask[:, None] & d_mask[None, :])


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """softmax(q k^T / sqrt(D)) v for q, k, v of shape [B, H, S, D] (same S for queries and keys)."""
    if q.dim() != 4 or q.shape != k.shape or q.shape != v.shape:
        raise ValueError(
            f"flash_attention: q, k, v must share one [B, H, S, D] shape, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    batch, heads, seq_len, head_dim = q.shape
    out = torch.empty_like(q)
    if seq_len == 0 or batch * heads == 0:
        return out
    if CONFIG["IMPL"] == "gluon" and _flash_hopper.usable(q, k, v):
        return _flash_hopper.attention(q, k, v, out, causal, _flash_hopper.hopper_config(CONFIG))
    seq_pow2 = max(16, triton.next_power_of_2(seq_len))
    block_m = min(CONFIG["BLOCK_M"], seq_pow2)
    block_n = min(CONFIG["BLOCK_N"], seq_pow2)
    # Stages capped to fit shared memory; K/V through TMA where asked and possible.
    plan = attention_plan(q, k, v, block_m, block_n, CONFIG)
    grid = (triton.cdiv(seq_len, block_m), batch * heads)
    _flash_attention_fwd[grid](
        q,
        plan.k,
        plan.v,
        out,
        *q.stride(),
        *k.stride(),
        *v.stride(),
        *out.stride(),
        heads,
        seq_len,
        head_dim,
        plan.qk_scale,
        CAUSAL=bool(causal),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        EVEN_M=seq_len % block_m == 0,
        EVEN_N=seq_len % block_n == 0,
        LAZY_RESCALE=bool(CONFIG["LAZY_RESCALE"]),
        WARP_SPECIALIZE=bool(CONFIG["WARP_SPECIALIZE"]),
        **plan.meta,
    )
    return out


class ModelNew(nn.Module):
    def __init__(self, causal: bool = False):
        super().__init__()
        self.causal = bool(causal)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return flash_attention(q, k, v, self.causal)
