"""MCTS: UCT over the search graph, with a virtual root above the drafts.

Each evaluated node backs its score (the selection surrogate) up to all its ancestors and the
root: visits N and total reward W. Selection walks down from the root: a correct node with
fewer than `branching` children is expanded (an untried child comes before any deeper
exploration); otherwise the walk moves to the child with the highest

    UCT(c) = (W(c) / N(c)) / best_score + exploration * sqrt(ln N(parent) / N(c)),

rewards being divided by the best score so far so that speedups of any size stay comparable
with the exploration term. Work in flight counts as visits with reward 0 (a virtual loss) along
its first-parent chain (where the walk goes; a walk over every ancestor would cost O(n) per
step), so k selections in one step spread over the tree. Failed nodes are not expanded by UCT: the shared
debug rule handles them; a debug child that passes still joins the tree under its parent.
The tree is the graph's first-parent tree (a crossover node, made by another policy before a
policy switch, hangs under its first parent).
"""

from __future__ import annotations

import math
import random
from collections import ChainMap, Counter

from kernelevolve.records.graph import SearchGraph
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
        # Subtree openness, kept across calls for one graph (see _track_openness).
        self._open_graph: SearchGraph | None = None
        self._open: dict[int, bool] = {}
        self._cursor = 0

    def options(self) -> dict:
        return {**super().options(), "exploration": self.exploration, "branching": self.branching}

    # -- back-propagation -----------------------------------------------------------------
    def observe(self, graph: SearchGraph, node_id: int) -> None:
        score = graph[node_id].score
        for n in graph.ancestors(node_id) | {node_id, ROOT}:
            self.visits[n] += 1
            self.reward[n] = self.reward.get(n, 0.0) + score

    def state_dict(self) -> dict:
        return {
            "visits": {str(k): v for k, v in self.visits.items()},
            "reward": {str(k): v for k, v in self.reward.items()},
        }

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
        self._graph = graph
        self._virtual: Counter[int] = Counter()  # work in flight, then this call's planned steps
        for node in graph.pending():  # in flight: few
            for a in self._chain(node.id):
                self._virtual[a] += 1
        best = graph.best()
        self._norm = best.score if best is not None and best.score > 0 else 1.0
        self._open_base = self._track_openness(graph)
        self._used: Counter[int] = Counter()  # expansion slots taken beyond the written children
        self._overlay = ChainMap({}, self._open_base)  # this call's changes stay on top
        self._planned_seen = 0

    def _chain(self, n: int) -> list[int]:
        """`n`, its first-parent ancestors and the root: the path a walk takes to reach it."""
        chain = [n]
        while self._graph[n].parents:
            n = self._graph[n].parents[0]
            chain.append(n)
        return chain + [ROOT]

    def _children(self, n: int) -> list[int]:
        return self._graph.tree_children(None if n == ROOT else n)

    def _expandable(self, n: int, used: Counter) -> bool:
        return n != ROOT and self._graph[n].correct and len(self._children(n)) + used[n] < self.branching

    def _openness(self, used: Counter, nodes, open_: dict[int, bool]) -> dict[int, bool]:
        """A subtree is open when some node in it can still be expanded (`nodes`: children first)."""
        for n in nodes:
            open_[n] = self._expandable(n, used) or any(open_[c] for c in self._children(n))
        return open_

    def _track_openness(self, graph: SearchGraph) -> dict[int, bool]:
        """Which subtrees are open, kept across calls: only nodes added or evaluated since the last
        call, and their tree ancestors, can have changed (a pass over the graph the first time)."""
        if self._open_graph is not graph:
            self._open_graph, self._open, self._cursor = graph, {}, 0
        changed, self._cursor = graph.changes_since(self._cursor)
        touched = {ROOT}
        for n in changed:
            while n != ROOT and n not in touched:
                touched.add(n)
                parents = graph[n].parents
                n = parents[0] if parents else ROOT
        return self._openness(Counter(), sorted(touched, reverse=True), self._open)

    def choose(self, graph: SearchGraph, rng: random.Random, planned: list[Expansion]) -> Expansion | None:
        # Steps planned since the last call (this select call's, and the engine's in flight at the
        # first): their parents take expansion slots and virtual visits; only the parents' chains
        # can close, and they are recomputed on top of the kept openness.
        used, virtual, open_ = self._used, self._virtual, self._overlay
        for step in planned[self._planned_seen :]:
            if step.parents:
                parent = step.parents[0]
                used[parent] += 1
                chain = self._chain(parent)
                for a in chain:
                    virtual[a] += 1
                self._openness(used, chain, open_)
        self._planned_seen = len(planned)
        at = ROOT
        while True:
            if at != ROOT and self._expandable(at, used):
                return Expansion((at,))
            options = [c for c in self._children(at) if open_.get(c) and graph[c].evaluation is not None]
            if not options:
                return None
            at = max(options, key=lambda c: (self.uct(graph, at, c, virtual, self._norm), -c))
