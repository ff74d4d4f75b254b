"""Where a search stands, for progress displays (the cli draws it): nodes, failures, the best node,
tokens, cost and where the evaluator's places' time went.

Apart from the engine because it only reads the graph: the displays depend on this record, not on
the loop that fills it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from kernelevolve.records.graph import SearchGraph
from kernelevolve.search.timing import TimeSpent
from kernelevolve.spec import Budget


@dataclass(frozen=True)
class Best:
    id: int
    fitness: float | None  # None: correct but untimed (the interpreter)
    score: float


@dataclass(frozen=True)
class Progress:
    """Where a search stands (for progress displays; the cli draws it)."""

    nodes: int  # written, pending included
    evaluated: int
    max_nodes: int
    in_flight: int
    failures: dict[str, int]  # failure class -> evaluated nodes
    held: dict[str, int]  # mark -> nodes held for a person's review
    correct: int
    best: Best | None  # the best correct node not held back
    elapsed_s: float
    wall_clock_s: float | None
    tokens: int
    cost_usd: float
    time: TimeSpent | None = None  # where the evaluator's places' time went (search/timing.py)


def spent(graph: SearchGraph) -> tuple[int, float]:
    """Tokens and dollars the graph's nodes cost."""
    nodes = graph.nodes()
    return sum(n.tokens for n in nodes), sum(n.cost_usd for n in nodes)


def progress_of(
    graph: SearchGraph, limits: Budget, *, in_flight: int, elapsed_s: float, time: TimeSpent | None
) -> Progress:
    done = graph.evaluated()
    best = graph.best()
    tokens, cost = spent(graph)
    return Progress(
        nodes=len(graph),
        evaluated=len(done),
        max_nodes=limits.max_nodes,
        in_flight=in_flight,
        failures=dict(Counter(n.failure for n in done if n.failure)),
        held=dict(Counter(m for n in done if n.held for m in n.evaluation.marks)),
        correct=sum(1 for n in done if n.correct),
        best=None if best is None or not best.correct or best.held else Best(best.id, best.fitness, best.score),
        elapsed_s=elapsed_s,
        wall_clock_s=limits.wall_clock_s,
        tokens=tokens,
        cost_usd=cost,
        time=time,
    )
