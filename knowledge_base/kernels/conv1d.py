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
CONFIG["align_hints"] tells the compiler (as (v // A) * A: tl.multiple_of on an argument is lost)
that x's row stride and L are multiples of the 16-byte vector, checked on the host: y is then
stored with vector stores and the aligned loads are staged asynchronously.

Precision: fp16/bf16 inputs go to the tensor cores as they are (fp32 accumulation). fp32 inputs
use CONFIG["fp32_precision"]: "bf16x3" (operands split into bf16 hi and lo parts, three bf16
products; ~16 mantissa bits, enough for the spec's atol 1e-4, rtol 5e-4 at CIN * KSIZE = 288;
"pairs" splits each operand once per CIN slice itself, tl.dot would split it again per dot),
"tf32x3" (three tf32 products), "bf16x6" or "ieee" (plain fp32 FMA, slow); plain "tf32" misses
that tolerance and is not offered.

Measured on an H200 (bench/results/recsys_operators_h200_round4/): B = 2048, (CIN, COUT, L) =
(96, 96, 200): FP16 "gather" with CIN slices of 16 0.151 ms (the "load" kernel 0.217, F.conv1d
0.340, the channels_last conv2d trick 0.292); FP32 "pairs" with CIN slices of 32 0.363 ms (was
0.606; F.conv1d, which runs TF32, 0.482). At B = 64 (64 programs on 132 SMs) slices of 32 were
faster for FP16 too (0.014 ms against 0.033), hence CONFIG["small_grid_BLOCK_CI"]. Compiled
for sm_90a the "load" kernel spilled (255 registers) and issued only scalar x loads; "gather" and
"pairs" do neither. A TMA version (shifted boxes, zero fill as the padding) hit an illegal
instruction on the H200 with Triton 3.6 and was dropped.

The weight is read through a [KSIZE, COUT, CIN] copy (CONFIG["packed_weight"]), made once and
kept by the module until the weight changes: every program re-reads the whole weight from L2,
and in the native layout a tap's slice is elements KSIZE apart (no vector loads).

Tiling notes: L = 200 is not a power of two, so an L tile of 256 wastes 22%, tiles of 64 or 128
waste the same 56 columns; COUT = 96 is covered by BLOCK_CO = 32 (three tiles, x re-read from L2)
or one masked 128-row tile (25% of the MMA work wasted, x read once). Which is faster depends on
the dtype: the benchmark (bench/recsys_operators.py) times the TUNABLES variants.
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
    "BLOCK_CI": 16,
    "fp32_BLOCK_CI": 32,
    "small_grid_BLOCK_CI": 32,
    "num_warps": 8,
    "num_stages": 3,
    "fp32_precision": "bf16x3",
    "packed_weight": True,
    "align_hints": True,
    "shift": "gather",
    "fp32_shift": "pairs",
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
    "shift": ["load", "gather", "prefetch", "pairs"],
    "fp32_shift": ["load", "gather", "prefetch", "pairs"],  # "shift" for fp32 inputs
}


@triton.jit
def _split_bf16(v):
    """An fp32 tile as bf16 (hi, lo) with hi + lo = v to about 16 mantissa bits."""
    hi = v.to(tl.bfloat16)
    return hi, (v - hi.to(tl.float32)).to(tl.bfloat16)


@triton.jit
def _dot3(a_hi, a_lo, b_hi, b_lo, acc):
    """acc + a @ b as bf16x3: the small products first, then hi * hi."""
    acc = tl.dot(a_lo, b_hi, acc)
    acc = tl.dot(a_hi, b_lo, acc)
    return tl.dot(a_hi, b_hi, acc)


@triton.jit
def _conv1d_kernel(
    x_ptr, w_ptr, bias_ptr, y_ptr,
    C_IN, C_OUT, L, tiles_l, tiles_co,
    stride_xb, stride_xc, stride_xl,
    stride_wo, stride_wi, stride_wk,
    stride_yb, stride_yc, stride_yl, stride_bias,
    KSIZE: tl.constexpr, PAD: tl.constexpr, HAS_BIAS: tl.constexpr,
    BLOCK_CO: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_CI: tl.constexpr,
    PRECISION: tl.constexpr, NUM_STAGES: tl.constexpr, ALIGN: tl.constexpr, GATHER: tl.constexpr,
    PREFETCH: tl.constexpr, PAIRS: tl.constexpr, SPLIT3: tl.constexpr,
):
    # Programs of one sample are adjacent (its x columns stay in L2 for the other COUT tiles).
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
    acc = tl.zeros([BLOCK_CO, BLOCK_L], dtype=tl.float32)
    x_base = x_ptr + b.to(tl.int64) * stride_xb
    if PAIRS:
        # KSIZE 3 on even and odd output columns apart. With pairs P_s[m] = (x[2(m+s)], x[2(m+s)+1]):
        #   y[2m]     = w0 . x[2m - 1] + w1 . x[2m]     + w2 . x[2m + 1] = w0 P_-1.odd + w1 P_0.even + w2 P_0.odd
        #   y[2m + 1] = w0 . x[2m]     + w1 . x[2m + 1] + w2 . x[2m + 2] = w0 P_0.even + w1 P_0.odd + w2 P_+1.even
        # Every x tile then starts on a pair boundary (4-byte aligned in FP16, 8 in FP32), which the
        # asynchronous copies of the pipelined loop can stage; the odd shifts need no unaligned load.
        HALF: tl.constexpr = BLOCK_L // 2
        acc_e = tl.zeros([BLOCK_CO, HALF], dtype=tl.float32)
        acc_o = tl.zeros([BLOCK_CO, HALF], dtype=tl.float32)
        p_m = l_out - 2
        p_p = l_out + 2
        ok_m = ((p_m >= 0) & (p_m < L))[None, :]
        ok_c = (l_out < L)[None, :]
        ok_p = (p_p < L)[None, :]
        for ci0 in tl.range(0, C_IN, BLOCK_CI, num_stages=NUM_STAGES):
            ci = ci0 + tl.arange(0, BLOCK_CI)
            ci_ok = (ci < C_IN)[:, None]
            x_rows = x_base + ci[:, None] * stride_xc
            x_m = tl.load(x_rows + p_m[None, :] * stride_xl, mask=ci_ok & ok_m, other=0.0)
            x_c = tl.load(x_rows + l_out[None, :] * stride_xl, mask=ci_ok & ok_c, other=0.0)
            x_p = tl.load(x_rows + p_p[None, :] * stride_xl, mask=ci_ok & ok_p, other=0.0)
            _, odd_m = tl.split(tl.reshape(x_m, [BLOCK_CI, HALF, 2]))
            even_c, odd_c = tl.split(tl.reshape(x_c, [BLOCK_CI, HALF, 2]))
            even_p, _ = tl.split(tl.reshape(x_p, [BLOCK_CI, HALF, 2]))
            w_rows = w_ptr + co[:, None] * stride_wo + ci[None, :] * stride_wi
            w_ok = co_ok[:, None] & (ci < C_IN)[None, :]
            w0 = tl.load(w_rows, mask=w_ok, other=0.0)
            w1 = tl.load(w_rows + stride_wk, mask=w_ok, other=0.0)
            w2 = tl.load(w_rows + 2 * stride_wk, mask=w_ok, other=0.0)
            if SPLIT3:
                # FP32 as bf16x3, each operand split into bf16 (hi, lo) once per CIN slice rather than
                # once per dot (4 x tiles and 3 weight slices feed 6 dots): hi*hi + hi*lo + lo*hi.
                w0h, w0l = _split_bf16(w0)
                w1h, w1l = _split_bf16(w1)
                w2h, w2l = _split_bf16(w2)
                omh, oml = _split_bf16(odd_m)
                ech, ecl = _split_bf16(even_c)
                och, ocl = _split_bf16(odd_c)
                eph, epl = _split_bf16(even_p)
                acc_e = _dot3(w0h, w0l, omh, oml, acc_e)
                acc_e = _dot3(w1h, w1l, ech, ecl, acc_e)
                acc_e = _dot3(w2h, w2l, och, ocl, acc_e)
                acc_o = _dot3(w0h, w0l, ech, ecl, acc_o)
                acc_o = _dot3(w1h, w1l, och, ocl, acc_o)
                acc_o = _dot3(w2h, w2l, eph, epl, acc_o)
            else:
                acc_e = tl.dot(w0, odd_m, acc_e, input_precision=PRECISION)
                acc_e = tl.dot(w1, even_c, acc_e, input_precision=PRECISION)
                acc_e = tl.dot(w2, odd_c, acc_e, input_precision=PRECISION)
                acc_o = tl.dot(w0, even_c, acc_o, input_precision=PRECISION)
                acc_o = tl.dot(w1, odd_c, acc_o, input_precision=PRECISION)
                acc_o = tl.dot(w2, even_p, acc_o, input_precision=PRECISION)
        acc = tl.reshape(tl.join(acc_e, acc_o), [BLOCK_CO, BLOCK_L])
    elif PREFETCH:
        # KSIZE == 3: the three shifted x tiles of the next CIN slice are loaded (into registers)
        # before this slice's dots, so their latency overlaps the tensor-core work; the unaligned
        # taps cannot be staged by the asynchronous copies that num_stages pipelines.
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
    else:
        for ci0 in tl.range(0, C_IN, BLOCK_CI, num_stages=NUM_STAGES):
            ci = ci0 + tl.arange(0, BLOCK_CI)
            ci_ok = ci < C_IN
            if GATHER:
                # The x tile is loaded once, aligned, and shifted on chip. Zeros past L come with the
                # load; the column that a shift of one brings in from outside the tile (KSIZE 3) is
                # loaded on its own (masked off at the row's ends: the padding); for other KSIZE
                # the tile covers the whole row (one L tile), so what lies outside it is padding.
                x0 = tl.load(x_base + ci[:, None] * stride_xc + l_out[None, :] * stride_xl,
                             mask=ci_ok[:, None] & (l_out < L)[None, :], other=0.0)
            for t in tl.static_range(KSIZE):
                w = tl.load(w_ptr + co[:, None] * stride_wo + ci[None, :] * stride_wi + t * stride_wk,
                            mask=co_ok[:, None] & ci_ok[None, :], other=0.0)
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
                        if KSIZE == 3:
                            h_pos = pid_l * BLOCK_L + (-1 if t < PAD else BLOCK_L)
                            halo = tl.load(x_base + ci * stride_xc + h_pos * stride_xl,
                                           mask=ci_ok & (h_pos >= 0) & (h_pos < L), other=0.0)
                            x = tl.where(inside[None, :], x, halo[:, None])
                        else:
                            x = tl.where(inside[None, :], x, tl.zeros_like(x))
                else:
                    x = tl.load(x_base + ci[:, None] * stride_xc + pos[None, :] * stride_xl,
                                mask=ci_ok[:, None] & ((pos >= 0) & (pos < L))[None, :], other=0.0)
                acc = tl.dot(w, x, acc, input_precision=PRECISION)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + co * stride_bias, mask=co_ok, other=0.0).to(tl.float32)[:, None]
    y = y_ptr + b.to(tl.int64) * stride_yb + co[:, None] * stride_yc + l_out[None, :] * stride_yl
    tl.store(y, acc.to(y_ptr.dtype.element_ty), mask=co_ok[:, None] & (l_out < L)[None, :])


def _pow2_at_most(limit: int, n: int) -> int:
    """The configured block, shrunk for small sizes (never below 16, tl.dot's smallest)."""
    return max(16, min(limit, triton.next_power_of_2(n)))


def pack_weight(weight: torch.Tensor) -> torch.Tensor:
    """[COUT, CIN, KSIZE] -> a [KSIZE, COUT, CIN] copy: a tap's [BLOCK_CO, BLOCK_CI] slice is then
    rows of contiguous CIN (vector loads) instead of elements KSIZE apart."""
    return weight.detach().permute(2, 0, 1).contiguous()


def conv1d_forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                   packed: torch.Tensor | None = None) -> torch.Tensor:
    """conv1d(x, weight, bias, padding=KSIZE // 2) for odd KSIZE, with the CONFIG in force at call
    time. `packed`: pack_weight(weight), used when CONFIG["packed_weight"] (made here if None)."""
    batch, c_in, length = x.shape
    c_out, w_in, ksize = weight.shape
    if w_in != c_in or ksize % 2 == 0 or (bias is not None and bias.shape != (c_out,)):
        raise ValueError(f"conv1d: x {tuple(x.shape)}, weight {tuple(weight.shape)}, bias "
                         f"{None if bias is None else tuple(bias.shape)}: need weight [COUT, CIN, odd KSIZE]")
    y = torch.empty(batch, c_out, length, dtype=x.dtype, device=x.device)
    if y.numel() == 0:
        return y
    cfg = CONFIG
    block_co = _pow2_at_most(cfg["BLOCK_CO"], c_out)
    block_l = _pow2_at_most(cfg["fp32_BLOCK_L" if x.dtype == torch.float32 else "BLOCK_L"], length)
    tiles_l, tiles_co = triton.cdiv(length, block_l), triton.cdiv(c_out, block_co)
    ci_cfg = cfg["fp32_BLOCK_CI" if x.dtype == torch.float32 else "BLOCK_CI"]
    if cfg["small_grid_BLOCK_CI"] and batch * tiles_co * tiles_l < sm_count(x.device):
        ci_cfg = cfg["small_grid_BLOCK_CI"]
    block_ci = _pow2_at_most(ci_cfg, c_in)
    # A stage of the CIN loop holds KSIZE weight slices and KSIZE x tiles in shared memory.
    stages = pipeline_stages(cfg["num_stages"], ksize * x.element_size() * block_ci * (block_co + block_l))
    if cfg["packed_weight"]:
        w = pack_weight(weight) if packed is None else packed
        w_strides = (w.stride(1), w.stride(2), w.stride(0))  # as (COUT, CIN, KSIZE) strides
    else:
        w, w_strides = weight, weight.stride()
    # Only fp32 operands read it (16-bit ones pass the default "tf32", ignored); the interpreter
    # (CPU tensors) computes dots in fp32 anyway and knows no bf16xN.
    if x.dtype != torch.float32:
        precision = "tf32"
    else:
        precision = cfg["fp32_precision"] if x.is_cuda else "ieee"
    # Vector width (elements of 16 bytes) that x's and y's row starts and L are multiples of.
    align = 1
    if cfg["align_hints"] and x.is_cuda and x.stride(2) == 1:
        vec = 16 // x.element_size()
        if all(v % vec == 0 for v in (x.stride(0), x.stride(1), length)) and x.data_ptr() % 16 == 0:
            align = vec
    shift = cfg["fp32_shift" if x.dtype == torch.float32 else "shift"]
    gather = shift == "gather" and (tiles_l == 1 or ksize == 3)
    prefetch = shift == "prefetch" and ksize == 3
    pairs = shift == "pairs" and ksize == 3
    # FP32 pairs with bf16x3: operands split once per CIN slice in the kernel (also under the
    # interpreter, which then checks that arithmetic).
    split3 = pairs and x.dtype == torch.float32 and cfg["fp32_precision"] == "bf16x3"
    if pairs and align == 1 and x.stride(2) == 1 and all(v % 2 == 0 for v in (x.stride(0), x.stride(1), length)):
        align = 2  # pair boundaries are 2-element aligned (what the pairs mode needs to stage its loads)
    _conv1d_kernel[(batch * tiles_co * tiles_l,)](
        x, w, bias if bias is not None else w, y,
        c_in, c_out, length, tiles_l, tiles_co,
        *x.stride(), *w_strides, *y.stride(), bias.stride(0) if bias is not None else 0,
        KSIZE=ksize, PAD=ksize // 2, HAS_BIAS=bias is not None,
        BLOCK_CO=block_co, BLOCK_L=block_l, BLOCK_CI=block_ci,
        PRECISION=precision, NUM_STAGES=stages, ALIGN=align, GATHER=gather, PREFETCH=prefetch, PAIRS=pairs, SPLIT3=split3, num_warps=cfg["num_warps"],
    )
    return y


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, kernel_size))
        self.bias = nn.Parameter(torch.zeros(out_channels))
        nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)
        self._packed, self._packed_of = None, None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The packed copy is remade whenever the weight changes: new storage, dtype, or an in-place
        # write (load_state_dict, an optimiser step), which bumps the tensor's version counter.
        of = (self.weight.data_ptr(), self.weight.dtype, self.weight._version)
        if CONFIG["packed_weight"] and of != self._packed_of:
            self._packed, self._packed_of = pack_weight(self.weight), of
        return conv1d_forward(x, self.weight, self.bias, self._packed if CONFIG["packed_weight"] else None)
