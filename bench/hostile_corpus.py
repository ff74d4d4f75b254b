"""The hostile corpus on a GPU: every entry (tests/evaluation/hostile/: the older corpus.py and the
documented cheats of documented.py, CPU and GPU mechanisms alike) through `kernelevolve eval --device
cuda --json`, each judged against what a correct evaluator answers; then a `kernelevolve run` whose
scripted model (a local OpenAI-compatible server) proposes cheats.

    python bench/hostile_corpus.py --list                       # the entries and their expected answers
    python bench/hostile_corpus.py --out DIR [--part eval|run|all] [--where gpu|cpu|all] [--only NAME ...]

Writes DIR/hostile_eval.json (per entry: expected, got, whether it meets the expectation and why not,
fitness, marks, message, timings, the post-condition checks) and DIR/hostile_run.json; prints one line
an entry. Exits 1 if any entry's outcome is not what a correct evaluator answers (a cheat ending correct
with a fitness above the honest control's, as the run's best, or in the wrong class).
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.evaluation.hostile.corpus import CORPUS  # noqa: E402
from tests.evaluation.hostile.documented import (  # noqa: E402
    CHEATS,
    FIGURES_NOT_BELIEVED,
    NOTHING_PERSISTS,
    SPECS,
    meets,
)

DEVICE = "cuda"  # --device interpret: a dry run of the script on a CPU
CLI = [sys.executable, "-c", "from kernelevolve.cli import main; main()"]
MARKERS = "kernelevolve-hostile-*"
# The cheats a scripted model proposes in the search (those that could score if unchecked).
SEARCH_ORDER = [
    "cache_by_pointer",
    "late_garbage",
    "side_stream",
    "torch_only",
    "writes_into_input",
    "returns_view_of_input",
    "patched_timer",
    "slows_the_baseline",
    "kill_parent",
    "fork_bomb",
    "honest",
    "lower_precision",
    "torch_compute_plus_token_kernel",
    "forges_handed_over_digests",
    "timer_statistics_alias",
    "detects_the_monitor",
    "cache_keyed_on_sampled_values",
]


def entries() -> dict[str, dict]:
    """name -> {source, spec, expected (on a GPU), where, check, origin}; the honest control first."""
    out = {}
    for name, h in CORPUS.items():
        expected = h.gpu if h.gpu != "same" else h.screened
        out[name] = {"code": h.source, "spec": SPECS["strict"], "expected": expected, "where": "cpu", "check": ""}
        out[name]["origin"] = "corpus.py"
    for name, c in CHEATS.items():
        out[name] = {"code": c.code, "spec": SPECS[c.spec], "expected": c.on_gpu, "where": c.where, "check": c.check}
        out[name]["origin"] = "documented.py"
    return out


def source_of(name: str) -> str:
    return entries()[name]["code"]


def markers() -> list[str]:
    """Files the corpus's candidates leave as markers, wherever a later evaluation could find them."""
    places = [Path("/dev/shm"), Path(tempfile.gettempdir()), Path.home() / ".triton", Path.home() / ".cache"]
    found = []
    for place in places:
        if place.is_dir():
            found += [str(p) for p in place.glob(MARKERS)]
            found += [str(p) for p in place.glob(f"kernelevolve-*/**/{MARKERS}")]
            if place.name in (".triton", ".cache"):
                found += [str(p) for p in place.glob(f"**/{MARKERS}")]
    return sorted(set(found))


def evaluate_all(work: Path, names: list[str], save_to: Path) -> list[dict]:
    table = entries()
    rows = []
    honest_fitness = None
    for name in ["honest"] + [n for n in names if n != "honest"]:
        e = table[name]
        path = work / f"{name}.py"
        path.write_text(e["code"])
        before = set(markers())
        t0 = time.monotonic()
        try:
            proc = subprocess.run(
                [*CLI, "eval", str(e["spec"]), str(path), "--device", DEVICE, "--json"],
                capture_output=True,
                text=True,
                timeout=1800,
                env={**os.environ, "ANTHROPIC_API_KEY": "sk-bench-secret"},
            )
            stdout, stderr, code = proc.stdout, proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as exc:
            stdout, stderr, code = "", f"timed out after {exc.timeout}s", None
        wall = time.monotonic() - t0
        try:
            out = json.loads(stdout)
        except ValueError:
            out = {"correct": None, "failure": "no JSON", "message": (stderr or stdout)[-300:]}
        correct = bool(out.get("correct"))
        got = "correct" if correct else out.get("failure")
        if name == "honest":
            honest_fitness = out.get("fitness")
        problem = meets(
            e["expected"], correct, out.get("failure"), out.get("fitness"), out.get("marks"), honest_fitness
        )
        if out.get("failure") == "no JSON":
            problem = f"kernelevolve eval gave no JSON (exit {code}): {out['message']}"
        elif "\n" in (out.get("message") or ""):
            problem = (problem + "; " if problem else "") + "the message is not one line"
        left = sorted(set(markers()) - before)
        if e["check"] == NOTHING_PERSISTS and left:
            problem = (problem + "; " if problem else "") + f"files outlive the verdict: {left[:3]}"
        scheduling, diagnostics = out.get("scheduling") or {}, out.get("diagnostics") or {}
        figures = (scheduling.get("gpu_prepared_bytes"), scheduling.get("gpu_peak_bytes"))
        if e["check"] == FIGURES_NOT_BELIEVED and 2**50 in figures:
            problem = (problem + "; " if problem else "") + "the evaluator took the candidate's memory figures"
        rows.append(
            {
                "name": name,
                "origin": e["origin"],
                "where": e["where"],
                "expected": e["expected"],
                "got": got,
                "meets": problem is None,
                "problem": problem,
                "fitness": out.get("fitness"),
                "honest_fitness": honest_fitness,
                "message": out.get("message", ""),
                "marks": out.get("marks", {}),
                "exit": code,
                "wall_s": round(wall, 2),
                "phases_s": out.get("phases_s", {}),
                "sandbox": diagnostics.get("sandbox", {}),
                "outside_timing": diagnostics.get("outside_timing") or None,
                "speedups": [s.get("speedup") for s in out.get("shapes", [])],
                "markers_left": left,
            }
        )
        print(
            f"{name:40s} expected {e['expected']:14s} got {str(got):14s} fitness {out.get('fitness')} "
            f"{'ok' if problem is None else 'PROBLEM: ' + problem} ({wall:.1f}s) {out.get('message', '')[:100]}",
            flush=True,
        )
        save_to.write_text(json.dumps(rows, indent=1))  # as it goes: a cut-off run keeps what it measured
    return rows


def search(work: Path) -> dict:
    from tests.llm.fake_llm_server import FakeLLMServer

    replies = [f"Trying {name}.\n\n```python\n{source_of(name)}```\n" for name in SEARCH_ORDER]
    served = []

    def responder(api, prompt, body):
        if "Write ONE short insight" in prompt:  # the insight writer's question, not a kernel request
            return 200, "No insight from a scripted model.", {}
        i = len(served)
        served.append(SEARCH_ORDER[i % len(SEARCH_ORDER)])
        return 200, replies[i % len(replies)], {}

    db = f"sqlite:///{work / 'hostile.db'}"
    with FakeLLMServer(responder) as server:
        env = {
            **os.environ,
            "OPENAI_BASE_URL": server.url + "/v1",
            "OPENAI_API_KEY": "sk-scripted",
            "KERNELEVOLVE_REPLY_CACHE": "0",
            "KERNELEVOLVE_LLM_INSIGHTS": "0",
        }
        t0 = time.monotonic()
        proc = subprocess.run(
            [
                *CLI,
                "run",
                str(SPECS["strict"]),
                "--model",
                "openai:scripted",
                "--device",
                DEVICE,
                "--budget",
                str(len(SEARCH_ORDER)),
                "--drafts",
                str(len(SEARCH_ORDER)),
                "--db",
                db,
            ],
            capture_output=True,
            text=True,
            timeout=3600,
            env=env,
        )
        wall = time.monotonic() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"kernelevolve run failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    runs = json.loads(subprocess.run([*CLI, "runs", "--db", db, "--json"], capture_output=True, text=True).stdout)
    run_id = runs[0]["id"] if isinstance(runs, list) else runs["runs"][0]["id"]
    shown = json.loads(
        subprocess.run([*CLI, "show", run_id, "--db", db, "--json"], capture_output=True, text=True).stdout
    )
    nodes = []
    for n in shown["nodes"]:
        n = json.loads(
            subprocess.run(
                [*CLI, "show", run_id, "--db", db, "--node", str(n["id"]), "--json"], capture_output=True, text=True
            ).stdout
        )
        name = next(
            (k for k in SEARCH_ORDER if n.get("source") and source_of(k).strip() == (n["source"] or "").strip()),
            None,
        )
        nodes.append(
            {
                "id": n["id"],
                "cheat": name,
                "correct": n["correct"],
                "failure": n["failure"],
                "fitness": n["fitness"],
                "marks": n.get("marks"),
                "message": n["message"][:200],
            }
        )
    return {
        "exit": proc.returncode,
        "wall_s": round(wall, 1),
        "best": shown["best"],
        "nodes": nodes,
        "served": served,
        "stdout_tail": proc.stdout[-3000:],
        "stderr_tail": proc.stderr[-2000:],
    }


def list_entries(where: str) -> None:
    for name, e in entries().items():
        if where in ("all", e["where"]):
            check = f"  [{e['check']}]" if e["check"] else ""
            print(f"{name:40s} {e['where']:4s} {e['origin']:14s} expected on a GPU: {e['expected']}{check}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="list the entries and their expected answers, run nothing")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--part", choices=["eval", "run", "all"], default="all")
    ap.add_argument("--device", default="cuda")
    ap.add_argument(
        "--where",
        choices=["gpu", "cpu", "all"],
        default="all",
        help="entries whose mechanism needs a GPU, those the CPU tests also run, or all (default)",
    )
    ap.add_argument(
        "--only",
        nargs="+",
        choices=sorted(entries()),
        metavar="NAME",
        help="evaluate only these entries (default: all of --where)",
    )
    args = ap.parse_args()
    if args.list:
        list_entries(args.where)
        return 0
    if args.out is None:
        ap.error("--out DIR is needed unless --list")
    global DEVICE
    DEVICE = args.device
    args.out.mkdir(parents=True, exist_ok=True)
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.part in ("eval", "all"):
            names = args.only or [n for n, e in entries().items() if args.where in ("all", e["where"])]
            rows = evaluate_all(work, names, args.out / "hostile_eval.json")
            bad += [f"{r['name']} ({r['problem']})" for r in rows if not r["meets"]]
        if args.part in ("run", "all"):
            res = search(work)
            (args.out / "hostile_run.json").write_text(json.dumps(res, indent=1))
            best = res["best"]
            best_cheat = next((n["cheat"] for n in res["nodes"] if best and n["id"] == best["id"]), None)
            print(f"run exit {res['exit']} in {res['wall_s']}s; best: {best} ({best_cheat})")
            for n in res["nodes"]:
                print(
                    f"  #{n['id']} {n['cheat']}: {n['failure'] or 'correct'} fitness {n['fitness']} {n['marks'] or ''}"
                )
            if best_cheat not in (None, "honest"):
                bad.append(f"run best is the cheat {best_cheat}")
            table = entries()
            bad += [
                f"run node {n['id']} ({n['cheat']}) correct with fitness {n['fitness']}"
                for n in res["nodes"]
                if n["cheat"] not in (None, "honest")
                and table[n["cheat"]]["expected"] not in ("correct", "no gain")
                and n["correct"]
                and (n["fitness"] or 0) > 0
            ]
    print("PROBLEMS: " + "; ".join(bad) if bad else "every entry got what a correct evaluator answers")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
