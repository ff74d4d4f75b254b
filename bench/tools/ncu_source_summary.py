"""Summarise Nsight Compute's per-instruction (SASS) page: where each kernel's warps spent their sampled
cycles, by stall reason, by opcode and (optionally) by ranges of instructions.

    ncu --section SourceCounters --section WarpStateStats -o REPORT python ...
    ncu --import REPORT.ncu-rep --page source --csv --print-source sass > SOURCE.csv
    python bench/tools/ncu_source_summary.py SOURCE.csv [--sections 'softmax:438-809,...'] [--out SUMMARY.json]

Section ranges index the instructions of the first kernel in the file, in the order ncu lists them.
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import re
import sys
from pathlib import Path

SAMPLES = "Warp Stall Sampling (All Samples)"


def load(path: Path) -> list[dict]:
    """The kernels of one `--page source --csv` export: [{"name", "rows": [{column: value}]}]."""
    kernels: list[dict] = []
    header = None
    for row in csv.reader(path.open()):
        if not row:
            continue
        if row[0] == "Kernel Name":
            kernels.append({"name": row[1], "rows": []})
            header = None
        elif header is None:
            header = row
        elif kernels:
            kernels[-1]["rows"].append(dict(zip(header, row)))
    return kernels


def number(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def opcode(source: str) -> str:
    match = re.match(r"(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", source.strip())
    return match.group(1) if match else "?"


def share(counter: collections.Counter, total: float, top: int) -> dict:
    return {key: round(value / total * 100, 2) for key, value in counter.most_common(top) if value}


def summarise(kernel: dict, sections: list[tuple[str, int, int]]) -> dict:
    rows = kernel["rows"]
    reasons = [h for h in rows[0] if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(number(r[SAMPLES]) for r in rows) or 1.0

    def block(part: list[dict]) -> dict:
        why = collections.Counter()
        for r in part:
            for h in reasons:
                why[h[len("stall_") :]] += number(r[h])
        return {
            "samples_pct": round(sum(number(r[SAMPLES]) for r in part) / total * 100, 2),
            "warp_instructions": int(sum(number(r["Instructions Executed"]) for r in part)),
            "stall_pct": share(why, total, 5),
        }

    by_op: dict[str, list[dict]] = collections.defaultdict(list)
    for r in rows:
        by_op[opcode(r["Source"])].append(r)
    ops = sorted(by_op.items(), key=lambda kv: -sum(number(r["Instructions Executed"]) for r in kv[1]))
    return {
        "kernel": kernel["name"],
        "sass_instructions": len(rows),
        "samples": int(total),
        "warp_instructions": int(sum(number(r["Instructions Executed"]) for r in rows)),
        "overall": block(rows),
        "by_opcode": {op: block(part) for op, part in ops[:20]},
        "sections": {name: dict(block(rows[a:b]), range=[a, b]) for name, a, b in sections},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source_csv", type=Path)
    parser.add_argument("--sections", default="", help="NAME:FIRST-END,... (instruction indices, end excluded)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not args.source_csv.is_file():
        sys.exit(f"ncu_source_summary: no file {args.source_csv}")
    kernels = load(args.source_csv)
    if not kernels or not kernels[0]["rows"] or SAMPLES not in kernels[0]["rows"][0]:
        sys.exit(
            f"ncu_source_summary: {args.source_csv} is not an `ncu --page source --csv` export with SourceCounters"
        )
    sections = []
    for item in filter(None, args.sections.split(",")):
        name, _, span = item.rpartition(":")
        first, _, end = span.partition("-")
        sections.append((name, int(first), int(end)))
    result = [summarise(k, sections if i == 0 else []) for i, k in enumerate(kernels)]
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text)
    for k in result:
        print(f"{k['kernel'][:60]}: {k['samples']} samples, {k['warp_instructions']} warp instructions")
        print("  stalls:", k["overall"]["stall_pct"])
        for name, s in k["sections"].items():
            print(
                f"  {name:32} {s['samples_pct']:5.1f}% of samples  {s['warp_instructions']:>10} warp instr  {s['stall_pct']}"
            )


if __name__ == "__main__":
    main()
