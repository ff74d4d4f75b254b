"""Greedy: always improve the best node so far.

Ties (equal score) go to the node with the fewest children, then the earliest: under the
interpreter every correct node scores the same (untimed), and without this rule greedy would
expand node 0 for ever; with it, equally correct nodes are explored breadth-first.
"""

from __future__ import annotations

import random

from kernelevolve.records.graph import SearchGraph
from kernelevolve.search.policies.base import Expansion, Policy


class Greedy(Policy):
    name = "greedy"

    def begin(self, graph: SearchGraph) -> None:
        self._best = graph.best()

    def choose(self, graph: SearchGraph, rng: random.Random, planned: list[Expansion]) -> Expansion | None:
        best = self._best
        if best is None or not best.correct:
            return None
        if best.score:  # among the nodes of the top score: fewest children (planned ones count), then earliest
            busy = [p for e in planned for p in e.parents]
            contenders = []
            ranked = graph.ranked(fewest_children=True)
            try:
                for node in ranked:  # by (-score, children, id): the first idle one beats every idle one after it
                    if node.score != best.score:
                        break
                    if node.correct:
                        contenders.append(node)
                        if node.id not in busy:
                            break
            finally:
                ranked.close()
            best = min(contenders, key=lambda n: (len(graph.children(n.id)) + busy.count(n.id), n.id))
        return Expansion((best.id,))
