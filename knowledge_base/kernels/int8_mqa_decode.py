"""
---
title: int8 multi-query attention decode (all query heads in one tile, split-KV with a combine step)
kind: kernels
family: [int8_mqa_decode, attention]
tags: [attention, decode, mqa, int8, kv-cache, quantization, split-kv, flash-decoding, head-packing, memory-bound]
hardware: [any]
spec: int8_mqa_decode
---
Decode attention for multi-query attention over an int8 KV cache: Q [B, HQ, QL, D] (QL = 1-4 new
tokens), one KV head shared by all HQ query heads as int8 codes [B, KV, D] with per-token scales
[B, KV].

Decode is bound by reading the KV cache. Two choices make that read efficient:
- Head packing: the HQ * QL query rows of one batch element share the same K and V, so one program
  loads them as one [HQ * QL, D] tile (16 rows for 16 heads) and reads each K/V tile once for all
  of them: one MMA per KV tile instead of 16 matrix-vector products each re-reading the cache.
- Split-KV (flash-decoding): with one program per batch element a batch of 64 fills half of an
  H100/H200's SMs; the KV length is split over SPLITS programs per batch element (chosen so the
  grid is about PROGRAMS_PER_SM programs per SM), each writes its unnormalised partial output and
  its row max / row sum, and the splits are merged (rescale by exp2(m_s - m), sum, divide) by a
  second small kernel, or (COMBINE = "last_program") by the last split program of each batch
  element to finish, found with an atomic arrival counter: one launch instead of two. With one
  split the first kernel writes the output itself.
Dequantisation costs no pass over K or V: the int8 codes are converted to bf16 in registers
(exact: |code| <= 127), the K scale multiplies the [rows, BLOCK_N] score tile (s = (q . codes) *
k_scale[n]) and the V scale multiplies P before the second MMA (P * v_scale[n]), never the
[BLOCK_N, D] tiles. The int8 tiles are pipelined through shared memory by num_stages; the scale
vectors are too narrow for that, so they are loaded one KV step ahead (PREFETCH_SCALES).
"""

import math
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl
from _int8_kv import int8_scores, int8_update, load_scales
from _launch_heuristics import sm_count

CONFIG = {
    "BLOCK_N": 128,  # KV tokens per inner step
    # How many splits of the KV length: "sm_fill" = about PROGRAMS_PER_SM programs per SM over the
    # grid; "balanced" = the split count whose busiest SM streams the fewest key tiles
    # (ceil(BATCH * splits / SMs) programs of ceil(tiles / splits) tiles each, a split's partial
    # counted as half a tile), the smaller count on a tie. Measured (round 3): balanced was 1.1-3.9x
    # slower: it leaves one 4-warp program per SM, and a program alone on its SM streams its tiles
    # far slower than two sharing one (the step is bound by latency, not bandwidth).
    "SPLIT_RULE": "sm_fill",
    "PROGRAMS_PER_SM": 1,  # sm_fill's target
    "num_warps": 4,
    "num_stages": 3,  # KV tiles in flight
    # Merge the splits in a second kernel, or in the last split program of each batch element.
    "COMBINE": "last_program",
    # Load the next KV step's scales one step ahead (else in the step that uses them). H200
    # (bench/results/attention_issue17_h200_round3), this CONFIG: 39.2 / 50.4 / 51.3 / 68.7 us at B256 KV1024 /
    # B128 KV2048 / B64 KV4096 / the same with Q_LEN 4 (without the prefetch 70.1 / 52.7 / 58.0 / 58.8).
    "PREFETCH_SCALES": True,
    # How the int8 V tile becomes bf16: "cast" (.to(), which Triton moves after the shared-memory read
    # into the P V operand layout: 4 keys D bytes apart per thread, read a byte at a time) or "asm"
    # (inline PTX the compiler cannot move: the tile is read 16 bytes at a time, converted, written
    # back in bf16 and read with ldmatrix.trans; NVIDIA GPUs only, "cast" under the interpreter).
    "V_CONVERT": "cast",
}

TUNABLES = {
    "BLOCK_N": [64, 128, 256],
    "SPLIT_RULE": ["sm_fill", "balanced"],
    "PROGRAMS_PER_SM": [1, 2, 4, 8],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4, 5],
    "COMBINE": ["kernel", "last_program"],
    "PREFETCH_SCALES": [False, True],
    "V_CONVERT": ["cast", "asm"],
}


def split_count(batch: int, n_tiles: int, sms: int, config: dict) -> int:
    """Programs per batch element along the KV length (see CONFIG["SPLIT_RULE"])."""
    if config.get("SPLIT_RULE", "sm_fill") == "balanced":
        def cost(s: int) -> float:
            return triton.cdiv(batch * s, sms) * (triton.cdiv(n_tiles, s) + (0.5 if s > 1 else 0.0))

        return min(range(1, n_tiles + 1), key=lambda s: (cost(s), s))
    return max(1, min(n_tiles, triton.cdiv(config["PROGRAMS_PER_SM"] * sms, batch)))


@triton.jit
def _int8_mqa_decode_split(
    Q, KC, KS, VC, VS, O, PART_ACC, PART_ML, COUNTERS,
    stride_qb, stride_qh, stride_qt, stride_qd,
    stride_kb, stride_kn, stride_kd, stride_ksb, stride_ksn,
    stride_vb, stride_vn, stride_vd, stride_vsb, stride_vsn,
    stride_ob, stride_oh, stride_ot, stride_od,
    q_len, n_rows, kv_len, head_dim, split_len, qk_scale,
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    SPLIT: tl.constexpr,
    FUSED_COMBINE: tl.constexpr,
    PREFETCH_SCALES: tl.constexpr,
    V_ASM: tl.constexpr,
):
    b = tl.program_id(0)
    split = tl.program_id(1)
    n_splits = tl.num_programs(1)
    # Row r of the packed tile is query head r // q_len, new token r % q_len.
    offs_r = tl.arange(0, ROWS)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    r_live = offs_r < n_rows
    d_live = offs_d < head_dim
    q_rows = (offs_r // q_len) * stride_qh + (offs_r % q_len) * stride_qt
    q = tl.load(Q + b * stride_qb + q_rows[:, None] + offs_d[None, :] * stride_qd, mask=r_live[:, None] & d_live[None, :], other=0.0)

    lo = split * split_len
    hi = tl.minimum(lo + split_len, kv_len)
    m_i = tl.full([ROWS], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([ROWS], dtype=tl.float32)
    acc = tl.zeros([ROWS, BLOCK_D], dtype=tl.float32)
    k_base = KC + b * stride_kb
    v_base = VC + b * stride_vb
    ks_base = KS + b * stride_ksb
    vs_base = VS + b * stride_vsb
    # The scale vectors are too narrow for the software pipeliner (which stages the int8 tiles
    # through shared memory): with PREFETCH_SCALES the next step's scales are loaded one step ahead
    # into registers, so no step waits for a global load of its own scales.
    k_sc = load_scales(ks_base, lo + offs_n, stride_ksn, lo + offs_n < hi)
    v_sc = load_scales(vs_base, lo + offs_n, stride_vsn, lo + offs_n < hi)
    for start in tl.range(lo, hi, BLOCK_N):
        cols = start + offs_n
        c_live = cols < hi
        kv_mask = c_live[:, None] & d_live[None, :]
        if PREFETCH_SCALES:
            nxt = cols + BLOCK_N
            k_next = load_scales(ks_base, nxt, stride_ksn, nxt < hi)
            v_next = load_scales(vs_base, nxt, stride_vsn, nxt < hi)
        else:
            k_sc = load_scales(ks_base, cols, stride_ksn, c_live)
        s = int8_scores(q, k_base, cols, offs_d, kv_mask, stride_kn, stride_kd, k_sc, qk_scale)
        s = tl.where(c_live[None, :], s, float("-inf"))
        if not PREFETCH_SCALES:
            v_sc = load_scales(vs_base, cols, stride_vsn, c_live)
        acc, m_i, l_i = int8_update(acc, m_i, l_i, s, q, v_base, cols, offs_d, kv_mask, stride_vn, stride_vd, v_sc, V_ASM)
        if PREFETCH_SCALES:
            k_sc = k_next
            v_sc = v_next

    if SPLIT:
        part = (b * n_splits + split) * ROWS
        tl.store(PART_ACC + (part + offs_r)[:, None] * BLOCK_D + offs_d[None, :], acc)
        tl.store(PART_ML + 2 * (part + offs_r), m_i)
        tl.store(PART_ML + 2 * (part + offs_r) + 1, l_i)
        if FUSED_COMBINE:
            # The batch element's last split to finish merges them all (acq_rel: the others'
            # partials are visible to it) and resets the counter for the next call.
            if tl.atomic_add(COUNTERS + b, 1) == n_splits - 1:
                _combine_splits(
                    PART_ACC, PART_ML, O, b, n_splits,
                    stride_ob, stride_oh, stride_ot, stride_od, q_len, n_rows, head_dim, ROWS, BLOCK_D,
                )
                tl.atomic_xchg(COUNTERS + b, 0)
    else:
        o_rows = (offs_r // q_len) * stride_oh + (offs_r % q_len) * stride_ot
        out = acc / l_i[:, None]
        tl.store(O + b * stride_ob + o_rows[:, None] + offs_d[None, :] * stride_od, out.to(O.dtype.element_ty), mask=r_live[:, None] & d_live[None, :])


@triton.jit
def _combine_splits(
    PART_ACC, PART_ML, O, b, n_splits,
    stride_ob, stride_oh, stride_ot, stride_od,
    q_len, n_rows, head_dim,
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
    o_rows = (offs_r // q_len) * stride_oh + (offs_r % q_len) * stride_ot
    live = (offs_r < n_rows)[:, None] & (offs_d < head_dim)[None, :]
    tl.store(O + b * stride_ob + o_rows[:, None] + offs_d[None, :] * stride_od, out.to(O.dtype.element_ty), mask=live)


@triton.jit
def _int8_mqa_decode_combine(
    PART_ACC, PART_ML, O,
    stride_ob, stride_oh, stride_ot, stride_od,
    q_len, n_rows, head_dim, n_splits,
    ROWS: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    _combine_splits(
        PART_ACC, PART_ML, O, tl.program_id(0), n_splits,
        stride_ob, stride_oh, stride_ot, stride_od, q_len, n_rows, head_dim, ROWS, BLOCK_D,
    )


def check_inputs(name, q, k_codes, k_scale, v_codes, v_scale):
    if q.dim() != 4:
        raise ValueError(f"{name}: q must be [BATCH, Q_HEADS, Q_LEN, HEAD_DIM], got {tuple(q.shape)}")
    batch, _, _, head_dim = q.shape
    for what, codes, scale in (("k", k_codes, k_scale), ("v", v_codes, v_scale)):
        if codes.dtype != torch.int8 or codes.dim() != 3 or codes.shape[0] != batch or codes.shape[2] != head_dim:
            raise ValueError(f"{name}: {what}_codes must be int8 [BATCH, KV_LEN, HEAD_DIM] matching q, got {tuple(codes.shape)} {codes.dtype}")
        if tuple(scale.shape) != tuple(codes.shape[:2]):
            raise ValueError(f"{name}: {what}_scale must be [BATCH, KV_LEN] = {tuple(codes.shape[:2])}, got {tuple(scale.shape)}")
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


def int8_mqa_decode(q, k_codes, k_scale, v_codes, v_scale):
    """softmax(q K^T / sqrt(D)) V with K = k_codes * k_scale[..., None] (likewise V), one KV head for all query heads."""
    check_inputs("int8_mqa_decode", q, k_codes, k_scale, v_codes, v_scale)
    batch, heads, q_len, head_dim = q.shape
    kv_len = k_codes.shape[1]
    out = torch.empty_like(q)
    if out.numel() == 0:
        return out
    if kv_len == 0:
        raise ValueError("int8_mqa_decode: an empty KV cache (KV_LEN = 0) has no attention output")
    n_rows = heads * q_len
    rows = max(16, triton.next_power_of_2(n_rows))  # tl.dot needs at least 16 rows
    block_d = max(16, triton.next_power_of_2(head_dim))
    block_n = min(CONFIG["BLOCK_N"], max(16, triton.next_power_of_2(kv_len)))
    n_tiles = triton.cdiv(kv_len, block_n)
    splits = split_count(batch, n_tiles, sm_count(q.device), CONFIG)
    split_len = triton.cdiv(n_tiles, splits) * block_n
    splits = triton.cdiv(kv_len, split_len)  # no split left without keys
    fused = splits > 1 and CONFIG["COMBINE"] == "last_program"
    if splits > 1:
        part_acc = torch.empty(batch * splits * rows * block_d, dtype=torch.float32, device=q.device)
        part_ml = torch.empty(batch * splits * rows * 2, dtype=torch.float32, device=q.device)
    else:
        part_acc = part_ml = out  # not read or written with one split
    counters = arrival_counters(q.device, batch) if fused else out
    qk_scale = 1.0 / math.sqrt(head_dim) * 1.4426950408889634
    _int8_mqa_decode_split[(batch, splits)](
        q, k_codes, k_scale, v_codes, v_scale, out, part_acc, part_ml, counters,
        *q.stride(), *k_codes.stride(), *k_scale.stride(), *v_codes.stride(), *v_scale.stride(), *out.stride(),
        q_len, n_rows, kv_len, head_dim, split_len, qk_scale,
        ROWS=rows, BLOCK_N=block_n, BLOCK_D=block_d, SPLIT=splits > 1, FUSED_COMBINE=fused,
        PREFETCH_SCALES=bool(CONFIG["PREFETCH_SCALES"]),
        V_ASM=CONFIG["V_CONVERT"] == "asm" and inline_ptx_ok(q),
        num_warps=CONFIG["num_warps"], num_stages=CONFIG["num_stages"],
    )
    if splits > 1 and not fused:
        _int8_mqa_decode_combine[(batch,)](
            part_acc, part_ml, out, *out.stride(), q_len, n_rows, head_dim, splits,
            ROWS=rows, BLOCK_D=block_d, num_warps=4,
        )
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k_codes, k_scale, v_codes, v_scale):
        return int8_mqa_decode(q, k_codes, k_scale, v_codes, v_scale)
