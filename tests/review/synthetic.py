"""A synthetic timed run written into the experiment database with the repository's own tables:
for the review pages' speed checks (2,000 nodes) and the screenshots. Its numbers are made up.
One transaction for the lot (the engine's two per node would take 20 s for 2,000 nodes here)."""

from __future__ import annotations

import random

from kernelevolve.evaluation.result import EvalResult, ShapeResult
from kernelevolve.records.result import Versions
from kernelevolve.memory import Repository
from kernelevolve.memory.models import EdgeRow, EvaluationRow, LLMCallRow, NodeRow

FAILURES = ["compile", "runtime", "incorrect", "timeout", "not_a_kernel"]
SHAPES = [{"M": 32768, "N": 4096}, {"M": 8192, "N": 16384}, {"M": 2048, "N": 65536}]
BASELINE_MS = [0.312, 0.305, 0.298]


def write_synthetic_run(url: str, n_nodes: int, seed: int = 0, suspicious: int | None = None) -> str:
    """A softmax run of `n_nodes` nodes (drafts, debug and improve chains, crossovers); node
    `suspicious`, if given, is correct and marked suspicious. Returns the run id."""
    from kernelevolve.paths import REPO_ROOT
    from kernelevolve.spec import load_spec

    rng = random.Random(seed)
    spec = load_spec(REPO_ROOT / "specs" / "softmax.yaml")
    repo = Repository(url)
    run_id = repo.create_run(
        spec=spec,
        policy="mcts",
        device="cuda",
        settings={"policy": "mcts", "model": "synthetic:made-up", "synthetic": True},
        rng_state={},
        policy_state={},
        snapshot="synthetic",
    )
    base = (REPO_ROOT / "knowledge_base" / "kernels" / "softmax.py").read_text()
    fitness: dict[int, float] = {}
    rows = []
    for i in range(n_nodes):
        if i < 4:
            parents: tuple[int, ...] = ()
        elif rng.random() < 0.05 and len(fitness) >= 2:
            parents = tuple(sorted(rng.sample(sorted(fitness), 2)))
        else:
            parents = (rng.choice(range(max(0, i - 40), i)),)
        source = base.replace("CONFIG = {", f"CONFIG = {{  # variant {i}\n", 1) + f"\n# tweak {i}\n"
        rows.append(
            NodeRow(
                run_id=run_id,
                id=i,
                source=source,
                note=f"synthetic change {i}",
                state="evaluated",
                tokens=1200,
                cost_usd=0.01,
            )
        )
        rows.extend(EdgeRow(run_id=run_id, child_id=i, parent_id=p, position=k) for k, p in enumerate(parents))
        prompt = f"# Task: make a correct Triton kernel for `softmax` faster (synthetic prompt for node {i})"
        rows.append(
            LLMCallRow(
                run_id=run_id,
                node_id=i,
                provider="synthetic",
                model="made-up",
                prompt=prompt,
                prompt_sha256="0" * 64,
                reply=f"Synthetic change {i}.\n```python\n# (source)\n```",
                input_tokens=1000,
                output_tokens=200,
                cost_usd=0.01,
                latency_s=rng.uniform(5, 30),
            )
        )
        failed = rng.random() < 0.3 and i != suspicious
        parent_fit = max([fitness.get(p, 0.8) for p in parents] or [0.8])
        speed = max(0.3, parent_fit * rng.uniform(0.9, 1.12))
        shapes = [
            ShapeResult(
                label=f"M={s['M']},N={s['N']} bfloat16",
                params=s,
                dtype="bfloat16",
                correct=not failed,
                max_abs_err=None if failed else 0.002,
                latency_ms=None if failed else b / speed / rng.uniform(0.97, 1.03),
                baseline_ms=b,
            )
            for s, b in zip(SHAPES, BASELINE_MS)
        ]
        if failed:
            kind = rng.choice(FAILURES)
            result = EvalResult(
                correct=False,
                failure=kind,
                message=f"{kind}: synthetic failure of node {i}",
                log="\n".join(f"log line {k} of node {i}" for k in range(120)),
                shapes=shapes,
                device="cuda",
            )
        else:
            result = EvalResult(
                correct=True, shapes=shapes, device="cuda", timed=True, versions=Versions(gpu="NVIDIA H200 (synthetic)")
            )
            if i == suspicious:
                result.marks["suspicious"] = "synthetic: above the hardware's peak bandwidth"
            fitness[i] = result.fitness
        rows.append(
            EvaluationRow(
                run_id=run_id,
                node_id=i,
                result=result.to_dict(),
                correct=result.correct,
                fitness=result.fitness,
                failure=result.failure,
                device="cuda",
            )
        )
    with repo.Session.begin() as session:
        nodes = [r for r in rows if isinstance(r, NodeRow)]
        session.add_all(nodes)
        session.flush()  # nodes before the edges and evaluations that point at them
        session.add_all([r for r in rows if not isinstance(r, NodeRow)])
    repo.update_run(run_id, status="finished", termination_reason="nodes", elapsed_s=20.0 * n_nodes)
    repo.close()
    return run_id
