"""Confirming a would-be best: an evaluation that would lead the run is evaluated again in a fresh
process, with new seeds, before it counts; the second evaluation is kept with the first, and a
disagreement between them holds the node for a person (mark `unstable`).

Apart from the engine because the rule (who is rechecked, what the two evaluations make together)
is judged without the loop; the loop only gives the recheck its place.
"""

from __future__ import annotations

from kernelevolve.evaluation import plausibility
from kernelevolve.records.graph import SearchGraph
from kernelevolve.records.result import EvalResult


def would_lead(graph: SearchGraph, result: EvalResult) -> bool:
    """The result would be the run's new best (timed, not held): it is rechecked before it counts."""
    fitness = result.fitness
    if not fitness or result.marks:  # untimed, failed, or already held for a person
        return False
    best = graph.best()
    return best is None or best.fitness is None or fitness > best.score


def confirmed(first: EvalResult, second: EvalResult) -> EvalResult:
    """The first evaluation with its recheck noted; marked unstable where the two disagree."""
    first.recheck = {
        "fitness": second.fitness,
        "failure": second.failure,
        "latency_ms": [s.latency_ms for s in second.shapes],
    }
    reason = plausibility.disagreement(first, second)
    if reason:
        first.marks["unstable"] = reason
    return first
