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
"""

from __future__ import annotations

import math
import random
from collections import Counter

import networkx as nx

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

    def choose(self, graph: SearchGraph, rng: random.Random, planned: list[Expansion]) -> Expansion | None:
        children = {ROOT: graph.roots()}
        for n in graph.nodes():
            children[n.id] = graph.children(n.id)
        used = Counter({k: len(v) for k, v in children.items()})  # expansion slots taken
        virtual: Counter[int] = Counter()
        for node in graph.pending():
            for a in graph.ancestors(node.id) | {node.id, ROOT}:
                virtual[a] += 1
        for step in planned:
            if step.parents:
                used[step.parents[0]] += 1
                for a in graph.ancestors(step.parents[0]) | {step.parents[0], ROOT}:
                    virtual[a] += 1
        best = graph.best()
        norm = best.score if best is not None and best.score > 0 else 1.0

        def expandable(n: int) -> bool:
            return n != ROOT and graph[n].correct and used[n] < self.branching

        # A subtree is open when some node in it can still be expanded (children before parents).
        open_: dict[int, bool] = {}
        for n in reversed(list(nx.topological_sort(graph.g))):
            open_[n] = expandable(n) or any(open_[c] for c in children[n])
        at = ROOT
        while True:
            if expandable(at):
                return Expansion((at,))
            options = [c for c in children[at] if open_.get(c) and graph[c].evaluation is not None]
            if not options:
                return None
            at = max(options, key=lambda c: (self.uct(graph, at, c, virtual, norm), -c))

