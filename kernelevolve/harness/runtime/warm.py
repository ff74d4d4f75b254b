"""A harness-owned Triton launch made while a timing process prepares, so that Triton's once-per-process
start (its driver utilities, the launcher machinery, the first module load) is not paid inside the timed
phase, where the GPU is held alone. Runs before the process's references exist and is synchronised:
whatever the shared compile cache hands back for this kernel cannot touch what is judged later."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _touch(ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(ptr + offs, tl.load(ptr + offs, mask=mask) + 1, mask=mask)


def warm_triton(torch) -> None:
    x = torch.zeros(64, device="cuda", dtype=torch.float32)
    _touch[(1,)](x, 64, BLOCK=64)
    torch.cuda.synchronize()
    if int(x.sum().item()) != 64:  # a cached binary that does something else: say so, judge nothing
        raise RuntimeError("the harness's own Triton warm-up kernel computed the wrong thing")
