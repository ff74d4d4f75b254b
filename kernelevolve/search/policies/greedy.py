"""Greedy: always improve the best node so far (ties: the earliest)."""

from __future__ import annotations

import random

from kernelevolve.search.graph import SearchGraph
from kernelevolve.search.policies.base import Expansion, Policy


class Greedy(Policy):
    name = "greedy"

    def begin(self, graph: SearchGraph) -> None:
        self._best = graph.best()

    def choose(self, graph: SearchGraph, rng: random.Random, planned: list[Expansion]) -> Expansion | None:
        best = self._best
        if best is None or not best.correct:
            return None
        return Expansion((best.id,))
