"""MCTS: UCT over the search graph, with a virtual root above the drafts.

Each evaluated node backs its score (the selection surrogate) up to all its ancestors and the
root: visits N and total reward W. Selection walks down from the root: a correct node with
fewer than `branching` children is expanded (an untried child comes before any deeper
exploration); otherwise the walk moves to the child with the highest

    UCT(c) = (W(c) / N(c)) / best_score + exploration * sqrt(ln N(parent) / N(c)),

rewards being divided by the best score so far so that speedups of any size stay comparable
with the exploration term. Work in flight counts as visits with reward 0 (a virtual loss), so k
selections in one step spread over the tree. Failed nodes are not expanded by UCT: the shared
debug rule handles them; a debug child that passes still joins the tree under its parent.
The tree is the graph's first-parent tree (a crossover node, made by another policy before a
policy switch, hangs under its first parent).
"""

from __future__ import annotations

import math
import random
from collections import Counter

from kernelevolve.search.graph import SearchGraph
from kernelevolve.search.policies.base import Expansion, Policy

ROOT = -1


class MCTS(Policy):
    name = "mcts"

    def __init__(self, exploration: float = 1.4, branching: int = 3, **common) -> None:
        super().__init__(**common)
        if exploration < 0:
            raise ValueError("exploration must be 0 or more")
        if branching < 1:
            raise ValueError("branching must be at least 1")
        self.exploration = exploration
        self.branching = branching
        self.visits: Counter[int] = Counter()
        self.reward: dict[int, float] = {}

    def options(self) -> dict:
        return {**super().options(), "exploration": self.exploration, "branching": self.branching}

    # -- back-propagation -----------------------------------------------------------------
    def observe(self, graph: SearchGraph, node_id: int) -> None:
        score = graph[node_id].score
        for n in graph.ancestors(node_id) | {node_id, ROOT}:
            self.visits[n] += 1
            self.reward[n] = self.reward.get(n, 0.0) + score

    def state_dict(self) -> dict:
        return {"visits": {str(k): v for k, v in self.visits.items()},
                "reward": {str(k): v for k, v in self.reward.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.visits = Counter({int(k): v for k, v in state.get("visits", {}).items()})
        self.reward = {int(k): float(v) for k, v in state.get("reward", {}).items()}

    # -- selection ------------------------------------------------------------------------
    def uct(self, graph: SearchGraph, parent: int, child: int, virtual: Counter, norm: float) -> float:
        n_child = self.visits[child] + virtual[child]
        if n_child == 0:
            return math.inf
        n_parent = max(self.visits[parent] + virtual[parent], 1)
        mean = self.reward.get(child, 0.0) / n_child
        return mean / norm + self.exploration * math.sqrt(math.log(n_parent) / n_child)

    def begin(self, graph: SearchGraph) -> None:
        nodes = graph.nodes()
        self._children: dict[int, list[int]] = {ROOT: []}
        for n in nodes:
            self._children[n.id] = []
            self._children[n.parents[0] if n.parents else ROOT].append(n.id)
        self._order = [n.id for n in reversed(nodes)]  # children before parents: ids grow down the graph
        self._virtual_pending: Counter[int] = Counter()
        for node in graph.pending():
            for a in graph.ancestors(node.id) | {node.id, ROOT}:
                self._virtual_pending[a] += 1
        best = graph.best()
        self._norm = best.score if best is not None and best.score > 0 else 1.0
        self._above: dict[int, set[int]] = {}
        self._correct = {n.id for n in graph.evaluated() if n.correct}
        self._position = {n: i for i, n in enumerate(self._order)}
        self._open_base = self._openness(Counter(), self._order, {})

    def _expandable(self, n: int, used: Counter) -> bool:
        return n in self._correct and len(self._children[n]) + used[n] < self.branching

    def _openness(self, used: Counter, nodes, open_: dict[int, bool]) -> dict[int, bool]:
        """A subtree is open when some node in it can still be expanded (`nodes`: children first)."""
        for n in nodes:
            open_[n] = self._expandable(n, used) or any(open_[c] for c in self._children[n])
        return open_

    def choose(self, graph: SearchGraph, rng: random.Random, planned: list[Expansion]) -> Expansion | None:
        children = self._children
        used: Counter[int] = Counter()  # expansion slots taken beyond the written children
        virtual = Counter(self._virtual_pending)
        for step in planned:
            if step.parents:
                parent = step.parents[0]
                used[parent] += 1
                if parent not in self._above:
                    self._above[parent] = graph.ancestors(parent) | {parent, ROOT}
                for a in self._above[parent]:
                    virtual[a] += 1

        open_ = self._open_base
        if used:  # only the planned parents and their ancestors can have closed since begin()
            affected = set().union(*(self._above[p] for p in used)) - {ROOT}
            open_ = self._openness(used, sorted(affected, key=self._position.__getitem__), dict(open_))
        at = ROOT
        while True:
            if at != ROOT and self._expandable(at, used):
                return Expansion((at,))
            options = [c for c in children[at] if open_.get(c) and graph[c].evaluation is not None]
            if not options:
                return None
            at = max(options, key=lambda c: (self.uct(graph, at, c, virtual, self._norm), -c))
