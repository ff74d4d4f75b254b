"""Selection reads facts the graph keeps up to date as nodes come (debuggable leaves, score
heaps, first-parent tree, MCTS openness) instead of passing over the graph each step. These
tests grow random graphs (failures, debug chains, crossovers, ties, nodes evaluated out of order,
work in flight) and check, after every change, each kept fact against its definition computed
from scratch, and each policy's picks against a fresh policy that builds everything anew.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from kernelevolve.search.graph import SearchGraph
from kernelevolve.search.policies import make_policy
from kernelevolve.search.policies.base import Expansion
from kernelevolve.search.policies.mcts import ROOT

from .helpers import add, result


def grow(seed: int, size: int = 160):
    """Yield the graph after every change: add a node (sometimes left pending) or evaluate one."""
    rng = random.Random(seed)
    graph = SearchGraph()
    pending: list[int] = []
    for i in range(size):
        evaluated = [n.id for n in graph.evaluated()]
        if i < 3 or not evaluated:
            parents = ()
        elif rng.random() < 0.08 and len(evaluated) > 1:
            parents = tuple(rng.sample(evaluated, 2))
        else:
            parents = (rng.choice(evaluated),)
        wait = rng.random() < 0.3
        fitness = rng.choice([None, 1.0, 1.5, 1.5, 2.0, rng.uniform(0.5, 3.0)])  # ties on purpose
        failure = "incorrect" if rng.random() < 0.25 else None
        add(graph, i, parents, pending=True)
        if wait:
            pending.append(i)
        else:
            graph.set_evaluation(i, result(fitness, failure))
        yield graph, rng
        if pending and rng.random() < 0.5:  # finished out of order
            done = pending.pop(rng.randrange(len(pending)))
            graph.set_evaluation(done, result(fitness, "runtime" if rng.random() < 0.3 else None))
            yield graph, rng


@pytest.mark.parametrize("seed", range(4))
def test_the_graphs_kept_facts_match_their_definitions(seed):
    for graph, _ in grow(seed):
        done = [n for n in graph.nodes() if n.evaluation is not None]
        assert graph.evaluated() == done
        assert graph.pending() == [n for n in graph.nodes() if n.evaluation is None]
        assert graph.best() == (min(done, key=lambda n: (-n.score, n.id)) if done else None)
        assert list(graph.debuggable(3)) == debuggable(graph, 3)  # kept as nodes come
        ranked = graph.ranked(fewest_children=True)
        first = [n.id for _, n in zip(range(5), ranked)]
        ranked.close()
        assert first == [n.id for n in sorted(done, key=lambda n: (-n.score, len(graph.children(n.id)), n.id))][:5]
        assert graph.root_count() == len(graph.roots())
    assert list(graph.debuggable(1)) == debuggable(graph, 1)  # another limit: built afresh


def debuggable(graph, limit):
    return [
        n.id
        for n in graph.evaluated()
        if not n.correct and not graph.children(n.id) and graph.debug_depth(n.id) < limit
    ]


@pytest.mark.parametrize("name", ["greedy", "mcts", "evolutionary"])
@pytest.mark.parametrize("seed", range(3))
def test_a_policy_that_kept_its_facts_picks_what_a_fresh_one_picks(name, seed):
    kept = make_policy(name, drafts=3)
    for graph, rng in grow(seed):
        planned = [Expansion((n.id,)) for n in graph.evaluated()[-2:] if rng.random() < 0.5]
        fresh = make_policy(name, drafts=3)
        fresh.load_state_dict(kept.state_dict())
        seed = rng.random()
        picks = kept.select(graph, 4, random.Random(seed), in_flight=planned)
        assert picks == fresh.select(graph, 4, random.Random(seed), in_flight=planned)
        for n in graph.changes_since(len(graph.changes_since(0)[0]) - 1)[0]:
            if graph[n].evaluation is not None:
                kept.observe(graph, n)


def test_mcts_openness_kept_across_calls_equals_a_full_recomputation():
    policy = make_policy("mcts", drafts=3, branching=2)
    for graph, _ in grow(7, size=200):
        policy.begin(graph)
        everything = sorted([n.id for n in graph.nodes()] + [ROOT], reverse=True)
        assert policy._open_base == policy._openness(Counter(), everything, {})


def test_greedy_ties_go_to_the_fewest_children_counting_planned_work():
    graph = SearchGraph()
    for i in range(4):
        add(graph, i, fitness=2.0)  # four tied drafts
    add(graph, 4, (0,), fitness=1.0)
    greedy = make_policy("greedy", drafts=4, debug_prob=0.0)
    picks = greedy.select(graph, 4, random.Random(0))
    # 0 has a child: 1, 2, 3 first (earliest first), then 0 and 1 tie at one (planned) child each.
    assert [p.parents for p in picks] == [(1,), (2,), (3,), (0,)]
