"""Shared device steps of the int8 multi-query attention kernels (decode and prefill): one key tile's
scores and one online-softmax update over an int8 K/V cache with per-token scales.

Dequantisation never multiplies a [BLOCK_N, D] tile: the codes are converted in registers, the K
scale multiplies the score tile and the V scale multiplies P. The per-token scale vectors are
loaded by the caller (`load_scales`) and passed in: a [BLOCK_N] vector of bf16 scales is too
narrow for Triton's software pipeliner (less than 4 bytes per thread), so a load of it inside the
KV loop is a plain global load whose latency every step waits for; the decode kernel loads the
next step's scales one step ahead instead. Imported as `from _int8_kv import ...`
(knowledge_base/kernels is on the candidates' import path; Triton inlines @triton.jit helpers into
the kernels that call them).
"""

import triton
import triton.language as tl


@triton.jit
def dequant_tile(base, cols, offs_d, stride_n, stride_d, kv_mask, like):
    # int8 -> fp32 -> bf16 is exact (|code| <= 127); the Triton 3.6 interpreter turns a direct
    # int8 -> bf16 cast into NaN.
    return tl.load(base + cols[:, None] * stride_n + offs_d[None, :] * stride_d, mask=kv_mask, other=0).to(tl.float32).to(like.dtype)


@triton.jit
def int8_to_bf16_asm(codes):
    """int8 -> bf16 (exact) in inline PTX, four codes a register: x ^ 0x80 placed in the mantissa of
    2^23 (0x4B0000xx = 8388608 + x + 128), minus 8388736, two fp32 -> bf16x2 conversions. The
    compiler cannot move its tile's layout change ahead of it (it does for a plain cast, and then
    reads the int8 V tile from shared memory a byte at a time to build the P V operand). is_pure=False
    on purpose: a pure inline-asm op is moved like a cast."""
    return tl.inline_asm_elementwise(
        asm="""{
        .reg .b32 t, b0, b1, b2, b3;
        .reg .f32 f0, f1, f2, f3;
        xor.b32 t, $2, 0x80808080;
        prmt.b32 b0, t, 0x4B000000, 0x7540;
        prmt.b32 b1, t, 0x4B000000, 0x7541;
        prmt.b32 b2, t, 0x4B000000, 0x7542;
        prmt.b32 b3, t, 0x4B000000, 0x7543;
        sub.f32 f0, b0, 0f4B000080;
        sub.f32 f1, b1, 0f4B000080;
        sub.f32 f2, b2, 0f4B000080;
        sub.f32 f3, b3, 0f4B000080;
        cvt.rn.bf16x2.f32 $0, f1, f0;
        cvt.rn.bf16x2.f32 $1, f3, f2;
        }""",
        constraints="=r,=r,r",
        args=[codes],
        dtype=tl.bfloat16,
        is_pure=False,
        pack=4,
    )


@triton.jit
def load_scales(base, cols, stride_n, c_live):
    """The per-token scales of key tile `cols` in fp32 (0 where the key is not live)."""
    return tl.load(base + cols * stride_n, mask=c_live, other=0.0).to(tl.float32)


@triton.jit
def int8_scores(q, k_base, cols, offs_d, kv_mask, stride_kn, stride_kd, k_scale, qk_scale):
    """q . K^T of key tile `cols` in the exp2 domain: (q . codes) * k_scale[n] * qk_scale."""
    k = dequant_tile(k_base, cols, offs_d, stride_kn, stride_kd, kv_mask, q)
    return tl.dot(q, tl.trans(k)) * (k_scale * qk_scale)[None, :]


@triton.jit
def int8_update(acc, m_i, l_i, s, q, v_base, cols, offs_d, kv_mask, stride_vn, stride_vd, v_scale, V_ASM: tl.constexpr = False):
    """Online-softmax step: fold the (masked) score tile s and its V tile into (acc, running max, running sum)."""
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.exp2(s - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    if V_ASM:
        v = int8_to_bf16_asm(tl.load(v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd, mask=kv_mask, other=0))
    else:
        v = dequant_tile(v_base, cols, offs_d, stride_vn, stride_vd, kv_mask, q)
    acc = acc * alpha[:, None] + tl.dot((p * v_scale[None, :]).to(q.dtype), v)
    return acc, m_new, l_i
