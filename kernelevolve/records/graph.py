"""The search graph: every node is one complete kernel candidate, every edge one operator step.

Edges run parent -> child; a node's parents keep their order (crossover: first parent first).
Only what cannot be recomputed is stored on a node; its kind, debug depth and best descendant
are derived from the graph.
"""

from __future__ import annotations

import bisect
import heapq
import time
from dataclasses import dataclass, field

from sortedcontainers import SortedList

from kernelevolve.records.result import EvalResult, static_score
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
        """Selection surrogate, never shown as a speedup: the fitness when timed; for a correct untimed
        candidate its static estimate's score (records.result.static_score: within (0.5, 1), 0.5 when the
        estimate failed), or 1.0 when it has none; 0.0 for a failed, pending or held one."""
        if self.held:
            return 0.0
        fit = self.fitness
        if fit is not None:
            return fit
        if not self.correct:
            return 0.0
        static = self.evaluation.static
        if static is None:
            return 1.0
        return static_score(static) or 0.5


class _LazyHeap:
    """Node ids ordered by `key(id)`, which may change: an entry pushed with a key is current while
    the node's key is still that; stale entries are dropped when they come up. Push after every
    change that can move a node."""

    def __init__(self, key) -> None:
        self.key = key
        self.heap: list[tuple] = []

    def push(self, node_id: int) -> None:
        heapq.heappush(self.heap, self.key(node_id))

    def ordered(self):
        """Current entries in order, popped one at a time and pushed back when the caller stops."""
        taken, seen = [], set()
        try:
            while self.heap:
                entry = heapq.heappop(self.heap)
                node_id = entry[-1]
                if node_id in seen or self.key(node_id) != entry:
                    continue
                seen.add(node_id)
                taken.append(entry)
                yield node_id
        finally:
            for entry in taken:
                heapq.heappush(self.heap, entry)


class SearchGraph:
    """Nodes of one run on a networkx DiGraph (attribute "node" holds the Node).

    What selection asks at every step is kept up to date as nodes are added and evaluated (the
    evaluated and pending nodes, the failed leaves, a heap of scores, first-parent tree children),
    so that one selection step costs O(log n), not a pass over the graph."""

    def __init__(self) -> None:
        import networkx as nx  # here, not at the top: commands that never build a graph start 0.3 s sooner

        self.g = nx.DiGraph()
        self._ordered: list[Node] = []  # id order, kept as nodes are added
        self._evaluated: list[Node] = []  # id order
        self._evaluated_ids: set[int] = set()
        self._pending: dict[int, Node] = {}
        self._roots = 0
        self._failed_leaves: set[int] = set()  # evaluated, not correct, no children
        self._debug_limit: int | None = None
        self._debuggable = SortedList()  # failed leaves below the debug-depth limit, by id
        self._tree_children: dict[int, list[int]] = {}  # first-parent tree (MCTS); roots under None
        self._by_score = _LazyHeap(lambda n: (-self[n].score, n))
        self._by_children = _LazyHeap(lambda n: (-self[n].score, self.g.out_degree(n), n))
        self._depth: dict[int, int] = {}  # debug depth, once a node's parents are all evaluated
        self._changes: list[int] = []  # ids of nodes as they are added or evaluated (changes_since)

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
            self._leaf(p, False)
        for p in set(node.parents):
            self._rank(p)  # one more child
        self._roots += not node.parents
        bisect.insort(self._tree_children.setdefault(node.parents[0] if node.parents else None, []), node.id)
        self._index(node)
        return node

    def set_evaluation(self, node_id: int, evaluation: EvalResult) -> Node:
        node = self[node_id]
        again = node.evaluation is not None
        node.evaluation = evaluation
        if again:  # a re-evaluation may change what its children are (debug or improve)
            self._depth.clear()
            self._debug_limit = None
        self._index(node)
        return node

    def _index(self, node: Node) -> None:
        self._changes.append(node.id)
        if node.evaluation is None:
            self._pending[node.id] = node
            return
        self._pending.pop(node.id, None)
        if node.id not in self._evaluated_ids:
            self._evaluated_ids.add(node.id)
            bisect.insort(self._evaluated, node, key=lambda n: n.id)
        self._leaf(node.id, not node.correct and not self.g.out_degree(node.id))
        self._rank(node.id)

    def _leaf(self, node_id: int, failed_leaf: bool) -> None:
        if failed_leaf:
            self._failed_leaves.add(node_id)
            if (
                self._debug_limit is not None
                and node_id not in self._debuggable
                and self.debug_depth(node_id) < self._debug_limit
            ):
                self._debuggable.add(node_id)
        else:
            self._failed_leaves.discard(node_id)
            self._debuggable.discard(node_id)

    def _rank(self, node_id: int) -> None:
        if self[node_id].evaluation is not None:
            self._by_score.push(node_id)
            self._by_children.push(node_id)

    def ranked(self, fewest_children: bool = False):
        """Evaluated nodes by (-score, id), or by (-score, number of children, id): a generator to
        take the first few from (each costs O(log n)); close it (or let it end) when done."""
        ids = (self._by_children if fewest_children else self._by_score).ordered()
        try:
            for node_id in ids:
                yield self[node_id]
        finally:
            ids.close()

    def next_id(self) -> int:
        return self._ordered[-1].id + 1 if self._ordered else 0

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
        return list(self._evaluated)

    def pending(self) -> list[Node]:
        return sorted(self._pending.values(), key=lambda n: n.id)

    def changes_since(self, cursor: int) -> tuple[list[int], int]:
        """Ids of the nodes added or evaluated since `cursor` (0: all), and the cursor for next time."""
        return self._changes[cursor:], len(self._changes)

    def has_pending(self) -> bool:
        return bool(self._pending)

    def root_count(self) -> int:
        return self._roots

    def debuggable(self, limit: int) -> SortedList:
        """Failed evaluated nodes that nothing was made from yet and whose debug chain is shorter
        than `limit`, by id (what the debug rule picks from). Read-only for the caller."""
        if limit != self._debug_limit:
            self._debug_limit = limit
            self._debuggable = SortedList(i for i in self._failed_leaves if self.debug_depth(i) < limit)
        return self._debuggable

    def tree_children(self, node_id: int | None) -> list[int]:
        """Children in the first-parent tree (None: the drafts), in the order they were added."""
        return self._tree_children.get(node_id, [])

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
        known = self._depth.get(node_id)
        if known is not None:
            return known
        depth = 1 + self.debug_depth(self[node_id].parents[0]) if self.kind(node_id) == "debug" else 0
        if all(self[p].evaluation is not None for p in self[node_id].parents):  # its kind is settled
            self._depth[node_id] = depth
        return depth

    def ancestors(self, node_id: int) -> set[int]:
        import networkx as nx

        return nx.ancestors(self.g, node_id)

    def descendants(self, node_id: int) -> set[int]:
        import networkx as nx

        return nx.descendants(self.g, node_id)

    def best_descendant(self, node_id: int) -> int | None:
        """The best-scoring evaluated descendant (ties: the earliest), None if none."""
        ids = [i for i in self.descendants(node_id) if self[i].evaluation is not None]
        return min(ids, key=lambda i: (-self[i].score, i)) if ids else None

    def best(self) -> Node | None:
        """The best evaluated node by score (ties: the earliest); None if nothing evaluated."""
        ranked = self.ranked()
        try:
            return next(ranked, None)
        finally:
            ranked.close()

    def lineage(self, node_id: int, limit: int | None = None) -> list[int]:
        """First-parent chain above a node, oldest first (the node itself excluded)."""
        chain: list[int] = []
        parents = self[node_id].parents
        while parents and (limit is None or len(chain) < limit):
            chain.append(parents[0])
            parents = self[parents[0]].parents
        return chain[::-1]


def best_nodes(graph: SearchGraph, limit: int = 5) -> list[Node]:
    """The best correct nodes not held for review, by (-score, id): at most `limit`."""
    best: list[Node] = []
    ranked = graph.ranked()
    try:
        for node in ranked:
            if len(best) == limit:
                break
            if node.correct and not node.held:
                best.append(node)
    finally:
        ranked.close()
    return best
