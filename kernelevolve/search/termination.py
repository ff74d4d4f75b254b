"""When a search stops: node budget, wall clock, tokens, cost, stall, or a fitness target."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from kernelevolve.search.graph import SearchGraph


@dataclass
class Limits:
    max_nodes: int = 20
    wall_clock_s: float | None = None
    tokens: int | None = None
    cost_usd: float | None = None
    stall: int | None = None  # stop after this many evaluated nodes without a new best
    target_fitness: float | None = None  # a real (timed) fitness; never met on the interpreter

    @classmethod
    def from_budget(cls, budget, **overrides) -> "Limits":
        """The spec's budget, with the non-None overrides (CLI options) on top."""
        limits = cls(
            max_nodes=budget.nodes,
            wall_clock_s=budget.wall_clock_s,
            tokens=budget.tokens,
            cost_usd=budget.cost_usd,
            stall=budget.stall,
            target_fitness=budget.target_fitness,
        )
        for key, value in overrides.items():
            if value is not None:
                setattr(limits, key, value)
        return limits

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Limits":
        return cls(**d)

    def stop_reason(self, graph: SearchGraph, elapsed_s: float, tokens: int, cost_usd: float) -> str | None:
        """Why the search must stop starting new nodes, or None to go on.

        The node budget counts every node written (pending included); the engine also checks it
        before each new expansion so that it never overshoots.
        """
        if self.target_fitness is not None:
            if any((n.fitness or 0.0) >= self.target_fitness and not n.held for n in graph.evaluated()):
                return "target_fitness"
        if len(graph) >= self.max_nodes:
            return "nodes"
        if self.wall_clock_s is not None and elapsed_s >= self.wall_clock_s:
            return "wall_clock"
        if self.tokens is not None and tokens >= self.tokens:
            return "tokens"
        if self.cost_usd is not None and cost_usd >= self.cost_usd:
            return "cost"
        if self.stall is not None and nodes_since_improvement(graph) >= self.stall:
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
