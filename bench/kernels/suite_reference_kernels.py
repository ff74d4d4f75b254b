"""`kernelevolve suite --solutions` on the six bundled specs with their reference kernels.

Runs the campaign against torch.compile, then `kernelevolve score`, and writes under --out:
suite.db (the experiment database), suite_stdout.txt / suite_stderr.txt (the live progress),
score.json, score.txt and table.md (one row per problem: speedup, fast_1.0, shapes). Expected on
an H200: every kernel correct, fast_1.0 5/6 or 6/6; flash_attention is known slower than SDPA
(fitness 0.863 in bench/results/all_operators/h200/2026-11-21_eval_every_spec_recheck/), so it may miss fast_1.0.

    python bench/kernels/suite_reference_kernels.py --out "$OUT"                      # on a GPU
    python bench/kernels/suite_reference_kernels.py --out /tmp/x --device interpret --specs rmsnorm   # CPU dry run
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from kernelevolve.cli import main; main()"]
SIX = ["rmsnorm", "softmax", "cross_entropy", "ikbo_lce", "ikbo_target_attention", "flash_attention"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--device", default="cuda", choices=["cuda", "interpret"])
    ap.add_argument("--specs", nargs="*", default=SIX, help="spec names under specs/ (default: the six)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    db = f"sqlite:///{(args.out / 'suite.db').resolve()}"
    specs = [str(ROOT / "specs" / f"{name}.yaml") for name in args.specs]
    proc = subprocess.run(
        [
            *CLI,
            "suite",
            "--solutions",
            str(ROOT / "knowledge_base" / "kernels"),
            *specs,
            "--device",
            args.device,
            "--baseline",
            "torch.compile",
            "--parallel",
            "1",
            "--db",
            db,
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    (args.out / "suite_stdout.txt").write_text(proc.stdout)
    (args.out / "suite_stderr.txt").write_text(proc.stderr)
    campaign = next((line.split()[1] for line in proc.stderr.splitlines() if line.startswith("campaign c-")), None)
    if campaign is None:
        print(f"the suite did not start (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
        return 1
    # the score from the database, whether or not the suite process finished cleanly
    score = subprocess.run([*CLI, "score", campaign, "--db", db, "--json"], capture_output=True, text=True, cwd=ROOT)
    (args.out / "score.json").write_text(score.stdout)
    text = subprocess.run(
        [*CLI, "score", campaign, "--db", db],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**__import__("os").environ, "COLUMNS": "120"},
    )
    (args.out / "score.txt").write_text(text.stdout + text.stderr)
    data = json.loads(score.stdout)
    rows = [
        "| problem | result | speedup vs " + data["baseline"] + " | fast_1.0 | shapes |",
        "| --- | --- | --- | --- | --- |",
    ]
    for p in data["problems"]:
        speed = "-" if p["speedup"] is None else f"{p['speedup']:.3f}x"
        fast = "yes" if p["speedup"] is not None and p["speedup"] > 1.0 else "no"
        rows.append(
            f"| {p['name']} | {'correct' if p['correct'] else p['failure']} | {speed} | {fast} | "
            f"{p['shapes'] or p['shape_rule']} |"
        )
    summary = (
        f"campaign {campaign} on {data['device']}: correct {data['correct']}/{data['total']}, "
        f"fast_p {data['fast_p']}, geomean {data['geomean_speedup']}"
    )
    (args.out / "table.md").write_text(summary + "\n\n" + "\n".join(rows) + "\n")
    print(summary)
    print("\n".join(rows))
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
