"""The online-softmax step of the flash-style attention kernels (flash_attention.py, int8_mqa_prefill.py):
one tile of raw scores masked and folded into the running (max, sum) and the accumulator."""

import triton
import triton.language as tl


@triton.jit
def softmax_step(
    acc,
    m_i,
    l_i,
    s,
    cols,
    offs_m,
    seq_len,
    qk_scale,
    CAUSAL_MASK: tl.constexpr,
    SEQ_MASK: tl.constexpr,
    LAZY_RESCALE: tl.constexpr,
):
    """Mask the raw score tile s, fold it into (running max, running sum) and rescale acc; returns P too."""
    if CAUSAL_MASK:
        s = tl.where(offs_m[:, None] >= cols[None, :], s, float("-inf"))
    if SEQ_MASK:
        s = tl.where(cols[None, :] < seq_len, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
    if LAZY_RESCALE:
        # Keep the running max (and skip rescaling acc and l) unless some row's max grew by more
        # than 2^8: p stays <= 256, and acc and l share the stale max, so out = acc / l is exact.
        if tl.max(m_new - m_i, 0) > 8.0:
            alpha = tl.exp2(m_i - m_new)
            l_i = l_i * alpha
            acc = acc * alpha[:, None]
            m_i = m_new
        p = tl.exp2(s * qk_scale - m_i[:, None])
        l_i = l_i + tl.sum(p, 1)
    else:
        p = tl.exp2(s * qk_scale - m_new[:, None])  # one FMA per score
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        m_i = m_new
    return acc, m_i, l_i, p
