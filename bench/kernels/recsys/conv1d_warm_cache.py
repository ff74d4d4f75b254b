"""Compile knowledge_base/kernels/conv1d.py at its default CONFIG and at every conv1d variant of
bench/kernels/recsys/recsys_operators.py, in parallel processes, into Triton's on-disk cache: the timed sweep run
after it then loads the kernels instead of compiling them one after another inside its budget.

    python bench/kernels/recsys/conv1d_warm_cache.py [--procs 8]

Calls each configuration once at B = 256 and B = 64 (the grids on either side of the SM count,
where small_grid_BLOCK_CI applies) in both dtypes, with the production CIN, COUT, L, KSIZE: the
same specialisations as the spec's shapes. Nothing is timed or checked here.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE)]  # bench/ (benchlib) and this folder (recsys_operators)


def _warm(variant: dict) -> str:
    import torch

    from benchlib import KERNELS, load_module

    kernel = load_module(KERNELS / "conv1d.py", "kernel_conv1d")
    kernel.CONFIG.update(variant)
    t0 = time.time()
    try:
        for dtype in (torch.float16, torch.float32):
            model = kernel.ModelNew(96, 96, 3).cuda().to(dtype)
            for batch in (256, 64):
                model(torch.randn(batch, 96, 200, device="cuda", dtype=dtype))
        torch.cuda.synchronize()
        return f"{time.time() - t0:6.1f} s {variant}"
    except Exception as exc:  # the sweep reports it; here only say so
        return f"FAILED {variant}: {type(exc).__name__}: {str(exc)[:200]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, default=8)
    args = parser.parse_args()
    from recsys_operators import VARIANTS

    variants = [{}] + VARIANTS["conv1d"]
    t0 = time.time()
    with mp.get_context("spawn").Pool(args.procs) as pool:
        for line in pool.imap_unordered(_warm, variants):
            print(line, flush=True)
    print(f"warmed {len(variants)} configurations in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
