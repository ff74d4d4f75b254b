"""Selection time per step for each policy on synthetic search graphs of 100, 1,000, 10,000 nodes.

No evaluation happens: graphs are grown at random (a tenth of the nodes failed, debug chains,
crossovers), the MCTS statistics are backed up node by node, then `select(graph, k)` is timed.
A CPU script, not a test:  python bench/framework/selection_speed.py [--sizes 100 1000 10000] [--repeats 15]
Writes bench/results/framework/cpu/selection_speed/selection_speed.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

import networkx

from kernelevolve.evaluation.result import EvalResult, ShapeResult
from kernelevolve.search.graph import Node, SearchGraph
from kernelevolve.search.policies import make_policy

RESULTS = Path(__file__).resolve().parents[1] / "results" / "framework" / "cpu" / "selection_speed"


def _result(rng: random.Random, fitness: float | None) -> EvalResult:
    shape = ShapeResult(label="N=1", params={"N": 1}, dtype="float32")
    if fitness is None:
        shape.correct, shape.failure = False, "incorrect"
        return EvalResult(correct=False, failure="incorrect", shapes=[shape])
    shape.correct, shape.latency_ms, shape.baseline_ms = True, 1.0, fitness
    return EvalResult(correct=True, timed=True, device="cuda", shapes=[shape])


def synthetic_graph(size: int, seed: int = 0) -> SearchGraph:
    """Drafts, then children of random earlier nodes (biased to good ones), 10% failures, 5% crossovers."""
    rng = random.Random(seed)
    g = SearchGraph()
    good: list[int] = []
    for i in range(size):
        if i < 5 or not good:
            parents: tuple[int, ...] = ()
            base = rng.uniform(0.5, 1.5)
        elif rng.random() < 0.05 and len(good) > 1:
            parents = tuple(rng.sample(good[-50:], 2))
            base = sum(g[p].score for p in parents) / 2
        elif rng.random() < 0.1:
            parents = (rng.randrange(i),)  # anything, including failed nodes: a debug step
            base = 1.0
        else:
            parents = (max(rng.sample(good, min(5, len(good))), key=lambda n: g[n].score),)
            base = g[parents[0]].score
        failed = rng.random() < 0.1
        g.add(Node(id=i, parents=parents, source=None))
        g.set_evaluation(i, _result(rng, None if failed else base * rng.uniform(0.9, 1.15)))
        if not failed:
            good.append(i)
    return g


def measure(policy_name: str, graph: SearchGraph, k: int, repeats: int) -> dict:
    policy = make_policy(policy_name, drafts=3)
    t0 = time.perf_counter()
    for node in graph.nodes():
        policy.observe(graph, node.id)  # MCTS back-up; a no-op for the others
    observe_s = time.perf_counter() - t0
    rng = random.Random(1)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        policy.select(graph, k, rng)
        times.append(time.perf_counter() - t)
    return {
        "policy": policy_name,
        "nodes": len(graph),
        "k": k,
        "repeats": repeats,
        "median_ms": 1e3 * statistics.median(times),
        "min_ms": 1e3 * min(times),
        "observe_all_ms": 1e3 * observe_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    rows = []
    for size in args.sizes:
        graph = synthetic_graph(size)
        for name in ("greedy", "mcts", "evolutionary"):
            for k in args.ks:
                row = measure(name, graph, k, args.repeats)
                rows.append(row)
                print(f"{name:13s} {size:6d} nodes k={k}: {row['median_ms']:8.2f} ms per select", flush=True)
    machine = {
        "python": sys.version.split()[0],
        "networkx": networkx.__version__,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "selection_speed.json").write_text(json.dumps({"machine": machine, "results": rows}, indent=2) + "\n")
    lines = [
        "# Selection time per step",
        "",
        "`python bench/framework/selection_speed.py`: synthetic graphs (10% failed nodes, debug chains, 5% crossovers), "
        "median wall time of one `policy.select(graph, k)` call over "
        f"{args.repeats} calls; no evaluation. Machine: {machine['processor']}, {machine['cpus']} CPUs "
        f"(shared), Python {machine['python']}, networkx {machine['networkx']}.",
        "",
        "| policy | nodes | k | median ms | min ms |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    lines += [f"| {r['policy']} | {r['nodes']:,} | {r['k']} | {r['median_ms']:.2f} | {r['min_ms']:.2f} |" for r in rows]
    (args.out / "selection_speed.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
