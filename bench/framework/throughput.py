"""Evaluation throughput on GPUs: candidates judged per minute per GPU, baseline cached.

    python bench/framework/throughput.py --out DIR [--old OLD_TREE] [--candidates 24] [--specs softmax rmsnorm]
        [--gpus 0,1] [--executor local|ray] [--parts before,one,all,agree]

The candidates are what a search evaluates: the spec's reference kernel with its CONFIG moved one or
two knobs (distinct configurations, so each compiles as a search's would), the same list for every
part. Each part runs in a process of its own with one checkout's `kernelevolve` on its path:
  before  the evaluator of OLD_TREE (--old; one evaluation per GPU at a time), on GPU 0
  one     this checkout's evaluator on GPU 0 alone
  all     this checkout's evaluator on every GPU of --gpus (scaling: per-GPU rate against `one`)
  agree   one candidate timed on each GPU alone, three times: how far the GPUs' medians differ
Before timing, one evaluation fills the baseline cache (a search's first candidate does the same);
it is not counted. Writes DIR/throughput.json (everything) and DIR/throughput.md (the table).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

MEASURE = r"""
import json, statistics, sys, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
args = json.loads(sys.argv[1])
from kernelevolve.evaluation.evaluator import Evaluator
from kernelevolve.evaluation.baselines import MemoryBaselineStore
from kernelevolve.spec import load_spec

spec = load_spec(args["spec"])
sources = [Path(p).read_text() for p in args["candidates"]]
store = MemoryBaselineStore()
if args["executor"] == "ray":
    import tempfile
    from kernelevolve.runs.ray_executor import RayExecutor
    # Its workers keep baselines in the run's database, as in a search.
    db = "sqlite:///" + tempfile.mkdtemp() + "/throughput.db"
    from kernelevolve.memory.repository import Repository
    Repository(db)
    evaluator = RayExecutor("cuda", db_url=db, timeout_s=300, workers=len(args["gpus"]))
else:
    kw = {"per_gpu": args["per_gpu"]} if args.get("per_gpu") else {}
    evaluator = Evaluator(device="cuda", gpus=args["gpus"], baseline_store=store, **kw)
out = {"parallelism": evaluator.parallelism}
t = time.monotonic()
first = evaluator.evaluate(spec, sources[0])
out["first_s"] = time.monotonic() - t  # fills the baseline cache; not counted
if args["mode"] == "agree":
    per_gpu = {}
    for g in args["gpus"]:
        single = Evaluator(device="cuda", gpus=[g], baseline_store=store)
        runs = [single.evaluate(spec, sources[0]) for _ in range(3)]
        per_gpu[str(g)] = {
            s.label: statistics.median(r.shapes[i].latency_ms for r in runs) for i, s in enumerate(runs[0].shapes)
        } if all(r.timed for r in runs) else None
        getattr(single, "close", lambda: None)()
    out["latency_ms_by_gpu"] = per_gpu
else:
    t = time.monotonic()
    with ThreadPoolExecutor(max_workers=evaluator.parallelism) as pool:
        results = list(pool.map(lambda s: evaluator.evaluate(spec, s), sources[1:]))
    out["wall_s"] = time.monotonic() - t
    out["evaluated"] = len(results)
    out["correct"] = sum(r.correct for r in results)
    out["timed"] = sum(bool(r.timed) for r in results)
    out["failures"] = sorted({r.failure for r in results if r.failure})
    out["mean_duration_s"] = statistics.mean(r.duration_s for r in results)
    out["phases_s"] = {k: statistics.mean(r.phases_s.get(k, 0.0) for r in results) for k in ("correctness", "benchmark", "baseline")}
    out["fitness"] = [r.fitness for r in results]
    # Where each phase's time went, per harness stage (mean over the candidates that reached it).
    stages = {}
    for r in results:
        for phase, times in r.diagnostics.stages_s.items():
            for stage, s in times.items():
                stages.setdefault(phase, {}).setdefault(stage, []).append(s)
    out["stages_s"] = {p: {k: round(statistics.mean(v), 3) for k, v in t.items()} for p, t in stages.items()}
    out["judged_alone_after_oom"] = sum(r.scheduling.judged_alone_after is not None for r in results)
    out["memory_need_bytes"] = {str(k[0])[:12]: v for k, v in getattr(evaluator, "_memory_need", {}).items()}
    out["messages"] = [(r.failure, r.message[:400], r.log[-1500:]) for r in results if r.failure]
    gates = getattr(evaluator, "gates", {})
    out["timing_waited_s"] = {g: gate.waited_s for g, gate in gates.items()}
getattr(evaluator, "close", lambda: None)()
print("RESULT " + json.dumps(out), flush=True)
"""


def candidates(spec_name: str, count: int, folder: Path) -> list[str]:
    """`count` distinct CONFIGs of the spec's reference kernel, one or two knobs from its own."""
    sys.path.insert(0, str(ROOT))
    from kernelevolve.operators.config_search import neighbours
    from kernelevolve.operators.tunables import config_key, read_declared, rewrite_config

    source = (ROOT / "knowledge_base" / "kernels" / f"{spec_name}.py").read_text()
    declared = read_declared(source)
    rng = random.Random(0)
    near = neighbours(declared.config, declared.tunables, knobs=1, distance=1)
    far = neighbours(declared.config, declared.tunables, knobs=2, distance=1)
    rng.shuffle(near)
    rng.shuffle(far)
    seen, paths = {config_key(declared.config)}, []
    (folder / "c000.py").write_text(source)
    paths.append(str(folder / "c000.py"))
    for config in near + far:
        if len(paths) > count:
            break
        if config_key(config) in seen:
            continue
        seen.add(config_key(config))
        path = folder / f"c{len(paths):03d}.py"
        path.write_text(rewrite_config(source, config))
        paths.append(str(path))
    return paths


def measure(code_root: Path, args: dict, log) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code_root), os.environ.get("PYTHONPATH", "")])}
    env.pop("TRITON_INTERPRET", None)
    t = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, json.dumps(args)], env=env, capture_output=True, text=True, cwd=code_root
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if not lines:
        log(f"  failed ({proc.returncode}): {proc.stderr.strip().splitlines()[-3:]}")
        return {"error": proc.stderr[-3000:], "returncode": proc.returncode}
    out = json.loads(lines[-1][len("RESULT ") :])
    out["process_s"] = time.monotonic() - t
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--old", type=Path, help="an older checkout (its kernelevolve/ at the top) for the 'before' part")
    ap.add_argument("--candidates", type=int, default=24, help="counted candidates per GPU (default 24)")
    ap.add_argument("--specs", nargs="+", default=["softmax", "rmsnorm"])
    ap.add_argument("--gpus", default=None, help="comma-separated GPU indices (default: every visible GPU)")
    ap.add_argument("--executor", choices=["local", "ray"], default="local")
    ap.add_argument("--per-gpu", type=int, default=None, help="evaluations at once per GPU (default: the evaluator's)")
    ap.add_argument("--parts", default="before,one,all,agree")
    a = ap.parse_args()
    if a.gpus is None:
        import torch

        gpus = list(range(torch.cuda.device_count()))
    else:
        gpus = [int(g) for g in a.gpus.split(",")]
    parts = a.parts.split(",")
    a.out.mkdir(parents=True, exist_ok=True)
    report: dict = {"gpus": gpus, "executor": a.executor, "candidates_per_gpu": a.candidates, "specs": {}}
    path = a.out / "throughput.json"

    def log(text):
        print(text, flush=True)

    for spec_name in a.specs:
        folder = Path(tempfile.mkdtemp(prefix=f"throughput-{spec_name}-"))
        pool = candidates(spec_name, a.candidates * len(gpus), folder)
        spec = str(ROOT / "specs" / f"{spec_name}.yaml")
        old_spec = str((a.old or ROOT) / "specs" / f"{spec_name}.yaml")  # the spec format that checkout reads
        entry = report["specs"].setdefault(spec_name, {"candidates": len(pool) - 1})
        runs = {
            "before": (a.old, [gpus[0]], pool[: a.candidates + 1], "local"),
            "one": (ROOT, [gpus[0]], pool[: a.candidates + 1], a.executor),
            "all": (ROOT, gpus, pool, a.executor),
            "agree": (ROOT, gpus, pool[:1], "local"),
        }
        for part in parts:
            code_root, on, sources, executor = runs[part]
            if code_root is None or (part == "all" and len(gpus) < 2):
                continue
            log(f"{spec_name} {part}: {len(sources) - 1} candidates on GPU(s) {on} ({executor})")
            args = {"spec": old_spec if part == "before" else spec, "candidates": sources, "gpus": on}
            args.update(executor=executor, per_gpu=a.per_gpu)
            args["mode"] = "agree" if part == "agree" else "throughput"
            if part == "before":
                args["per_gpu"] = None  # the old evaluator has no such setting
            got = measure(code_root, args, log)
            if "wall_s" in got:
                got["per_minute_per_gpu"] = got["evaluated"] / (got["wall_s"] / 60) / len(on)
                log(
                    f"  {got['per_minute_per_gpu']:.1f} candidates/min/GPU ({got['evaluated']} in {got['wall_s']:.0f} s, "
                    f"{got['correct']} correct, {got['timed']} timed)"
                )
            if got.get("latency_ms_by_gpu"):
                medians = [m for m in got["latency_ms_by_gpu"].values() if m]
                if len(medians) > 1:
                    spread = max((max(m[k] for m in medians) / min(m[k] for m in medians) - 1) for k in medians[0])
                    got["max_spread"] = spread
                    log(f"  the GPUs' medians differ by at most {100 * spread:.1f}%")
            entry[part] = got
            path.write_text(json.dumps(report, indent=1))
    lines = [
        "| spec | part | GPUs | candidates/min/GPU | evaluated | correct | mean s per evaluation |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for spec_name, entry in report["specs"].items():
        for part in ("before", "one", "all"):
            got = entry.get(part)
            if got and "wall_s" in got:
                n = 1 if part != "all" else len(gpus)
                lines.append(
                    f"| {spec_name} | {part} | {n} | {got['per_minute_per_gpu']:.1f} | {got['evaluated']} | "
                    f"{got['correct']} | {got['mean_duration_s']:.1f} |"
                )
        if entry.get("one", {}).get("per_minute_per_gpu") and entry.get("all", {}).get("per_minute_per_gpu"):
            scale = entry["all"]["per_minute_per_gpu"] / entry["one"]["per_minute_per_gpu"]
            entry["scaling"] = scale
            lines.append(f"| {spec_name} | scaling | {len(gpus)} | {scale:.2f} x per-GPU rate of one GPU | | | |")
        if entry.get("agree", {}).get("max_spread") is not None:
            lines.append(
                f"| {spec_name} | agree | {len(gpus)} | medians within {100 * entry['agree']['max_spread']:.1f}% | | | |"
            )
    path.write_text(json.dumps(report, indent=1))
    (a.out / "throughput.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
