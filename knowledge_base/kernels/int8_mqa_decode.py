"""
---
title: int8 multi-query attention decode (all query heads in one tile, split-KV merged in-kernel, int8 -> fp16 by integer ops)
kind: kernels
family: [int8_mqa_decode, attention]
tags: [attention, decode, mqa, int8, kv-cache, quantization, split-kv, flash-decoding, head-packing, memory-bound]
hardware: [any]
spec: int8_mqa_decode
---
Decode attention for multi-query attention over an int8 KV cache: Q [B, HQ, QL, D] (QL = 1-4 new
tokens), one KV head shared by all HQ query heads as int8 codes [B, KV, D] with per-token scales
[B, KV].

Decode is bound by reading the KV cache. What makes that read efficient:
- Head packing: the HQ * QL query rows of one batch element share the same K and V, so one program
  loads them as one [HQ * QL, D] tile (16 rows for 16 heads) and reads each K/V tile once for all
  of them: one MMA per KV tile instead of 16 matrix-vector products each re-reading the cache.
- Split-KV (flash-decoding): the KV length is split over SPLITS programs per batch element (about
  PROGRAMS_PER_SM programs per SM over the grid); each keeps its unnormalised partial output and
  row max / row sum, and the last split program of a batch element to finish (an atomic arrival
  counter) merges them (COMBINE = "last_program": one launch), or a second small kernel does.
- The int8 -> 16-bit conversion: Triton 3.6's cast (int8 -> bf16) costs ~1450 SASS instructions per
  32 KB KV step (sm_90a), V read from shared memory a byte at a time. CONVERT = "f16" converts with
  integer/half ops in inline PTX (4 codes a register: xor 0x80, two byte permutes that put x + 128
  in the mantissa of fp16 1024, one packed fp16 subtract of 1152: exact) and runs both MMAs in fp16
  with fp32 accumulation: ~860 instructions per step, 10-17% less device time at 16 rows (H200,
  the tl kernel's split-KV tuning). fp16 has the range of neither bf16 q nor arbitrary scales, so q is divided by its row's
  max |q| (the factor goes back into the scores' scale) and P * v_scale by the tile's max v_scale
  (back into the accumulator's unit).
- Dequantisation costs no pass over K or V: the K scale multiplies the [rows, BLOCK_N] score tile
  and the V scale multiplies P before the second MMA, never the [BLOCK_N, D] tiles. The int8 tiles
  are pipelined through shared memory by num_stages; the scale vectors are too narrow for that, so
  they are loaded one KV step ahead (PREFETCH_SCALES).
- The host side: LAUNCH = "cached" keeps, per input shape, the grid, the split buffers and Triton's
  compiled kernel, and launches it directly (no argument binding).
- IMPL = "auto" (the default) takes _decode_hopper.py's Gluon kernel where it can run (Hopper, Triton
  3.6, 16 packed rows, head dim 128, aligned strides) and the batch fits in one wave of its programs (8
  warps and one program an SM, else 4 warps and two): K/V copied by cp.async and read straight into int8 /
  fp16 MMA operands, launched directly from its plan like this kernel (_cached_launch.py). On the H200
  (2026-11-27, CUDA graph, clean L2) 20.9 / 20.8 / 23.4 us at B256 KV1024 / B128 KV2048 / B64 KV4096
  (3.27 / 3.27 / 2.91 TB/s), 1.28-1.47x this kernel; Q_LEN 4 and other Triton releases stay here.
The floor (H200, bench/investigations/int8_mqa_decode/decode_read_roofline.py): a kernel that only reads the same bytes takes 22.3 us (3.05 TB/s) when timed
like this one (CUDA graph, L2 flushed by writing: its dirty lines are written back during the call), 16.8 us
(4.06 TB/s) after a flush by reading; this kernel takes 28.0 / 26.4 us at B256 KV1024 (the two flushes).
What bounds this file's tl kernel (H200, Nsight Compute, B256 KV1024): 57% of DRAM peak; 8 warps per SM (shared memory
for 3 stages of K/V tiles and the fp16 V tile), 1.4 instructions issued per cycle, stalls on shared
memory (short scoreboard) first: the loop is latency-bound per SM, and more, smaller programs did
not raise the per-SM rate (bench/results/int8_mqa_decode/h200/2026-11-23_split_kv_tl_kernel/README.md).
"""

import math
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl
from _int8_kv import int8_scores, int8_update, load_scales
from _cached_launch import launch, launchable
from _launch_heuristics import sm_count

# H200, the tl kernel's split-KV tuning (bench/results/int8_mqa_decode/h200/2026-11-23_split_kv_tl_kernel/README.md): device time per call
# in a CUDA graph with L2 flushed at B256 KV1024 / B128 KV2048 / B64 KV4096 / B64 KV4096 Q_LEN 4,
# this CONFIG: 29.2 / 32.2 / 36.0 / 50.0 us (2.3 / 2.1 / 1.9 / 1.4 TB/s of KV cache; 1.3-1.5x SDPA
# on the bf16 cache, 7.8x at Q_LEN 4); the previous default in the same run 34.0 / 37.1 / 42.6 / 50.2.
# No config of the ~30 measured was more than 3% faster at any shape.
CONFIG = {
    "BLOCK_N": 128,  # KV tokens per inner step
    # How many splits of the KV length: "sm_fill" = about PROGRAMS_PER_SM programs per SM over the
    # grid; "balanced" = the split count whose busiest SM streams the fewest key tiles
    # (ceil(BATCH * splits / SMs) programs of ceil(tiles / splits) tiles each, a split's partial
    # counted as half a tile), the smaller count on a tie. Measured (H200, bench/results/attention/h200/2026-11-23_int8_mqa_flash_tuning): balanced was 1.1-3.9x
    # slower: it leaves one 4-warp program per SM, and a program alone on its SM streams its tiles
    # far slower than two sharing one (the step is bound by latency, not bandwidth).
    "SPLIT_RULE": "sm_fill",
    # sm_fill's target. Split-KV tuning: 2-8 programs per SM at BLOCK_N 64 were not faster than 1 at 128
    # (the per-SM rate did not grow with the programs on it), and a grid above what fits on the
    # SMs at once runs a second, partial wave.
    "PROGRAMS_PER_SM": 1,
    "num_warps": 4,
    "num_stages": 3,  # KV tiles in flight
    # Merge the splits in a second kernel, or in the last split program of each batch element.
    "COMBINE": "last_program",
    # Load the next KV step's scales one step ahead (else in the step that uses them). H200 (the first tuning):
    # 39.2 / 50.4 / 51.3 us at B256 KV1024 / B128 KV2048 / B64 KV4096 with, 70.1 / 52.7 / 58.0 without.
    "PREFETCH_SCALES": True,
    # int8 -> 16 bit: "cast" (.to(), bf16 MMAs; Triton moves the V cast after the shared-memory read
    # into the P V operand layout, 4 keys D bytes apart per thread, read a byte at a time), "v_asm"
    # (V by inline PTX the compiler cannot move: read 16 bytes at a time, converted, written back,
    # read with ldmatrix.trans; K cast), "f16" (K and V by the integer trick above, fp16 MMAs). The
    # PTX runs on NVIDIA GPUs only: the interpreter takes the same paths with plain casts. Split-KV tuning,
    # BLOCK_N 128: f16 10-17% faster than cast at Q_LEN 1, 7% slower at Q_LEN 4 (64 rows: 255
    # registers) in both calls; at BLOCK_N 64 cast, v_asm and f16 were within 5%. "auto": f16 below
    # 64 packed rows, cast from 64.
    "CONVERT": "auto",
    # "jit": launch through the @triton.jit wrapper every call; "cached": the plan of the shape
    # (grid, split buffers, compiled kernel) is kept and the compiled kernel launched directly
    # (_cached_launch.py; the tl and the Gluon kernel alike). Host time per call at B256 (split-KV tuning): 16.3 us
    # cached, 30.3 us through the JIT; the Gluon kernel through its JIT took 30-100 us
    # (bench/results/int8_mqa_decode/h200/2026-11-27_gluon_register_kernel/README.md).
    "LAUNCH": "cached",
    # f16 only: each warp streams its own keys with its own softmax state, merged after the loop
    # (no cross-warp reduction or layout exchange per step; each warp holds a whole accumulator).
    # Split-KV tuning: 24% slower at B256 (242 registers, 3x the bank conflicts), 40x at Q_LEN 4.
    "WARP_SPLIT": False,
    # f16 only: the V tile loaded one step ahead into registers (converted there, then through
    # shared memory once in fp16 for its transposed MMA operand) instead of copied into shared
    # memory by the pipeliner and read back: less shared-memory traffic per KV byte. Split-KV tuning: 37%
    # slower at B256 (the register tile is repacked byte by byte: 80% more instructions).
    "V_IN_REGS": False,
    # "auto": on a Hopper GPU with 16 packed query rows, head dim 128 and aligned strides,
    # _decode_hopper.py's Gluon kernel (no K/V byte through registers of the compiler's choosing: cp.async
    # rings, int8 MMA for q K^T, V pairs by PRMT), where REGS_ONE_WAVE allows; elsewhere this file's tl
    # kernel. "triton": always the tl kernel. H200, 2026-11-27 (bench/results/int8_mqa_decode/h200/2026-11-27_fixed_costs/README.md, CUDA
    # graph; tl in the same run): B256 KV1024 / B128 KV2048 / B64 KV4096 20.85 / 20.83 / 23.44 us against
    # 26.61 / 29.28 / 34.44 with L2 left clean (1.28x / 1.41x / 1.47x), 26.21 / 27.03 / 28.52 against
    # 27.68 / 30.53 / 34.67 with L2 flushed by writing (1.06x / 1.13x / 1.22x); evaluator fitness 4.36 (4.04 before the fixed costs were cut).
    "IMPL": "auto",
    # The Gluon kernel: warps per program (each streams its own keys), keys per warp and step, steps
    # whose loads are issued together, and programs per SM the split count aims at.
    "REGS_WARPS": 8,
    "REGS_KEYS": 32,
    "REGS_STAGES": 2,
    "REGS_CTAS_PER_SM": 1,
    # Batches beyond one wave of those programs: REGS_WIDE_WARPS warps and REGS_WIDE_CTAS_PER_SM programs an
    # SM (the same keys a warp-step and stages).
    "REGS_WIDE_WARPS": 4,
    "REGS_WIDE_CTAS_PER_SM": 2,
    # The Gluon kernel only where the batch fits in one wave of its programs (the splits fill the rest);
    # larger batches take the tl kernel.
    "REGS_ONE_WAVE": True,
    # Rescale the accumulator only when some row's max has grown by more than 2^8 (FlashAttention-4's
    # conditional rescale; one program-wide reduction and branch a step instead of a [16, 128] multiply).
    "REGS_LAZY_RESCALE": False,
}

TUNABLES = {
    "BLOCK_N": [32, 64, 128, 256],
    "SPLIT_RULE": ["sm_fill", "balanced"],
    "PROGRAMS_PER_SM": [1, 2, 3, 4, 6, 8],
    "num_warps": [1, 2, 4, 8],
    "num_stages": [2, 3, 4, 5],
    "COMBINE": ["kernel", "last_program"],
    "PREFETCH_SCALES": [False, True],
    "CONVERT": ["cast", "v_asm", "f16", "auto"],
    "LAUNCH": ["jit", "cached"],
    "WARP_SPLIT": [False, True],
    "V_IN_REGS": [False, True],
    "IMPL": ["auto", "triton"],
    "REGS_WARPS": [1, 2, 4, 8],
    "REGS_KEYS": [16, 32],
    "REGS_STAGES": [2, 3, 4, 6],
    "REGS_CTAS_PER_SM": [1, 2, 3, 4, 6, 8, 10, 12],
    "REGS_WIDE_WARPS": [2, 4, 8],
    "REGS_WIDE_CTAS_PER_SM": [1, 2, 3, 4, 6],
    "REGS_LAZY_RESCALE": [False, True],
    "REGS_ONE_WAVE": [False, True],
}


def split_count(batch: int, n_tiles: int, sms: int, config: dict) -> int:
    """Programs per batch element along the KV length (see CONFIG["SPLIT_RULE"])."""
    if config.get("SPLIT_RULE", "sm_fill") == "balanced":

        def cost(s: int) -> float:
            return triton.cdiv(batch * s, sms) * (triton.cdiv(n_tiles, s) + (0.5 if s > 1 else 0.0))

        return min(range(1, n_tiles + 1), key=lambda s: (cost(s), s))
    return max(1, min(n_tiles, triton.cdiv(config["PROGRAMS_PER_SM"] * sms, batch)))


# int8 -> fp16 (exact), four codes a register: x ^ 0x80 = x + 128 permuted into the low byte of fp16
# 0x64xx = 1024 + (x + 128), then one packed fp16 subtract of 1152 (0x6480): no conversion
# instruction. Element 0 is the low byte in, the low half of $0 out.
_I8_TO_F16_PTX = tl.constexpr("""{
    .reg .b32 t, lo, hi, c;
    xor.b32 t, $2, 0x80808080;
    prmt.b32 lo, t, 0x64646464, 0x4140;
    prmt.b32 hi, t, 0x64646464, 0x4342;
    mov.b32 c, 0x64806480;
    sub.f16x2 $0, lo, c;
    sub.f16x2 $1, hi, c;
    }""")


@triton.jit
def _i8_to_f16(codes, ASM: tl.constexpr, MOVABLE: tl.constexpr):
    """int8 -> fp16 by _I8_TO_F16_PTX, or by casts under the interpreter. MOVABLE (is_pure) lets the
    compiler move the tile's layout change ahead of it (the K tile, read in its MMA layout 8 bytes
    at a time); the V tile must not be (its MMA layout needs 4 keys D bytes apart per thread: byte
    loads), so its conversion happens first and the fp16 tile goes through ldmatrix.trans."""
    if ASM:
        out = tl.inline_asm_elementwise(
            asm=_I8_TO_F16_PTX, constraints="=r,=r,r", args=[codes], dtype=tl.float16, is_pure=MOVABLE, pack=4
        )
    else:
        out = codes.to(tl.float32).to(tl.float16)
    return out


@triton.jit
def _f16_step(
    q16, row_mult, acc, m_i, l_part, v_unit, k_tile, v_tile, c_live, k_sc, v_sc,
    EVEN: tl.constexpr, ASM: tl.constexpr, LAZY_SUM: tl.constexpr,
):  # fmt: skip
    """One KV tile with fp16 MMAs. Scores t = (q16 . K) * k_scale in units of row_mult (> 0, one
    FFMA into exp2). With LAZY_SUM the row sum is kept per element (l_part [rows, BLOCK_N], summed
    after the loop: with 16 rows the warps split the keys, so a row sum per step is a cross-warp
    reduction; with 64 rows each warp owns whole rows and l_part is [rows, 1]). P * v_scale enters
    the MMA divided by the tile's largest V scale v_top (in [0, 1]: inside fp16's range whatever the
    scales), so acc is kept in units of the last tile's v_top (v_unit): rescaled by
    alpha * v_unit / v_top and accumulated by the MMA itself, one multiply per element."""
    k = _i8_to_f16(k_tile, ASM, True)
    t = tl.dot(q16, tl.trans(k)) * k_sc[None, :]
    if not EVEN:
        t = tl.where(c_live[None, :], t, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(t, 1) * row_mult)
    p = tl.exp2(t * row_mult[:, None] - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    if LAZY_SUM:
        l_part = l_part * alpha[:, None] + p
    else:
        l_part = l_part * alpha[:, None] + tl.sum(p, 1)[:, None]
    v_top = tl.maximum(tl.max(v_sc, 0), 1e-30)
    v = _i8_to_f16(v_tile, ASM, False)
    pv = (p * (v_sc * (1.0 / v_top))[None, :]).to(tl.float16)
    acc = tl.dot(pv, v, acc * (alpha * (v_unit / v_top))[:, None])
    return acc, m_new, l_part, v_top


@triton.jit
def _f16_warp_split_loop(
    q16, row_mult, k_base, v_base, ks_base, vs_base, lo, hi,
    HEAD_DIM: tl.constexpr, ROWS: tl.constexpr, BLOCK_D: tl.constexpr, WARPS: tl.constexpr, BLOCK_N: tl.constexpr,
    EVEN: tl.constexpr, ASM: tl.constexpr, V_IN_REGS: tl.constexpr,
):  # fmt: skip
    """The f16 loop with each warp on its own keys (WARP_SPLIT): the tiles are [WARPS, BLOCK_N /
    WARPS, D] and the MMAs batched over the first axis, which Triton gives one warp each, so every
    warp keeps its own row max, row sum and accumulator and no step reduces across warps; the
    WARPS partial results are merged once after the loop, like the splits. Returns (acc, m, l)."""
    NW: tl.constexpr = BLOCK_N // WARPS
    offs_w = tl.arange(0, WARPS)
    offs_n = tl.arange(0, NW)
    offs_d = tl.arange(0, BLOCK_D)
    q3 = tl.broadcast_to(q16[None, :, :], [WARPS, ROWS, BLOCK_D])
    key = offs_w[:, None] * NW + offs_n[None, :]  # [WARPS, NW]: warp w's keys of the tile
    m_i = tl.full([WARPS, ROWS], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([WARPS, ROWS], dtype=tl.float32)
    acc = tl.zeros([WARPS, ROWS, BLOCK_D], dtype=tl.float32)
    v_unit = tl.full([WARPS], 1.0, dtype=tl.float32)
    k_sc = tl.load(ks_base + lo + key, mask=lo + key < hi, other=0.0).to(tl.float32)
    v_sc = tl.load(vs_base + lo + key, mask=lo + key < hi, other=0.0).to(tl.float32)
    if V_IN_REGS:
        v_off = (lo + key)[:, :, None] * HEAD_DIM + offs_d[None, None, :]
        v_reg = tl.load(v_base + v_off, mask=(lo + key < hi)[:, :, None], other=0)
    for start in tl.range(lo, hi, BLOCK_N):
        cols = start + key
        c_live = cols < hi
        nxt = cols + BLOCK_N
        k_next = tl.load(ks_base + nxt, mask=nxt < hi, other=0.0).to(tl.float32)
        v_next = tl.load(vs_base + nxt, mask=nxt < hi, other=0.0).to(tl.float32)
        kv_off = cols[:, :, None] * HEAD_DIM + offs_d[None, None, :]
        if EVEN:
            k_tile = tl.load(k_base + kv_off)
        else:
            k_tile = tl.load(k_base + kv_off, mask=c_live[:, :, None], other=0)
        if V_IN_REGS:  # this step's V came one step ahead; the next one's is loaded now
            v_tile = v_reg
            if EVEN:  # the last step reloads its own tile: no mask (a masked int8 load selects bytewise)
                nxt_start = tl.minimum(start + BLOCK_N, hi - BLOCK_N)
                v_reg = tl.load(v_base + (nxt_start + key)[:, :, None] * HEAD_DIM + offs_d[None, None, :])
            else:
                v_reg = tl.load(v_base + kv_off + BLOCK_N * HEAD_DIM, mask=(nxt < hi)[:, :, None], other=0)
        elif EVEN:
            v_tile = tl.load(v_base + kv_off)
        else:
            v_tile = tl.load(v_base + kv_off, mask=c_live[:, :, None], other=0)
        k = _i8_to_f16(k_tile, ASM, True)
        t = tl.dot(q3, tl.trans(k, (0, 2, 1))) * k_sc[:, None, :]
        if not EVEN:
            t = tl.where(c_live[:, None, :], t, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(t, 2) * row_mult[None, :])
        # a warp whose keys are all masked keeps m = -inf: exp2(-inf - -inf) would be NaN
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(t * row_mult[None, :, None] - m_safe[:, :, None])
        alpha = tl.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 2)
        v_top = tl.maximum(tl.max(v_sc, 1), 1e-30)
        v = _i8_to_f16(v_tile, ASM, False)
        pv = (p * (v_sc * (1.0 / v_top)[:, None])[:, None, :]).to(tl.float16)
        acc = tl.dot(pv, v, acc * (alpha * (v_unit / v_top)[:, None])[:, :, None])
        m_i = m_new
        v_unit = v_top
        k_sc = k_next
        v_sc = v_next
    m = tl.max(m_i, 0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    w = tl.exp2(m_i - m_safe[None, :])  # [WARPS, ROWS]
    l = tl.sum(w * l_i, 0)
    acc = tl.sum(acc * (w * v_unit[:, None])[:, :, None], 0)
    return acc, m, l


@triton.jit
def _int8_mqa_decode_split(
    Q,
    KC,
    KS,
    VC,
    VS,
    O,
    PART_ACC,
    PART_ML,
    COUNTERS,
    kv_len,
    split_len,
    stride_kb,
    stride_vb,
    stride_ksb,
    stride_vsb,
    qk_scale,
    Q_LEN: tl.constexpr,
    N_ROWS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    EVEN: tl.constexpr,
    SPLIT: tl.constexpr,
    FUSED_COMBINE: tl.constexpr,
    PREFETCH_SCALES: tl.constexpr,
    CONVERT: tl.constexpr,
    ASM: tl.constexpr,
    WARP_SPLIT: tl.constexpr,
    WARPS: tl.constexpr,
    V_IN_REGS: tl.constexpr,
):
    # q and out are [B, HQ, QL, D] contiguous: row r of the packed tile (head r // QL, token r % QL)
    # is at r * D. K/V codes are [B, KV, D] with rows D apart, scales [B, KV] with unit stride.
    b = tl.program_id(0)
    split = tl.program_id(1)
    n_splits = tl.num_programs(1)
    offs_r = tl.arange(0, ROWS)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_live = offs_d < HEAD_DIM
    qo_off = b.to(tl.int64) * (N_ROWS * HEAD_DIM) + offs_r[:, None] * HEAD_DIM + offs_d[None, :]
    qo_mask = (offs_r < N_ROWS)[:, None] & d_live[None, :]
    q = tl.load(Q + qo_off, mask=qo_mask, other=0.0)
    if CONVERT == "f16":
        # q / max|q| of its row in fp16 (|.| <= 1), the max folded into the scores' scale.
        qf = q.to(tl.float32)
        top = tl.max(tl.abs(qf), 1)
        top = tl.where(top > 0, top, 1.0)
        q16 = (qf * (1.0 / top)[:, None]).to(tl.float16)
        row_mult = top * qk_scale

    lo = split * split_len
    hi = tl.minimum(lo + split_len, kv_len)
    m_i = tl.full([ROWS], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([ROWS], dtype=tl.float32)
    acc = tl.zeros([ROWS, BLOCK_D], dtype=tl.float32)
    LAZY_SUM: tl.constexpr = ROWS < 64
    l_part = tl.zeros([ROWS, BLOCK_N if LAZY_SUM else 1], dtype=tl.float32)
    v_unit = tl.full([], 1.0, dtype=tl.float32)  # the f16 path's acc unit (see _f16_step)
    k_base = KC + b.to(tl.int64) * stride_kb
    v_base = VC + b.to(tl.int64) * stride_vb
    ks_base = KS + b.to(tl.int64) * stride_ksb
    vs_base = VS + b.to(tl.int64) * stride_vsb
    # The scale vectors are too narrow for the software pipeliner (which stages the int8 tiles
    # through shared memory): with PREFETCH_SCALES the next step's scales are loaded one step ahead
    # into registers, so no step waits for a global load of its own scales.
    k_sc = load_scales(ks_base, lo + offs_n, 1, lo + offs_n < hi)
    v_sc = load_scales(vs_base, lo + offs_n, 1, lo + offs_n < hi)
    if WARP_SPLIT:
        acc, m_i, l_i = _f16_warp_split_loop(
            q16, row_mult, k_base, v_base, ks_base, vs_base, lo, hi,
            HEAD_DIM, ROWS, BLOCK_D, WARPS, BLOCK_N, EVEN, ASM, V_IN_REGS,
        )  # fmt: skip
    else:
        if V_IN_REGS:
            v_off0 = (lo + offs_n)[:, None] * HEAD_DIM + offs_d[None, :]
            v_reg = tl.load(v_base + v_off0, mask=(lo + offs_n < hi)[:, None] & d_live[None, :], other=0)
        for start in tl.range(lo, hi, BLOCK_N):
            cols = start + offs_n
            c_live = cols < hi
            if PREFETCH_SCALES:
                nxt = cols + BLOCK_N
                k_next = load_scales(ks_base, nxt, 1, nxt < hi)
                v_next = load_scales(vs_base, nxt, 1, nxt < hi)
            else:
                k_sc = load_scales(ks_base, cols, 1, c_live)
                v_sc = load_scales(vs_base, cols, 1, c_live)
            if CONVERT == "f16":
                kv_off = cols[:, None] * HEAD_DIM + offs_d[None, :]
                if EVEN:  # no key masked: unpredicated 16-byte copies
                    k_tile = tl.load(k_base + kv_off)
                else:
                    k_tile = tl.load(k_base + kv_off, mask=c_live[:, None] & d_live[None, :], other=0)
                if V_IN_REGS:  # this step's V came one step ahead; the next one's is loaded now
                    v_tile = v_reg
                    if EVEN:  # the last step reloads its own tile: no mask (a masked int8 load selects bytewise)
                        nxt_start = tl.minimum(start + BLOCK_N, hi - BLOCK_N)
                        v_reg = tl.load(v_base + (nxt_start + offs_n)[:, None] * HEAD_DIM + offs_d[None, :])
                    else:
                        nxt_live = cols + BLOCK_N < hi
                        v_reg = tl.load(
                            v_base + kv_off + BLOCK_N * HEAD_DIM, mask=nxt_live[:, None] & d_live[None, :], other=0
                        )
                elif EVEN:
                    v_tile = tl.load(v_base + kv_off)
                else:
                    v_tile = tl.load(v_base + kv_off, mask=c_live[:, None] & d_live[None, :], other=0)
                acc, m_i, l_part, v_unit = _f16_step(
                    q16, row_mult, acc, m_i, l_part, v_unit, k_tile, v_tile, c_live, k_sc, v_sc, EVEN, ASM, LAZY_SUM
                )
            else:
                kv_mask = c_live[:, None] & d_live[None, :]
                s = int8_scores(q, k_base, cols, offs_d, kv_mask, HEAD_DIM, 1, k_sc, qk_scale)
                s = tl.where(c_live[None, :], s, float("-inf"))
                acc, m_i, l_i = int8_update(acc, m_i, l_i, s, q, v_base, cols, offs_d, kv_mask, HEAD_DIM, 1, v_sc, ASM)
            if PREFETCH_SCALES:
                k_sc = k_next
                v_sc = v_next
        if CONVERT == "f16":
            l_i = tl.sum(l_part, 1)
            acc = acc * v_unit

    if SPLIT:
        part = (b * n_splits + split) * ROWS
        tl.store(PART_ACC + (part + offs_r)[:, None] * BLOCK_D + offs_d[None, :], acc)
        tl.store(PART_ML + 2 * (part + offs_r), m_i)
        tl.store(PART_ML + 2 * (part + offs_r) + 1, l_i)
        if FUSED_COMBINE:
            # The batch element's last split to finish merges them all (acq_rel: the others'
            # partials are visible to it) and resets the counter for the next call.
            if tl.atomic_add(COUNTERS + b, 1) == n_splits - 1:
                _combine_splits(PART_ACC, PART_ML, O, b, n_splits, N_ROWS, HEAD_DIM, ROWS, BLOCK_D)
                tl.atomic_xchg(COUNTERS + b, 0)
    else:
        out = acc / l_i[:, None]
        tl.store(O + qo_off, out.to(O.dtype.element_ty), mask=qo_mask)


@triton.jit
def _combine_splits(
    PART_ACC,
    PART_ML,
    O,
    b,
    n_splits,
    N_ROWS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    ROWS: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    """out = sum_s exp2(m_s - m) acc_s / sum_s exp2(m_s - m) l_s for batch element b (m = max_s m_s)."""
    offs_r = tl.arange(0, ROWS)
    offs_d = tl.arange(0, BLOCK_D)
    m = tl.full([ROWS], float("-inf"), dtype=tl.float32)
    for s in range(n_splits):
        m = tl.maximum(m, tl.load(PART_ML + 2 * ((b * n_splits + s) * ROWS + offs_r)))
    l = tl.zeros([ROWS], dtype=tl.float32)
    acc = tl.zeros([ROWS, BLOCK_D], dtype=tl.float32)
    for s in range(n_splits):
        part = (b * n_splits + s) * ROWS
        w = tl.exp2(tl.load(PART_ML + 2 * (part + offs_r)) - m)
        l += w * tl.load(PART_ML + 2 * (part + offs_r) + 1)
        acc += w[:, None] * tl.load(PART_ACC + (part + offs_r)[:, None] * BLOCK_D + offs_d[None, :])
    out = acc / l[:, None]
    o_off = b.to(tl.int64) * (N_ROWS * HEAD_DIM) + offs_r[:, None] * HEAD_DIM + offs_d[None, :]
    live = (offs_r < N_ROWS)[:, None] & (offs_d < HEAD_DIM)[None, :]
    tl.store(O + o_off, out.to(O.dtype.element_ty), mask=live)


@triton.jit
def _int8_mqa_decode_combine(
    PART_ACC,
    PART_ML,
    O,
    n_splits,
    N_ROWS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    ROWS: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    _combine_splits(PART_ACC, PART_ML, O, tl.program_id(0), n_splits, N_ROWS, HEAD_DIM, ROWS, BLOCK_D)


def check_inputs(name, q, k_codes, k_scale, v_codes, v_scale):
    if q.dim() != 4:
        raise ValueError(f"{name}: q must be [BATCH, Q_HEADS, Q_LEN, HEAD_DIM], got {tuple(q.shape)}")
    batch, _, _, head_dim = q.shape
    for what, codes, scale in (("k", k_codes, k_scale), ("v", v_codes, v_scale)):
        if codes.dtype != torch.int8 or codes.dim() != 3 or codes.shape[0] != batch or codes.shape[2] != head_dim:
            raise ValueError(
                f"{name}: {what}_codes must be int8 [BATCH, KV_LEN, HEAD_DIM] matching q, got {tuple(codes.shape)} {codes.dtype}"
            )
        if tuple(scale.shape) != tuple(codes.shape[:2]):
            raise ValueError(
                f"{name}: {what}_scale must be [BATCH, KV_LEN] = {tuple(codes.shape[:2])}, got {tuple(scale.shape)}"
            )
    if k_codes.shape != v_codes.shape:
        raise ValueError(f"{name}: k_codes {tuple(k_codes.shape)} and v_codes {tuple(v_codes.shape)} differ")


def inline_ptx_ok(t: torch.Tensor) -> bool:
    """Whether a kernel on `t` may run inline PTX: an NVIDIA GPU, not the CPU interpreter."""
    return t.is_cuda and torch.version.cuda is not None and os.environ.get("TRITON_INTERPRET", "0") in ("", "0")


_COUNTERS: dict = {}


def arrival_counters(device: torch.device, batch: int) -> torch.Tensor:
    """Per-batch-element split counters, zero between calls (the merging program resets its own),
    kept per device so a call launches no memset."""
    key = (str(device), batch)
    if key not in _COUNTERS:
        _COUNTERS[key] = torch.zeros(batch, dtype=torch.int32, device=device)
    return _COUNTERS[key]


def _rows_unit_stride(codes: torch.Tensor, scale: torch.Tensor):
    """The kernel takes any batch stride but needs codes rows D apart and unit-stride scales."""
    if codes.stride(2) != 1 or codes.stride(1) != codes.shape[2]:
        codes = codes.contiguous()
    if scale.stride(1) != 1:
        scale = scale.contiguous()
    return codes, scale


class _Plan:
    """Everything of a call that depends only on the shapes, strides, device and CONFIG."""

    __slots__ = (
        "grid",
        "splits",
        "tail",
        "consts",
        "const_args",
        "part_acc",
        "part_ml",
        "counters",
        "fused",
        "combine",
        "compiled",
    )


_PLANS: dict = {}
_decode_hopper = None  # the Gluon kernel's module, imported by _gluon_serves where it can run
_GLUON_SHAPES: dict = {}  # per _PLANS key: (warps, programs an SM) of the Gluon kernel that serves it, or None


def _make_plan(q, kc, ks, vc, vs) -> _Plan:
    batch, heads, q_len, head_dim = q.shape
    kv_len = kc.shape[1]
    n_rows = heads * q_len
    rows = max(16, triton.next_power_of_2(n_rows))  # tl.dot needs at least 16 rows
    block_d = max(16, triton.next_power_of_2(head_dim))
    block_n = min(CONFIG["BLOCK_N"], max(16, triton.next_power_of_2(kv_len)))
    n_tiles = triton.cdiv(kv_len, block_n)
    splits = split_count(batch, n_tiles, sm_count(q.device), CONFIG)
    split_len = triton.cdiv(n_tiles, splits) * block_n
    splits = triton.cdiv(kv_len, split_len)  # no split left without keys
    convert = CONFIG["CONVERT"]
    if convert == "auto":
        convert = "f16" if rows < 64 else "cast"
    plan = _Plan()
    plan.grid = (batch, splits)
    plan.splits = splits
    plan.fused = splits > 1 and CONFIG["COMBINE"] == "last_program"
    if splits > 1:  # kept with the plan: stream-ordered calls reuse them
        plan.part_acc = torch.empty(batch * splits * rows * block_d, dtype=torch.float32, device=q.device)
        plan.part_ml = torch.empty(batch * splits * rows * 2, dtype=torch.float32, device=q.device)
    else:
        plan.part_acc = plan.part_ml = None  # not read or written with one split: out stands in
    plan.counters = arrival_counters(q.device, batch) if plan.fused else None
    plan.tail = (
        kv_len,
        split_len,
        kc.stride(0),
        vc.stride(0),
        ks.stride(0),
        vs.stride(0),
        1.0 / math.sqrt(head_dim) * 1.4426950408889634,
    )
    plan.consts = dict(
        Q_LEN=q_len,
        N_ROWS=n_rows,
        HEAD_DIM=head_dim,
        ROWS=rows,
        BLOCK_N=block_n,
        BLOCK_D=block_d,
        EVEN=kv_len % block_n == 0 and block_d == head_dim,
        SPLIT=splits > 1,
        FUSED_COMBINE=plan.fused,
        PREFETCH_SCALES=bool(CONFIG["PREFETCH_SCALES"]),
        CONVERT=convert,
        ASM=convert != "cast" and inline_ptx_ok(q),
        WARP_SPLIT=convert == "f16" and bool(CONFIG["WARP_SPLIT"]) and block_n // CONFIG["num_warps"] >= 16,
        WARPS=CONFIG["num_warps"],
        V_IN_REGS=convert == "f16" and bool(CONFIG["V_IN_REGS"]),
        num_warps=CONFIG["num_warps"],
        num_stages=CONFIG["num_stages"],
    )
    names = _int8_mqa_decode_split.arg_names  # the launcher takes every parameter, constexprs too
    n_const = len(plan.consts) - 2  # num_warps, num_stages are options, not parameters
    plan.const_args = tuple(plan.consts[n] for n in names[len(names) - n_const :])
    assert names[len(names) - n_const :] == list(plan.consts)[:n_const], names
    plan.combine = (
        None
        if splits == 1 or plan.fused
        else dict(N_ROWS=n_rows, HEAD_DIM=head_dim, ROWS=rows, BLOCK_D=block_d, num_warps=4)
    )
    plan.compiled = None
    return plan


def int8_mqa_decode(q, k_codes, k_scale, v_codes, v_scale):
    """softmax(q K^T / sqrt(D)) V with K = k_codes * k_scale[..., None] (likewise V), one KV head for all query heads."""
    global DIRECT_LAUNCH_ERROR
    key = (
        q.shape, q.stride(), q.dtype, q.device, k_codes.shape, k_codes.stride(), v_codes.stride(), k_scale.stride(),
        v_scale.stride(), k_codes.dtype, v_codes.dtype, k_scale.shape, v_scale.shape, k_scale.dtype, v_scale.dtype,
        tuple(CONFIG.values()),
    )  # fmt: skip
    gluon = _GLUON_SHAPES.get(key)
    if gluon is None:  # a new shape: checked once, and whether the Gluon kernel may serve it
        check_inputs("int8_mqa_decode", q, k_codes, k_scale, v_codes, v_scale)
        if q.numel() == 0:
            return torch.empty_like(q)
        if k_codes.shape[1] == 0:
            raise ValueError("int8_mqa_decode: an empty KV cache (KV_LEN = 0) has no attention output")
    q = q if q.is_contiguous() else q.contiguous()
    k_codes, k_scale = _rows_unit_stride(k_codes, k_scale)
    v_codes, v_scale = _rows_unit_stride(v_codes, v_scale)
    if gluon is None:
        gluon = _GLUON_SHAPES[key] = _gluon_serves(q, k_codes, k_scale, v_codes, v_scale)
    if gluon and _decode_hopper.aligned(q, k_codes, k_scale, v_codes, v_scale):  # this call's pointers
        return _decode_hopper.decode(q, k_codes, k_scale, v_codes, v_scale, arrival_counters, CONFIG, key, *gluon)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS[key] = _make_plan(q, k_codes, k_scale, v_codes, v_scale)
    out = torch.empty_like(q)
    part_acc = out if plan.part_acc is None else plan.part_acc
    part_ml = out if plan.part_ml is None else plan.part_ml
    counters = out if plan.counters is None else plan.counters
    args = (q, k_codes, k_scale, v_codes, v_scale, out, part_acc, part_ml, counters)
    if plan.compiled is not None:
        try:
            if _direct_launch(plan, args):
                return out
        except Exception as exc:  # an incompatible Triton: launch through the JIT from now on
            DIRECT_LAUNCH_ERROR = f"{type(exc).__name__}: {exc}"
            plan.compiled = None
    compiled = _int8_mqa_decode_split[plan.grid](*args, *plan.tail, **plan.consts)
    if (
        CONFIG["LAUNCH"] == "cached"
        and DIRECT_LAUNCH_ERROR is None
        and inline_ptx_ok(q)
        and plan.combine is None
        and launchable(compiled)
    ):
        plan.compiled = compiled
    if plan.combine is not None:
        _int8_mqa_decode_combine[(plan.grid[0],)](part_acc, part_ml, out, plan.splits, **plan.combine)
    return out


DIRECT_LAUNCH_ERROR = None  # why the direct launch failed, if it did (then every plan takes the JIT)


def _gluon_batch(q: torch.Tensor) -> tuple[int, int] | None:
    """(warps, programs an SM) of the Gluon kernel for this batch: REGS_WARPS / REGS_CTAS_PER_SM where the
    batch fits in one wave of those programs (their splits then fill the SMs), else the REGS_WIDE_ pair where
    it fits in one wave of those; None (the tl kernel) beyond. Without REGS_ONE_WAVE, always the first."""
    batch, sms = q.shape[0], sm_count(q.device)
    for warps, ctas in (
        (CONFIG["REGS_WARPS"], CONFIG["REGS_CTAS_PER_SM"]),
        (CONFIG["REGS_WIDE_WARPS"], CONFIG["REGS_WIDE_CTAS_PER_SM"]),
    ):
        if not CONFIG["REGS_ONE_WAVE"] or batch <= ctas * sms:
            return warps, ctas
    return None


def _gluon_serves(q, k_codes, k_scale, v_codes, v_scale) -> tuple[int, int] | None:
    """_gluon_batch's (warps, programs an SM) where _decode_hopper's Gluon kernel may serve this shape (IMPL
    auto), else None (once per shape: then only the pointers' alignment is checked a call)."""
    global _decode_hopper
    launch_shape = _gluon_batch(q) if CONFIG["IMPL"] == "auto" and inline_ptx_ok(q) else None
    if launch_shape is None:
        return None
    import _decode_hopper  # Gluon: imported only where it can run

    return launch_shape if _decode_hopper.shape_usable(q, k_codes, k_scale, v_codes, v_scale) else None


def _direct_launch(plan: _Plan, args: tuple) -> bool:
    """The plan's compiled kernel launched directly (_cached_launch.launch); False to take the JIT."""
    return launch(plan.compiled, plan.grid, args, plan.tail + plan.const_args)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k_codes, k_scale, v_codes, v_scale):
        return int8_mqa_decode(q, k_codes, k_scale, v_codes, v_scale)
