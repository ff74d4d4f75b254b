"""Pieces shared by the warp-specialised Gluon kernels for Hopper (_flash_hopper.py, _ikbo_hopper.py):
the TMA load under either Triton name, and the inline PTX that Gluon has no op for (named barriers for
the consumers' ping-pong, a wgmma wait that ptxas cannot hoist)."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import tma

# Triton 3.6 names the TMA tile load async_copy_global_to_shared; later releases call it async_load
# (same arguments) and make the old name raise.
tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared


@gluon.jit
def named_barrier(token, ASM: gl.constexpr):
    """One named-barrier instruction (bar.sync / bar.arrive id, threads) per thread; returns the token.
    is_pure=False keeps it in program order with the wgmma issues."""
    return gl.inline_asm_elementwise(ASM + " mov.b32 $0, $1;", "=r,r", [token], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def turn_wait(token, ME: gl.constexpr, PINGPONG: gl.constexpr):
    """PINGPONG: wait for consumer ME's turn to issue wgmma (named barrier 8 + ME, 256 threads: its 128
    threads' bar.sync and the other consumer's 128 threads' bar.arrive)."""
    if PINGPONG:
        if ME == 0:
            token = named_barrier(token, "bar.sync 8, 256;")
        else:
            token = named_barrier(token, "bar.sync 9, 256;")
    return token


@gluon.jit
def turn_pass(token, TO: gl.constexpr, PINGPONG: gl.constexpr):
    """PINGPONG: consumer TO's turn next (arrive on its barrier, 8 + TO)."""
    if PINGPONG:
        if TO == 0:
            token = named_barrier(token, "bar.arrive 8, 256;")
        else:
            token = named_barrier(token, "bar.arrive 9, 256;")
    return token


@gluon.jit
def wgmma_wait_behind(x):
    """`wgmma.wait_group 0` placed after x is computed. ptxas hoists a plain wait to the top of its basic
    block, above the softmax it should overlap; here the wait sits behind a branch on x (a sum of
    exponentials, never negative, so never taken), which it cannot hoist over."""
    return gl.inline_asm_elementwise(
        "{ .reg .pred neg; setp.lt.f32 neg, $1, 0f00000000; @neg bra skip; wgmma.wait_group.sync.aligned 0; skip: mov.b32 $0, $1; }",
        "=r,r",
        [x],
        dtype=gl.float32,
        is_pure=False,
        pack=1,
    )
