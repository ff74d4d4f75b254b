"""A short search whose scripted model records every prompt: do optimise prompts carry the
parent's profile summary, and what does profiling cost per profiled node?

    python bench/framework/profile_search.py --out DIR [--device cuda|interpret] [--budget 6]
                                   [--profile all|torch,ncu,...] [--shape M=32768,N=4096]

A local OpenAI-compatible server (tests/llm/fake_llm_server.py) answers `kernelevolve run
specs/softmax.yaml --model openai:scripted` with the reference softmax kernel under a different
CONFIG each time (max_warps, tile_elems, elems_per_thread moved one step), so nodes are correct and
the search has bests to profile. Written to DIR: prompts/NNN_<kind>.txt (every prompt, in order),
summary.json (per optimise prompt: its parent, whether the parent had a profile and whether the
prompt shows it; per profiled node: tools, seconds, the roofline line), run_stdout.txt.
Under --device interpret only the torch tool works (the CPU profile has no GPU kernels).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.llm.fake_llm_server import FakeLLMServer  # noqa: E402

CLI = [sys.executable, "-c", "from kernelevolve.cli import main; main()"]
SPEC = ROOT / "specs" / "softmax.yaml"
KERNEL = ROOT / "knowledge_base" / "kernels" / "softmax.py"
MOVES = [
    {},
    {"max_warps": 8},
    {"tile_elems": 2048},
    {"elems_per_thread": 8},
    {"max_warps": 32},
    {"tile_elems": 4096},
    {"elems_per_thread": 32},
    {"num_stages": 2},
    {"tile_elems": 8192},
]


def _replies() -> list[str]:
    from kernelevolve.operators.tunables import read_declared, rewrite_config

    source = KERNEL.read_text()
    base = read_declared(source).config
    out = []
    for move in MOVES:
        note = ", ".join(f"{k}={v}" for k, v in move.items()) or "the reference CONFIG"
        out.append(f"Change: {note}\n\n```python\n{rewrite_config(source, {**base, **move})}```\n")
    return out


def _kind(prompt: str) -> str:
    if prompt.startswith("Reply with the single word OK"):
        return "model_check"
    for kind, head in (
        ("optimise", "# Task: make a correct Triton kernel"),
        ("debug", "# Task: fix a failing"),
        ("draft", "# Task: write a fast Triton kernel"),
        ("crossover", "# Task: combine two"),
    ):
        if prompt.startswith(head):
            return kind
    return "other"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--budget", type=int, default=6)
    ap.add_argument("--profile", default="all")
    ap.add_argument("--shape", default="M=32768,N=4096")
    args = ap.parse_args()
    out = args.out
    (out / "prompts").mkdir(parents=True, exist_ok=True)
    replies, served = _replies(), []

    def responder(api, prompt, body):
        if "Write ONE short insight" in prompt:
            return 200, "No insight from a scripted model.", {}
        served.append(prompt)
        (out / "prompts" / f"{len(served):03d}_{_kind(prompt)}.txt").write_text(prompt)
        return 200, replies[(len(served) - 1) % len(replies)], {}

    db = f"sqlite:///{out / 'search.db'}"
    shape = [] if args.device == "interpret" and not args.shape else ["--shape", args.shape]
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
                args.device,
                "--budget",
                str(args.budget),
                "--db",
                db,
                "--profile",
                args.profile,
                *shape,
            ],
            capture_output=True,
            text=True,
            timeout=1500,
            env=env,
            cwd=out,
        )
        wall = time.monotonic() - t0
    (out / "run_stdout.txt").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    if proc.returncode not in (0, 1):
        print(f"kernelevolve run failed (exit {proc.returncode}): {proc.stderr.strip()[-600:]}", file=sys.stderr)
        return 1

    from kernelevolve.memory import Repository
    from kernelevolve.memory.profiles import load_profiles
    from kernelevolve.profiling.schema import NodeProfile

    repo = Repository(db)
    run_id = repo.runs()[0].id
    profiles = {
        i: NodeProfile(summaries=row.summaries, seconds=row.seconds) for i, row in load_profiles(repo, run_id).items()
    }
    graph = repo.load_graph(run_id)
    prompts = []
    for n, prompt in enumerate(served, start=1):
        kind = _kind(prompt)
        parent = re.search(r"Candidate #(\d+)", prompt)
        pid = int(parent.group(1)) if parent else None
        prompts.append(
            {
                "prompt": n,
                "kind": kind,
                "parent": pid,
                "parent_profiled": pid in profiles,
                "shows_profile": "Profile at " in prompt,
                "shows_roofline": "roofline: " in prompt,
            }
        )
    optimise = [p for p in prompts if p["kind"] == "optimise"]
    first = min(profiles) if profiles else None
    summary = {
        "device": args.device,
        "budget": args.budget,
        "profile_tools": args.profile,
        "wall_s": round(wall, 1),
        "exit": proc.returncode,
        "nodes": len(graph),
        "termination": repo.run(run_id).termination_reason,
        "profiled_nodes": {
            i: {
                "seconds": round(p.seconds, 2),
                "tools": p.summaries[0].tools if p.summaries else [],
                "errors": p.summaries[0].errors if p.summaries else {},
                "roofline": p.summaries[0].roofline.line() if p.summaries and p.summaries[0].roofline else None,
                "fitness": graph[i].fitness,
            }
            for i, p in sorted(profiles.items())
        },
        "seconds_per_profiled_node": round(sum(p.seconds for p in profiles.values()) / len(profiles), 2)
        if profiles
        else None,
        "evaluation_seconds_per_node": round(
            sum(n.evaluation.duration_s for n in graph.evaluated()) / max(1, len(graph.evaluated())), 2
        ),
        "optimise_prompts": optimise,
        "first_profiled_node": first,
        "optimise_prompts_with_a_profiled_parent": sum(1 for p in optimise if p["parent_profiled"]),
        "of_which_show_the_profile": sum(1 for p in optimise if p["parent_profiled"] and p["shows_profile"]),
        "optimise_prompts_with_an_unprofiled_parent": sum(1 for p in optimise if not p["parent_profiled"]),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    print(
        json.dumps(
            {
                k: summary[k]
                for k in (
                    "wall_s",
                    "nodes",
                    "termination",
                    "seconds_per_profiled_node",
                    "optimise_prompts_with_a_profiled_parent",
                    "of_which_show_the_profile",
                    "optimise_prompts_with_an_unprofiled_parent",
                )
            }
        )
    )
    repo.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
