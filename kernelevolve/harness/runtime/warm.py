"""Triton's once-per-process start paid before any candidate code runs: its driver utilities (a C
module built with the C compiler into the evaluation's own, empty cache), the compiler's first use, the
launcher machinery and the first module load. `compile_triton` does the CPU part without touching the GPU
(a warm process waits for its candidate while another may be timed); `warm_triton`, while a timing
process prepares, also launches and checks the kernel, so none of this is paid in the timed phase.
On the H200 a process's first kernel otherwise took ~0.3 s more, and a timing process's preparation,
~1.6 s, outlasted a quick candidate's checks."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _touch(ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(ptr + offs, tl.load(ptr + offs, mask=mask) + 1, mask=mask)


def compile_triton(torch) -> None:
    """Compile the harness's own kernel and load it, launching nothing (best effort: a Triton without
    these entry points just pays later)."""
    try:
        kernel = _touch.warmup(torch.float32, 64, BLOCK=64, grid=(1,))
        kernel._init_handles()  # the launcher (C compiler) and the module load
    except Exception:  # noqa: BLE001 - only an optimisation; warm_triton checks for real
        pass


def warm_triton(torch) -> None:
    x = torch.zeros(64, device="cuda", dtype=torch.float32)
    _touch[(1,)](x, 64, BLOCK=64)
    torch.cuda.synchronize()
    if int(x.sum().item()) != 64:  # a cached binary that does something else: say so, judge nothing
        raise RuntimeError("the harness's own Triton warm-up kernel computed the wrong thing")
