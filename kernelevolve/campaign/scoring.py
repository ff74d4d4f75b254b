"""A campaign's scores, KernelBench-style: pass rate, fast_p, geometric-mean speedup, failure classes.

Every problem of the campaign is in the denominator (skipped ones included, as KernelBench counts
a problem without a kernel as failed). A problem is correct when its run has a correct node that
is not held for review; its speedup is that best node's fitness, the geometric mean over its
shapes of baseline / kernel latency. fast_p counts correct problems whose speedup is above p.
Under the interpreter nothing is timed: the score is correctness only and says so.

`baseline` other than the one a problem was timed against takes that baseline's latency from the
experiment database's baseline cache (same spec, shape, GPU and software), when it was measured.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field

from kernelevolve.memory import campaigns as store
from kernelevolve.records.baselines import BaselineKey

FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)


@dataclass
class ProblemScore:
    name: str
    state: str
    shapes: str
    shape_rule: str
    run_id: str | None = None
    nodes: int = 0
    best_node: int | None = None
    correct: bool = False
    speedup: float | None = None
    failure: str | None = None  # a failure class, `skipped: WHY` or `error: WHY` when not correct
    note: str = ""


@dataclass
class CampaignScore:
    campaign_id: str
    kind: str
    device: str
    timed: bool
    baseline: str  # what speedups are against: eager, torch.compile, or "each spec's"
    total: int
    correct: int
    fast_p: dict[str, int] | None  # "1.0" -> problems; None when untimed
    geomean_speedup: float | None
    failures: dict[str, int]
    problems: list[ProblemScore] = field(default_factory=list)
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def score(repo, campaign_id: str, baseline: str | None = None) -> CampaignScore:
    from kernelevolve.campaign.runner import CampaignSettings

    row = store.campaign(repo, campaign_id)
    settings = CampaignSettings.model_validate(row.settings)
    timed = settings.device == "cuda"
    rows = [_problem(repo, p, settings, baseline if timed else None) for p in store.problems(repo, campaign_id)]
    correct = [p for p in rows if p.correct]
    speedups = [p.speedup for p in correct if p.speedup is not None]
    failures = Counter(
        p.failure.split(":")[0] if p.failure.startswith(("skipped", "error")) else p.failure for p in rows if p.failure
    )
    against = (
        baseline
        or settings.baseline
        or (
            next(iter(set(settings.baselines.values())))
            if len(set(settings.baselines.values())) == 1
            else "each spec's"
        )
    )
    note = "" if timed else "untimed (interpreter): correctness only, no speedups"
    if timed and len(speedups) < len(correct):
        note = f"{len(correct) - len(speedups)} correct problem(s) have no {against} timing: not counted in fast_p"
    return CampaignScore(
        campaign_id=campaign_id,
        kind=row.kind,
        device=settings.device,
        timed=timed,
        baseline=against,
        total=len(rows),
        correct=len(correct),
        fast_p={f"{p:.1f}": sum(1 for s in speedups if s > p) for p in FAST_P} if timed else None,
        geomean_speedup=math.exp(sum(map(math.log, speedups)) / len(speedups)) if timed and speedups else None,
        failures=dict(sorted(failures.items())),
        problems=rows,
        note=note,
    )


def _problem(repo, p, settings, baseline: str | None) -> ProblemScore:
    from kernelevolve.records.graph import best_nodes

    from kernelevolve.spec import shape_text

    shapes = "; ".join(shape_text(s) for s in p.shapes) if p.shapes else ""
    out = ProblemScore(name=p.name, state=p.state, shapes=shapes, shape_rule=p.shape_rule, run_id=p.run_id, note=p.note)
    if p.state in (store.SKIPPED, store.ERROR):
        out.failure = f"{p.state}: {p.note}"
        return out
    if p.run_id is None:
        out.failure = "not started"
        return out
    graph = repo.load_graph(p.run_id)
    out.nodes = len(graph)
    if not out.shapes:
        first = next((n for n in graph.evaluated() if n.evaluation.shapes), None)
        out.shapes = (
            "; ".join(dict.fromkeys(s.label.rsplit(" ", 1)[0] for s in first.evaluation.shapes)) if first else ""
        )
    best = best_nodes(graph, 1)
    if not best:
        done = graph.evaluated()
        held = [n for n in done if n.correct and n.held]
        out.failure = "held for review" if held else (done[-1].failure if done else "not evaluated")
        return out
    node = best[0]
    out.best_node, out.correct = node.id, True
    measured = settings.baselines.get(p.name)
    out.speedup = (
        node.fitness
        if baseline in (None, measured)
        else _against(repo, repo.run(p.run_id).spec_fingerprint, node, baseline)
    )
    return out


def _against(repo, fingerprint: str, node, baseline: str) -> float | None:
    """The node's geometric-mean speedup against another baseline's cached latencies, if all are there."""
    ev = node.evaluation
    gpu = ev.versions.gpu
    cached = repo.baselines(fingerprint)
    ratios = []
    for s in ev.shapes:
        rows = [
            r
            for r in cached
            if r.shape == s.label
            and BaselineKey.from_columns(r.spec_fingerprint, r.shape, r.device, r.software).kind == baseline
            and (gpu is None or r.device == gpu)
        ]
        if not s.latency_ms or not rows:
            return None
        ratios.append(max(rows, key=lambda r: r.created_at).baseline_ms / s.latency_ms)
    return math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
