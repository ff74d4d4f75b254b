"""
---
title: int8 multi-query attention prefill (flash attention with K/V dequantised inside the KV loop)
kind: kernels
family: [int8_mqa_prefill, attention]
tags: [attention, prefill, mqa, int8, kv-cache, quantization, online-softmax, causal, tensor-core]
hardware: [any]
spec: int8_mqa_prefill
---
Prefill attention for multi-query attention with int8 K/V: Q [B, HQ, S, D] bf16, one KV head
shared by all HQ query heads as int8 codes [B, S, D] with per-token scales [B, S], causal or not.

The structure is flash attention's forward (one program per BLOCK_M query rows of one (batch, query
head), online softmax over BLOCK_N-row key tiles, causal tiles above the diagonal never visited and
only the diagonal tiles masked). Dequantisation happens inside the KV loop and never touches the
[BLOCK_N, D] tiles with a multiply: the int8 codes become bf16 in registers (exact), the K scale
multiplies the [BLOCK_M, BLOCK_N] score tile (s = (q . codes) * k_scale[n], folded with the softmax
scale into the exp2 argument) and the V scale multiplies P before the P V product. Reading int8
halves the K/V bytes against bf16; at prefill lengths the kernel is compute-bound, so the gain is
mostly the smaller shared-memory footprint of a K/V stage (more stages or larger tiles fit).

Query heads are the fastest-varying grid axis, so the programs that share one batch element's K/V
run close together and read it from L2. HEADS_PER_TILE > 1 goes further: the tile's rows are
several query heads x fewer positions, so each K/V tile loaded and converted serves all of them
(the multi-query structure used inside the program, as decode does with all 16 heads).

DEQUANT = "prepass" (the default) does the conversion once instead: a small kernel writes K = codes
* scale and V likewise in bf16 (rounded once, as the reference does), then a bf16 multi-query flash
kernel (TMA K/V tiles over the [B * S, D] buffers, the heads of a batch element side by side so
they share its K/V in L2) computes the attention. On Hopper the in-loop conversion puts each
converted tile back through shared memory for wgmma and the tensor cores wait for it; the prepass
costs 2% of the time and was 1.7x faster overall (bench/results/attention/h200/2026-11-23_int8_mqa_flash_tuning).
On a Hopper GPU with IMPL "gluon" the attention after the prepass is _flash_hopper.py's Gluon kernel
(asynchronous wgmma, each tile's softmax overlapping the previous tile's P V product; the KV head
of query head h is h // 16), with the HOPPER_* tiles; elsewhere the tl kernel below.
Packing the 16 query heads of a KV head into one tile's rows (HEADS_PER_TILE) does not reduce the
K/V traffic of the prepass kernels: a program of BLOCK_M rows reads every K/V tile once whichever
heads its rows belong to, and the heads of a batch element run side by side, so K/V come from L2.
"""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl
from _launch_heuristics import attention_plan
from _int8_kv import int8_scores, int8_update, load_scales
from _online_softmax import softmax_step

import _flash_hopper

CONFIG = {  # H200 (bench/results/attention/h200/2026-11-23_int8_mqa_flash_tuning): prepass 0.385 ms causal, 0.588 ms full at B32 S1024 (in_loop 0.656 / 1.037)
    # Where K/V become bf16: "in_loop" = each K/V tile converted in registers inside the attention
    # loop (the tensor cores wait for it: on Hopper the converted tile goes back through shared memory
    # for wgmma); "prepass" = one small kernel writes K = codes * scale and V likewise in bf16 (the
    # values the reference computes), then a bf16 multi-query flash kernel reads them (K/V tiles by TMA).
    "DEQUANT": "prepass",
    "BLOCK_M": 128,  # query rows a program owns (in_loop: HEADS_PER_TILE heads x BLOCK_M / HEADS_PER_TILE positions)
    "BLOCK_N": 64,  # keys per inner step (in_loop measured best at 128 with 8 warps)
    "num_warps": 4,  # prepass: 4 warps and 2 stages let two programs share an SM (as flash_attention)
    "num_stages": 2,  # K/V tiles in flight
    "HEADS_PER_TILE": 2,  # in_loop: query heads sharing one tile's rows (and each K/V tile); halved until it divides HQ
    "USE_TMA": True,  # prepass: K/V tiles through tensor descriptors where the GPU has them
    "LAZY_RESCALE": False,  # prepass: rescale acc and l only when a row max grows by more than 2^8 (flash_attention.py)
    # prepass on a Hopper GPU: "gluon" = _flash_hopper.py's kernel (async wgmma, softmax overlapping P V)
    # with the HOPPER_* tiles; "triton" = the tl kernel _mqa_bf16_attention (also used everywhere else).
    # H200 (bench/results/flash_attention/h200/2026-11-23_gluon_prefill_tuning/README.md): tl kernel 0.380 /
    # 0.542-0.572 ms causal / full, one-block Gluon kernels 0.391-0.405 / 0.589-0.63 (blocks of only 1-8 key
    # tiles at S = 1024). Then (bench/results/flash_attention/h200/2026-11-23_gluon_ws_kernel/README.md): warp-specialised, persistent across
    # blocks (HOPPER_PERSISTENT 2) with ping-pong 0.338 / 0.518 ms (tl 0.380 / 0.562 in the same run).
    "IMPL": "gluon",
    "HOPPER_BLOCK_M": 128,
    "HOPPER_BLOCK_N": 128,
    "HOPPER_WARPS": 4,
    "HOPPER_STAGES": 2,
    "HOPPER_Q_IN_REGS": False,  # Q K^T with Q as the register operand (Q read from shared memory once)
    # Warp-specialised Gluon kernel: a loader warp issues the TMA copies, two consumer warpgroups (64 rows
    # each of a 128-row block, Q in registers, 240 registers) run on their own (HOPPER_BLOCK_N, _STAGES).
    "HOPPER_WS": True,
    # HOPPER_WS: 0 = one program a 128-row block; 1 = one program an SM taking work units (causal: a heavy
    # and a light block of one head) in turn, a loop of blocks; 2 = the same with one loop over all of a
    # program's key tiles, the next block's first Q K^T issued with the previous block's last P V (Q a
    # shared-memory wgmma operand, two buffers). H200
    # (bench/results/flash_attention/h200/2026-11-23_gluon_ws_kernel/README.md): all correct (spec and ragged shapes); flash best with 1 +
    # PINGPONG (1.62 / 1.04 ms full / causal, 1.12x / 1.00x cuDNN; kernelevolve eval 1.008x / 1.007x), the
    # int8 prefill with 2 + PINGPONG (0.90x bf16 SDPA; eval 0.93x / 0.95x).
    "HOPPER_PERSISTENT": 2,
    # HOPPER_PERSISTENT for full attention (None: the same). H200, A/B in one process
    # (8 rounds, with HOPPER_LAZY): full attention 1 (Q in registers, a loop a block) 0.967x cuDNN against
    # 2's 0.953x; causal 2 0.967x against 1's 0.944x (8 key tiles a block at most: the cross-block pipeline
    # pays where blocks are short).
    "HOPPER_PERSISTENT_FULL": 1,
    # HOPPER_WS: the two consumer warpgroups take turns issuing their wgmma (FlashAttention-3's ping-pong,
    # named barriers 8 and 9): one warpgroup's softmax runs while the other's products are on the tensor cores.
    # Each turn issues its wgmma (SASS checked by tests/kernels/test_flash_hopper.py); correct on the H200.
    "HOPPER_PINGPONG": True,
    # HOPPER_WS: FlashAttention-4's lazy rescale (a row's running max kept until it grows by more than 8 in
    # log2 units; a warp whose rows all kept theirs skips O's 64 multiplies). H200
    # (bench/results/flash_attention/h200/2026-11-27_gluon_softmax_epilogue/README.md, as is the A/B above): prefill kernel 0.933 -> 0.961x / 0.949 -> 0.956x cuDNN causal / full (A/B in one process).
    "HOPPER_LAZY": True,
}

TUNABLES = {
    "DEQUANT": ["in_loop", "prepass"],
    "BLOCK_M": [64, 128],
    "BLOCK_N": [32, 64, 128],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4],
    "HEADS_PER_TILE": [1, 2, 4],
    "USE_TMA": [False, True],
    "LAZY_RESCALE": [False, True],
    "IMPL": ["gluon", "triton"],
    "HOPPER_BLOCK_M": [64, 128],
    "HOPPER_BLOCK_N": [64, 128],
    "HOPPER_WARPS": [4, 8],
    "HOPPER_STAGES": [2, 3],
    "HOPPER_Q_IN_REGS": [False, True],
    "HOPPER_WS": [False, True],
    "HOPPER_PERSISTENT": [0, 1, 2],
    "HOPPER_PERSISTENT_FULL": [None, 0, 1, 2],
    "HOPPER_PINGPONG": [False, True],
    "HOPPER_LAZY": [False, True],
}


@triton.jit
def _attend_keys(
    acc,
    m_i,
    l_i,
    q,
    k_base,
    v_base,
    ks_base,
    vs_base,
    stride_kn,
    stride_kd,
    stride_ksn,
    stride_vn,
    stride_vd,
    stride_vsn,
    offs_m,
    offs_n,
    offs_d,
    d_live,
    lo,
    hi,
    seq_len,
    qk_scale,
    BLOCK_N: tl.constexpr,
    CAUSAL_MASK: tl.constexpr,
    SEQ_MASK: tl.constexpr,
):
    """Online-softmax update over key tiles lo, lo + BLOCK_N, ... < hi, dequantising K and V."""
    for start in tl.range(lo, hi, BLOCK_N):
        cols = start + offs_n
        c_live = cols < seq_len
        kv_mask = c_live[:, None] & d_live[None, :]
        k_sc = load_scales(ks_base, cols, stride_ksn, c_live)  # wide enough here for the pipeliner
        s = int8_scores(q, k_base, cols, offs_d, kv_mask, stride_kn, stride_kd, k_sc, qk_scale)
        if CAUSAL_MASK:
            s = tl.where(offs_m[:, None] >= cols[None, :], s, float("-inf"))
        if SEQ_MASK:
            s = tl.where(c_live[None, :], s, float("-inf"))
        v_sc = load_scales(vs_base, cols, stride_vsn, c_live)
        acc, m_i, l_i = int8_update(acc, m_i, l_i, s, q, v_base, cols, offs_d, kv_mask, stride_vn, stride_vd, v_sc)
    return acc, m_i, l_i


@triton.jit
def _int8_mqa_prefill(
    Q,
    stride_qb,
    stride_qh,
    stride_qm,
    stride_qd,
    KC,
    stride_kb,
    stride_kn,
    stride_kd,
    KS,
    stride_ksb,
    stride_ksn,
    VC,
    stride_vb,
    stride_vn,
    stride_vd,
    VS,
    stride_vsb,
    stride_vsn,
    O,
    stride_ob,
    stride_oh,
    stride_om,
    stride_od,
    heads,
    seq_len,
    head_dim,
    qk_scale,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    HEADS_PER_TILE: tl.constexpr,
):
    # The tile's BLOCK_M rows are HEADS_PER_TILE query heads x POS positions: the heads share the
    # K/V tiles, so each one loaded and converted serves them all.
    POS: tl.constexpr = BLOCK_M // HEADS_PER_TILE
    pid_g = tl.program_id(0)  # head groups of one batch element side by side: they share its K/V in L2
    if CAUSAL:
        pid_m = tl.num_programs(1) - 1 - tl.program_id(1)  # longest rows first
    else:
        pid_m = tl.program_id(1)
    groups = heads // HEADS_PER_TILE
    b = pid_g // groups
    rows = tl.arange(0, BLOCK_M)
    h = (pid_g % groups) * HEADS_PER_TILE + rows // POS
    m0 = pid_m * POS
    offs_m = m0 + rows % POS  # each row's position in the sequence
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_live = offs_d < head_dim
    row_mask = (offs_m < seq_len)[:, None] & d_live[None, :]
    q_rows = h * stride_qh + offs_m * stride_qm
    q = tl.load(Q + b * stride_qb + q_rows[:, None] + offs_d[None, :] * stride_qd, mask=row_mask, other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    k_base = KC + b * stride_kb
    v_base = VC + b * stride_vb
    ks_base = KS + b * stride_ksb
    vs_base = VS + b * stride_vsb
    if CAUSAL:
        full_hi = (m0 // BLOCK_N) * BLOCK_N  # tiles wholly left of the block: no mask
        diag_hi = tl.minimum(m0 + POS, seq_len)
    else:
        full_hi = (seq_len // BLOCK_N) * BLOCK_N
        diag_hi = seq_len
    acc, m_i, l_i = _attend_keys(
        acc,
        m_i,
        l_i,
        q,
        k_base,
        v_base,
        ks_base,
        vs_base,
        stride_kn,
        stride_kd,
        stride_ksn,
        stride_vn,
        stride_vd,
        stride_vsn,
        offs_m,
        offs_n,
        offs_d,
        d_live,
        0,
        full_hi,
        seq_len,
        qk_scale,
        BLOCK_N,
        False,
        False,
    )
    acc, m_i, l_i = _attend_keys(
        acc,
        m_i,
        l_i,
        q,
        k_base,
        v_base,
        ks_base,
        vs_base,
        stride_kn,
        stride_kd,
        stride_ksn,
        stride_vn,
        stride_vd,
        stride_vsn,
        offs_m,
        offs_n,
        offs_d,
        d_live,
        full_hi,
        diag_hi,
        seq_len,
        qk_scale,
        BLOCK_N,
        CAUSAL,
        True,
    )
    out = acc / l_i[:, None]
    o_rows = h * stride_oh + offs_m * stride_om
    tl.store(
        O + b * stride_ob + o_rows[:, None] + offs_d[None, :] * stride_od, out.to(O.dtype.element_ty), mask=row_mask
    )


@triton.jit
def _dequant_kv(
    KC,
    stride_kb,
    stride_kn,
    stride_kd,
    KS,
    stride_ksb,
    stride_ksn,
    VC,
    stride_vb,
    stride_vn,
    stride_vd,
    VS,
    stride_vsb,
    stride_vsn,
    KO,
    VO,
    seq_len,
    head_dim,
    n_rows,
    BLOCK_R: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    """KO, VO [B * S, D] (contiguous, q's dtype) = codes * scale, rounded once as the reference does."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_d = tl.arange(0, BLOCK_D)
    live = rows < n_rows
    mask = live[:, None] & (offs_d < head_dim)[None, :]
    b = rows // seq_len
    n = rows % seq_len
    out = rows[:, None] * head_dim + offs_d[None, :]
    kc = tl.load(KC + (b * stride_kb + n * stride_kn)[:, None] + offs_d[None, :] * stride_kd, mask=mask, other=0)
    ks = tl.load(KS + b * stride_ksb + n * stride_ksn, mask=live, other=0.0).to(tl.float32)
    tl.store(KO + out, (kc.to(tl.float32) * ks[:, None]).to(KO.dtype.element_ty), mask=mask)
    vc = tl.load(VC + (b * stride_vb + n * stride_vn)[:, None] + offs_d[None, :] * stride_vd, mask=mask, other=0)
    vs = tl.load(VS + b * stride_vsb + n * stride_vsn, mask=live, other=0.0).to(tl.float32)
    tl.store(VO + out, (vc.to(tl.float32) * vs[:, None]).to(VO.dtype.element_ty), mask=mask)


@triton.jit
def _attend_bf16(
    acc,
    m_i,
    l_i,
    q,
    K,
    V,
    kv_row0,
    head_dim,
    offs_m,
    offs_n,
    offs_d,
    lo,
    hi,
    seq_len,
    qk_scale,
    BLOCK_N: tl.constexpr,
    CAUSAL_MASK: tl.constexpr,
    SEQ_MASK: tl.constexpr,
    USE_TMA: tl.constexpr,
    LAZY_RESCALE: tl.constexpr,
):
    """Online-softmax update over the bf16 key tiles lo, lo + BLOCK_N, ... < hi of rows kv_row0 + n
    of K, V [B * S, D] (descriptors with USE_TMA; a ragged tile's extra rows are masked by the scores)."""
    for start in tl.range(lo, hi, BLOCK_N):
        cols = start + offs_n
        if USE_TMA:
            k = K.load([kv_row0 + start, 0])
        else:
            kv_mask = (cols < seq_len)[:, None] & (offs_d < head_dim)[None, :]
            k = tl.load(K + (kv_row0 + cols)[:, None] * head_dim + offs_d[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k))
        acc, m_i, l_i, p = softmax_step(
            acc, m_i, l_i, s, cols, offs_m, seq_len, qk_scale, CAUSAL_MASK, SEQ_MASK, LAZY_RESCALE
        )
        if USE_TMA:
            v = V.load([kv_row0 + start, 0])
        else:
            v = tl.load(V + (kv_row0 + cols)[:, None] * head_dim + offs_d[None, :], mask=kv_mask, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, m_i, l_i


@triton.jit
def _mqa_bf16_attention(
    Q,
    stride_qb,
    stride_qh,
    stride_qm,
    stride_qd,
    K,
    V,
    O,
    stride_ob,
    stride_oh,
    stride_om,
    stride_od,
    heads,
    seq_len,
    head_dim,
    qk_scale,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    EVEN_M: tl.constexpr,
    EVEN_N: tl.constexpr,
    USE_TMA: tl.constexpr,
    LAZY_RESCALE: tl.constexpr,
):
    """Flash-attention forward of one (batch, query head) x BLOCK_M rows over the batch element's one
    bf16 KV head (rows b * S ... of K, V): the heads of a batch element run side by side and share it in L2."""
    if CAUSAL:
        pid_m = tl.num_programs(0) - 1 - tl.program_id(0)  # longest rows first
    else:
        pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // heads
    h = pid_bh % heads
    m0 = pid_m * BLOCK_M
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    row_mask = (offs_m < seq_len)[:, None] & (offs_d < head_dim)[None, :]
    q_ptrs = Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd
    if EVEN_M:
        q = tl.load(q_ptrs)
    else:
        q = tl.load(q_ptrs, mask=row_mask, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    kv_row0 = b * seq_len
    if CAUSAL:
        full_hi = (m0 // BLOCK_N) * BLOCK_N  # tiles wholly left of the block: no mask
        acc, m_i, l_i = _attend_bf16(
            acc,
            m_i,
            l_i,
            q,
            K,
            V,
            kv_row0,
            head_dim,
            offs_m,
            offs_n,
            offs_d,
            0,
            full_hi,
            seq_len,
            qk_scale,
            BLOCK_N,
            False,
            False,
            USE_TMA,
            LAZY_RESCALE,
        )
        acc, m_i, l_i = _attend_bf16(
            acc,
            m_i,
            l_i,
            q,
            K,
            V,
            kv_row0,
            head_dim,
            offs_m,
            offs_n,
            offs_d,
            full_hi,
            tl.minimum(m0 + BLOCK_M, seq_len),
            seq_len,
            qk_scale,
            BLOCK_N,
            True,
            not EVEN_N,
            USE_TMA,
            LAZY_RESCALE,
        )
    else:
        full_hi = (seq_len // BLOCK_N) * BLOCK_N
        acc, m_i, l_i = _attend_bf16(
            acc,
            m_i,
            l_i,
            q,
            K,
            V,
            kv_row0,
            head_dim,
            offs_m,
            offs_n,
            offs_d,
            0,
            full_hi,
            seq_len,
            qk_scale,
            BLOCK_N,
            False,
            False,
            USE_TMA,
            LAZY_RESCALE,
        )
        if not EVEN_N:
            acc, m_i, l_i = _attend_bf16(
                acc,
                m_i,
                l_i,
                q,
                K,
                V,
                kv_row0,
                head_dim,
                offs_m,
                offs_n,
                offs_d,
                full_hi,
                seq_len,
                seq_len,
                qk_scale,
                BLOCK_N,
                False,
                True,
                USE_TMA,
                LAZY_RESCALE,
            )
    out = acc / l_i[:, None]
    o_ptrs = O + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od
    if EVEN_M:
        tl.store(o_ptrs, out.to(O.dtype.element_ty))
    else:
        tl.store(o_ptrs, out.to(O.dtype.element_ty), mask=row_mask)


def check_inputs(name, q, k_codes, k_scale, v_codes, v_scale):
    if q.dim() != 4:
        raise ValueError(f"{name}: q must be [BATCH, Q_HEADS, SEQ_LEN, HEAD_DIM], got {tuple(q.shape)}")
    batch, _, seq_len, head_dim = q.shape
    for what, codes, scale in (("k", k_codes, k_scale), ("v", v_codes, v_scale)):
        if codes.dtype != torch.int8 or tuple(codes.shape) != (batch, seq_len, head_dim):
            raise ValueError(
                f"{name}: {what}_codes must be int8 [BATCH, SEQ_LEN, HEAD_DIM] = {(batch, seq_len, head_dim)}, got {tuple(codes.shape)} {codes.dtype}"
            )
        if tuple(scale.shape) != (batch, seq_len):
            raise ValueError(
                f"{name}: {what}_scale must be [BATCH, SEQ_LEN] = {(batch, seq_len)}, got {tuple(scale.shape)}"
            )


def int8_mqa_prefill(q, k_codes, k_scale, v_codes, v_scale, causal: bool):
    """softmax(q K^T / sqrt(D) [causal]) V with K = k_codes * k_scale[..., None] (likewise V), one KV head for all query heads."""
    check_inputs("int8_mqa_prefill", q, k_codes, k_scale, v_codes, v_scale)
    batch, heads, seq_len, head_dim = q.shape
    out = torch.empty_like(q)
    if out.numel() == 0:
        return out
    if CONFIG["DEQUANT"] == "prepass":
        return _prefill_prepass(q, k_codes, k_scale, v_codes, v_scale, causal, out)
    per_tile = CONFIG["HEADS_PER_TILE"]
    while heads % per_tile:
        per_tile //= 2
    seq_pow2 = max(16, triton.next_power_of_2(seq_len))
    block_m = max(16, min(CONFIG["BLOCK_M"], per_tile * seq_pow2))  # rows: heads x positions
    block_n = min(CONFIG["BLOCK_N"], seq_pow2)
    grid = (batch * heads // per_tile, triton.cdiv(seq_len, block_m // per_tile))
    _int8_mqa_prefill[grid](
        q,
        *q.stride(),
        k_codes,
        *k_codes.stride(),
        k_scale,
        *k_scale.stride(),
        v_codes,
        *v_codes.stride(),
        v_scale,
        *v_scale.stride(),
        out,
        *out.stride(),
        heads,
        seq_len,
        head_dim,
        1.0 / math.sqrt(head_dim) * 1.4426950408889634,
        CAUSAL=bool(causal),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_D=max(16, triton.next_power_of_2(head_dim)),
        HEADS_PER_TILE=per_tile,
        num_warps=CONFIG["num_warps"],
        num_stages=CONFIG["num_stages"],
    )
    return out


def _prefill_prepass(q, k_codes, k_scale, v_codes, v_scale, causal, out):
    """DEQUANT = "prepass": K, V dequantised to q's dtype by one kernel, then bf16 multi-query attention."""
    batch, heads, seq_len, head_dim = q.shape
    n_rows = batch * seq_len
    k = torch.empty(n_rows, head_dim, dtype=q.dtype, device=q.device)
    v = torch.empty_like(k)
    block_d = max(16, triton.next_power_of_2(head_dim))
    block_r = max(1, 4096 // block_d)
    _dequant_kv[(triton.cdiv(n_rows, block_r),)](
        k_codes,
        *k_codes.stride(),
        k_scale,
        *k_scale.stride(),
        v_codes,
        *v_codes.stride(),
        v_scale,
        *v_scale.stride(),
        k,
        v,
        seq_len,
        head_dim,
        n_rows,
        BLOCK_R=block_r,
        BLOCK_D=block_d,
        num_warps=4,
    )
    if CONFIG["IMPL"] == "gluon" and _flash_hopper.usable(q, k, v):
        return _flash_hopper.attention(q, k, v, out, causal, _flash_hopper.hopper_config(CONFIG))
    seq_pow2 = max(16, triton.next_power_of_2(seq_len))
    block_m = min(CONFIG["BLOCK_M"], seq_pow2)
    block_n = min(CONFIG["BLOCK_N"], seq_pow2)
    plan = attention_plan(q, k, v, block_m, block_n, CONFIG)  # stages capped to shared memory; TMA where asked
    _mqa_bf16_attention[(triton.cdiv(seq_len, block_m), batch * heads)](
        q,
        *q.stride(),
        plan.k,
        plan.v,
        out,
        *out.stride(),
        heads,
        seq_len,
        head_dim,
        plan.qk_scale,
        CAUSAL=bool(causal),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_D=plan.meta["BLOCK_D"],
        EVEN_M=seq_len % block_m == 0 and plan.meta["EVEN_D"],
        EVEN_N=seq_len % block_n == 0 and plan.meta["EVEN_D"],
        USE_TMA=plan.meta["USE_TMA"],
        LAZY_RESCALE=bool(CONFIG["LAZY_RESCALE"]),
        num_warps=plan.meta["num_warps"],
        num_stages=plan.meta["num_stages"],
    )
    return out


class ModelNew(nn.Module):
    def __init__(self, causal: bool = False):
        super().__init__()
        self.causal = bool(causal)

    def forward(self, q, k_codes, k_scale, v_codes, v_scale):
        return int8_mqa_prefill(q, k_codes, k_scale, v_codes, v_scale, self.causal)
