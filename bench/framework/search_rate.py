"""Nodes a minute of `kernelevolve run` itself, with a user's default flags.

    python bench/framework/search_rate.py --out DIR [--specs softmax rmsnorm] [--budget 60]
        [--parts one,two,ray] [--gpus 0,1] [--agree 3] [--wall-clock S]

Each part is a real `kernelevolve run specs/SPEC.yaml --device cuda --budget N --json` with the offline
operator and no other flag (so --parallel, --profile auto and --profile-share are their defaults):
  one  on the first GPU of --gpus (CUDA_VISIBLE_DEVICES)
  two  on the first two GPUs, the local evaluator
  ray  on the first two GPUs, --executor ray (a Ray cluster started on this host for the run)
--wall-clock S adds `--wall-clock S` to every run (it stops starting nodes after S seconds of search
time; the rate is still nodes over search time), so a part fits a time limit. The JSON is rewritten
after every run. All runs share one database, and one untimed run of one node per spec fills its baseline cache first
(a search's first candidate does the same), so the parts measure a search with the baseline cached.
The rate is nodes over the run's search time (runs.elapsed_s, what the progress line shows), and
over the command's wall time (start-up, preflight and the end included). Then `--agree` correct nodes
of each `one` run are evaluated alone (`kernelevolve eval`, one at a time on the first GPU), to see
that a search's fitness is within 2% of a candidate's own.

Writes DIR/search_rate.json (commands, every run's summary figures, its time breakdown and profile
share, and the checks: at least 20 nodes a minute on one GPU, the profile share within its limit,
two GPUs at least 0.9x twice one, a search's fitness within 2% of a candidate's own) and prints one
line per run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "kernelevolve"]


def _run(args: list[str], gpus: str, db: str, timeout: float) -> tuple[dict, float, str]:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpus)
    env.pop("KERNELEVOLVE_DB", None)
    start = time.monotonic()
    proc = subprocess.run(
        [*CLI, *args, "--db", db, "--json"], capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT
    )
    wall = time.monotonic() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout), wall, proc.stderr


def _part(
    name: str, spec: str, budget: int, gpus: list[str], db: str, timeout: float, device: str, wall_clock=None
) -> dict:
    args = ["run", f"specs/{spec}.yaml", "--device", device, "--budget", str(budget)]
    if wall_clock:  # a rate needs no fixed node count: stop starting nodes after this much search time
        args += ["--wall-clock", str(wall_clock)]
    if name == "ray":
        args += ["--executor", "ray"]
    visible = ",".join(gpus[:1] if name == "one" else gpus[:2])
    summary, wall, stderr = _run(args, visible, db, timeout)
    nodes = len(summary["nodes"])
    spent = summary["settings"].get("time_spent") or {}
    out = {
        "part": name,
        "spec": spec,
        "command": f"CUDA_VISIBLE_DEVICES={visible} kernelevolve " + " ".join(args) + f" --db {db} --json",
        "run": summary["id"],
        "termination": summary["termination_reason"],
        "nodes": nodes,
        "correct": sum(1 for n in summary["nodes"] if n["failure"] is None),
        "elapsed_s": summary["elapsed_s"],
        "wall_s": wall,
        "nodes_per_min": nodes / summary["elapsed_s"] * 60 if summary["elapsed_s"] else None,
        "nodes_per_min_wall": nodes / wall * 60,
        "parallel": summary["settings"].get("parallel"),
        "time_spent": spent,
        "profile_gpu_share": spent.get("profile_gpu_share"),
        "printed": [ln for ln in stderr.splitlines() if ln.startswith("time over ")],
        "best": summary["best"],
    }
    print(
        f"{name:4s} {spec:8s} {nodes} nodes in {out['elapsed_s']:.0f} s search / {wall:.0f} s wall: "
        f"{out['nodes_per_min']:.1f} / {out['nodes_per_min_wall']:.1f} a minute; {' '.join(out['printed'])}",
        flush=True,
    )
    return out


def _agree(run: dict, db: str, gpu: str, count: int, timeout: float) -> list[dict]:
    """Correct nodes of a run evaluated alone: their search fitness against `kernelevolve eval`'s."""
    summary, _, _ = _run(["show", run["run"]], gpu, db, timeout)
    timed = [n for n in summary["nodes"] if n.get("fitness")][:count]
    out = []
    for node in timed:
        details, _, _ = _run(["show", run["run"], "--node", str(node["id"])], gpu, db, timeout)
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(details["source"])
        alone, _, _ = _run(["eval", f"specs/{run['spec']}.yaml", f.name, "--device", "cuda"], gpu, db, timeout)
        ratio = alone["fitness"] / node["fitness"] if alone.get("fitness") else None
        out.append({"node": node["id"], "search": node["fitness"], "alone": alone.get("fitness"), "ratio": ratio})
        print(f"     node {node['id']}: search {node['fitness']:.3f}, alone {alone.get('fitness')}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--specs", nargs="+", default=["softmax", "rmsnorm"])
    ap.add_argument("--budget", type=int, default=60)
    ap.add_argument("--parts", default="one,two,ray")
    ap.add_argument("--gpus", default="0,1")
    ap.add_argument("--agree", type=int, default=3, help="correct nodes of each one-GPU run evaluated alone")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--device", default="cuda", help="interpret: a CPU smoke test of this script (no rates)")
    ap.add_argument("--wall-clock", type=float, help="each run stops starting nodes after this much search time (s)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    gpus = a.gpus.split(",")
    db = f"sqlite:///{(a.out / 'search_rate.db').resolve()}"
    parts = a.parts.split(",")
    results: dict = {"commands": [], "runs": [], "agree": {}, "checks": {}}
    for spec in a.specs:  # the baseline cache, filled by one untimed node
        _run(["run", f"specs/{spec}.yaml", "--device", a.device, "--budget", "1"], gpus[0], db, a.timeout)
    for spec in a.specs:
        for part in parts:
            run = _part(part, spec, a.budget, gpus, db, a.timeout, a.device, a.wall_clock)
            results["runs"].append(run)
            results["commands"].append(run["command"])
            if part == "one" and a.agree:
                results["agree"][spec] = _agree(run, db, gpus[0], a.agree, a.timeout)
            (a.out / "search_rate.json").write_text(json.dumps(results, indent=2))  # kept if cut short
    by = {(r["part"], r["spec"]): r for r in results["runs"]}
    for spec in a.specs:
        one = by.get(("one", spec))
        checks = {}
        if one:
            checks["one_gpu_at_least_20_a_minute"] = one["nodes_per_min"] >= 20
            checks["profile_share_within_limit"] = (one["profile_gpu_share"] or 0) <= 0.1 + 1e-9
        for part in ("two", "ray"):
            if one and (part, spec) in by:
                scaling = by[(part, spec)]["nodes_per_min"] / (2 * one["nodes_per_min"])
                checks[f"{part}_scaling"] = round(scaling, 3)
                checks[f"{part}_at_least_0.9x_twice_one"] = scaling >= 0.9
        ratios = [x["ratio"] for x in results["agree"].get(spec, []) if x["ratio"]]
        if ratios:
            checks["fitness_within_2pct_of_alone"] = all(abs(r - 1) <= 0.02 for r in ratios)
        results["checks"][spec] = checks
    (a.out / "search_rate.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results["checks"], indent=2))


if __name__ == "__main__":
    main()
