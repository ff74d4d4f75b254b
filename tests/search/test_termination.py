"""Each termination rule fires exactly when its limit is reached, and names itself."""

from kernelevolve.search.graph import SearchGraph
from kernelevolve.search.termination import Limits, nodes_since_improvement
from kernelevolve.spec import Budget
from tests.search.helpers import add


def _graph(fits):
    g = SearchGraph()
    for i, f in enumerate(fits):
        add(g, i, fitness=f) if f is not None else add(g, i, failure="incorrect")
    return g


def test_node_budget_counts_pending_nodes():
    g = _graph([1.0, 1.1])
    limits = Limits(max_nodes=3)
    assert limits.stop_reason(g, 0, 0, 0) is None
    add(g, 2, pending=True)
    assert limits.stop_reason(g, 0, 0, 0) == "nodes"


def test_wall_clock_tokens_and_cost():
    g = _graph([1.0])
    assert Limits(wall_clock_s=60).stop_reason(g, 59.9, 0, 0) is None
    assert Limits(wall_clock_s=60).stop_reason(g, 60.0, 0, 0) == "wall_clock"
    assert Limits(tokens=1000).stop_reason(g, 0, 999, 0) is None
    assert Limits(tokens=1000).stop_reason(g, 0, 1000, 0) == "tokens"
    assert Limits(cost_usd=2.0).stop_reason(g, 0, 0, 2.5) == "cost"


def test_stall_counts_nodes_without_a_new_best():
    g = _graph([1.0, 1.5, 1.2, None, 1.5])
    assert nodes_since_improvement(g) == 3  # 1.2, failure, and an equal 1.5 are no improvement
    assert Limits(stall=4).stop_reason(g, 0, 0, 0) is None
    assert Limits(stall=3).stop_reason(g, 0, 0, 0) == "stall"
    add(g, 5, fitness=1.6)
    assert Limits(stall=3).stop_reason(g, 0, 0, 0) is None
    assert nodes_since_improvement(_graph([None, None])) == 2


def test_fitness_target_needs_a_real_fitness():
    assert Limits(target_fitness=1.5).stop_reason(_graph([1.2, 1.6]), 0, 0, 0) == "target_fitness"
    assert Limits(target_fitness=1.5).stop_reason(_graph([1.2, 1.4]), 0, 0, 0) is None
    # On the interpreter a correct node has no fitness: its surrogate score (1.0) never counts.
    assert Limits(target_fitness=0.5).stop_reason(_untimed(), 0, 0, 0) is None


def _untimed():
    g = SearchGraph()
    add(g, 0, fitness=None)
    return g


def test_limits_come_from_the_spec_budget_with_overrides_on_top():
    budget = Budget(nodes=50, wall_clock_s=3600, stall=10)
    limits = Limits.from_budget(budget, max_nodes=8, stall=None, tokens=5000)
    assert (limits.max_nodes, limits.wall_clock_s, limits.stall, limits.tokens) == (8, 3600, 10, 5000)
    assert Limits.from_dict(limits.to_dict()) == limits
