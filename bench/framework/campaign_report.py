"""Per problem of a campaign: what the search met under the interpreter and what its nodes gave on a GPU.

    python bench/framework/campaign_report.py CAMPAIGN --db URL [--out DIR]

For a campaign searched under the interpreter and then retimed on a GPU (`kernelevolve retime CAMPAIGN
--device cuda`), one row per problem:
- nodes, and the first node that was correct under the interpreter;
- the failure classes met there, with counts;
- on the GPU, at the problem's own sizes: the nodes retimed, how many were correct, and the best node with
  its speedup over the campaign's baseline (the fitness of a timed evaluation);
- the sizes of its kernel prompts (characters: median and largest; insight prompts left out).
Then the campaign's share of problems with a kernel correct on the GPU and the geometric mean of their
best speedups. Writes DIR/campaign_report.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kernelevolve.memory import campaigns  # noqa: E402
from kernelevolve.memory.repository import Repository  # noqa: E402

INSIGHT_PROMPT = "You keep the notes of a Triton kernel search"


def _interpreter_view(node) -> tuple[bool | None, str | None]:
    """(correct, failure) of a node as the interpreter judged it (kept in `retimed_from` once retimed)."""
    ev = node.evaluation
    if ev is None:
        return None, None
    before = ev.retimed_from
    if before is not None:
        return before.correct, before.failure
    return ev.correct, ev.failure


def problem_row(repo: Repository, name: str, run_id: str) -> dict:
    graph = repo.load_graph(run_id)
    nodes = sorted(graph.nodes(), key=lambda n: n.id)
    seen = [(n.id, *_interpreter_view(n)) for n in nodes]
    first = next((i for i, ok, _ in seen if ok), None)
    failures = Counter(f for _, ok, f in seen if ok is False and f)
    # Evaluated again on the GPU: a timed result, or a failure there (which is not timed).
    retimed = [n for n in nodes if n.evaluation is not None and n.evaluation.retimed_from is not None]
    gpu_correct = [n for n in retimed if n.evaluation.correct and n.evaluation.timed]
    best = max(gpu_correct, key=lambda n: n.evaluation.fitness or 0.0, default=None)
    gpu_failures = Counter(n.evaluation.failure for n in retimed if not n.evaluation.correct and n.evaluation.failure)
    sizes = [len(c.prompt) for c in repo.llm_calls(run_id) if INSIGHT_PROMPT not in c.prompt]
    return {
        "problem": name,
        "run": run_id,
        "nodes": len(nodes),
        "first_correct_interpreter": first,
        "failures_interpreter": dict(failures),
        "retimed": len(retimed),
        "correct_gpu": len(gpu_correct),
        "failures_gpu": dict(gpu_failures),
        "best_gpu_node": best.id if best else None,
        "best_gpu_speedup": best.evaluation.fitness if best else None,
        "kernel_prompts": len(sizes),
        "prompt_chars_median": statistics.median(sizes) if sizes else None,
        "prompt_chars_max": max(sizes) if sizes else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("campaign")
    ap.add_argument("--db", required=True)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    repo = Repository(a.db)
    problems = campaigns.problems(repo, a.campaign)
    if not problems:
        raise SystemExit(f"no campaign {a.campaign!r} (or no problems) in {a.db}")
    rows = [problem_row(repo, p.name, p.run_id) for p in problems if p.run_id]
    solved = [r for r in rows if r["correct_gpu"]]
    speedups = [r["best_gpu_speedup"] for r in solved if r["best_gpu_speedup"]]
    sizes = [r["prompt_chars_median"] for r in rows if r["prompt_chars_median"]]
    summary = {
        "campaign": a.campaign,
        "problems": len(rows),
        "correct_on_gpu": len(solved),
        "share_correct_on_gpu": len(solved) / len(rows) if rows else None,
        "geomean_best_speedup": math.exp(sum(map(math.log, speedups)) / len(speedups)) if speedups else None,
        "median_of_problem_median_prompt_chars": statistics.median(sizes) if sizes else None,
        "rows": rows,
    }
    print(
        "| problem | nodes | first correct (interp.) | failures (interp.) | retimed | correct on GPU | failures (GPU) "
        "| best node | speedup | prompts (median / max chars) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        fails = ", ".join(f"{k} x{v}" for k, v in sorted(r["failures_interpreter"].items())) or "-"
        gpu_fails = ", ".join(f"{k} x{v}" for k, v in sorted(r["failures_gpu"].items())) or "-"
        speed = f"{r['best_gpu_speedup']:.2f}x" if r["best_gpu_speedup"] else "-"
        prompts = (
            f"{r['prompt_chars_median'] / 1000:.1f}k / {r['prompt_chars_max'] / 1000:.1f}k"
            if r["kernel_prompts"]
            else "-"
        )
        print(
            f"| {r['problem']} | {r['nodes']} | {r['first_correct_interpreter']} | {fails} | {r['retimed']} | "
            f"{r['correct_gpu']} | {gpu_fails} | {r['best_gpu_node']} | {speed} | {prompts} |"
        )
    share = summary["share_correct_on_gpu"]
    geo = summary["geomean_best_speedup"]
    print(
        f"\n{len(solved)} of {len(rows)} problems ({share:.0%}) with a kernel correct on the GPU; "
        f"geometric mean of their best speedups: {geo:.2f}x"
        if geo
        else f"\n{len(solved)} of {len(rows)} correct on the GPU"
    )
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "campaign_report.json").write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
