"""Experiment (not a test): how well the offline operator's local search does in 30 nodes.

The real search engine (greedy policy) and the real OfflineOperator run over the RMSNorm
reference kernel's declared tunables; only the evaluator is synthetic: latency is a product of
per-knob unimodal penalties (half the knobs matter 8-25% per step, half 0-2%), the optimum lying
0-2 steps from the reference CONFIG per knob, with +-1% timing noise. The optimum is found by
enumerating the whole space. The engine hands the operator every evaluated node
(OperatorContext.evaluated), from which it learns which one-knob moves paid off.

    python tests/operators/offline_search_sim.py 8        # 8 landscapes of 30 nodes each
    python tests/operators/offline_search_sim.py 8 60     # 8 landscapes of 60 nodes each

tests/operators/test_offline_search_sim.py runs it on one small landscape, so that it keeps working.
"""

from __future__ import annotations

import itertools
import random
import sys
import tempfile
from dataclasses import dataclass

from kernelevolve.evaluation.executors import Executor
from kernelevolve.evaluation.result import EvalResult, ShapeResult
from kernelevolve.memory import Repository
from kernelevolve.operators.offline import OfflineOperator
from kernelevolve.operators.tunables import read_declared
from kernelevolve.paths import BUNDLED_KNOWLEDGE_BASE, SPECS
from kernelevolve.runs.session import RunSettings, start_run, build_engine
from kernelevolve.spec import Budget
from kernelevolve.spec import load_spec

ref = read_declared((BUNDLED_KNOWLEDGE_BASE / "kernels" / "rmsnorm.py").read_text())
T = ref.tunables


def landscape(seed):
    r = random.Random(seed)
    # per knob: preferred index and cost per step away (big knobs matter, small ones barely)
    prefs = {}
    for k, vals in T.items():
        big = r.random() < 0.5
        i0 = vals.index(ref.config[k])
        prefs[k] = (
            min(len(vals) - 1, max(0, i0 + r.choice([-2, -1, 0, 0, 1, 2]))),
            r.uniform(0.08, 0.25) if big else r.uniform(0.0, 0.02),
        )

    def lat(cfg, noise=None):
        x = 1.0
        for k, (p, c) in prefs.items():
            x *= (1 + c) ** abs(T[k].index(cfg[k]) - p)
        if noise:
            x *= noise.uniform(0.99, 1.01)
        return x

    return lat


class Eval(Executor):
    device, parallelism = "cuda", 1

    def __init__(self, lat):
        self.lat, self.n, self.noise = lat, 0, random.Random(0)

    def run(self, request):
        self.n += 1
        cfg = read_declared(request.source).config
        s = ShapeResult(
            label="M=1,N=1 bfloat16",
            params={},
            dtype="bfloat16",
            correct=True,
            latency_ms=self.lat(cfg, self.noise),
            baseline_ms=1.0,
        )
        return EvalResult(correct=True, shapes=[s], device="cuda", timed=True)


def best_possible(lat):
    keys = sorted(T)
    return min(lat({**ref.config, **dict(zip(keys, v))}) for v in itertools.product(*(T[k] for k in keys)))


@dataclass(frozen=True)
class Outcome:
    nodes: int
    unique: int  # distinct configurations among them
    ref: float  # the reference CONFIG's latency against the optimum's (optimum / latency; 1 is the optimum)
    best: float  # the best node's, likewise


def simulate(seed: int, nodes: int = 30) -> Outcome:
    """One search of `nodes` nodes on landscape `seed`."""
    lat = landscape(seed)
    opt = best_possible(lat)
    d = tempfile.mkdtemp()
    repo = Repository(f"sqlite:///{d}/r.db")
    spec = load_spec(SPECS / "rmsnorm.yaml")
    run = start_run(repo, spec, RunSettings(device="cuda", limits=Budget(max_nodes=nodes), seed=seed))
    eng = build_engine(repo, run, operator=OfflineOperator(), evaluator=Eval(lat))
    eng.insight_writer = None
    eng.run()
    found = eng.graph.nodes()
    repo.close()
    cfgs = {tuple(sorted(read_declared(n.source).config.items())) for n in found if n.source}
    best = min(lat(read_declared(n.source).config) for n in found if n.correct)
    return Outcome(len(found), len(cfgs), opt / lat(ref.config), opt / best)


def main(argv: list[str]) -> None:
    landscapes = int(argv[0]) if argv else 8
    nodes = int(argv[1]) if len(argv) > 1 else 30
    res = []
    for seed in range(landscapes):
        o = simulate(seed, nodes)
        res.append(o.best)
        print(f"seed {seed}: nodes {o.nodes} unique {o.unique} ref {o.ref:.3f} best-found {o.best:.3f}")
    print("mean", sum(res) / len(res), ">=0.95:", sum(r >= 0.95 for r in res), "/", len(res))


if __name__ == "__main__":
    main(sys.argv[1:])
