"""
---
title: Conv1D with bias, "same" padding, as an implicit GEMM (tl.dot over CIN x KSIZE), bias fused
kind: kernels
family: [conv1d, convolution]
tags: [convolution, conv1d, implicit-gemm, tensor-core, epilogue-fusion, recommendation, fp16, fp32, tf32x3]
hardware: [any]
spec: conv1d
---
y[b, co, l] = bias[co] + sum over ci, t of w[co, ci, t] * x[b, ci, l + t - KSIZE // 2] (zero
outside [0, L)). x [B, CIN, L], w [COUT, CIN, KSIZE], bias [COUT], y [B, COUT, L]; x, w and bias
are read in place through their strides (a view costs no copy).

One program computes a [BLOCK_CO, BLOCK_L] tile of y for one sample: the GEMM
W [COUT, CIN * KSIZE] @ im2col(x) [CIN * KSIZE, L] without building im2col. The contraction
walks CIN in BLOCK_CI slices and, inside each, the KSIZE taps: tap t multiplies the weight slice
w[:, ci, t] with x[ci, l + t - pad], the same x tile shifted by t - pad columns. The accumulator
is fp32; the bias is added in the epilogue and y is written once in x's dtype, so x is read from
HBM about once and y written once: the fewest bytes possible.

How the shifted tiles are made (CONFIG["shift"], and ["fp32_shift"] for fp32 inputs):
* "load": one masked load per tap. The odd taps start one element off a 16-byte boundary: scalar
  loads that the pipelined loop cannot stage with cp.async, so the loop waits on them.
* "gather" (the FP16 default): the x tile is loaded once per CIN slice, aligned (cp.async), and
  the other taps are made on chip with tl.gather along L; the one column a shift brings in from
  the neighbouring L tile is loaded on its own (KSIZE 3; other KSIZE need one L tile per row).
* "pairs" (KSIZE 3, the FP32 default): even and odd output columns are computed apart. With pairs
  P_s[m] = (x[2(m+s)], x[2(m+s)+1]): y[2m] = w0 P_-1.odd + w1 P_0.even + w2 P_0.odd and
  y[2m+1] = w0 P_0.even + w1 P_0.odd + w2 P_+1.even. Every x tile starts on a pair boundary
  (cp.async-able); six dots of half width per CIN slice, the two accumulators interleaved with
  tl.join for one vectorised store.
* "prefetch" (KSIZE 3): "load", with the next slice's three tiles loaded before this slice's dots.
* "out" (KSIZE 3, L as M): no shifted x tile at all. Z_t = x^T w_t^T for the aligned x tile (the
  A operand of all three taps, straight from shared memory), three accumulators, and once per tile
  y[l] = Z_0[l - 1] + Z_1[l] + Z_2[l + 1] (tl.gather along the rows); the two rows a shift brings
  in from outside the tile, W_0 x[l0 - 1] and W_2 x[l0 + BLOCK_L], are matrix-vector products.
* "pairs_out" (KSIZE 3, L as M): "out" on even and odd columns apart (x_e, x_o split from the one
  aligned load): y_e[m] = a_e[m] + b_m[m - 1], y_o[m] = a_o[m] + b_p[m + 1] with a_e = W1 x_e +
  W2 x_o, a_o = W0 x_e + W1 x_o, b_m = W0 x_o, b_p = W2 x_e: four half-length accumulators (2/3 of
  "out"'s registers), two of them shifted.
CONFIG["orient"] ("fp32_orient"): "l_m" makes L the MMA's M (x^T the A operand, COUT the N), and
then CONFIG["split_co"] covers COUT = 96 as 64 + 32 columns instead of one 128 tile (25% less MMA
work). CONFIG["fp32_presplit"]: FP32 bf16x3 weights split into bf16 hi and lo once on the host.
CONFIG["align_hints"] tells the compiler (as (v // A) * A: tl.multiple_of on an argument is lost)
that x's row stride and L are multiples of the 16-byte vector, checked on the host: y is then
stored with vector stores and the aligned loads are staged asynchronously.

Precision: fp16/bf16 inputs go to the tensor cores as they are (fp32 accumulation). fp32 inputs
use CONFIG["fp32_precision"]: "bf16x3" (operands split into bf16 hi and lo parts, three bf16
products; ~16 mantissa bits, enough for the spec's atol 1e-4, rtol 5e-4 at CIN * KSIZE = 288;
"pairs" splits each operand once per CIN slice itself, tl.dot would split it again per dot),
"tf32x3" (three tf32 products), "bf16x6" or "ieee" (plain fp32 FMA, slow); plain "tf32" misses
that tolerance and is not offered.

Measured on an H200 (bench/results/recsys/h200/2026-11-23_conv1d_fm_restructured/ and
bench/results/conv1d/h200/2026-11-23_loop_count/): B = 2048,
(CIN, COUT, L) = (96, 96, 200). FP16 "gather" with CIN slices of 32, the next slice's x tile
prefetched (prefetch_x) and no neighbour-column loads with one L tile (one_tile_halo False):
0.1425 ms (F.conv1d 0.3405: 2.39x; the channels_last conv2d trick 0.292; the earlier "gather" with
slices of 16 0.152, the "load" kernel 0.217). FP32 "pairs" with slices of 32 and the weight split
on the host (fp32_presplit): 0.318 ms (F.conv1d, which runs TF32, 0.477: 1.50x; earlier 0.326).
Compiled for sm_90a, the x tile of "gather" (and of "out"/"pairs_out", whose x feeds register
operands) is read with 2-byte scalar loads, the layout its consumer wants, which the pipeliner
cannot stage: prefetching it one slice ahead hides that; the loop costs ~350 instructions per
slice and warp, so fewer, larger slices and tiles pay. Hence every variant with L tiles of 128
was slower (twice the slices per column), and moving the shift to the accumulators ("out" 0.286
ms at 128 columns, "pairs_out" 0.159 at 256) or L as M with COUT as 64 + 32 (0.17-0.20 ms: N of
32/64 per wgmma, split over two warpgroups) did not pay, though they remove the per-slice shifts
or the COUT padding. At B = 64 (64 programs on 132 SMs) slices of 32 were faster for FP16 too,
hence CONFIG["small_grid_BLOCK_CI"]. A TMA version (shifted boxes, zero fill as the padding) hit
an illegal instruction on the H200 with Triton 3.6 and was dropped.

The weight is read through a [KSIZE, COUT, CIN] copy (CONFIG["packed_weight"]), made once and
kept by the module until the weight changes: every program re-reads the whole weight from L2,
and in the native layout a tap's slice is elements KSIZE apart (no vector loads).

Tiling notes: L = 200 is not a power of two, so an L tile of 256 wastes 22%, tiles of 64 or 128
waste the same 56 columns; COUT = 96 is covered by BLOCK_CO = 32 (three tiles, x re-read from L2)
or one masked 128-row tile (25% of the MMA work wasted, x read once). Which is faster depends on
the dtype: the benchmark (bench/kernels/recsys/recsys_operators.py) times the TUNABLES variants.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl
from _launch_heuristics import pipeline_stages, sm_count

CONFIG = {
    "BLOCK_CO": 128,
    "BLOCK_L": 256,
    "fp32_BLOCK_L": 256,
    "BLOCK_CI": 32,
    "fp32_BLOCK_CI": 32,
    "small_grid_BLOCK_CI": 32,
    "num_warps": 8,
    "num_stages": 3,
    "fp32_precision": "bf16x3",
    "packed_weight": True,
    "align_hints": True,
    "shift": "gather",
    "fp32_shift": "pairs",
    "orient": "co_m",
    "fp32_orient": "co_m",
    "split_co": False,
    "fp32_presplit": True,
    "fp32_num_warps": 0,
    "one_tile_halo": False,
    "prefetch_x": True,
    "flat": False,
    "fp32_flat": False,
    "fp32_num_stages": 0,
    "fp32_maxnreg": 0,
}

TUNABLES = {
    "BLOCK_CO": [32, 64, 128],
    "BLOCK_L": [32, 64, 128, 256],
    "fp32_BLOCK_L": [32, 64, 128, 256],  # BLOCK_L for fp32 inputs (twice the bytes per element)
    "BLOCK_CI": [16, 32, 64],
    "fp32_BLOCK_CI": [16, 32, 64],  # BLOCK_CI for fp32 inputs
    # BLOCK_CI when the grid has fewer programs than the GPU has SMs (B = 64 here: each program's
    # chain of CIN slices is then the whole time, and fewer, larger slices shorten it); 0: no override.
    "small_grid_BLOCK_CI": [0, 16, 32, 64],
    "num_warps": [4, 8],
    "num_stages": [1, 2, 3, 4],
    "fp32_precision": ["bf16x3", "tf32x3", "bf16x6", "ieee"],
    "packed_weight": [True, False],
    # Tell the compiler that x's rows start 16-byte aligned and L is a multiple of the vector width
    # (checked on the host): the unshifted x loads and y stores become vector loads/stores.
    "align_hints": [False, True],
    # How tap t's shifted x tile is made: "load" (one masked, unaligned load per tap, L1 hits) or
    # "gather" (one aligned load per CIN slice, the other taps shifted on chip with tl.gather;
    # KSIZE 3, or one L tile covering the row, else "load") or "prefetch" (KSIZE 3 only: the
    # next CIN slice's three shifted tiles loaded into registers before this slice's dots).
    # "pairs" (KSIZE 3 only: even and odd output columns computed apart, every x tile then starts
    # on a 2-element boundary; six dots of half width per CIN slice).
    # "out" (KSIZE 3; always L as M): no shifted x tiles at all: each tap's product with the
    # aligned x tile in its own accumulator, the accumulators' rows shifted once per tile.
    # "pairs_out" (KSIZE 3; L as M): "out" on even and odd columns apart, so that only two of four
    # half-length accumulators need shifting (2/3 of the accumulator registers of "out").
    # "quads" (KSIZE 3; COUT as M): "pairs" with four phases (columns 4m + r): one aligned load
    # holds four of the six x parts a CIN slice needs, the other two are a quarter tile each.
    "shift": ["load", "gather", "prefetch", "pairs", "out", "pairs_out", "quads"],
    "fp32_shift": ["load", "gather", "prefetch", "pairs", "out", "pairs_out", "quads"],  # "shift" for fp32 inputs
    # Which GEMM dimension is the MMA's M: "co_m" (COUT rows, x tiles as the B operand) or "l_m"
    # (L rows: the shifted x tiles become the A operand, in registers, COUT the N dimension; not
    # for "prefetch").
    "orient": ["co_m", "l_m"],
    "fp32_orient": ["co_m", "l_m"],  # "orient" for fp32 inputs
    # With L as M ("l_m"): COUT in two power-of-two pieces when one tile would cover it (96 as
    # 64 + 32 instead of one 128-column tile: 25% less MMA work at the price of two dots per tap).
    "split_co": [False, True],
    # FP32 bf16x3 (pairs, out, pairs_out) with packed_weight: the packed weight split into bf16 hi
    # and lo once on the host (cached the same way) instead of in every program and CIN slice.
    "fp32_presplit": [False, True],
    "fp32_num_warps": [0, 4, 8],  # num_warps for fp32 inputs; 0: num_warps
    # "gather", "out", "pairs_out" with one L tile covering the row (L = 200 in 256 columns): True
    # still loads the columns a shift brings in from outside the tile (masked off: they are the
    # padding), False skips them (on sm_90a ~28 scalar loads per thread and CIN slice in "gather").
    "one_tile_halo": [True, False],
    # "gather", "out", "pairs_out": load the next CIN slice's x tile into registers at the top of
    # this slice (its latency under this slice's work). Their x tile feeds register operations,
    # so the pipeliner does not stage it with cp.async; compiled for sm_90a "gather" loads it with
    # 2-byte scalar loads (the layout tl.gather wants), each slice waiting on them.
    "prefetch_x": [False, True],
    # "pairs", "quads" and "load": tile the B rows of L columns laid end to end (B * L columns)
    # instead of each row apart, so that no tile is padded past the row's end (L = 200 in 256
    # columns: 22% of the MMA and split work wasted). "pairs" needs L even, "quads" a multiple of 4
    # (else ignored); "load" becomes its own kernel (COUT as M; FP32 bf16x3 split in the kernel,
    # the weight on the host). "fp32_flat": the same for fp32 inputs.
    "flat": [False, True],
    "fp32_flat": [False, True],
    # num_stages for fp32 inputs (0: num_stages); stages that do not fit in shared memory are dropped.
    "fp32_num_stages": [0, 1, 2, 3, 4],
    # A register cap per thread for fp32 inputs (0: the compiler's choice): at 128 two 8-warp
    # programs fit on an SM (the flat "load" kernel at BLOCK_L 128 takes 139 uncapped), which
    # then overlap one's loads with the other's MMAs; the compiler spills what does not fit.
    "fp32_maxnreg": [0, 128, 168],
}


@triton.jit
def _split_bf16(v):
    """An fp32 tile as bf16 (hi, lo) with hi + lo = v to about 16 mantissa bits."""
    hi = v.to(tl.bfloat16)
    return hi, (v - hi.to(tl.float32)).to(tl.bfloat16)


@triton.jit
def _split_weight_kernel(w_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """w (fp32, contiguous, n elements) as its bf16 hi parts then its lo parts (pack_weight)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    hi, lo = _split_bf16(tl.load(w_ptr + offs, mask=ok, other=0.0))
    tl.store(out_ptr + offs, hi, mask=ok)
    tl.store(out_ptr + n + offs, lo, mask=ok)


@triton.jit
def _mma(w, x, acc, LM: tl.constexpr, PRECISION: tl.constexpr):
    """acc + w @ x for w [CO, CI], x [CI, N]: acc [CO, N], or with LM (L as the MMA's M) the
    transposed product x^T @ w^T into acc [N, CO]."""
    if LM:
        acc = tl.dot(tl.trans(x), tl.trans(w), acc, input_precision=PRECISION)
    else:
        acc = tl.dot(w, x, acc, input_precision=PRECISION)
    return acc


@triton.jit
def _mma3(wh, wl, xh, xl, acc, LM: tl.constexpr):
    """acc + w @ x as bf16x3 from split operands: the small products first, then hi * hi."""
    acc = _mma(wl, xh, acc, LM, "tf32")
    acc = _mma(wh, xl, acc, LM, "tf32")
    return _mma(wh, xh, acc, LM, "tf32")


@triton.jit
def _load_w(w_ptr, co, co_ok, ci, ci_ok, t, stride_wo, stride_wi, stride_wk):
    """The [CO, CI] weight slice of tap t."""
    return tl.load(w_ptr + co[:, None] * stride_wo + ci[None, :] * stride_wi + t * stride_wk,
                   mask=co_ok[:, None] & ci_ok[None, :], other=0.0)


@triton.jit
def _pairs_piece(w_ptr, co, co_ok, ci, ci_ok, stride_wo, stride_wi, stride_wk, stride_wp,
                 omh, oml, ech, ecl, och, ocl, eph, epl, acc_e, acc_o,
                 LM: tl.constexpr, PRECISION: tl.constexpr, SPLIT3: tl.constexpr, PRESPLIT: tl.constexpr):
    """One COUT piece's six dots of a CIN slice in the pairs mode (see _conv1d_kernel). With SPLIT3
    the x tiles come as bf16 (hi, lo); otherwise the *l arguments are unused."""
    w0 = _load_w(w_ptr, co, co_ok, ci, ci_ok, 0, stride_wo, stride_wi, stride_wk)
    w1 = _load_w(w_ptr, co, co_ok, ci, ci_ok, 1, stride_wo, stride_wi, stride_wk)
    w2 = _load_w(w_ptr, co, co_ok, ci, ci_ok, 2, stride_wo, stride_wi, stride_wk)
    if SPLIT3:
        if PRESPLIT:
            # The host stored the weight as bf16 hi then lo parts (pack_weight(split=True)).
            w0h, w1h, w2h = w0, w1, w2
            w0l = _load_w(w_ptr + stride_wp, co, co_ok, ci, ci_ok, 0, stride_wo, stride_wi, stride_wk)
            w1l = _load_w(w_ptr + stride_wp, co, co_ok, ci, ci_ok, 1, stride_wo, stride_wi, stride_wk)
            w2l = _load_w(w_ptr + stride_wp, co, co_ok, ci, ci_ok, 2, stride_wo, stride_wi, stride_wk)
        else:
            w0h, w0l = _split_bf16(w0)
            w1h, w1l = _split_bf16(w1)
            w2h, w2l = _split_bf16(w2)
        acc_e = _mma3(w0h, w0l, omh, oml, acc_e, LM)
        acc_e = _mma3(w1h, w1l, ech, ecl, acc_e, LM)
        acc_e = _mma3(w2h, w2l, och, ocl, acc_e, LM)
        acc_o = _mma3(w0h, w0l, ech, ecl, acc_o, LM)
        acc_o = _mma3(w1h, w1l, och, ocl, acc_o, LM)
        acc_o = _mma3(w2h, w2l, eph, epl, acc_o, LM)
    else:
        acc_e = _mma(w0, omh, acc_e, LM, PRECISION)
        acc_e = _mma(w1, ech, acc_e, LM, PRECISION)
        acc_e = _mma(w2, och, acc_e, LM, PRECISION)
        acc_o = _mma(w0, ech, acc_o, LM, PRECISION)
        acc_o = _mma(w1, och, acc_o, LM, PRECISION)
        acc_o = _mma(w2, eph, acc_o, LM, PRECISION)
    return acc_e, acc_o


@triton.jit
def _quads_piece(w_ptr, co, co_ok, ci, ci_ok, stride_wo, stride_wi, stride_wk, stride_wp,
                 mh, ml, q0h, q0l, q1h, q1l, q2h, q2l, q3h, q3l, ph, pl, a0, a1, a2, a3,
                 PRECISION: tl.constexpr, SPLIT3: tl.constexpr, PRESPLIT: tl.constexpr):
    """A CIN slice of the "quads" mode (see _conv1d_kernel): twelve dots of a quarter tile's width,
    y[4m + r] += w0 x[4m + r - 1] + w1 x[4m + r] + w2 x[4m + r + 1] for r = 0 .. 3, x[4m - 1] coming
    as m (mh, ml) and x[4m + 4] as p. With SPLIT3 every x part comes as bf16 (hi, lo)."""
    w0 = _load_w(w_ptr, co, co_ok, ci, ci_ok, 0, stride_wo, stride_wi, stride_wk)
    w1 = _load_w(w_ptr, co, co_ok, ci, ci_ok, 1, stride_wo, stride_wi, stride_wk)
    w2 = _load_w(w_ptr, co, co_ok, ci, ci_ok, 2, stride_wo, stride_wi, stride_wk)
    if SPLIT3:
        if PRESPLIT:
            w0h, w1h, w2h = w0, w1, w2
            w0l = _load_w(w_ptr + stride_wp, co, co_ok, ci, ci_ok, 0, stride_wo, stride_wi, stride_wk)
            w1l = _load_w(w_ptr + stride_wp, co, co_ok, ci, ci_ok, 1, stride_wo, stride_wi, stride_wk)
            w2l = _load_w(w_ptr + stride_wp, co, co_ok, ci, ci_ok, 2, stride_wo, stride_wi, stride_wk)
        else:
            w0h, w0l = _split_bf16(w0)
            w1h, w1l = _split_bf16(w1)
            w2h, w2l = _split_bf16(w2)
        a0 = _mma3(w0h, w0l, mh, ml, a0, False)
        a1 = _mma3(w0h, w0l, q0h, q0l, a1, False)
        a2 = _mma3(w0h, w0l, q1h, q1l, a2, False)
        a3 = _mma3(w0h, w0l, q2h, q2l, a3, False)
        a0 = _mma3(w1h, w1l, q0h, q0l, a0, False)
        a1 = _mma3(w1h, w1l, q1h, q1l, a1, False)
        a2 = _mma3(w1h, w1l, q2h, q2l, a2, False)
        a3 = _mma3(w1h, w1l, q3h, q3l, a3, False)
        a0 = _mma3(w2h, w2l, q1h, q1l, a0, False)
        a1 = _mma3(w2h, w2l, q2h, q2l, a1, False)
        a2 = _mma3(w2h, w2l, q3h, q3l, a2, False)
        a3 = _mma3(w2h, w2l, ph, pl, a3, False)
    else:
        a0 = _mma(w0, mh, a0, False, PRECISION)
        a1 = _mma(w0, q0h, a1, False, PRECISION)
        a2 = _mma(w0, q1h, a2, False, PRECISION)
        a3 = _mma(w0, q2h, a3, False, PRECISION)
        a0 = _mma(w1, q0h, a0, False, PRECISION)
        a1 = _mma(w1, q1h, a1, False, PRECISION)
        a2 = _mma(w1, q2h, a2, False, PRECISION)
        a3 = _mma(w1, q3h, a3, False, PRECISION)
        a0 = _mma(w2, q1h, a0, False, PRECISION)
        a1 = _mma(w2, q2h, a1, False, PRECISION)
        a2 = _mma(w2, q3h, a2, False, PRECISION)
        a3 = _mma(w2, ph, a3, False, PRECISION)
    return a0, a1, a2, a3


@triton.jit
def _store_at(y_base, acc, co, co_ok, y_off, ok, bias_ptr, stride_bias, stride_yc, HAS_BIAS: tl.constexpr):
    """acc [CO, N] (+ bias) into y at y_base + co * stride_yc + y_off (columns where ok), in y's dtype."""
    if HAS_BIAS:
        acc += tl.load(bias_ptr + co * stride_bias, mask=co_ok, other=0.0).to(tl.float32)[:, None]
    y = y_base + co[:, None] * stride_yc + y_off[None, :]
    tl.store(y, acc.to(y_base.dtype.element_ty), mask=co_ok[:, None] & ok[None, :])


@triton.jit
def _store_tile(y_base, acc, co, co_ok, l_out, L, bias_ptr, stride_bias, stride_yc, stride_yl,
                HAS_BIAS: tl.constexpr):
    """acc [CO, BLOCK_L] (+ bias) into y's row at columns l_out, in y's dtype."""
    _store_at(y_base, acc, co, co_ok, l_out * stride_yl, l_out < L, bias_ptr, stride_bias, stride_yc, HAS_BIAS)


@triton.jit
def _as_co_l(acc, LM: tl.constexpr):
    """An accumulator as [CO, N] (LM ones are [N, CO])."""
    if LM:
        acc = tl.trans(acc)
    return acc


@triton.jit
def _load_x_tile(x_base, ci0, C_IN, l_out, L, stride_xc, stride_xl, BLOCK_CI: tl.constexpr):
    """The aligned [BLOCK_CI, BLOCK_L] x tile of the CIN slice at ci0 (zeros past CIN and L)."""
    ci = ci0 + tl.arange(0, BLOCK_CI)
    return tl.load(x_base + ci[:, None] * stride_xc + l_out[None, :] * stride_xl,
                   mask=(ci < C_IN)[:, None] & (l_out < L)[None, :], other=0.0)


@triton.jit
def _out_piece(w_ptr, co, co_ok, ci, ci_ok, stride_wo, stride_wi, stride_wk, stride_wp,
               xh, xl, xm, xp, z0, z1, z2, h0, h2,
               PRECISION: tl.constexpr, SPLIT3: tl.constexpr, PRESPLIT: tl.constexpr,
               HALO: tl.constexpr):
    """One COUT piece's part of a CIN slice in the "out" mode (see _conv1d_kernel): the three taps'
    products with the unshifted x tile, and the two outside rows' matrix-vector products."""
    w0 = _load_w(w_ptr, co, co_ok, ci, ci_ok, 0, stride_wo, stride_wi, stride_wk)
    w1 = _load_w(w_ptr, co, co_ok, ci, ci_ok, 1, stride_wo, stride_wi, stride_wk)
    w2 = _load_w(w_ptr, co, co_ok, ci, ci_ok, 2, stride_wo, stride_wi, stride_wk)
    if SPLIT3:
        if PRESPLIT:
            w0h, w1h, w2h = w0, w1, w2
            w0l = _load_w(w_ptr + stride_wp, co, co_ok, ci, ci_ok, 0, stride_wo, stride_wi, stride_wk)
            w1l = _load_w(w_ptr + stride_wp, co, co_ok, ci, ci_ok, 1, stride_wo, stride_wi, stride_wk)
            w2l = _load_w(w_ptr + stride_wp, co, co_ok, ci, ci_ok, 2, stride_wo, stride_wi, stride_wk)
        else:
            w0h, w0l = _split_bf16(w0)
            w1h, w1l = _split_bf16(w1)
            w2h, w2l = _split_bf16(w2)
        z0 = _mma3(w0h, w0l, xh, xl, z0, True)
        z1 = _mma3(w1h, w1l, xh, xl, z1, True)
        z2 = _mma3(w2h, w2l, xh, xl, z2, True)
        w0f = w0h.to(tl.float32) + w0l.to(tl.float32)
        w2f = w2h.to(tl.float32) + w2l.to(tl.float32)
    else:
        z0 = _mma(w0, xh, z0, True, PRECISION)
        z1 = _mma(w1, xh, z1, True, PRECISION)
        z2 = _mma(w2, xh, z2, True, PRECISION)
        w0f = w0.to(tl.float32)
        w2f = w2.to(tl.float32)
    if HALO:  # else one L tile covers the row: the outside rows are the zero padding
        h0 += tl.sum(w0f * xm[None, :], axis=1)
        h2 += tl.sum(w2f * xp[None, :], axis=1)
    return z0, z1, z2, h0, h2


@triton.jit
def _out_combine(z0, z1, z2, h0, h2, BLOCK_L: tl.constexpr):
    """y rows of an "out" tile ([BLOCK_L, CO]): z1[l] + z0[l - 1] + z2[l + 1], the rows from outside
    the tile being h0 (before its first row) and h2 (after its last)."""
    rows = tl.arange(0, BLOCK_L)[:, None] + tl.zeros_like(z0).to(tl.int32)
    s0 = tl.gather(z0, tl.maximum(rows - 1, 0), axis=0)
    s2 = tl.gather(z2, tl.minimum(rows + 1, BLOCK_L - 1), axis=0)
    s0 = tl.where(rows == 0, h0[None, :], s0)
    s2 = tl.where(rows == BLOCK_L - 1, h2[None, :], s2)
    return z1 + s0 + s2


@triton.jit
def _pout_piece(w_ptr, co, co_ok, ci, ci_ok, stride_wo, stride_wi, stride_wk, stride_wp,
                eh, el, oh, ol, xm, xp, a_e, a_o, b_m, b_p, h0, h2,
                PRECISION: tl.constexpr, SPLIT3: tl.constexpr, PRESPLIT: tl.constexpr,
                HALO: tl.constexpr):
    """One COUT piece's part of a CIN slice in the "pairs_out" mode (see _conv1d_kernel). With
    SPLIT3 the even (e) and odd (o) x columns come as bf16 hi (h) and lo (l) parts."""
    w0 = _load_w(w_ptr, co, co_ok, ci, ci_ok, 0, stride_wo, stride_wi, stride_wk)
    w1 = _load_w(w_ptr, co, co_ok, ci, ci_ok, 1, stride_wo, stride_wi, stride_wk)
    w2 = _load_w(w_ptr, co, co_ok, ci, ci_ok, 2, stride_wo, stride_wi, stride_wk)
    if SPLIT3:
        if PRESPLIT:
            w0h, w1h, w2h = w0, w1, w2
            w0l = _load_w(w_ptr + stride_wp, co, co_ok, ci, ci_ok, 0, stride_wo, stride_wi, stride_wk)
            w1l = _load_w(w_ptr + stride_wp, co, co_ok, ci, ci_ok, 1, stride_wo, stride_wi, stride_wk)
            w2l = _load_w(w_ptr + stride_wp, co, co_ok, ci, ci_ok, 2, stride_wo, stride_wi, stride_wk)
        else:
            w0h, w0l = _split_bf16(w0)
            w1h, w1l = _split_bf16(w1)
            w2h, w2l = _split_bf16(w2)
        a_e = _mma3(w1h, w1l, eh, el, a_e, True)
        a_e = _mma3(w2h, w2l, oh, ol, a_e, True)
        a_o = _mma3(w0h, w0l, eh, el, a_o, True)
        a_o = _mma3(w1h, w1l, oh, ol, a_o, True)
        b_m = _mma3(w0h, w0l, oh, ol, b_m, True)
        b_p = _mma3(w2h, w2l, eh, el, b_p, True)
        w0f = w0h.to(tl.float32) + w0l.to(tl.float32)
        w2f = w2h.to(tl.float32) + w2l.to(tl.float32)
    else:
        a_e = _mma(w1, eh, a_e, True, PRECISION)
        a_e = _mma(w2, oh, a_e, True, PRECISION)
        a_o = _mma(w0, eh, a_o, True, PRECISION)
        a_o = _mma(w1, oh, a_o, True, PRECISION)
        b_m = _mma(w0, oh, b_m, True, PRECISION)
        b_p = _mma(w2, eh, b_p, True, PRECISION)
        w0f = w0.to(tl.float32)
        w2f = w2.to(tl.float32)
    if HALO:  # else one L tile covers the row: the outside rows are the zero padding
        h0 += tl.sum(w0f * xm[None, :], axis=1)
        h2 += tl.sum(w2f * xp[None, :], axis=1)
    return a_e, a_o, b_m, b_p, h0, h2


@triton.jit
def _pout_combine(a_e, a_o, b_m, b_p, h0, h2, HALF: tl.constexpr):
    """A "pairs_out" tile as [CO, BLOCK_L]: y_e = a_e + b_m one row down (h0 first), y_o = a_o +
    b_p one row up (h2 last), interleaved."""
    rows = tl.arange(0, HALF)[:, None] + tl.zeros_like(b_m).to(tl.int32)
    s_m = tl.gather(b_m, tl.maximum(rows - 1, 0), axis=0)
    s_p = tl.gather(b_p, tl.minimum(rows + 1, HALF - 1), axis=0)
    y_e = a_e + tl.where(rows == 0, h0[None, :], s_m)
    y_o = a_o + tl.where(rows == HALF - 1, h2[None, :], s_p)
    co_n: tl.constexpr = a_e.shape[1]
    return tl.reshape(tl.join(tl.trans(y_e), tl.trans(y_o)), [co_n, 2 * HALF])


@triton.jit
def _conv1d_kernel(
    x_ptr, w_ptr, bias_ptr, y_ptr,
    C_IN, C_OUT, L, tiles_l, tiles_co, n_total,
    stride_xb, stride_xc, stride_xl,
    stride_wo, stride_wi, stride_wk, stride_wp,
    stride_yb, stride_yc, stride_yl, stride_bias,
    KSIZE: tl.constexpr, PAD: tl.constexpr, HAS_BIAS: tl.constexpr,
    BLOCK_CO: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_CI: tl.constexpr,
    PRECISION: tl.constexpr, NUM_STAGES: tl.constexpr, ALIGN: tl.constexpr, GATHER: tl.constexpr,
    PREFETCH: tl.constexpr, PAIRS: tl.constexpr, SPLIT3: tl.constexpr,
    LM: tl.constexpr, CO_B: tl.constexpr, PRESPLIT: tl.constexpr, OUT: tl.constexpr, HALO: tl.constexpr,
    PREFETCH_X: tl.constexpr, QUADS: tl.constexpr, FLAT: tl.constexpr, I64: tl.constexpr,
):
    # Programs of one sample are adjacent (its x columns stay in L2 for the other COUT tiles).
    # LM: the MMAs take L as M and COUT as N (acc [L, CO]). CO_B > 0: one COUT tile of BLOCK_CO
    # rows plus a second piece of CO_B rows (COUT 96 as 64 + 32 instead of one 128-row tile).
    if ALIGN > 1:
        # The host checked that these are multiples of ALIGN (align_hints). Written as (v // A) * A,
        # the same value, whose divisibility the compiler can see (tl.multiple_of on an argument is lost).
        stride_xb = (stride_xb // ALIGN) * ALIGN
        stride_xc = (stride_xc // ALIGN) * ALIGN
        stride_yb = (stride_yb // ALIGN) * ALIGN
        stride_yc = (stride_yc // ALIGN) * ALIGN
        L = (L // ALIGN) * ALIGN
    pid = tl.program_id(0)
    b = pid // (tiles_l * tiles_co)
    rest = pid % (tiles_l * tiles_co)
    pid_co = rest // tiles_l
    pid_l = rest % tiles_l
    co = pid_co * BLOCK_CO + tl.arange(0, BLOCK_CO)
    l_out = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
    co_ok = co < C_OUT
    if CO_B > 0:
        co2 = BLOCK_CO + tl.arange(0, CO_B)
    else:
        co2 = BLOCK_CO + tl.arange(0, 16)  # unused
    co2_ok = co2 < C_OUT
    x_base = x_ptr + b.to(tl.int64) * stride_xb
    y_base = y_ptr + b.to(tl.int64) * stride_yb
    # The tile's columns: x_off / y_off from x_base / y_base, lpos the position in its row, n_ok
    # whether the column exists. FLAT ("pairs", "quads"): the B rows of L columns laid end to end,
    # n_total = B * L columns in tiles of BLOCK_L that may hold the end of one row and the start of
    # the next (b is then 0): no tile is padded past L (L = 200 in 256 columns wastes 22%).
    if FLAT:
        n = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
        n_ok = n < n_total
        bn = n // L
        lpos = n % L
        if I64:
            bn = bn.to(tl.int64)
        x_off = bn * stride_xb + lpos * stride_xl
        y_off = bn * stride_yb + lpos * stride_yl
    else:
        n_ok = l_out < L
        lpos = l_out
        x_off = l_out * stride_xl
        y_off = l_out * stride_yl
    if PAIRS:
        # KSIZE 3 on even and odd output columns apart. With pairs P_s[m] = (x[2(m+s)], x[2(m+s)+1]):
        #   y[2m]     = w0 . x[2m - 1] + w1 . x[2m]     + w2 . x[2m + 1] = w0 P_-1.odd + w1 P_0.even + w2 P_0.odd
        #   y[2m + 1] = w0 . x[2m]     + w1 . x[2m + 1] + w2 . x[2m + 2] = w0 P_0.even + w1 P_0.odd + w2 P_+1.even
        # Every x tile then starts on a pair boundary (4-byte aligned in FP16, 8 in FP32), which the
        # asynchronous copies of the pipelined loop can stage; the odd shifts need no unaligned load.
        HALF: tl.constexpr = BLOCK_L // 2
        if LM:
            acc_e = tl.zeros([HALF, BLOCK_CO], dtype=tl.float32)
            acc_o = tl.zeros([HALF, BLOCK_CO], dtype=tl.float32)
            acc_e2 = tl.zeros([HALF, CO_B if CO_B > 0 else 16], dtype=tl.float32)
            acc_o2 = tl.zeros([HALF, CO_B if CO_B > 0 else 16], dtype=tl.float32)
        else:
            acc_e = tl.zeros([BLOCK_CO, HALF], dtype=tl.float32)
            acc_o = tl.zeros([BLOCK_CO, HALF], dtype=tl.float32)
            acc_e2 = tl.zeros([CO_B if CO_B > 0 else 16, HALF], dtype=tl.float32)
            acc_o2 = tl.zeros([CO_B if CO_B > 0 else 16, HALF], dtype=tl.float32)
        if FLAT:  # the pair before and after, within the row (L even: no pair spans two rows)
            off_m = x_off - 2 * stride_xl
            off_p = x_off + 2 * stride_xl
            ok_m = ((lpos >= 2) & n_ok)[None, :]
            ok_p = ((lpos + 2 < L) & n_ok)[None, :]
        else:
            p_m = l_out - 2
            p_p = l_out + 2
            off_m = p_m * stride_xl
            off_p = p_p * stride_xl
            ok_m = ((p_m >= 0) & (p_m < L))[None, :]
            ok_p = (p_p < L)[None, :]
        ok_c = n_ok[None, :]
        for ci0 in tl.range(0, C_IN, BLOCK_CI, num_stages=NUM_STAGES):
            ci = ci0 + tl.arange(0, BLOCK_CI)
            ci_ok = ci < C_IN
            x_rows = x_base + ci[:, None] * stride_xc
            x_m = tl.load(x_rows + off_m[None, :], mask=ci_ok[:, None] & ok_m, other=0.0)
            x_c = tl.load(x_rows + x_off[None, :], mask=ci_ok[:, None] & ok_c, other=0.0)
            x_p = tl.load(x_rows + off_p[None, :], mask=ci_ok[:, None] & ok_p, other=0.0)
            _, odd_m = tl.split(tl.reshape(x_m, [BLOCK_CI, HALF, 2]))
            even_c, odd_c = tl.split(tl.reshape(x_c, [BLOCK_CI, HALF, 2]))
            even_p, _ = tl.split(tl.reshape(x_p, [BLOCK_CI, HALF, 2]))
            if SPLIT3:
                # FP32 as bf16x3, each x tile split into bf16 (hi, lo) once per CIN slice rather than
                # once per dot (4 x tiles feed 6 dots per COUT piece): hi*hi + hi*lo + lo*hi.
                omh, oml = _split_bf16(odd_m)
                ech, ecl = _split_bf16(even_c)
                och, ocl = _split_bf16(odd_c)
                eph, epl = _split_bf16(even_p)
            else:
                omh, oml, ech, ecl, och, ocl, eph, epl = odd_m, odd_m, even_c, even_c, odd_c, odd_c, even_p, even_p
            acc_e, acc_o = _pairs_piece(w_ptr, co, co_ok, ci, ci_ok, stride_wo, stride_wi, stride_wk, stride_wp,
                                        omh, oml, ech, ecl, och, ocl, eph, epl, acc_e, acc_o,
                                        LM, PRECISION, SPLIT3, PRESPLIT)
            if CO_B > 0:
                acc_e2, acc_o2 = _pairs_piece(w_ptr, co2, co2_ok, ci, ci_ok, stride_wo, stride_wi, stride_wk,
                                              stride_wp, omh, oml, ech, ecl, och, ocl, eph, epl, acc_e2, acc_o2,
                                              LM, PRECISION, SPLIT3, PRESPLIT)
        # The two parities interleaved (tl.join) for one vectorised store.
        acc = tl.reshape(tl.join(_as_co_l(acc_e, LM), _as_co_l(acc_o, LM)), [BLOCK_CO, BLOCK_L])
        _store_at(y_base, acc, co, co_ok, y_off, n_ok, bias_ptr, stride_bias, stride_yc, HAS_BIAS)
        if CO_B > 0:
            acc2 = tl.reshape(tl.join(_as_co_l(acc_e2, LM), _as_co_l(acc_o2, LM)), [CO_B, BLOCK_L])
            _store_at(y_base, acc2, co2, co2_ok, y_off, n_ok, bias_ptr, stride_bias, stride_yc, HAS_BIAS)
    elif QUADS:
        # KSIZE 3 on the four phases of the column index apart (COUT as M). With q_r[m] = x[4m + r]:
        #   y[4m]     = w0 x[4m - 1] + w1 q_0 + w2 q_1      y[4m + 1] = w0 q_0 + w1 q_1 + w2 q_2
        #   y[4m + 2] = w0 q_1 + w1 q_2 + w2 q_3            y[4m + 3] = w0 q_2 + w1 q_3 + w2 x[4m + 4]
        # The four q_r come from one aligned load of the tile; only x[4m - 1] and x[4m + 4] (a quarter
        # tile each) are loaded apart. FP32 as bf16x3 then splits 1.5 tiles per CIN slice where
        # "pairs" splits 2 (and loads 1.5 tiles where "pairs" loads 3); twelve dots of BLOCK_L / 4.
        Q: tl.constexpr = BLOCK_L // 4
        a0 = tl.zeros([BLOCK_CO, Q], dtype=tl.float32)
        a1 = tl.zeros([BLOCK_CO, Q], dtype=tl.float32)
        a2 = tl.zeros([BLOCK_CO, Q], dtype=tl.float32)
        a3 = tl.zeros([BLOCK_CO, Q], dtype=tl.float32)
        nq = pid_l * BLOCK_L + 4 * tl.arange(0, Q)  # each quad's first column
        if FLAT:  # L a multiple of 4: no quad spans two rows
            q_ok = nq < n_total
            bq = nq // L
            lq = nq % L
            if I64:
                bq = bq.to(tl.int64)
            q_off = bq * stride_xb + lq * stride_xl
        else:
            q_ok = nq < L
            lq = nq
            q_off = nq * stride_xl
        ok_qm = ((lq >= 1) & q_ok)[None, :]
        ok_qp = ((lq + 4 < L) & q_ok)[None, :]
        ok_c = n_ok[None, :]
        for ci0 in tl.range(0, C_IN, BLOCK_CI, num_stages=NUM_STAGES):
            ci = ci0 + tl.arange(0, BLOCK_CI)
            ci_ok = ci < C_IN
            x_rows = x_base + ci[:, None] * stride_xc
            x_c = tl.load(x_rows + x_off[None, :], mask=ci_ok[:, None] & ok_c, other=0.0)
            x_m = tl.load(x_rows + (q_off - stride_xl)[None, :], mask=ci_ok[:, None] & ok_qm, other=0.0)
            x_p = tl.load(x_rows + (q_off + 4 * stride_xl)[None, :], mask=ci_ok[:, None] & ok_qp, other=0.0)
            ev, od = tl.split(tl.reshape(x_c, [BLOCK_CI, Q, 2, 2]))  # columns 4m + {0, 2}, 4m + {1, 3}
            q0, q2 = tl.split(ev)
            q1, q3 = tl.split(od)
            if SPLIT3:
                mh, ml = _split_bf16(x_m)
                q0h, q0l = _split_bf16(q0)
                q1h, q1l = _split_bf16(q1)
                q2h, q2l = _split_bf16(q2)
                q3h, q3l = _split_bf16(q3)
                ph, pl = _split_bf16(x_p)
            else:
                mh, ml, q0h, q0l, q1h, q1l, q2h, q2l, q3h, q3l, ph, pl = (x_m, x_m, q0, q0, q1, q1, q2, q2, q3, q3,
                                                                          x_p, x_p)
            a0, a1, a2, a3 = _quads_piece(w_ptr, co, co_ok, ci, ci_ok, stride_wo, stride_wi, stride_wk, stride_wp,
                                          mh, ml, q0h, q0l, q1h, q1l, q2h, q2l, q3h, q3l, ph, pl, a0, a1, a2, a3,
                                          PRECISION, SPLIT3, PRESPLIT)
        # Interleaved back: [..., i, j] of the double join is phase 2i + j.
        acc = tl.reshape(tl.join(tl.join(a0, a2), tl.join(a1, a3)), [BLOCK_CO, BLOCK_L])
        _store_at(y_base, acc, co, co_ok, y_off, n_ok, bias_ptr, stride_bias, stride_yc, HAS_BIAS)
    elif OUT == 2:
        # KSIZE 3, "pairs_out": the shift moved to the output as in "out", on even and odd columns
        # apart (x_e[m] = x[2m], x_o[m] = x[2m + 1], both from one aligned load, split in registers):
        #   y[2m]     = W0 x_o[m - 1] + W1 x_e[m] + W2 x_o[m]  = b_m[m - 1] + a_e[m]
        #   y[2m + 1] = W0 x_e[m] + W1 x_o[m] + W2 x_e[m + 1]  = a_o[m] + b_p[m + 1]
        # Four accumulators of BLOCK_L / 2 rows (2/3 of "out"'s three of BLOCK_L), only b_m and b_p
        # shifted, by one row of half the length; the rows from outside the tile as in "out".
        HALF: tl.constexpr = BLOCK_L // 2
        NB: tl.constexpr = CO_B if CO_B > 0 else 16
        a_e = tl.zeros([HALF, BLOCK_CO], dtype=tl.float32)
        a_o = tl.zeros([HALF, BLOCK_CO], dtype=tl.float32)
        b_m = tl.zeros([HALF, BLOCK_CO], dtype=tl.float32)
        b_p = tl.zeros([HALF, BLOCK_CO], dtype=tl.float32)
        a_e2 = tl.zeros([HALF, NB], dtype=tl.float32)
        a_o2 = tl.zeros([HALF, NB], dtype=tl.float32)
        b_m2 = tl.zeros([HALF, NB], dtype=tl.float32)
        b_p2 = tl.zeros([HALF, NB], dtype=tl.float32)
        h0 = tl.zeros([BLOCK_CO], dtype=tl.float32)
        h2 = tl.zeros([BLOCK_CO], dtype=tl.float32)
        h0b = tl.zeros([NB], dtype=tl.float32)
        h2b = tl.zeros([NB], dtype=tl.float32)
        pos_m = pid_l * BLOCK_L - 1
        pos_p = pid_l * BLOCK_L + BLOCK_L
        if PREFETCH_X:  # the x tile of the slice after the current one, in registers
            x_next = _load_x_tile(x_base, 0, C_IN, l_out, L, stride_xc, stride_xl, BLOCK_CI)
        for ci0 in tl.range(0, C_IN, BLOCK_CI, num_stages=NUM_STAGES):
            ci = ci0 + tl.arange(0, BLOCK_CI)
            ci_ok = ci < C_IN
            if PREFETCH_X:
                x0 = x_next
                x_next = _load_x_tile(x_base, ci0 + BLOCK_CI, C_IN, l_out, L, stride_xc, stride_xl, BLOCK_CI)
            else:
                x0 = _load_x_tile(x_base, ci0, C_IN, l_out, L, stride_xc, stride_xl, BLOCK_CI)
            x_e, x_o = tl.split(tl.reshape(x0, [BLOCK_CI, HALF, 2]))
            if HALO:
                xm = tl.load(x_base + ci * stride_xc + pos_m * stride_xl, mask=ci_ok & (pos_m >= 0),
                             other=0.0).to(tl.float32)
                xp = tl.load(x_base + ci * stride_xc + pos_p * stride_xl, mask=ci_ok & (pos_p < L),
                             other=0.0).to(tl.float32)
            else:
                xm = tl.zeros([BLOCK_CI], dtype=tl.float32)
                xp = xm
            if SPLIT3:
                eh, el = _split_bf16(x_e)
                oh, ol = _split_bf16(x_o)
            else:
                eh, el, oh, ol = x_e, x_e, x_o, x_o
            a_e, a_o, b_m, b_p, h0, h2 = _pout_piece(w_ptr, co, co_ok, ci, ci_ok, stride_wo, stride_wi, stride_wk,
                                                     stride_wp, eh, el, oh, ol, xm, xp, a_e, a_o, b_m, b_p, h0, h2,
                                                     PRECISION, SPLIT3, PRESPLIT, HALO)
            if CO_B > 0:
                a_e2, a_o2, b_m2, b_p2, h0b, h2b = _pout_piece(w_ptr, co2, co2_ok, ci, ci_ok, stride_wo, stride_wi,
                                                               stride_wk, stride_wp, eh, el, oh, ol, xm, xp,
                                                               a_e2, a_o2, b_m2, b_p2, h0b, h2b,
                                                               PRECISION, SPLIT3, PRESPLIT, HALO)
        acc = _pout_combine(a_e, a_o, b_m, b_p, h0, h2, HALF)
        _store_tile(y_base, acc, co, co_ok, l_out, L, bias_ptr, stride_bias, stride_yc, stride_yl, HAS_BIAS)
        if CO_B > 0:
            acc2 = _pout_combine(a_e2, a_o2, b_m2, b_p2, h0b, h2b, HALF)
            _store_tile(y_base, acc2, co2, co2_ok, l_out, L, bias_ptr, stride_bias, stride_yc, stride_yl, HAS_BIAS)
    elif OUT == 1:
        # KSIZE 3 with the shift moved to the output (L as M): Z_t = x^T @ w_t^T for the aligned,
        # unshifted x tile (one load per CIN slice, the A operand of all three taps, no on-chip
        # shift per slice), then once per tile y[l] = Z_0[l - 1] + Z_1[l] + Z_2[l + 1], the shifted
        # rows gathered through shared memory. The two rows a shift brings in from outside the tile
        # are W_0 x[l0 - 1] and W_2 x[l0 + BLOCK_L]: matrix-vector products summed per slice.
        NB: tl.constexpr = CO_B if CO_B > 0 else 16
        z0 = tl.zeros([BLOCK_L, BLOCK_CO], dtype=tl.float32)
        z1 = tl.zeros([BLOCK_L, BLOCK_CO], dtype=tl.float32)
        z2 = tl.zeros([BLOCK_L, BLOCK_CO], dtype=tl.float32)
        z0b = tl.zeros([BLOCK_L, NB], dtype=tl.float32)
        z1b = tl.zeros([BLOCK_L, NB], dtype=tl.float32)
        z2b = tl.zeros([BLOCK_L, NB], dtype=tl.float32)
        h0 = tl.zeros([BLOCK_CO], dtype=tl.float32)
        h2 = tl.zeros([BLOCK_CO], dtype=tl.float32)
        h0b = tl.zeros([NB], dtype=tl.float32)
        h2b = tl.zeros([NB], dtype=tl.float32)
        pos_m = pid_l * BLOCK_L - 1
        pos_p = pid_l * BLOCK_L + BLOCK_L
        if PREFETCH_X:  # the x tile of the slice after the current one, in registers
            x_next = _load_x_tile(x_base, 0, C_IN, l_out, L, stride_xc, stride_xl, BLOCK_CI)
        for ci0 in tl.range(0, C_IN, BLOCK_CI, num_stages=NUM_STAGES):
            ci = ci0 + tl.arange(0, BLOCK_CI)
            ci_ok = ci < C_IN
            if PREFETCH_X:
                x0 = x_next
                x_next = _load_x_tile(x_base, ci0 + BLOCK_CI, C_IN, l_out, L, stride_xc, stride_xl, BLOCK_CI)
            else:
                x0 = _load_x_tile(x_base, ci0, C_IN, l_out, L, stride_xc, stride_xl, BLOCK_CI)
            if HALO:
                xm = tl.load(x_base + ci * stride_xc + pos_m * stride_xl, mask=ci_ok & (pos_m >= 0),
                             other=0.0).to(tl.float32)
                xp = tl.load(x_base + ci * stride_xc + pos_p * stride_xl, mask=ci_ok & (pos_p < L),
                             other=0.0).to(tl.float32)
            else:
                xm = tl.zeros([BLOCK_CI], dtype=tl.float32)
                xp = xm
            if SPLIT3:
                xh, xl = _split_bf16(x0)
            else:
                xh, xl = x0, x0
            z0, z1, z2, h0, h2 = _out_piece(w_ptr, co, co_ok, ci, ci_ok, stride_wo, stride_wi, stride_wk, stride_wp,
                                            xh, xl, xm, xp, z0, z1, z2, h0, h2, PRECISION, SPLIT3, PRESPLIT, HALO)
            if CO_B > 0:
                z0b, z1b, z2b, h0b, h2b = _out_piece(w_ptr, co2, co2_ok, ci, ci_ok, stride_wo, stride_wi, stride_wk,
                                                     stride_wp, xh, xl, xm, xp, z0b, z1b, z2b, h0b, h2b,
                                                     PRECISION, SPLIT3, PRESPLIT, HALO)
        acc = _out_combine(z0, z1, z2, h0, h2, BLOCK_L)
        _store_tile(y_base, tl.trans(acc), co, co_ok, l_out, L, bias_ptr, stride_bias, stride_yc, stride_yl, HAS_BIAS)
        if CO_B > 0:
            acc2 = _out_combine(z0b, z1b, z2b, h0b, h2b, BLOCK_L)
            _store_tile(y_base, tl.trans(acc2), co2, co2_ok, l_out, L, bias_ptr, stride_bias, stride_yc, stride_yl,
                        HAS_BIAS)
    elif PREFETCH:
        # KSIZE == 3: the three shifted x tiles of the next CIN slice are loaded (into registers)
        # before this slice's dots, so their latency overlaps the tensor-core work; the unaligned
        # taps cannot be staged by the asynchronous copies that num_stages pipelines.
        acc = tl.zeros([BLOCK_CO, BLOCK_L], dtype=tl.float32)
        p_m = l_out - 1
        p_p = l_out + 1
        ok_m = ((p_m >= 0) & (p_m < L))[None, :]
        ok_c = (l_out < L)[None, :]
        ok_p = (p_p < L)[None, :]
        ci = tl.arange(0, BLOCK_CI)
        x_rows = x_base + ci[:, None] * stride_xc
        ci_ok = (ci < C_IN)[:, None]
        x_m = tl.load(x_rows + p_m[None, :] * stride_xl, mask=ci_ok & ok_m, other=0.0)
        x_c = tl.load(x_rows + l_out[None, :] * stride_xl, mask=ci_ok & ok_c, other=0.0)
        x_p = tl.load(x_rows + p_p[None, :] * stride_xl, mask=ci_ok & ok_p, other=0.0)
        for ci0 in tl.range(0, C_IN, BLOCK_CI, num_stages=NUM_STAGES):
            ci = ci0 + tl.arange(0, BLOCK_CI)
            w_rows = w_ptr + co[:, None] * stride_wo + ci[None, :] * stride_wi
            w_ok = co_ok[:, None] & (ci < C_IN)[None, :]
            nci = ci + BLOCK_CI
            x_rows = x_base + nci[:, None] * stride_xc
            n_ok = (nci < C_IN)[:, None]
            nx_m = tl.load(x_rows + p_m[None, :] * stride_xl, mask=n_ok & ok_m, other=0.0)
            nx_c = tl.load(x_rows + l_out[None, :] * stride_xl, mask=n_ok & ok_c, other=0.0)
            nx_p = tl.load(x_rows + p_p[None, :] * stride_xl, mask=n_ok & ok_p, other=0.0)
            acc = tl.dot(tl.load(w_rows, mask=w_ok, other=0.0), x_m, acc, input_precision=PRECISION)
            acc = tl.dot(tl.load(w_rows + stride_wk, mask=w_ok, other=0.0), x_c, acc, input_precision=PRECISION)
            acc = tl.dot(tl.load(w_rows + 2 * stride_wk, mask=w_ok, other=0.0), x_p, acc,
                         input_precision=PRECISION)
            x_m, x_c, x_p = nx_m, nx_c, nx_p
        _store_tile(y_base, acc, co, co_ok, l_out, L, bias_ptr, stride_bias, stride_yc, stride_yl, HAS_BIAS)
    elif FLAT:
        # "load" over the rows laid end to end (COUT as M): each tap's shifted x tile loaded on its
        # own (element-aligned, which the pipelined loop stages asynchronously), masked where the
        # shift leaves the row. FP32 bf16x3: the tile split here, the weight split on the host.
        acc = tl.zeros([BLOCK_CO, BLOCK_L], dtype=tl.float32)
        for ci0 in tl.range(0, C_IN, BLOCK_CI, num_stages=NUM_STAGES):
            ci = ci0 + tl.arange(0, BLOCK_CI)
            ci_ok = ci < C_IN
            x_rows = x_base + ci[:, None] * stride_xc
            for t in tl.static_range(KSIZE):
                p = lpos + (t - PAD)
                x = tl.load(x_rows + (x_off + (t - PAD) * stride_xl)[None, :],
                            mask=ci_ok[:, None] & ((p >= 0) & (p < L) & n_ok)[None, :], other=0.0)
                w = _load_w(w_ptr, co, co_ok, ci, ci_ok, t, stride_wo, stride_wi, stride_wk)
                if SPLIT3:
                    if PRESPLIT:
                        wh = w
                        wl = _load_w(w_ptr + stride_wp, co, co_ok, ci, ci_ok, t, stride_wo, stride_wi, stride_wk)
                    else:
                        wh, wl = _split_bf16(w)
                    xh, xl = _split_bf16(x)
                    acc = _mma3(wh, wl, xh, xl, acc, False)
                else:
                    acc = _mma(w, x, acc, False, PRECISION)
        _store_at(y_base, acc, co, co_ok, y_off, n_ok, bias_ptr, stride_bias, stride_yc, HAS_BIAS)
    else:
        if LM:
            acc = tl.zeros([BLOCK_L, BLOCK_CO], dtype=tl.float32)
            acc2 = tl.zeros([BLOCK_L, CO_B if CO_B > 0 else 16], dtype=tl.float32)
        else:
            acc = tl.zeros([BLOCK_CO, BLOCK_L], dtype=tl.float32)
            acc2 = tl.zeros([CO_B if CO_B > 0 else 16, BLOCK_L], dtype=tl.float32)
        if PREFETCH_X:  # the x tile of the slice after the current one, in registers
            x_next = _load_x_tile(x_base, 0, C_IN, l_out, L, stride_xc, stride_xl, BLOCK_CI)
        for ci0 in tl.range(0, C_IN, BLOCK_CI, num_stages=NUM_STAGES):
            ci = ci0 + tl.arange(0, BLOCK_CI)
            ci_ok = ci < C_IN
            if GATHER:
                # The x tile is loaded once, aligned, and shifted on chip. Zeros past L come with the
                # load; the column that a shift of one brings in from outside the tile (KSIZE 3) is
                # loaded on its own (masked off at the row's ends: the padding); for other KSIZE
                # the tile covers the whole row (one L tile), so what lies outside it is padding.
                if PREFETCH_X:
                    x0 = x_next
                    x_next = _load_x_tile(x_base, ci0 + BLOCK_CI, C_IN, l_out, L, stride_xc, stride_xl, BLOCK_CI)
                else:
                    x0 = _load_x_tile(x_base, ci0, C_IN, l_out, L, stride_xc, stride_xl, BLOCK_CI)
            for t in tl.static_range(KSIZE):
                pos = l_out + (t - PAD)
                if GATHER:
                    if t == PAD:
                        x = x0
                    else:
                        local = tl.arange(0, BLOCK_L) + (t - PAD)  # source column within the tile
                        inside = (local >= 0) & (local < BLOCK_L)
                        src = tl.zeros([BLOCK_CI, BLOCK_L], dtype=tl.int32) + tl.minimum(tl.maximum(local, 0),
                                                                                         BLOCK_L - 1)[None, :]
                        x = tl.gather(x0, src, axis=1)
                        if KSIZE == 3 and HALO:
                            h_pos = pid_l * BLOCK_L + (-1 if t < PAD else BLOCK_L)
                            halo = tl.load(x_base + ci * stride_xc + h_pos * stride_xl,
                                           mask=ci_ok & (h_pos >= 0) & (h_pos < L), other=0.0)
                            x = tl.where(inside[None, :], x, halo[:, None])
                        else:
                            x = tl.where(inside[None, :], x, tl.zeros_like(x))
                else:
                    x = tl.load(x_base + ci[:, None] * stride_xc + pos[None, :] * stride_xl,
                                mask=ci_ok[:, None] & ((pos >= 0) & (pos < L))[None, :], other=0.0)
                w = _load_w(w_ptr, co, co_ok, ci, ci_ok, t, stride_wo, stride_wi, stride_wk)
                acc = _mma(w, x, acc, LM, PRECISION)
                if CO_B > 0:
                    w2 = _load_w(w_ptr, co2, co2_ok, ci, ci_ok, t, stride_wo, stride_wi, stride_wk)
                    acc2 = _mma(w2, x, acc2, LM, PRECISION)
        _store_tile(y_base, _as_co_l(acc, LM), co, co_ok, l_out, L, bias_ptr, stride_bias, stride_yc, stride_yl,
                    HAS_BIAS)
        if CO_B > 0:
            _store_tile(y_base, _as_co_l(acc2, LM), co2, co2_ok, l_out, L, bias_ptr, stride_bias, stride_yc,
                        stride_yl, HAS_BIAS)


def _pow2_at_most(limit: int, n: int) -> int:
    """The configured block, shrunk for small sizes (never below 16, tl.dot's smallest)."""
    return max(16, min(limit, triton.next_power_of_2(n)))


def pack_weight(weight: torch.Tensor, split: bool = False) -> torch.Tensor:
    """[COUT, CIN, KSIZE] -> a [KSIZE, COUT, CIN] copy: a tap's [BLOCK_CO, BLOCK_CI] slice is then
    rows of contiguous CIN (vector loads) instead of elements KSIZE apart. split (fp32 weights for
    bf16x3): a [2, KSIZE, COUT, CIN] bf16 copy, the hi and lo parts (hi + lo = w to ~16 bits), so
    the programs do not each split the same weight again."""
    w = weight.detach().permute(2, 0, 1).contiguous()
    if not split:
        return w
    parts = torch.empty((2, *w.shape), dtype=torch.bfloat16, device=w.device)
    n = w.numel()
    _split_weight_kernel[(triton.cdiv(n, 1024),)](w, parts, n, BLOCK=1024)
    return parts


def _fp32_cfg(cfg: dict, key: str, fp32: bool):
    """CONFIG[key], or for fp32 inputs CONFIG["fp32_" + key] where that is set (not 0)."""
    return cfg.get("fp32_" + key) or cfg[key] if fp32 else cfg[key]


def _plan(x: torch.Tensor, ksize: int, cfg: dict) -> dict:
    """The path CONFIG chooses for x (which shift, orientation, whether fp32 weights come presplit)."""
    fp32 = x.dtype == torch.float32
    shift = cfg["fp32_shift" if fp32 else "shift"]
    pairs = shift == "pairs" and ksize == 3
    quads = shift == "quads" and ksize == 3
    # "load" with flat tiles: a kernel of its own (COUT as M, bf16x3 split in the kernel).
    flat_load = shift == "load" and cfg["fp32_flat" if fp32 else "flat"]
    split3 = (pairs or flat_load or (shift in ("out", "pairs_out", "quads") and ksize == 3)) and fp32 \
        and cfg["fp32_precision"] == "bf16x3"
    return {
        "shift": shift,
        "pairs": pairs,
        "quads": quads,
        "flat_load": flat_load,
        "split3": split3,
        "presplit": split3 and cfg["fp32_presplit"] and cfg["packed_weight"],
        # 1: "out", 2: "pairs_out" (KSIZE 3), which always take L as M (the accumulators' rows are
        # shifted: with COUT as M that would be a shift along the MMA's N, spread over lanes).
        "out": {"out": 1, "pairs_out": 2}.get(shift, 0) if ksize == 3 else 0,
        "lm": (cfg["fp32_orient" if fp32 else "orient"] == "l_m" and shift not in ("prefetch", "quads") and not flat_load)
        or (shift in ("out", "pairs_out") and ksize == 3),
    }


def conv1d_forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                   packed: torch.Tensor | None = None) -> torch.Tensor:
    """conv1d(x, weight, bias, padding=KSIZE // 2) for odd KSIZE, with the CONFIG in force at call
    time. `packed`: pack_weight(weight, split=needs_split_weight(x, weight)), used when
    CONFIG["packed_weight"] (made here if None)."""
    batch, c_in, length = x.shape
    c_out, w_in, ksize = weight.shape
    if w_in != c_in or ksize % 2 == 0 or (bias is not None and bias.shape != (c_out,)):
        raise ValueError(f"conv1d: x {tuple(x.shape)}, weight {tuple(weight.shape)}, bias "
                         f"{None if bias is None else tuple(bias.shape)}: need weight [COUT, CIN, odd KSIZE]")
    y = torch.empty(batch, c_out, length, dtype=x.dtype, device=x.device)
    if y.numel() == 0:
        return y
    cfg = CONFIG
    fp32 = x.dtype == torch.float32
    plan = _plan(x, ksize, cfg)
    block_co = _pow2_at_most(cfg["BLOCK_CO"], c_out)
    block_l = _pow2_at_most(cfg["fp32_BLOCK_L" if fp32 else "BLOCK_L"], length)
    co_b = 0
    if cfg["split_co"] and plan["lm"] and block_co >= c_out:
        # One COUT tile would pad COUT up to a power of two (96 -> 128): cover it as the largest
        # power of two below (64) plus a second, smaller piece (32) instead. Only with L as M (COUT
        # is then the MMA's N, any multiple of 8): as M, a 32-row piece falls back from wgmma to
        # mma.sync and spilled (compiled offline for sm_90a).
        block_co = max(16, 1 << (c_out.bit_length() - 1))
        if c_out > block_co:
            co_b = _pow2_at_most(block_co, c_out - block_co)
    # "pairs" / "quads" over the rows laid end to end (no pair or quad may span two rows).
    flat = plan["flat_load"] or (cfg["fp32_flat" if fp32 else "flat"]
                                 and ((plan["pairs"] and length % 2 == 0) or (plan["quads"] and length % 4 == 0)))
    tiles_l, tiles_co = triton.cdiv(batch * length if flat else length, block_l), triton.cdiv(c_out, block_co + co_b)
    ci_cfg = cfg["fp32_BLOCK_CI" if fp32 else "BLOCK_CI"]
    if cfg["small_grid_BLOCK_CI"] and (1 if flat else batch) * tiles_co * tiles_l < sm_count(x.device):
        ci_cfg = cfg["small_grid_BLOCK_CI"]
    block_ci = _pow2_at_most(ci_cfg, c_in)
    # A stage of the CIN loop holds KSIZE weight slices and KSIZE x tiles in shared memory.
    if plan["quads"]:  # the weight slices (bf16 hi and lo when presplit) and 1.5 x tiles
        w_bytes = 4 if plan["presplit"] else x.element_size()
        stage_bytes = block_ci * (ksize * block_co * w_bytes + 3 * block_l * x.element_size() // 2)
    else:
        stage_bytes = ksize * x.element_size() * block_ci * (block_co + co_b + block_l)
    stages = pipeline_stages(_fp32_cfg(cfg, "num_stages", fp32), stage_bytes)
    if cfg["packed_weight"] or plan["presplit"]:
        w = pack_weight(weight, plan["presplit"]) if packed is None else packed
        if plan["presplit"]:  # [2, KSIZE, COUT, CIN]: (COUT, CIN, KSIZE) strides, then hi -> lo
            w_strides = (w.stride(2), w.stride(3), w.stride(1), w.stride(0))
        else:
            w_strides = (w.stride(1), w.stride(2), w.stride(0), 0)
    else:
        w, w_strides = weight, (*weight.stride(), 0)
    # Only fp32 operands read it (16-bit ones pass the default "tf32", ignored); the interpreter
    # (CPU tensors) computes dots in fp32 anyway and knows no bf16xN.
    if not fp32:
        precision = "tf32"
    else:
        precision = cfg["fp32_precision"] if x.is_cuda else "ieee"
    # Vector width (elements of 16 bytes) that x's and y's row starts and L are multiples of.
    align = 1
    if cfg["align_hints"] and x.is_cuda and x.stride(2) == 1:
        vec = 16 // x.element_size()
        if all(v % vec == 0 for v in (x.stride(0), x.stride(1), length)) and x.data_ptr() % 16 == 0:
            align = vec
    # "out" with KSIZE other than 3 falls back to "gather" (one L tile) or shifted loads.
    gather = plan["shift"] in ("gather", "out", "pairs_out") and (tiles_l == 1 or ksize == 3)
    prefetch = plan["shift"] == "prefetch" and ksize == 3
    pairs = plan["pairs"]
    if (pairs or plan["quads"]) and align == 1 and x.stride(2) == 1 and all(v % 2 == 0 for v in (x.stride(0), x.stride(1), length)):
        align = 2  # pair boundaries are 2-element aligned (what the pairs mode needs to stage its loads)
    # Element offsets past 2**31 need 64-bit column offsets in the flat tiling.
    i64 = flat and max(sum((n - 1) * st for n, st in zip(t.shape, t.stride())) for t in (x, y)) >= 2**31
    _conv1d_kernel[((1 if flat else batch) * tiles_co * tiles_l,)](
        x, w, bias if bias is not None else w, y,
        c_in, c_out, length, tiles_l, tiles_co, batch * length,
        *x.stride(), *w_strides, *y.stride(), bias.stride(0) if bias is not None else 0,
        KSIZE=ksize, PAD=ksize // 2, HAS_BIAS=bias is not None,
        BLOCK_CO=block_co, BLOCK_L=block_l, BLOCK_CI=block_ci,
        PRECISION=precision, NUM_STAGES=stages, ALIGN=align, GATHER=gather, PREFETCH=prefetch, PAIRS=pairs,
        # FP32 pairs with bf16x3: operands split once per CIN slice in the kernel (also under the
        # interpreter, which then checks that arithmetic).
        SPLIT3=plan["split3"], LM=plan["lm"], CO_B=co_b, PRESPLIT=plan["presplit"], OUT=plan["out"],
        # The columns a shift brings in from outside the tile: loaded ("gather") or multiplied
        # ("out", "pairs_out") unless one L tile covers the row, where they are the zero padding.
        HALO=tiles_l > 1 or cfg["one_tile_halo"],
        PREFETCH_X=cfg["prefetch_x"] and (gather or plan["out"] > 0),
        QUADS=plan["quads"], FLAT=flat, I64=i64,
        num_warps=_fp32_cfg(cfg, "num_warps", fp32),
        **({"maxnreg": cfg["fp32_maxnreg"]} if fp32 and cfg["fp32_maxnreg"] and x.is_cuda else {}),
    )
    return y


def needs_split_weight(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether conv1d_forward(x, weight, ...) under the current CONFIG wants pack_weight(split=True)."""
    return _plan(x, weight.shape[2], CONFIG)["presplit"]


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, kernel_size))
        self.bias = nn.Parameter(torch.zeros(out_channels))
        nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)
        self._packed, self._packed_of = None, None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The packed copy is remade whenever the weight changes: new storage, dtype, or an in-place
        # write (load_state_dict, an optimiser step), which bumps the tensor's version counter; or
        # when the CONFIG asks for the other form (split into bf16 parts or not).
        split = needs_split_weight(x, self.weight)
        if not (CONFIG["packed_weight"] or split):
            return conv1d_forward(x, self.weight, self.bias)
        of = (self.weight.data_ptr(), self.weight.dtype, self.weight._version, split)
        if of != self._packed_of:
            self._packed, self._packed_of = pack_weight(self.weight, split), of
        return conv1d_forward(x, self.weight, self.bias, self._packed)
