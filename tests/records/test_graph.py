"""The search graph: derived kinds, debug depth, best descendant, and the selection surrogate."""

import pytest

from kernelevolve.search.graph import SearchGraph
from tests.search.helpers import add


def test_kind_is_derived_from_the_parents():
    g = SearchGraph()
    add(g, 0, fitness=1.2)
    add(g, 1, failure="compile")
    add(g, 2, parents=[0], fitness=1.5)
    add(g, 3, parents=[1], failure="runtime")
    add(g, 4, parents=[2, 0], fitness=1.1)
    assert [g.kind(i) for i in range(5)] == ["draft", "draft", "improve", "debug", "crossover"]
    assert g[4].parents == (2, 0) and g.children(0) == [2, 4]


def test_debug_depth_counts_consecutive_debug_steps():
    g = SearchGraph()
    add(g, 0, failure="compile")
    add(g, 1, parents=[0], failure="runtime")
    add(g, 2, parents=[1], failure="incorrect")
    add(g, 3, parents=[2], fitness=1.0)
    add(g, 4, parents=[3], failure="incorrect")  # improve of a correct node that failed: depth 0
    assert [g.debug_depth(i) for i in range(5)] == [0, 1, 2, 3, 0]
    add(g, 5, parents=[4], failure="incorrect")
    assert g.debug_depth(5) == 1


def test_best_descendant_and_best():
    g = SearchGraph()
    add(g, 0, fitness=1.0)
    add(g, 1, parents=[0], fitness=2.0)
    add(g, 2, parents=[1], fitness=3.0)
    add(g, 3, parents=[0], failure="timeout")
    add(g, 4, fitness=0.5)
    add(g, 5, parents=[2], pending=True)
    assert g.best_descendant(0) == 2 and g.best_descendant(2) is None and g.best_descendant(4) is None
    assert g.best().id == 2
    assert g.lineage(5) == [0, 1, 2]
    assert [n.id for n in g.pending()] == [5]


def test_score_is_a_surrogate_only_where_untimed():
    g = SearchGraph()
    timed = add(g, 0, fitness=2.5)
    untimed = add(g, 1, fitness=None)
    failed = add(g, 2, failure="incorrect")
    pending = add(g, 3, pending=True)
    assert (timed.fitness, timed.score) == (2.5, 2.5)
    assert (untimed.fitness, untimed.score) == (None, 1.0)
    assert (failed.fitness, failed.score) == (0.0, 0.0)
    assert (pending.fitness, pending.score, pending.state) == (None, 0.0, "pending")


def test_unknown_parent_and_duplicate_ids_are_refused():
    g = SearchGraph()
    add(g, 0)
    with pytest.raises(ValueError, match="parent 7"):
        add(g, 1, parents=[7])
    with pytest.raises(ValueError, match="already"):
        add(g, 0)
