"""The softmax pieces of the Gluon flash-attention kernels for Hopper (_flash_hopper.py, _flash_hopper_ws.py):
one score tile folded into the running max and sum, the causal mask as one select a score, the lazy
rescale of O (FlashAttention-4's, skipped per warp) and the last step, O / l stored."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def causal_select(s, rows, cols):
    """s where rows >= cols, else -inf: compare and select in one inline-asm block per score. With gl.where
    in the persistent kernel's block loop the compiler computed the [64, 128] comparisons ahead and kept
    them as bits packed into registers (~900 LOP3 in the diagonal tile's path)."""
    return gl.inline_asm_elementwise(
        "{ .reg .pred keep; setp.ge.s32 keep, $2, $3; selp.f32 $0, $1, 0fFF800000, keep; }",
        "=r,r,r,r",
        [s, rows, cols],
        dtype=gl.float32,
        is_pure=True,
        pack=1,
    )


def rescale_asm(n: int) -> str:
    """PTX for rescale_if_any: the n accumulator registers of a thread ($0 .. $n-1, tied to the inputs $n ...) times
    their row's alpha ($2n ...), skipped as a whole when no row of the warp has alpha != 1 (one vote, a
    branch the warp takes together). Elements 0 and 2 of a thread are its two rows (r and r + 8) in a
    wgmma accumulator: register bit 1 is row + 8 (NVMMA version 3)."""
    a = 2 * n  # operands: n outputs, n inputs tied to them, then the n alphas
    muls = " ".join(f"mul.f32 ${i}, ${i}, ${a + i};" for i in range(n))
    return (
        "{ .reg .pred p, q; "
        f"setp.ne.f32 p, ${a}, 0f3F800000; setp.ne.f32 q, ${a + 2}, 0f3F800000; or.pred p, p, q; "
        "vote.sync.any.pred p, p, 0xffffffff; @!p bra.uni done; "
        f"{muls} done: }}"
    )


# A thread holds HEAD_D / 2 accumulator values of a [64, HEAD_D] warpgroup tile (head dims 128 and 64).
RESCALE_ASM_64 = gl.constexpr(rescale_asm(64))
RESCALE_CONSTRAINTS_64 = gl.constexpr(",".join(["=r"] * 64 + [str(i) for i in range(64)] + ["r"] * 64))
RESCALE_ASM_32 = gl.constexpr(rescale_asm(32))
RESCALE_CONSTRAINTS_32 = gl.constexpr(",".join(["=r"] * 32 + [str(i) for i in range(32)] + ["r"] * 32))


@gluon.jit
def rescale_if_any(o, alpha):
    """o * alpha[:, None] for a [64, HEAD_D] wgmma accumulator of one warpgroup, the multiplies skipped by a
    warp whose rows all have alpha 1 (the lazy rescale keeps the running max while it grows by less than 8
    in log2 units, so after a block's first tiles almost every step skips)."""
    a, _ = gl.broadcast(alpha[:, None], o)
    if o.shape[1] == 128:
        return gl.inline_asm_elementwise(
            RESCALE_ASM_64, RESCALE_CONSTRAINTS_64, [o, a], dtype=gl.float32, is_pure=True, pack=64
        )
    else:
        gl.static_assert(o.shape[1] == 64, "the lazy rescale takes head dims 64 and 128")
        return gl.inline_asm_elementwise(
            RESCALE_ASM_32, RESCALE_CONSTRAINTS_32, [o, a], dtype=gl.float32, is_pure=True, pack=32
        )


@gluon.jit
def scores_to_p(
    s,
    m_i,
    l_i,
    offs_m,
    cols,
    seq_len,
    qk_scale,
    masked,
    CAUSAL: gl.constexpr,
    LAZY: gl.constexpr,
):
    """Fold one raw score tile into the running (max, sum): returns P (fp32), the rescale factor
    alpha for O, and the new (max, sum). `masked` (a runtime flag) applies the causal and
    sequence-end masks; interior tiles skip the where(). LAZY: a row's max moves only when it would grow by
    more than 8 (alpha is then 1 for the rows that keep theirs; exact, since O and the sum share the max)."""
    if masked:
        if CAUSAL:  # keys past the row; a row inside the sequence sees no key past its end
            s = causal_select(s, offs_m[:, None], cols[None, :])
        else:
            s = gl.where(cols[None, :] < seq_len, s, float("-inf"))
    m_tile = gl.max(s, 1) * qk_scale
    if LAZY:  # FlashAttention-4: the running max kept until a row's grows by more than 8 (log2): P <= 256
        m_new = gl.where(m_tile > m_i + 8.0, gl.maximum(m_i, m_tile), m_i)
    else:
        m_new = gl.maximum(m_i, m_tile)
    p = gl.exp2(s * qk_scale - m_new[:, None])  # softmax scale * log2(e) folded in: one FMA a score
    alpha = gl.exp2(m_i - m_new)
    l_i = l_i * alpha + gl.sum(p, 1)
    return p, alpha, m_new, l_i


@gluon.jit
def store_normalised(O, o, l, row0, m0, seq_len):
    """O[row0 + r] = o[r] / l[r] in O's dtype for the rows r of this tile inside the sequence (m0 + r < seq_len):
    one division a row (`o / l[:, None]` is an IEEE division a value, ~190 instructions a thread a block)."""
    row_o: gl.constexpr = gl.SliceLayout(1, o.type.layout)
    rows = gl.arange(0, o.shape[0], layout=row_o)
    cols = gl.arange(0, o.shape[1], layout=gl.SliceLayout(0, o.type.layout))
    out = o * gl.convert_layout(1.0 / l, row_o)[:, None]
    ptrs = O + (row0 + rows)[:, None].to(gl.int64) * o.shape[1] + cols[None, :]
    gl.store(ptrs, out.to(O.dtype.element_ty), mask=(m0 + rows < seq_len)[:, None])
