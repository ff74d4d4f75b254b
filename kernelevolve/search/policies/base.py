"""The selection-policy interface shared by greedy, MCTS and evolutionary search.

Every policy runs the same outer rules, as in the paper: a draft phase (N independent drafts),
then each expansion slot either debugs a failed node (up to a depth limit) or asks the
policy-specific `choose` which node(s) to improve. `select(graph, k)` fills k slots at once so the
engine can evaluate them in parallel; expansions still in flight are passed in so that two slots
do not debug the same node or overshoot the draft count.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any, Iterable

from kernelevolve.records.graph import SearchGraph


@dataclass(frozen=True)
class Expansion:
    """One step to take: no parent = draft, one = debug/improve, two = crossover."""

    parents: tuple[int, ...] = ()


class _Debuggable(Sequence):
    """The graph's sorted debuggable ids less the busy ones, as a sequence (what `rng.choice` needs)
    without copying: indexing skips the few busy ids in O(busy * log n)."""

    def __init__(self, ids, busy: set[int]) -> None:
        self.ids = ids
        self.busy = sorted(ids.index(b) for b in busy if b in ids)  # their positions in `ids`

    def __len__(self) -> int:
        return len(self.ids) - len(self.busy)

    def __getitem__(self, i: int) -> int:
        if not 0 <= i < len(self):
            raise IndexError(i)
        for position in self.busy:
            if position <= i:
                i += 1
        return self.ids[i]


class Policy:
    name = "base"

    def __init__(self, drafts: int = 3, max_debug_depth: int = 3, debug_prob: float = 0.5) -> None:
        if drafts < 1:
            raise ValueError("drafts must be at least 1")
        if max_debug_depth < 0:
            raise ValueError("max_debug_depth must be 0 or more")
        if not 0.0 <= debug_prob <= 1.0:
            raise ValueError("debug_prob must be within [0, 1]")
        self.drafts = drafts
        self.max_debug_depth = max_debug_depth
        self.debug_prob = debug_prob

    # -- the interface the engine uses ----------------------------------------------------
    def select(
        self, graph: SearchGraph, k: int, rng: random.Random, in_flight: Iterable[Expansion] = ()
    ) -> list[Expansion]:
        """Up to k expansions; fewer (maybe none) when the rest must wait for running work."""
        planned = list(in_flight)
        out: list[Expansion] = []
        # What each step needs is kept by the graph as nodes come (no pass over it here).
        self._roots = graph.root_count()
        self._failed_leaves = graph.debuggable(self.max_debug_depth)
        self.begin(graph)
        for _ in range(k):
            step = self._select_one(graph, rng, planned)
            if step is None:
                break
            out.append(step)
            planned.append(step)
        return out

    def begin(self, graph: SearchGraph) -> None:
        """Hook: precompute what `choose` needs for this call of `select`."""

    def observe(self, graph: SearchGraph, node_id: int) -> None:
        """Called once per node after its evaluation is recorded."""

    def state_dict(self) -> dict[str, Any]:
        """Whatever the policy learned that the graph does not hold (saved with each evaluation)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass

    def options(self) -> dict[str, Any]:
        return {"drafts": self.drafts, "max_debug_depth": self.max_debug_depth, "debug_prob": self.debug_prob}

    # -- policy-specific ------------------------------------------------------------------
    def choose(self, graph: SearchGraph, rng: random.Random, planned: list[Expansion]) -> Expansion | None:
        """The improve/crossover step; None when no node can be improved."""
        raise NotImplementedError

    # -- shared rules ---------------------------------------------------------------------
    def debuggable(self, graph: SearchGraph, planned: list[Expansion]) -> _Debuggable:
        """Failed leaves whose debug chain is still below the depth limit and not being debugged."""
        return _Debuggable(self._failed_leaves, {p for e in planned for p in e.parents})

    def _select_one(self, graph: SearchGraph, rng: random.Random, planned: list[Expansion]) -> Expansion | None:
        drafts_made = self._roots + sum(1 for e in planned if not e.parents)
        if drafts_made < self.drafts:
            return Expansion(())
        debuggable = self.debuggable(graph, planned)
        if debuggable and rng.random() < self.debug_prob:
            return Expansion((rng.choice(debuggable),))
        step = self.choose(graph, rng, planned)
        if step is not None:
            return step
        if debuggable:
            return Expansion((rng.choice(debuggable),))
        if planned or graph.has_pending():
            return None  # running work may open new options: wait for it
        return Expansion(())  # nothing left to improve or debug: start afresh
