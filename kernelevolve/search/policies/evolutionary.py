"""Evolutionary: parents drawn from the fittest correct nodes; mutation of one, crossover of two."""

from __future__ import annotations

import random

from kernelevolve.records.graph import Node, SearchGraph
from kernelevolve.search.policies.base import Expansion, Policy

SELECTIONS = ("tournament", "proportional")


class Evolutionary(Policy):
    name = "evolutionary"

    def __init__(
        self,
        population: int = 8,
        selection: str = "tournament",
        tournament: int = 3,
        crossover_rate: float = 0.3,
        **common,
    ) -> None:
        super().__init__(**common)
        if selection not in SELECTIONS:
            raise ValueError(f"selection {selection!r}: use one of {', '.join(SELECTIONS)}")
        if population < 1 or tournament < 1:
            raise ValueError("population and tournament size must be at least 1")
        if not 0.0 <= crossover_rate <= 1.0:
            raise ValueError("crossover_rate must be within [0, 1]")
        self.population = population
        self.selection = selection
        self.tournament = tournament
        self.crossover_rate = crossover_rate

    def options(self) -> dict:
        return {
            **super().options(),
            "population": self.population,
            "selection": self.selection,
            "tournament": self.tournament,
            "crossover_rate": self.crossover_rate,
        }

    def pool(self, graph: SearchGraph) -> list[Node]:
        """The population: the best correct nodes (ties: the earliest)."""
        pool = []
        ranked = graph.ranked()
        try:
            for node in ranked:
                if len(pool) == self.population:
                    break
                if node.correct:
                    pool.append(node)
        finally:
            ranked.close()
        return pool

    def pick(self, pool: list[Node], rng: random.Random) -> Node:
        if self.selection == "tournament":
            contestants = rng.sample(pool, min(self.tournament, len(pool)))
            return min(contestants, key=lambda n: (-n.score, n.id))
        weights = [n.score for n in pool]
        if sum(weights) <= 0:
            return rng.choice(pool)
        return rng.choices(pool, weights=weights)[0]

    def begin(self, graph: SearchGraph) -> None:
        self._pool = self.pool(graph)

    def choose(self, graph: SearchGraph, rng: random.Random, planned: list[Expansion]) -> Expansion | None:
        pool = self._pool
        if not pool:
            return None
        first = self.pick(pool, rng)
        if len(pool) >= 2 and rng.random() < self.crossover_rate:
            second = self.pick([n for n in pool if n.id != first.id], rng)
            return Expansion((first.id, second.id))
        return Expansion((first.id,))
