"""Device-side helpers shared by the cooperative long-row kernels: bf16 pairs in one int32.

A kernel that must keep a chunk of a row in registers across a wait holds bf16 data as int32 words
of two elements (element 2i in the low half), half the registers of fp32. Imported by the kernels
as `from _bf16_pairs import pack_bf16x2, unpack_bf16x2` (knowledge_base/kernels is on the
candidates' import path).
"""

import triton
import triton.language as tl


@triton.jit
def unpack_bf16x2(v):
    # -> two fp32, exactly (bf16 is fp32's top half).
    return (v << 16).to(tl.float32, bitcast=True), (v & -65536).to(tl.float32, bitcast=True)


@triton.jit
def pack_bf16x2(lo, hi):
    lo_bits = lo.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int32) & 65535
    return (hi.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int32) << 16) | lo_bits
