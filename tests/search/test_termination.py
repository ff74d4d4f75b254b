"""Each termination rule fires exactly when its limit is reached, and names itself."""

from kernelevolve.search.graph import SearchGraph
from kernelevolve.search.termination import nodes_since_improvement, stop_reason
from kernelevolve.spec import Budget
from tests.search.helpers import add


def _graph(fits):
    g = SearchGraph()
    for i, f in enumerate(fits):
        add(g, i, fitness=f) if f is not None else add(g, i, failure="incorrect")
    return g


def test_node_budget_counts_pending_nodes():
    g = _graph([1.0, 1.1])
    limits = Budget(max_nodes=3)
    assert stop_reason(limits, g, 0, 0, 0) is None
    add(g, 2, pending=True)
    assert stop_reason(limits, g, 0, 0, 0) == "nodes"


def test_wall_clock_tokens_and_cost():
    g = _graph([1.0])
    assert stop_reason(Budget(wall_clock_s=60), g, 59.9, 0, 0) is None
    assert stop_reason(Budget(wall_clock_s=60), g, 60.0, 0, 0) == "wall_clock"
    assert stop_reason(Budget(tokens=1000), g, 0, 999, 0) is None
    assert stop_reason(Budget(tokens=1000), g, 0, 1000, 0) == "tokens"
    assert stop_reason(Budget(cost_usd=2.0), g, 0, 0, 2.5) == "cost"


def test_stall_counts_nodes_without_a_new_best():
    g = _graph([1.0, 1.5, 1.2, None, 1.5])
    assert nodes_since_improvement(g) == 3  # 1.2, failure, and an equal 1.5 are no improvement
    assert stop_reason(Budget(stall=4), g, 0, 0, 0) is None
    assert stop_reason(Budget(stall=3), g, 0, 0, 0) == "stall"
    add(g, 5, fitness=1.6)
    assert stop_reason(Budget(stall=3), g, 0, 0, 0) is None
    assert nodes_since_improvement(_graph([None, None])) == 2


def test_fitness_target_needs_a_real_fitness():
    assert stop_reason(Budget(target_fitness=1.5), _graph([1.2, 1.6]), 0, 0, 0) == "target_fitness"
    assert stop_reason(Budget(target_fitness=1.5), _graph([1.2, 1.4]), 0, 0, 0) is None
    # On the interpreter a correct node has no fitness: its surrogate score (1.0) never counts.
    assert stop_reason(Budget(target_fitness=0.5), _untimed(), 0, 0, 0) is None


def _untimed():
    g = SearchGraph()
    add(g, 0, fitness=None)
    return g


def test_limits_come_from_the_spec_budget_with_overrides_on_top():
    budget = Budget(nodes=50, wall_clock_s=3600, stall=10)  # `nodes` as a spec's YAML names it
    limits = budget.with_overrides(max_nodes=8, stall=None, tokens=5000)
    assert (limits.max_nodes, limits.wall_clock_s, limits.stall, limits.tokens) == (8, 3600, 10, 5000)
    assert Budget.model_validate(limits.model_dump()) == limits  # as a run's settings store it
    assert budget.max_nodes == 50
