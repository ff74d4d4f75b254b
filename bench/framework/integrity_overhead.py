"""What the integrity checks cost, and that honest kernels keep their fitness: today's evaluator
(an older checkout, given with --old) against this one, alternating, on honest kernels.

    python bench/framework/integrity_overhead.py --old DIR --out DIR [--repeat 3]

--part compare: for each (spec, kernel), old and new evaluations alternate, each in a fresh process
(the first with an empty baseline cache: the uncached latency, the rest cached). Writes
DIR/integrity_overhead.json and prints fitness and evaluation latency side by side.
--part search: as a search evaluates: one warm evaluator per side (its next candidate's processes
start while one is judged), the same candidate evaluated 1 + --repeat times in a row with --pause
seconds between (a model's thinking time), baselines cached after the first; old and new sides
alternate per spec. Each evaluation gets a distinct candidate, as in a search: the kernel file with a
comment line `# candidate i` inside each jitted function's body. Triton's compile cache does not tell
such candidates apart (on the H200, Triton 3.6: a comment inside the kernel or lines in front of the file
still hit it, bench/framework/triton_cache_probe.py): the old evaluator, which kept one Triton cache for
all evaluations, loads their kernels from it, while the new one gives each evaluation its own cache and
compiles them. A search's candidates, whose kernels differ in code, compile on both sides; this script
does not measure that case. --same-source evaluates the very same file every time. Writes DIR/integrity_overhead_search.json.
--part kernels: every reference kernel's spec through the new evaluator (DIR/reference_kernels_eval.json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HONEST = "hostile-corpus:honest"  # the corpus's honest control, written to a file when needed
PAIRS = [
    ("tests/evaluation/hostile/softmax.yaml", HONEST),
    ("specs/softmax.yaml", "knowledge_base/kernels/softmax.py"),
    ("specs/rmsnorm.yaml", "knowledge_base/kernels/rmsnorm.py"),
]
KERNELS = ["rmsnorm", "softmax", "cross_entropy", "flash_attention", "ikbo_lce", "ikbo_target_attention"]

# One warm evaluator evaluating the same candidate again and again, as a search's evaluator does.
WARM_SEARCH = """
import ast, json, sys, time
from kernelevolve.evaluation.evaluator import Evaluator
from kernelevolve.memory.repository import BaselineTable, Repository
from kernelevolve.spec import load_spec
spec, source = load_spec(sys.argv[1]), open(sys.argv[2]).read()
store = BaselineTable(Repository(sys.argv[3]))
times, pause, device, distinct = int(sys.argv[4]), float(sys.argv[5]), sys.argv[6], sys.argv[7] == "distinct"


def candidate(i):
    # Candidate i: a comment line inside each jitted function's body (Triton's cache still hits it).
    if not i:
        return source
    lines, at = source.splitlines(keepends=True), []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            at.append((node.body[0].lineno - 1, " " * node.body[0].col_offset))
    for line, indent in sorted(at, reverse=True):
        lines.insert(line, indent + "# candidate " + str(i) + "\\n")
    return "".join(lines)


with Evaluator(device=device, baseline_store=store, warm=True) as ev:
    for i in range(times):
        t0 = time.monotonic()
        r = ev.evaluate(spec, candidate(i * distinct), deep=False)
        d = r.to_dict()
        d["wall_s"] = time.monotonic() - t0
        print("RESULT " + json.dumps(d), flush=True)
        time.sleep(pause)
"""


# What a search does per candidate (no profiler: that is for a would-be best and for `kernelevolve eval`).
# Baselines cached in an experiment database, as a search keeps them.
SEARCH_PATH = """
import json, sys
from kernelevolve.evaluation.evaluator import Evaluator
from kernelevolve.memory.repository import BaselineTable, Repository
from kernelevolve.spec import load_spec
store = BaselineTable(Repository(sys.argv[3]))
r = Evaluator(device="cuda", baseline_store=store).evaluate(load_spec(sys.argv[1]), open(sys.argv[2]).read(), deep=False)
print(json.dumps(r.to_dict()))
"""


def _kernel_file(kernel: str) -> Path:
    if kernel != HONEST:
        return ROOT / kernel
    sys.path.insert(0, str(ROOT))
    from tests.evaluation.hostile.corpus import CORPUS

    path = Path(tempfile.gettempdir()) / "kernelevolve-honest-control.py"
    path.write_text(CORPUS["honest"].source)
    return path


def evaluate(code_root: Path, spec: str, kernel: str, cache: Path, search_path: bool = False) -> dict:
    env = {
        **os.environ,
        "KERNELEVOLVE_CACHE_DIR": str(cache),
        "PYTHONPATH": os.pathsep.join(
            [str(code_root)]
            + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != ROOT]
        ),
    }
    db = f"sqlite:///{cache / 'baselines.db'}"  # the new evaluator's baseline store (the old one used the cache dir)
    new = Path(code_root).resolve() == ROOT
    t0 = time.monotonic()
    command = (
        [sys.executable, "-c", SEARCH_PATH, str(ROOT / spec), str(_kernel_file(kernel)), db]
        if search_path
        else [
            sys.executable,
            "-c",
            "from kernelevolve.cli import main; main()",
            "eval",
            str(ROOT / spec),
            str(_kernel_file(kernel)),
            "--device",
            "cuda",
            "--json",
        ]
        + (["--db", db] if new else [])
    )
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tempfile.gettempdir(), timeout=900)
    wall = time.monotonic() - t0
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        return {"error": (proc.stderr or proc.stdout)[-500:], "wall_s": wall}
    return {
        "correct": out["correct"],
        "failure": out["failure"],
        "message": out["message"],
        "fitness": out["fitness"],
        "wall_s": round(wall, 2),
        "duration_s": out["duration_s"],
        "phases_s": out["phases_s"],
        "latency_ms": [s["latency_ms"] for s in out["shapes"]],
        "baseline_ms": [s["baseline_ms"] for s in out["shapes"]],
        "marks": out.get("marks", {}),
        "sandbox": (out.get("diagnostics") or out.get("environment") or {}).get("sandbox", {}),
        "stages_s": (out.get("diagnostics") or out.get("environment") or {}).get("stages_s", {}),
    }


def warm_search(
    code_root: Path,
    spec: str,
    kernel: str,
    cache: Path,
    times: int,
    pause: float,
    device: str = "cuda",
    distinct: bool = True,
) -> list[dict]:
    """`times` evaluations of one kernel by one warm evaluator of the tree at `code_root` (`distinct`: as
    distinct candidates, whose Triton kernels compile anew)."""
    env = {
        **os.environ,
        "KERNELEVOLVE_CACHE_DIR": str(cache),
        "PYTHONPATH": os.pathsep.join(
            [str(code_root)]
            + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != ROOT]
        ),
    }
    db = f"sqlite:///{cache / 'baselines.db'}"
    args = [str(ROOT / spec), str(_kernel_file(kernel)), db, str(times), str(pause), device]
    args.append("distinct" if distinct else "same")
    proc = subprocess.run(
        [sys.executable, "-c", WARM_SEARCH, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
        timeout=1200,
    )
    out = []
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            d = json.loads(line[7:])
            out.append(
                {
                    "correct": d["correct"],
                    "failure": d["failure"],
                    "message": (d.get("message") or "")[:300],
                    "fitness": d["fitness"],
                    "wall_s": round(d["wall_s"], 3),
                    "phases_s": d.get("phases_s"),
                    "latency_ms": [s["latency_ms"] for s in d["shapes"]],
                    "baseline_ms": [s["baseline_ms"] for s in d["shapes"]],
                    "marks": d.get("marks", {}),
                    "stages_s": (d.get("diagnostics") or d.get("environment") or {}).get("stages_s", {}),
                }
            )
    if not out:
        out.append({"error": (proc.stderr or proc.stdout)[-800:]})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", type=Path, required=True, help="a checkout of the evaluator to compare with")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--part", choices=["compare", "search", "kernels", "all"], default="all")
    ap.add_argument("--device", default="cuda", help="--part search: interpret is a CPU smoke test of this script")
    ap.add_argument("--pause", type=float, default=5.0, help="--part search: seconds between evaluations")
    ap.add_argument(
        "--search-path",
        action="store_true",
        help="evaluate the new side as a search does (no profiled call), not through `kernelevolve eval`",
    )
    ap.add_argument("--kernels", nargs="*", default=[], help="--part search: these reference kernels instead")
    ap.add_argument("--new-only", action="store_true", help="--part search: this evaluator alone")
    ap.add_argument(
        "--same-source", action="store_true", help="--part search: the very same file each time (cache hits on old)"
    )
    ap.add_argument("--pairs", type=int, default=len(PAIRS), help="compare only the first N (spec, kernel) pairs")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.part in ("compare", "all"):
        rows = []
        for spec, kernel in PAIRS[: args.pairs]:
            with tempfile.TemporaryDirectory() as c_old, tempfile.TemporaryDirectory() as c_new:
                runs = {"old": [], "new": []}
                for i in range(args.repeat):
                    for which, root, cache in (("old", args.old.resolve(), c_old), ("new", ROOT, c_new)):
                        r = evaluate(root, spec, kernel, Path(cache), args.search_path and which == "new")
                        runs[which].append(r)
                        print(
                            f"{spec:40s} {which} #{i}: fitness {r.get('fitness')} in {r.get('duration_s')} s "
                            f"{r.get('error', '')[:200]}",
                            flush=True,
                        )
            fit = {w: [r.get("fitness") for r in rs] for w, rs in runs.items()}
            dur = {w: [r.get("duration_s") for r in rs] for w, rs in runs.items()}
            summary = {
                "spec": spec,
                "kernel": kernel,
                "runs": runs,
                "fitness_median": {
                    w: statistics.median([f for f in v if f]) if any(v) else None for w, v in fit.items()
                },
                "uncached_s": {w: v[0] for w, v in dur.items()},
                "cached_s_median": {
                    w: statistics.median([d for d in v[1:] if d]) if len(v) > 1 else None for w, v in dur.items()
                },
            }
            rows.append(summary)
            print(json.dumps({k: v for k, v in summary.items() if k != "runs"}), flush=True)
        (args.out / "integrity_overhead.json").write_text(json.dumps(rows, indent=1))
    if args.part in ("search", "all"):
        rows = []
        pairs = [(f"specs/{k}.yaml", f"knowledge_base/kernels/{k}.py") for k in args.kernels] or PAIRS[: args.pairs]
        for spec, kernel in pairs:
            runs = {}
            sides = (("new", ROOT),) if args.new_only else (("old", args.old.resolve()), ("new", ROOT))
            for which, root in sides:
                with tempfile.TemporaryDirectory() as cache:
                    runs[which] = warm_search(
                        root, spec, kernel, Path(cache), 1 + args.repeat, args.pause, args.device, not args.same_source
                    )
                for i, r in enumerate(runs[which]):
                    print(f"{spec:40s} {which} #{i}: fitness {r.get('fitness')} in {r.get('wall_s')} s", flush=True)
            summary = {"spec": spec, "kernel": kernel, "pause_s": args.pause, "runs": runs}
            summary["candidates"] = "same file" if args.same_source else "distinct"
            for which, rs in runs.items():
                cached = [r["wall_s"] for r in rs[1:] if "wall_s" in r]
                summary[f"{which}_cached_s_median"] = statistics.median(cached) if cached else None
                fits = [r.get("fitness") for r in rs if r.get("fitness")]
                summary[f"{which}_fitness_median"] = statistics.median(fits) if fits else None
            o, n = summary.get("old_cached_s_median"), summary["new_cached_s_median"]
            summary["cost"] = round(n / o - 1, 4) if o and n else None
            rows.append(summary)
            print(json.dumps({k: v for k, v in summary.items() if k != "runs"}), flush=True)
            (args.out / "integrity_overhead_search.json").write_text(json.dumps(rows, indent=1))  # kept if cut short
    if args.part in ("kernels", "all"):
        results = {}
        with tempfile.TemporaryDirectory() as cache:
            for name in KERNELS:
                results[name] = evaluate(ROOT, f"specs/{name}.yaml", f"knowledge_base/kernels/{name}.py", Path(cache))
                r = results[name]
                print(
                    f"{name:24s} correct {r.get('correct')} fitness {r.get('fitness')} {r.get('failure') or ''} "
                    f"{r.get('message', '')[:150]} {r.get('error', '')[:300]}",
                    flush=True,
                )
        (args.out / "reference_kernels_eval.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
