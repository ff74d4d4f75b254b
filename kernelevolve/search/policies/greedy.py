"""Greedy: always improve the best node so far.

Ties (equal score) go to the node with the fewest children, then the earliest: under the
interpreter every correct node scores the same (untimed), and without this rule greedy would
expand node 0 for ever; with it, equally correct nodes are explored breadth-first.
"""

from __future__ import annotations

import random

from kernelevolve.search.graph import SearchGraph
from kernelevolve.search.policies.base import Expansion, Policy


class Greedy(Policy):
    name = "greedy"

    def begin(self, graph: SearchGraph) -> None:
        self._best = graph.best()
        top = self._best.score if self._best is not None else None
        self._tied = [n for n in graph.evaluated() if n.correct and n.score == top] if top else []

    def choose(self, graph: SearchGraph, rng: random.Random, planned: list[Expansion]) -> Expansion | None:
        best = self._best
        if best is None or not best.correct:
            return None
        if self._tied:
            busy = [p for e in planned for p in e.parents]
            best = min(self._tied, key=lambda n: (len(graph.children(n.id)) + busy.count(n.id), n.id))
        return Expansion((best.id,))
