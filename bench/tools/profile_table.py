"""A markdown table of kept profiles (`kernelevolve profile ... --keep DIR/<kernel>`), one row per
spec shape: ncu time, the roofline line's fraction and bound, and ncu's main limits.

    python bench/tools/profile_table.py DIR [--kernels softmax,rmsnorm,...]  > table.md

Reads DIR/<kernel>/ncu/ncu_<n>.csv (n: the spec's n-th shape on the GPU) with the package's parser.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

KERNELS = "softmax,rmsnorm,cross_entropy,flash_attention,ikbo_lce,ikbo_target_attention"


def main() -> int:
    from kernelevolve.profiling.tools import ProfileParseError
    from kernelevolve.profiling.tools.ncu import parse_ncu_csv
    from kernelevolve.profiling.roofline import roofline
    from kernelevolve.spec import load_spec

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--kernels", default=KERNELS)
    args = ap.parse_args()
    print(
        "| kernel | shape | ncu ms | GB/s | TFLOP/s | roofline | bound | DRAM % | SM % | occupancy % | regs | "
        "smem KiB | L2 hit % | top stall |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for kernel in args.kernels.split(","):
        spec = load_spec(ROOT / "specs" / f"{kernel}.yaml")
        for n, case in enumerate(spec.cases("cuda")):
            path = args.dir / kernel / "ncu" / f"ncu_{n}.csv"
            try:
                ks = parse_ncu_csv(path.read_text())
            except (OSError, ProfileParseError) as e:
                print(f"| {kernel} | {case.label} | no profile: {e} |" + " |" * 11)
                continue
            ms = sum(k.duration_ms for k in ks)
            nbytes, flops = spec.roofline(case)
            r = roofline(ms, "ncu", nbytes, flops, spec.hardware)
            main_k = max(ks, key=lambda k: k.duration_ms)  # the launch that takes the time
            stall = main_k.top_stalls[0] if main_k.top_stalls else None
            print(
                f"| {kernel} | {case.label.replace(' bfloat16', '')} | {ms:.4f} | {r.gbps or 0:.0f} | {r.tflops or 0:.1f} | "
                f"{100 * (r.fraction or 0):.0f}% | {r.bound} | {main_k.dram_throughput_pct:.0f} | "
                f"{main_k.sm_throughput_pct:.0f} | {main_k.achieved_occupancy_pct:.0f} | {main_k.registers_per_thread} | "
                f"{(main_k.shared_bytes_per_block or 0) / 1024:.0f} | {main_k.l2_hit_rate_pct:.0f} | "
                f"{stall.reason + f' {stall.cycles_per_issue:.1f}' if stall else '-'} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
