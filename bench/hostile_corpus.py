"""The hostile corpus on a GPU: every cheat through `kernelevolve eval --device cuda`, then a
`kernelevolve run` whose scripted model (a local OpenAI-compatible server) proposes the cheats.

    python bench/hostile_corpus.py --out DIR [--part eval|run|all]

Writes DIR/hostile_eval.json and DIR/hostile_run.json; exits 1 if any cheat ends correct with
fitness > 0 or as the run's best. Expected classes come from tests/evaluation/hostile/corpus.py.
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

from tests.evaluation.hostile.corpus import CORPUS, SPEC  # noqa: E402
from tests.llm.fake_llm_server import FakeLLMServer  # noqa: E402

DEVICE = "cuda"  # --device interpret: a dry run of the script on a CPU
CLI = [sys.executable, "-c", "from kernelevolve.cli import main; main()"]
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
]


def evaluate_all(work: Path, names: list[str], save_to: Path) -> list[dict]:
    rows = []
    for name in names:
        hostile = CORPUS[name]
        path = work / f"{name}.py"
        path.write_text(hostile.source)
        t0 = time.monotonic()
        proc = subprocess.run(
            [*CLI, "eval", str(SPEC), str(path), "--device", DEVICE, "--json"],
            capture_output=True,
            text=True,
            timeout=900,
            env={**os.environ, "ANTHROPIC_API_KEY": "sk-bench-secret"},
        )
        wall = time.monotonic() - t0
        try:
            out = json.loads(proc.stdout)
        except ValueError:
            out = {"correct": None, "failure": "no JSON", "message": (proc.stderr or proc.stdout)[-300:]}
        expected = hostile.gpu if hostile.gpu != "same" else hostile.screened
        got = "correct" if out.get("correct") else out.get("failure")
        rows.append(
            {
                "name": name,
                "expected": expected,
                "got": got,
                "fitness": out.get("fitness"),
                "message": out.get("message", ""),
                "marks": out.get("marks", {}),
                "exit": proc.returncode,
                "wall_s": round(wall, 2),
                "phases_s": out.get("phases_s", {}),
                "sandbox": out.get("environment", {}).get("sandbox", {}),
                "speedups": [s.get("speedup") for s in out.get("shapes", [])],
            }
        )
        print(
            f"{name:32s} expected {expected:14s} got {str(got):14s} fitness {out.get('fitness')} "
            f"({wall:.1f}s) {out.get('message', '')[:120]}",
            flush=True,
        )
        save_to.write_text(json.dumps(rows, indent=1))  # as it goes: a cut-off run keeps what it measured
    return rows


def search(work: Path) -> dict:
    replies = [f"Trying {name}.\n\n```python\n{CORPUS[name].source}```\n" for name in SEARCH_ORDER]
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
                str(SPEC),
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
            timeout=1800,
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
            (k for k in SEARCH_ORDER if n.get("source") and CORPUS[k].source.strip() == (n["source"] or "").strip()),
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--part", choices=["eval", "run", "all"], default="all")
    ap.add_argument("--device", default="cuda")
    ap.add_argument(
        "--only",
        nargs="+",
        choices=sorted(CORPUS),
        metavar="NAME",
        help="evaluate only these candidates of the corpus (default: all)",
    )
    args = ap.parse_args()
    global DEVICE
    DEVICE = args.device
    args.out.mkdir(parents=True, exist_ok=True)
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.part in ("eval", "all"):
            rows = evaluate_all(work, args.only or list(CORPUS), args.out / "hostile_eval.json")
            bad += [
                r["name"]
                for r in rows
                if r["name"] != "honest"
                and (r["got"] == "correct" and (r["fitness"] or 0) > 0)
                and r["expected"] != "correct"
            ]
            bad += [
                f"{r['name']} (expected {r['expected']}, got {r['got']})" for r in rows if r["got"] != r["expected"]
            ]
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
            bad += [
                f"run node {n['id']} ({n['cheat']}) correct with fitness {n['fitness']}"
                for n in res["nodes"]
                if n["cheat"] not in ("honest", None) and n["correct"] and (n["fitness"] or 0) > 0
            ]
    print("PROBLEMS: " + "; ".join(bad) if bad else "no cheat ended correct with fitness > 0 or as the best")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
