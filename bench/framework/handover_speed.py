"""How fast a candidate's outputs reach the judge (handover.py), by where the evaluation's scratch lives.

    python bench/framework/handover_speed.py --out DIR [--mb 256] [--device cuda]

For each candidate scratch root (TMPDIR and /dev/shm, where they exist): the device-to-host copy alone,
`write_outputs` (the candidate's side) and `read_outputs` (the judge's side, back onto the device), each
the median of five. Prints a table and writes DIR/handover_speed.json with the roots' file systems.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path


def _fs_type(path: str) -> str:
    best, kind = "", "?"
    with open("/proc/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) > 2 and path.startswith(parts[1]) and len(parts[1]) > len(best):
                best, kind = parts[1], parts[2]
    return kind


def main() -> int:
    import torch

    from kernelevolve.harness.runtime import handover

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    t = torch.randn(args.mb << 19, dtype=torch.bfloat16, device=args.device)  # 2 bytes an element

    def median_of(fn, n=5) -> float:
        times = []
        for _ in range(n):
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    rows = {"mb": args.mb, "device": args.device, "d2h_s": median_of(lambda: t.cpu()), "roots": {}}
    for root in {tempfile.gettempdir(), "/dev/shm"}:
        if not os.path.isdir(root) or not os.access(root, os.W_OK):
            continue
        folder = tempfile.mkdtemp(prefix="kernelevolve-handover-", dir=root)
        try:
            free = shutil.disk_usage(root).free
            write = median_of(lambda: handover.write_outputs(folder, "x", [t]))
            read = median_of(lambda: handover.read_outputs(folder, "x", args.device))
            back = handover.read_outputs(folder, "x", args.device)[0]
            rows["roots"][root] = {
                "fs": _fs_type(os.path.realpath(root)),
                "free_gib": round(free / 2**30, 1),
                "write_s": round(write, 4),
                "read_s": round(read, 4),
                "same": bool(torch.equal(back, t)),
            }
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"{args.mb} MB on {args.device}: device-to-host {rows['d2h_s']:.4f} s")
    for root, r in rows["roots"].items():
        print(
            f"  {root:20s} {r['fs']:10s} free {r['free_gib']:8.1f} GiB  write {r['write_s']:.4f} s  read {r['read_s']:.4f} s"
        )
    (args.out / "handover_speed.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
