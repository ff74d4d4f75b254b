"""When a search stops: node budget, wall clock, tokens, cost, stall, or a fitness target."""

from __future__ import annotations

from kernelevolve.records.graph import SearchGraph
from kernelevolve.spec import Budget


def stop_reason(budget: Budget, graph: SearchGraph, elapsed_s: float, tokens: int, cost_usd: float) -> str | None:
    """Why the search must stop starting new nodes, or None to go on.

    The node budget counts every node written (pending included); the engine also checks it
    before each new expansion so that it never overshoots.
    """
    if budget.target_fitness is not None:
        if any((n.fitness or 0.0) >= budget.target_fitness and not n.held for n in graph.evaluated()):
            return "target_fitness"
    if len(graph) >= budget.max_nodes:
        return "nodes"
    if budget.wall_clock_s is not None and elapsed_s >= budget.wall_clock_s:
        return "wall_clock"
    if budget.tokens is not None and tokens >= budget.tokens:
        return "tokens"
    if budget.cost_usd is not None and cost_usd >= budget.cost_usd:
        return "cost"
    if budget.stall is not None and nodes_since_improvement(graph) >= budget.stall:
        return "stall"
    return None


def nodes_since_improvement(graph: SearchGraph) -> int:
    """Evaluated nodes (in id order) since the best score last went up.

    Before any node scores above zero, every evaluated node counts as no improvement.
    """
    best, since = 0.0, 0
    for node in graph.evaluated():
        if node.score > best:
            best, since = node.score, 0
        else:
            since += 1
    return since
