"""Where a candidate process's first handover of outputs goes, piece by piece, in fresh processes.

    python bench/framework/first_handover.py --out DIR [--repeat 3]

Each configuration (an output's shape and dtype; with or without `handover.warm_up` before the output
exists) runs in a new Python process, as a candidate's correctness process would: CUDA context, then
the output, then `write_outputs` twice (the first pays one-time set-up, the second is what every later
shape pays). Per piece (sampling plan, gather, device-to-host, files, digests) the seconds, synchronised.
Writes DIR/first_handover.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIGS = [
    ("fp32 4096x8192 (honest control)", [4096, 8192], "float32"),
    ("bf16 2048x65536 (softmax)", [2048, 65536], "bfloat16"),
    ("bf16 4x32x4096x128 (flash attention)", [4, 32, 4096, 128], "bfloat16"),
    ("bf16 1024x4096 (under FULL_BYTES)", [1024, 4096], "bfloat16"),
]


def child(shape: list, dtype: str, warm: bool) -> dict:
    import torch

    from kernelevolve.harness.runtime import handover, outside

    times = {}

    def timed(name, fn):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        value = fn()
        torch.cuda.synchronize()
        times[name] = round(times.get(name, 0.0) + time.perf_counter() - t0, 4)
        return value

    timed("context", lambda: torch.empty(1, device="cuda"))
    if warm:
        timed("warm_up", lambda: handover.warm_up("cuda", [getattr(torch, dtype)]))
    out = timed("output", lambda: torch.randn(shape, device="cuda").to(getattr(torch, dtype)))
    folder = tempfile.mkdtemp(prefix="kernelevolve-first-handover-")
    for k in range(2):
        flat = out.reshape(-1)
        blocks = timed(f"{k}.plan", lambda: handover.sample_blocks(flat.numel(), flat.element_size(), 7))
        part = timed(f"{k}.gather", lambda: flat if blocks is None else handover.gather_blocks(flat, blocks))
        raw = timed(f"{k}.to_host", lambda: handover._to_host(part))
        timed(f"{k}.files", lambda: raw.numpy().tofile(f"{folder}/x{k}.bin"))
        if blocks is not None:
            timed(f"{k}.digests", lambda: outside.digests([out], 7))
        timed(f"{k}.write_outputs", lambda: handover.write_outputs(folder, f"o{k}", [out], 11 + k))
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        shape, dtype, warm = json.loads(args.child)
        print(json.dumps(child(shape, dtype, warm)))
        return 0
    rows = []
    for name, shape, dtype in CONFIGS:
        for warm in (False, True):
            for r in range(args.repeat):
                proc = subprocess.run(
                    [sys.executable, __file__, "--child", json.dumps([shape, dtype, warm])],
                    capture_output=True,
                    text=True,
                )
                if proc.returncode:
                    print(name, warm, "failed:", proc.stderr.strip().splitlines()[-1:], file=sys.stderr)
                    continue
                times = json.loads(proc.stdout.strip().splitlines()[-1])
                rows.append({"config": name, "warm_up": warm, "repeat": r, "s": times})
                print(f"{name:40s} warm={warm!s:5s} " + " ".join(f"{k}={v}" for k, v in times.items()), flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "first_handover.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
