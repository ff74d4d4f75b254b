"""int8 multi-query decode with no K/V byte in a layout of the compiler's choosing (Gluon, Hopper), used by
int8_mqa_decode.py with IMPL "auto" for 16 packed query rows and head dim 128 on compute capability 9.x.

Why: the tl kernel (int8_mqa_decode.py) converts every int8 K/V tile after shared memory, writes the V
tile back in fp16 and reads it again with ldmatrix.trans; Nsight Compute put it at 57% of DRAM peak,
bound by shared memory and instruction issue
(bench/results/int8_mqa_decode/h200/2026-11-23_split_kv_tl_kernel/README.md). Here:

- Each warp streams its own keys with its own softmax state (the warps are the leading axis of every
  tensor; the mma_v2 layout has them on that axis), merged once after the loop through shared memory.
- Codes and scales come in by cp.async into rings of shared-memory stages (16-byte copies, XOR-swizzled
  rows) and go back out 16 bytes at a time to the thread that copied them, straight into the MMA operands:
  nothing is written back, nothing is converted for K.
- S = q K^T runs on int8 tensor cores (mma m16n8k32 s8). q is split once into two int8 parts,
  q ~ (hi + lo / 127) * max|q| / 127 (error below max|q| / 16000 per element, finer than bf16), two MMAs,
  exact int32 sums.
- The reduction over the head dim may run in any order that q and K share: the dims are permuted (the
  reshape/permute in `_k_operand`, the same in `_q_operand`) so that each thread's B-operand bytes of a
  key are 32 contiguous bytes. The reshape/permute gives the operand layout exactly (assert_trivial).
- P V runs in fp16 (m16n8k16): P comes from the S accumulator without moving (the FA2 identity); the V
  operand needs two keys per 32-bit register at one output dim. The output dims are permuted so that a
  thread's 16 dims of a key are contiguous; one inline-PTX block turns two such words (4 dims of two
  keys) into four fp16x2 key pairs: two byte interleaves and four permutes into the mantissa of fp16
  1024 (1024 + (x ^ 0x80) = x + 1152, no subtract). The 1152 bias is removed once at the end: a fifth
  n-tile multiplies P by ones, which accumulates sum_k P[r, k] through every rescale, and
  O = acc - 1152 * that sum.
- The K scale multiplies the score tile, the V scale P (divided by the largest V scale the warp has seen so
  far, so P fits fp16 whatever the scales; a larger one rescales the warp's accumulator as a larger max does).

Measured (H200, bench/results/int8_mqa_decode/h200/2026-11-27_fixed_costs/README.md): correct on every check. With a clean L2 20.85 /
20.83 / 23.44 us at B256 KV1024 (4 warps, two programs an SM) / B128 KV2048 / B64 KV4096 (8 warps, one an SM),
3.27 / 3.27 / 2.91 TB/s of KV cache, 1.28-1.47x the tl kernel; 1.06-1.22x with L2 flushed by writing. What
bounds it: it streams at the 1 GB read rate (4.4-4.7 TB/s, the slope over KV lengths); what is left above the
floor is fixed cost a program (~6 us against the read-only kernel's ~1.8): launch with 134 KB of shared memory,
the first copies' latency, the merge and, with splits, the last split's combine.
"""

import torch
import triton
from _cached_launch import launch, launchable
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp
from triton.experimental.gluon.language.nvidia.ampere import mma_v2

HEAD_DIM = gl.constexpr(128)
ROWS = gl.constexpr(16)


BUILT_FOR_TRITON = "3.6."  # the Gluon layout and cp.async API this kernel is written in (3.9's differ: no compile)


def usable(q: torch.Tensor, kc: torch.Tensor, ks: torch.Tensor, vc: torch.Tensor, vs: torch.Tensor) -> bool:
    """Triton 3.6, 16 packed query rows (heads x new tokens), head dim 128, an even KV length, on a Hopper
    GPU, and every copy aligned: cp.async copies 16 bytes of q and codes and 4 bytes of scales at a time, so
    the codes' batch stride must be a multiple of 16 bytes and the scales' of 16 elements (what the JIT
    specialises on). Elsewhere int8_mqa_decode keeps its tl kernel."""
    return shape_usable(q, kc, ks, vc, vs) and aligned(q, kc, ks, vc, vs)


def shape_usable(q: torch.Tensor, kc: torch.Tensor, ks: torch.Tensor, vc: torch.Tensor, vs: torch.Tensor) -> bool:
    """usable() but for the pointers: what the shapes, strides, dtypes and device decide (once per shape)."""
    batch, heads, q_len, head_dim = q.shape
    return (
        triton.__version__.startswith(BUILT_FOR_TRITON)
        and q.is_cuda
        and torch.cuda.get_device_capability(q.device)[0] == 9
        and heads * q_len == ROWS.value
        and head_dim == HEAD_DIM.value
        and kc.shape[1] % 2 == 0
        and q.dtype in (torch.bfloat16, torch.float16)
        and ks.dtype in (torch.bfloat16, torch.float16)
        and vs.dtype in (torch.bfloat16, torch.float16)
        and all(t.stride(0) % 16 == 0 for t in (kc, vc, ks, vs))
    )


def aligned(*tensors: torch.Tensor) -> bool:
    """usable()'s part that changes from call to call: 16-byte aligned q, K/V codes and scales."""
    return all(t.data_ptr() % 16 == 0 for t in tensors)


@gluon.constexpr_function
def _log2(x) -> int:
    return int(getattr(x, "value", x)).bit_length() - 1


@gluon.constexpr_function
def k_layout(warps: int, keys: int) -> gl.DistributedLinearLayout:
    """[warps, keys, 128 bytes] of K codes as loaded: per thread 32 contiguous bytes of one key (dims
    32t..32t+31, t = lane % 4), keys over lane // 4 and the registers. Reshaped and permuted it is the int8 mma
    B-operand layout (registers k1 k2 k16 k32 k64 n8 n16.., lanes k4 k8 n1 n2 n4): logical dim
    k = i + 4t + 16h + 32j + 64u reads byte i + 4h + 8j + 16u + 32t of the row."""
    return gl.DistributedLinearLayout(
        reg_bases=[[0, 0, 1], [0, 0, 2], [0, 0, 4], [0, 0, 8], [0, 0, 16]]
        + [[0, 8 << i, 0] for i in range(_log2(keys) - 3)],
        lane_bases=[[0, 0, 32], [0, 0, 64], [0, 1, 0], [0, 2, 0], [0, 4, 0]],
        warp_bases=[[1 << i, 0, 0] for i in range(_log2(warps))],
        block_bases=[],
        shape=[warps, keys, HEAD_DIM.value],
    )


@gluon.constexpr_function
def v_layout(warps: int, keys: int, pairs: bool) -> gl.DistributedLinearLayout:
    """[warps, keys, 128 bytes] of V codes: per thread 16 contiguous bytes (dims 16g.., g = lane // 4)
    of keys 2t, 2t+1, 2t+8, 2t+9 (+16.., t = lane % 4). pairs=False: registers in load order (16-byte
    loads); pairs=True: 4 dims of key 2t then the same 4 dims of key 2t+1, the order the conversion
    takes them in (the same 32-bit words, renamed)."""
    dims = [[0, 0, 1], [0, 0, 2], [0, 0, 4], [0, 0, 8]]
    keys_reg = [[0, 1, 0]] + [[0, 8 << i, 0] for i in range(_log2(keys) - 3)]
    regs = dims[:2] + keys_reg[:1] + dims[2:] + keys_reg[1:] if pairs else dims + keys_reg
    return gl.DistributedLinearLayout(
        reg_bases=regs,
        lane_bases=[[0, 2, 0], [0, 4, 0], [0, 0, 16], [0, 0, 32], [0, 0, 64]],
        warp_bases=[[1 << i, 0, 0] for i in range(_log2(warps))],
        block_bases=[],
        shape=[warps, keys, HEAD_DIM.value],
    )


# Codes in shared memory ([stages, warps, keys, 128 bytes]) as rows of 128 bytes, 16-byte chunk c of row r
# stored at chunk c ^ (r % 8): the 8 lanes of a quarter-warp then read 8 different 4-bank groups (K: chunks
# 0, 2, 4, 6 of an even key and 1, 3, 5, 7 of the odd one; V: 2 chunks each of keys 0, 2, 4, 6). Each thread
# reads back exactly the bytes it copied in. The layout names the per-stage dims ([warps, keys, bytes]).
KV_SMEM = gl.constexpr(gl.SwizzledSharedLayout(vec=16, per_phase=1, max_phase=8, order=[2, 1, 0]))


@gluon.jit
def _k_operand(kx, W: gl.constexpr, NK: gl.constexpr, DB8: gl.constexpr):
    """[W, NK, 128] K codes as loaded -> [W, 128, NK] B operand, head dims reordered (see k_layout)."""
    k7 = gl.reshape(kx, [W, NK, 4, 2, 2, 2, 4])  # byte = 32t + 16u + 8j + 4h + i
    k7 = gl.permute(k7, (0, 3, 4, 5, 2, 6, 1))  # -> [W, u, j, h, t, i, NK]
    return gl.convert_layout(gl.reshape(k7, [W, HEAD_DIM, NK]), DB8, assert_trivial=True)


# Two words of V codes (4 dims of key 2t, the same dims of key 2t+1) -> four fp16x2 pairs
# (key 2t, key 2t+1) of one dim each, value code + 1152: bytes interleaved, then each byte
# (^ 0x80 = code + 128) under 0x64 (fp16 1024 + byte).
_V_PAIRS_PTX = gl.constexpr("""{
    .reg .b32 a, b, lo, hi;
    xor.b32 a, $4, 0x80808080;
    xor.b32 b, $5, 0x80808080;
    prmt.b32 lo, a, b, 0x5140;
    prmt.b32 hi, a, b, 0x7362;
    prmt.b32 $0, lo, 0x64646464, 0x5140;
    prmt.b32 $1, lo, 0x64646464, 0x7362;
    prmt.b32 $2, hi, 0x64646464, 0x5140;
    prmt.b32 $3, hi, 0x64646464, 0x7362;
    }""")


@gluon.jit
def _v_operand(vx, W: gl.constexpr, NK: gl.constexpr, V_PAIRS: gl.constexpr, DB16: gl.constexpr):
    """[W, NK, 128] V codes as loaded -> [W, NK, 128] fp16 B operand (codes + 1152) with the output
    dims reordered (n = g + 8r is head dim 16g + r). The inline PTX writes key pairs where the tensor's layout says dim pairs:
    the reshape/permute below names the elements for what they hold."""
    vx = gl.convert_layout(vx, V_PAIRS)  # the same 32-bit registers in another order
    y = gl.inline_asm_elementwise(_V_PAIRS_PTX, "=r,=r,=r,=r,r,r", [vx], dtype=gl.float16, is_pure=True, pack=8)
    # y's element (key = 2kh + kb, dim = 16g + 4m + 2d1 + d0) holds key 2kh + d0, dim 16g + 4m + 2kb + d1
    y7 = gl.reshape(y, [W, NK // 2, 2, 8, 4, 2, 2])  # [W, kh, kb, g, m, d1, d0]
    y7 = gl.permute(y7, (0, 1, 6, 4, 2, 5, 3))  # -> [W, kh, key bit, m, dim bit 1, dim bit 0, g]
    return gl.convert_layout(gl.reshape(y7, [W, NK, HEAD_DIM]), DB16)


@gluon.jit
def _copy_step(
    k_dst, v_dst, ks_dst, vs_dst, k_base, v_base, ks_base, vs_base, start, hi, k_off, v_off, k_rows, v_rows, s_rows,
    EVEN: gl.constexpr,
):  # fmt: skip
    """cp.async of one step's K and V codes and scales (each warp its NK keys), one commit group. EVEN:
    every step whole, and a step past the split's end (prefetched, never used) re-reads its last step:
    no predicates. Else zeros past the end."""
    if EVEN:
        start = gl.minimum(start, hi - k_rows.shape[0] * k_rows.shape[1])
    cols = start + s_rows
    if EVEN:
        cp.async_copy_global_to_shared(k_dst, k_base + start * HEAD_DIM + k_off)
        cp.async_copy_global_to_shared(v_dst, v_base + start * HEAD_DIM + v_off)
        cp.async_copy_global_to_shared(ks_dst, ks_base + cols)
        cp.async_copy_global_to_shared(vs_dst, vs_base + cols)
    else:
        cp.async_copy_global_to_shared(k_dst, k_base + start * HEAD_DIM + k_off, mask=(start + k_rows) < hi)
        cp.async_copy_global_to_shared(v_dst, v_base + start * HEAD_DIM + v_off, mask=(start + v_rows) < hi)
        pair_live = (start + (s_rows // 2) * 2) < hi  # the same for both scales of a 4-byte copy (KV_LEN is even)
        cp.async_copy_global_to_shared(ks_dst, ks_base + cols, mask=pair_live)
        cp.async_copy_global_to_shared(vs_dst, vs_base + cols, mask=pair_live)
    cp.commit_group()


@gluon.jit
def _q_operand(q8, W: gl.constexpr, DA8: gl.constexpr):
    """[16, 128] int8 in head-dim order -> [W, 16, 128], every warp the whole tile, in the A operand's
    layout with the dims in the K tile's order (once a program)."""
    q3 = gl.expand_dims(gl.convert_layout(q8, gl.SliceLayout(0, DA8)), 0)
    q3 = q3 + gl.zeros([W, ROWS, HEAD_DIM], gl.int8, DA8)
    q7 = gl.reshape(q3, [W, ROWS, 4, 2, 2, 2, 4])  # dim = 32t + 16u + 8j + 4h + i
    q7 = gl.permute(q7, (0, 1, 3, 4, 5, 2, 6))  # -> [W, 16, u, j, h, t, i]
    return gl.convert_layout(gl.reshape(q7, [W, ROWS, HEAD_DIM]), DA8)


@gluon.jit
def _row_operand(v, W: gl.constexpr, ROW_L: gl.constexpr):
    """[16] per-row values -> [W, 16], every warp all rows."""
    return gl.expand_dims(gl.convert_layout(v, gl.SliceLayout(0, ROW_L)), 0) + gl.zeros([W, ROWS], gl.float32, ROW_L)


@gluon.jit
def _step(
    kx, vx, k_sc, v_sc, live, q_hi, q_lo, row_mult, v_top, m_i, l_i, acc, p_sum, ones, zero_s,
    W: gl.constexpr, NK: gl.constexpr, EVEN: gl.constexpr, LAZY: gl.constexpr,
    DB8: gl.constexpr, DA16: gl.constexpr, DB16: gl.constexpr, LV_PAIRS: gl.constexpr, ROW_L: gl.constexpr,
):  # fmt: skip
    """Fold one step's keys into each warp's (max, sum, acc, sum of P, largest V scale so far)."""
    kt = _k_operand(kx, W, NK, DB8)
    s_hi = mma_v2(q_hi, kt, zero_s)
    s_lo = mma_v2(q_lo, kt, zero_s)
    t = (s_hi * 127 + s_lo).to(gl.float32) * k_sc[:, None, :]
    if not EVEN:
        t = gl.where(live[:, None, :], t, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(t, 2) * row_mult)
    # Each warp's acc (and sum of P) is in units of the largest V scale it has seen so far, so that P times
    # the V scale over it fits fp16 (no pass over the split's scales before the loop: 0.9 us at B128 on
    # the H200); a larger one rescales them along with the max's alpha.
    top_new = gl.maximum(v_top, gl.max(v_sc, 1))
    shrink = gl.expand_dims(gl.convert_layout(v_top / top_new, gl.SliceLayout(1, ROW_L)), 1)
    v_top = top_new
    v_w = v_sc / top_new[:, None]
    if LAZY:
        # FlashAttention-4's conditional rescale: keep the stale max (P up to 2^8, still inside fp16 and
        # exact in the sums) until some row's max grows by more than 8 (log2 units) or some warp's V scale
        # grows, so most steps skip the [16, 128] multiply; the condition is reduced over the program
        # (uniform branch). NaN (no live key yet) never rescales.
        grow = gl.max(gl.max(m_new - m_i, 1), 0)
        if (grow > 8.0) | (gl.min(gl.min(shrink, 1), 0) < 1.0):
            m_next = gl.where(grow > 8.0, m_new, m_i)
            m_safe = gl.where(m_next == float("-inf"), 0.0, m_next)
            alpha = gl.exp2(m_i - m_safe)
            l_i = l_i * alpha
            alpha = alpha * shrink
            acc = acc * alpha[:, :, None]
            p_sum = p_sum * alpha[:, :, None]
            m_i = m_next
        m_safe = gl.where(m_i == float("-inf"), 0.0, m_i)
        p = gl.exp2(t * row_mult[:, :, None] - m_safe[:, :, None])
        l_i = l_i + gl.sum(p, 2)
    else:
        m_safe = gl.where(m_new == float("-inf"), 0.0, m_new)  # a warp with no live key yet
        p = gl.exp2(t * row_mult[:, :, None] - m_safe[:, :, None])
        alpha = gl.exp2(m_i - m_safe)
        l_i = l_i * alpha + gl.sum(p, 2)
        alpha = alpha * shrink
        acc = acc * alpha[:, :, None]
        p_sum = p_sum * alpha[:, :, None]
        m_i = m_new
    pv = gl.convert_layout((p * v_w[:, None, :]).to(gl.float16), DA16, assert_trivial=True)
    vt = _v_operand(vx, W, NK, LV_PAIRS, DB16)
    acc = mma_v2(pv, vt, acc)
    p_sum = mma_v2(pv, ones, p_sum)
    return m_i, l_i, acc, p_sum, v_top


@gluon.jit
def _decode_regs_kernel(
    Q, KC, KS, VC, VS, O, PART_ACC, PART_ML, COUNTERS,
    kv_len, split_len, stride_kb, stride_vb, stride_ksb, stride_vsb, qk_scale,
    W: gl.constexpr, NK: gl.constexpr, STAGES: gl.constexpr, LAZY: gl.constexpr, SPLIT: gl.constexpr,
    EVEN: gl.constexpr,
):  # fmt: skip
    MMA: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[W, 1, 1], instr_shape=[1, 16, 8])
    DA8: gl.constexpr = gl.DotOperandLayout(0, MMA, 4)
    DB8: gl.constexpr = gl.DotOperandLayout(1, MMA, 4)
    DA16: gl.constexpr = gl.DotOperandLayout(0, MMA, 2)
    DB16: gl.constexpr = gl.DotOperandLayout(1, MMA, 2)
    LK: gl.constexpr = k_layout(W, NK)
    LV: gl.constexpr = v_layout(W, NK, False)
    LV_PAIRS: gl.constexpr = v_layout(W, NK, True)
    ROW_L: gl.constexpr = gl.SliceLayout(2, MMA)  # [W, 16] per-row state
    COL_L: gl.constexpr = gl.SliceLayout(1, MMA)  # [W, NK] per-key scales
    STEP: gl.constexpr = W * NK
    SCALE_SMEM: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])

    b = gl.program_id(0)
    split = gl.program_id(1)
    n_splits = gl.num_programs(1)
    lo = split * split_len
    hi = gl.minimum(lo + split_len, kv_len)
    k_base = KC + b.to(gl.int64) * stride_kb
    v_base = VC + b.to(gl.int64) * stride_vb
    ks_base = KS + b.to(gl.int64) * stride_ksb
    vs_base = VS + b.to(gl.int64) * stride_vsb

    # per-warp offsets of one step: warp w takes keys start + w * NK ...
    wk = gl.arange(0, W, layout=gl.SliceLayout(1, gl.SliceLayout(2, LK)))
    nk = gl.arange(0, NK, layout=gl.SliceLayout(0, gl.SliceLayout(2, LK)))
    ck = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, gl.SliceLayout(1, LK)))
    k_rows = wk[:, None, None] * NK + nk[None, :, None]
    k_off = k_rows * HEAD_DIM + ck[None, None, :]
    wv = gl.arange(0, W, layout=gl.SliceLayout(1, gl.SliceLayout(2, LV)))
    nv = gl.arange(0, NK, layout=gl.SliceLayout(0, gl.SliceLayout(2, LV)))
    cv = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, gl.SliceLayout(1, LV)))
    v_rows = wv[:, None, None] * NK + nv[None, :, None]
    v_off = v_rows * HEAD_DIM + cv[None, None, :]
    ws = gl.arange(0, W, layout=gl.SliceLayout(1, COL_L))
    ns = gl.arange(0, NK, layout=gl.SliceLayout(0, COL_L))
    s_rows = ws[:, None] * NK + ns[None, :]

    # q [16, 128] (row r = head * Q_LEN + token), 16 contiguous bytes a load, the rows spread over the
    # warps, split into int8 hi + lo / 127 in units of max|q_r| / 127; then every warp takes the whole
    # tile (through shared memory, once) with the dims in the K tile's order in the A operand's layout.
    QL: gl.constexpr = gl.BlockedLayout([1, 8], [2, 16], [W, 1], [1, 0])
    rq = gl.arange(0, ROWS, layout=gl.SliceLayout(1, QL))
    cq = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, QL))
    # q comes by cp.async too, in a commit group of its own ahead of the K/V copies: each thread reads back
    # the 16 bytes it copied once that group has landed, while the K/V copies are still in flight. (A plain
    # load had its bf16 -> fp32 conversion scheduled before the K/V copies were issued: q's latency and
    # the first step's in series, ~0.8 us at B128.)
    q_smem = gl.allocate_shared_memory(Q.dtype.element_ty, [ROWS, HEAD_DIM], SCALE_SMEM)
    cp.async_copy_global_to_shared(
        q_smem, Q + b.to(gl.int64) * (ROWS * HEAD_DIM) + rq[:, None] * HEAD_DIM + cq[None, :]
    )
    cp.commit_group()
    # Then STAGES - 1 steps of codes and scales in flight (cp.async into rings of shared-memory stages: no
    # registers held, nothing for the compiler to sink, no scoreboard shared with the math), before the
    # math on q, so that their latencies overlap.
    k_smem = gl.allocate_shared_memory(gl.int8, [STAGES, W, NK, HEAD_DIM], KV_SMEM)
    v_smem = gl.allocate_shared_memory(gl.int8, [STAGES, W, NK, HEAD_DIM], KV_SMEM)
    ks_smem = gl.allocate_shared_memory(KS.dtype.element_ty, [STAGES, W, NK], SCALE_SMEM)
    vs_smem = gl.allocate_shared_memory(VS.dtype.element_ty, [STAGES, W, NK], SCALE_SMEM)
    for i in gl.static_range(STAGES - 1):
        _copy_step(
            k_smem.index(i), v_smem.index(i), ks_smem.index(i), vs_smem.index(i), k_base, v_base, ks_base, vs_base,
            lo + i * STEP, hi, k_off, v_off, k_rows, v_rows, s_rows, EVEN,
        )  # fmt: skip

    # P * v_scale / v_top <= 1 (fits fp16); acc in units of v_top
    v_top = gl.full([W], 1e-30, gl.float32, gl.SliceLayout(1, COL_L))  # each warp's largest V scale so far
    cp.wait_group(STAGES - 1)  # q's group (the K/V copies may still be in flight)
    qf = q_smem.load(QL).to(gl.float32)
    top = gl.max(gl.abs(qf), 1)
    top = gl.where(top > 0, top, 1.0)
    x = qf * (127.0 / top)[:, None]
    hi_i = x.to(gl.int32)  # toward zero: |x - hi| < 1
    q_hi = _q_operand(hi_i.to(gl.int8), W, DA8)
    q_lo = _q_operand(((x - hi_i.to(gl.float32)) * 127.0).to(gl.int32).to(gl.int8), W, DA8)
    # scores in the exp2 domain: (127 hi.k + lo.k) * k_scale * row_mult
    row_mult = _row_operand(top * (qk_scale / (127.0 * 127.0)), W, ROW_L)

    m_i = gl.full([W, ROWS], float("-inf"), gl.float32, ROW_L)
    l_i = gl.zeros([W, ROWS], gl.float32, ROW_L)
    acc = gl.zeros([W, ROWS, HEAD_DIM], gl.float32, MMA)
    p_sum = gl.zeros([W, ROWS, 8], gl.float32, MMA)  # sum_k P_f16[r, k] in every column
    ones = gl.full([W, NK, 8], 1.0, gl.float16, DB16)
    zero_s = gl.zeros([W, ROWS, NK], gl.int32, MMA)

    stage = 0
    for start in range(lo, hi, STEP):
        ahead = (stage + STAGES - 1) % STAGES
        _copy_step(
            k_smem.index(ahead), v_smem.index(ahead), ks_smem.index(ahead), vs_smem.index(ahead),
            k_base, v_base, ks_base, vs_base, start + (STAGES - 1) * STEP, hi, k_off, v_off, k_rows, v_rows, s_rows,
            EVEN,
        )  # fmt: skip
        cp.wait_group(STAGES - 1)
        kx = k_smem.index(stage).load(LK)
        vx = v_smem.index(stage).load(LV)
        k_sc = ks_smem.index(stage).load(COL_L).to(gl.float32)
        v_sc = vs_smem.index(stage).load(COL_L).to(gl.float32)
        live = (start + s_rows) < hi
        m_i, l_i, acc, p_sum, v_top = _step(
            kx, vx, k_sc, v_sc, live, q_hi, q_lo, row_mult, v_top, m_i, l_i, acc, p_sum, ones, zero_s,
            W, NK, EVEN, LAZY, DB8, DA16, DB16, LV_PAIRS, ROW_L,
        )  # fmt: skip
        stage = (stage + 1) % STAGES
    cp.wait_group(0)

    # Merge the warps. Each warp stores its tile as it leaves the loop (bias removed, in the unit of its
    # own V-scale maximum, not yet weighted) with its row maxima and sums; after one barrier each thread
    # weighs and sums all W tiles at its 4 columns of a row (the weights exp2(m_w - m) from the stored
    # maxima). No cross-warp reduction before the stores: the merge cost 5 barriers in a row before.
    bias = gl.max(p_sum, 2) * 1152.0
    v_w = gl.expand_dims(gl.convert_layout(v_top, gl.SliceLayout(1, ROW_L)), 1)
    o_w = (acc - bias[:, :, None]) * v_w[:, :, None]  # [W, 16, 128], column n holds head dim 16 (n % 8) + n // 8
    # The tiles go to shared memory as the MMA layout holds them (8 bytes a thread: rows 512 bytes apart, the
    # 4 threads of a row 8 bytes apart), 32-byte units of a row XOR-swizzled by row % 4: a half-warp's 16
    # stores then hit 16 different 8-byte bank pairs. (Unswizzled, or permuted to head-dim order first,
    # every thread of a warp hit the same banks: 32 wavefronts a store, 3 us a call at B128 KV2048.)
    red_l: gl.constexpr = gl.SwizzledSharedLayout(vec=8, per_phase=1, max_phase=4, order=[2, 1, 0])
    red = gl.allocate_shared_memory(gl.float32, [W, ROWS, HEAD_DIM], red_l)
    red.store(o_w)
    m_smem = gl.allocate_shared_memory(gl.float32, [W, ROWS], SCALE_SMEM)
    l_smem = gl.allocate_shared_memory(gl.float32, [W, ROWS], SCALE_SMEM)
    m_smem.store(m_i)
    l_smem.store(l_i)
    EL: gl.constexpr = gl.BlockedLayout([W, 1, 4], [1, 1, 32], [1, W, 1], [2, 1, 0])
    OL: gl.constexpr = gl.SliceLayout(0, EL)
    WL: gl.constexpr = gl.SliceLayout(2, EL)  # [W, 16]: a thread's row of every warp, in its registers
    m_all = m_smem.load(WL)
    m = gl.max(m_all, 0)
    wgt = gl.exp2(m_all - gl.where(m == float("-inf"), 0.0, m)[None, :])  # a warp with no live key: 0
    l = gl.sum(wgt * l_smem.load(WL), 0)
    o = gl.sum(red.load(EL) * wgt[:, :, None], 0)  # [16, 128], columns as in o_w
    ro = gl.arange(0, ROWS, layout=gl.SliceLayout(1, OL))
    co = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, OL))
    o_cols = ro[:, None] * HEAD_DIM + ((co % 8) * 16 + co // 8)[None, :]  # head-dim order in memory
    RL: gl.constexpr = gl.SliceLayout(1, OL)
    if SPLIT:
        part = (b * n_splits + split) * ROWS
        gl.store(PART_ACC + part * HEAD_DIM + o_cols, o)
        rl = gl.arange(0, ROWS, layout=RL)
        gl.store(PART_ML + 2 * (part + rl), gl.convert_layout(m, RL))
        gl.store(PART_ML + 2 * (part + rl) + 1, gl.convert_layout(l, RL))
        # the batch element's last split to finish merges them all (acq_rel atomic) and resets the counter
        if gl.atomic_add(COUNTERS + b, 1) == n_splits - 1:
            _combine(PART_ACC, PART_ML, O, b, n_splits, W)
            gl.atomic_xchg(COUNTERS + b, 0)
    else:
        out = o / gl.convert_layout(l, RL)[:, None]
        gl.store(O + b.to(gl.int64) * (ROWS * HEAD_DIM) + o_cols, out.to(O.dtype.element_ty))


@gluon.jit
def _combine(PART_ACC, PART_ML, O, b, n_splits, W: gl.constexpr):
    """out = sum_s exp2(m_s - m) acc_s / sum_s exp2(m_s - m) l_s over batch element b's splits."""
    L: gl.constexpr = gl.BlockedLayout([1, 4], [2, 16], [W, 1], [1, 0])
    r = gl.arange(0, ROWS, layout=gl.SliceLayout(1, L))
    c = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, L))
    first = b * n_splits * ROWS
    m = gl.full([ROWS], float("-inf"), gl.float32, gl.SliceLayout(1, L))
    for s in range(n_splits):
        m = gl.maximum(m, gl.load(PART_ML + 2 * (first + s * ROWS + r)))
    m = gl.where(m == float("-inf"), 0.0, m)
    l = gl.zeros([ROWS], gl.float32, gl.SliceLayout(1, L))
    acc = gl.zeros([ROWS, HEAD_DIM], gl.float32, L)
    for s in range(n_splits):
        part = first + s * ROWS
        w = gl.exp2(gl.load(PART_ML + 2 * (part + r)) - m)
        l += w * gl.load(PART_ML + 2 * (part + r) + 1)
        acc += w[:, None] * gl.load(PART_ACC + (part + r)[:, None] * HEAD_DIM + c[None, :])
    out = acc / l[:, None]
    gl.store(O + b.to(gl.int64) * (ROWS * HEAD_DIM) + r[:, None] * HEAD_DIM + c[None, :], out.to(O.dtype.element_ty))


class _Plan:
    __slots__ = (
        "grid",
        "split_len",
        "even",
        "part_acc",
        "part_ml",
        "counters",
        "consts",
        "scalars",
        "const_args",
        "compiled",
    )


_PLANS: dict = {}


def split_plan(batch: int, kv_len: int, sms: int, step: int, ctas_per_sm: int) -> tuple[int, int]:
    """(splits, keys per split): about ctas_per_sm programs per SM over the grid, never more than fit
    at once when the batch alone does not fill them, each split a whole number of steps."""
    steps = triton.cdiv(kv_len, step)
    splits = max(1, min(steps, (ctas_per_sm * sms) // batch))
    split_len = triton.cdiv(steps, splits) * step
    return triton.cdiv(kv_len, split_len), split_len


def make_plan(q, kc, ks, vc, vs, counters_of, config: dict, warps: int, ctas_per_sm: int) -> _Plan:
    """Everything of a call that the shapes, strides and config decide: grid, split buffers, launch arguments
    (decode() keeps one per shape; bench/investigations/int8_mqa_decode/decode_timeline.py launches a stamped copy with it)."""
    batch, _, _, _ = q.shape
    kv_len = kc.shape[1]
    keys, stages = config["REGS_KEYS"], config["REGS_STAGES"]
    lazy = bool(config.get("REGS_LAZY_RESCALE", False))
    step = warps * keys
    sms = torch.cuda.get_device_properties(q.device).multi_processor_count
    splits, split_len = split_plan(batch, kv_len, sms, step, ctas_per_sm)
    plan = _Plan()
    plan.grid = (batch, splits)
    plan.split_len = split_len
    plan.even = kv_len % step == 0 and split_len % step == 0
    if splits > 1:
        plan.part_acc = torch.empty(batch * splits * ROWS * HEAD_DIM, dtype=torch.float32, device=q.device)
        plan.part_ml = torch.empty(batch * splits * ROWS * 2, dtype=torch.float32, device=q.device)
        plan.counters = counters_of(q.device, batch)
    else:
        plan.part_acc = plan.part_ml = plan.counters = None
    plan.consts = dict(W=warps, NK=keys, STAGES=stages, LAZY=lazy, SPLIT=splits > 1, EVEN=plan.even, num_warps=warps)
    plan.const_args = tuple(v for k, v in plan.consts.items() if k != "num_warps")
    assert _decode_regs_kernel.arg_names[-len(plan.const_args) :] == list(plan.consts)[:-1]
    qk_scale = 1.4426950408889634 / HEAD_DIM.value**0.5
    plan.scalars = (kv_len, plan.split_len, kc.stride(0), vc.stride(0), ks.stride(0), vs.stride(0), qk_scale)
    plan.compiled = None
    return plan


def decode(q, kc, ks, vc, vs, counters_of, config: dict, key: tuple, warps: int, ctas_per_sm: int) -> torch.Tensor:
    """softmax(q K^T / sqrt(128)) V for 16 packed query rows; q [B, HQ, QL, 128] contiguous, codes
    [B, KV, 128] with rows 128 bytes apart, scales [B, KV] unit stride (int8_mqa_decode checks), by programs
    of `warps` warps, about `ctas_per_sm` an SM. key: the caller's plan key, holding every shape, stride,
    dtype and config value this call's plan depends on."""
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS[key] = make_plan(q, kc, ks, vc, vs, counters_of, config, warps, ctas_per_sm)
    out = torch.empty_like(q)
    split = plan.part_acc is not None  # else out stands in for the split buffers (not read or written)
    tensors = (q, kc, ks, vc, vs, out) + ((plan.part_acc, plan.part_ml, plan.counters) if split else (out,) * 3)
    if plan.compiled is not None:
        try:  # the launcher takes every parameter in order, constexprs too (num_warps is an option)
            if launch(plan.compiled, plan.grid, tensors, plan.scalars + plan.const_args):
                return out
        except Exception:  # an incompatible Triton: this plan launches through the JIT from now on
            plan.compiled = None
    compiled = _decode_regs_kernel[plan.grid](*tensors, *plan.scalars, **plan.consts)
    if config.get("LAUNCH", "cached") == "cached" and launchable(compiled):
        plan.compiled = compiled
    return out
