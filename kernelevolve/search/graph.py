"""The search graph: every node is one complete kernel candidate, every edge one operator step.

Edges run parent -> child; a node's parents keep their order (crossover: first parent first).
Only what cannot be recomputed is stored on a node; its kind, debug depth and best descendant
are derived from the graph.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass, field

import networkx as nx

from kernelevolve.evaluation.result import EvalResult
from kernelevolve.steps import StepKind, step_kind

PENDING, EVALUATED = "pending", "evaluated"


@dataclass
class Node:
    id: int
    parents: tuple[int, ...] = ()
    source: str | None = None  # None: the operator's reply held no kernel (failure no_code)
    note: str = ""
    evaluation: EvalResult | None = None  # None while pending (written, not yet evaluated)
    created_at: float = field(default_factory=time.time)
    tokens: int = 0
    cost_usd: float = 0.0
    approved: bool = False  # a person approved this kernel (kernelevolve review): marks no longer hold it back
    # EvalResult.fitness is a geometric mean: computed once per evaluation, not per selection.
    _fitness_of: EvalResult | None = field(default=None, repr=False, compare=False)
    _fitness: float | None = field(default=None, repr=False, compare=False)

    @property
    def state(self) -> str:
        return PENDING if self.evaluation is None else EVALUATED

    @property
    def correct(self) -> bool:
        return self.evaluation is not None and self.evaluation.correct

    @property
    def failure(self) -> str | None:
        return None if self.evaluation is None else self.evaluation.failure

    @property
    def fitness(self) -> float | None:
        """The real fitness (speedup); None while pending or when untimed (interpreter)."""
        if self.evaluation is None:
            return None
        if self._fitness_of is not self.evaluation:
            self._fitness_of, self._fitness = self.evaluation, self.evaluation.fitness
        return self._fitness

    @property
    def held(self) -> bool:
        """Marked suspicious or unstable and not approved by a person: never a run's best."""
        return bool(self.evaluation is not None and self.evaluation.marks and not self.approved)

    @property
    def score(self) -> float:
        """Selection surrogate, never shown as a speedup: the fitness when timed, else
        1.0 for a correct candidate and 0.0 for a failed, pending or held one."""
        if self.held:
            return 0.0
        fit = self.fitness
        if fit is not None:
            return fit
        return 1.0 if self.correct else 0.0


class SearchGraph:
    """Nodes of one run on a networkx DiGraph (attribute "node" holds the Node)."""

    def __init__(self) -> None:
        self.g = nx.DiGraph()
        self._ordered: list[Node] = []  # id order, kept as nodes are added

    # -- building ----------------------------------------------------------------------
    def add(self, node: Node) -> Node:
        if node.id in self.g:
            raise ValueError(f"node {node.id} already in the graph")
        for p in node.parents:
            if p not in self.g:
                raise ValueError(f"node {node.id}: parent {p} is not in the graph")
            if p >= node.id:  # so that id order is a topological order
                raise ValueError(f"node {node.id}: parent {p} must have a smaller id")
        self.g.add_node(node.id, node=node)
        bisect.insort(self._ordered, node, key=lambda n: n.id)
        for p in node.parents:
            self.g.add_edge(p, node.id)
        return node

    def set_evaluation(self, node_id: int, evaluation: EvalResult) -> Node:
        node = self[node_id]
        node.evaluation = evaluation
        return node

    def next_id(self) -> int:
        return max(self.g.nodes, default=-1) + 1

    # -- access ------------------------------------------------------------------------
    def __getitem__(self, node_id: int) -> Node:
        return self.g.nodes[node_id]["node"]

    def __contains__(self, node_id: int) -> bool:
        return node_id in self.g

    def __len__(self) -> int:
        return self.g.number_of_nodes()

    def nodes(self) -> list[Node]:
        """All nodes in id order."""
        return list(self._ordered)

    def evaluated(self) -> list[Node]:
        return [n for n in self.nodes() if n.evaluation is not None]

    def pending(self) -> list[Node]:
        return [n for n in self.nodes() if n.evaluation is None]

    def children(self, node_id: int) -> list[int]:
        return sorted(self.g.successors(node_id))

    def roots(self) -> list[int]:
        return sorted(i for i in self.g.nodes if self.g.in_degree(i) == 0)

    # -- derived facts -----------------------------------------------------------------
    def kind(self, node_id: int) -> StepKind:
        """How the node was made (kernelevolve.steps.step_kind on its parents)."""
        return self.step_kind(self[node_id].parents)

    def step_kind(self, parents: tuple[int, ...]) -> StepKind:
        """The kind of a step from these parents (made or about to be)."""
        return step_kind([self[p].correct for p in parents])

    def debug_depth(self, node_id: int) -> int:
        """How many debug steps in a row led to this node (0 for anything not a debug)."""
        depth = 0
        while self.kind(node_id) == "debug":
            depth += 1
            node_id = self[node_id].parents[0]
        return depth

    def ancestors(self, node_id: int) -> set[int]:
        return nx.ancestors(self.g, node_id)

    def descendants(self, node_id: int) -> set[int]:
        return nx.descendants(self.g, node_id)

    def best_descendant(self, node_id: int) -> int | None:
        """The best-scoring evaluated descendant (ties: the earliest), None if none."""
        ids = [i for i in self.descendants(node_id) if self[i].evaluation is not None]
        return min(ids, key=lambda i: (-self[i].score, i)) if ids else None

    def best(self) -> Node | None:
        """The best evaluated node by score (ties: the earliest); None if nothing evaluated."""
        done = self.evaluated()
        return min(done, key=lambda n: (-n.score, n.id)) if done else None

    def lineage(self, node_id: int, limit: int | None = None) -> list[int]:
        """First-parent chain above a node, oldest first (the node itself excluded)."""
        chain: list[int] = []
        parents = self[node_id].parents
        while parents and (limit is None or len(chain) < limit):
            chain.append(parents[0])
            parents = self[parents[0]].parents
        return chain[::-1]
