"""Each policy on a synthetic fitness landscape does what it promises."""

import math
import random
from collections import Counter

import pytest

from kernelevolve.evaluation.result import EvalResult, Failure, ShapeResult
from kernelevolve.search.graph import Node, SearchGraph
from kernelevolve.search.policies import MCTS, Evolutionary, Expansion, Greedy, make_policy
from tests.search.helpers import Landscape, add, drive


# -- shared rules ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["greedy", "mcts", "evolutionary"])
def test_draft_phase_comes_first_and_waits_for_results(name):
    policy = make_policy(name, drafts=4)
    g = SearchGraph()
    first = policy.select(g, 6, random.Random(0))
    # Four drafts; nothing to improve until one is evaluated, so it waits instead of over-drafting.
    assert first == [Expansion(())] * 4
    assert policy.select(g, 2, random.Random(0), in_flight=first) == []


@pytest.mark.parametrize("name", ["greedy", "mcts", "evolutionary"])
def test_failed_nodes_get_debug_attempts_up_to_the_depth_limit(name):
    policy = make_policy(name, drafts=2, max_debug_depth=2, debug_prob=1.0)
    land = Landscape(seed=3, fix_rate=0.0, fail_rate=1.0)  # nothing ever works
    g = drive(policy, land, steps=12)
    debug_nodes = [n.id for n in g.nodes() if g.kind(n.id) == "debug"]
    assert debug_nodes, "failed drafts were never debugged"
    assert max(g.debug_depth(i) for i in debug_nodes) == 2
    # Every failed line was debugged to the limit before new drafts were started.
    for root in g.roots()[:2]:
        assert max(g.debug_depth(d) for d in g.descendants(root)) == 2


def test_unknown_policy_and_bad_options_are_one_line_errors():
    with pytest.raises(ValueError, match="use one of greedy, mcts, evolutionary"):
        make_policy("beam")
    with pytest.raises(ValueError, match="exploration"):
        make_policy("mcts", exploration=-1)
    with pytest.raises(ValueError, match="unexpected keyword"):
        make_policy("greedy", exploration=1.0)


# -- greedy ------------------------------------------------------------------------------------


def test_greedy_always_expands_the_best_node():
    checked = []

    def check(graph, expansions):
        best = graph.best()
        for e in expansions:
            if e.parents and graph[e.parents[0]].correct:
                assert e.parents == (best.id,), f"expanded {e.parents} while #{best.id} was best"
                checked.append(e)

    g = drive(Greedy(drafts=3, debug_prob=0.5), Landscape(seed=1, fail_rate=0.3), steps=40, k=2, before_step=check)
    assert len(checked) > 20 and len(g) == 80
    assert g.best().score > max(g[r].score for r in g.roots())  # the landscape rewards climbing


# -- MCTS --------------------------------------------------------------------------------------


def test_mcts_visit_counts_are_backed_up_along_ancestors():
    policy = MCTS(drafts=3, branching=2)
    g = drive(policy, Landscape(seed=5, fail_rate=0.2), steps=30)
    for n in g.nodes():
        subtree = {n.id} | g.descendants(n.id)
        assert policy.visits[n.id] == len(subtree)
        assert policy.reward[n.id] == pytest.approx(sum(g[i].score for i in subtree))
    assert policy.visits[-1] == len(g)


def test_mcts_tries_untried_children_before_going_deeper():
    policy = MCTS(drafts=1, branching=3, debug_prob=0.0)
    g = SearchGraph()
    order = []

    def check(graph, expansions):
        order.extend(e.parents for e in expansions)

    drive(policy, Landscape(seed=2), steps=7, graph=g, before_step=check)
    # The draft, then its three untried children, and only then a grandchild.
    assert order[:4] == [(), (0,), (0,), (0,)]
    assert all(len(p) == 1 and p[0] in (1, 2, 3) for p in order[4:7])


def _uct(policy, parent, child, norm):
    return policy.reward[child] / policy.visits[child] / norm + policy.exploration * math.sqrt(
        math.log(policy.visits[parent]) / policy.visits[child]
    )


@pytest.mark.parametrize("exploration, expected", [(1.0, 3), (5.0, 4)])
def test_mcts_descends_by_uct(exploration, expected):
    # Two lines, each full at branching 1: #0 (2.0) -> #2 (2.0) -> #3 (2.0), and #1 (1.0) -> #4 (1.0).
    policy = MCTS(drafts=2, branching=1, exploration=exploration, debug_prob=0.0)
    g = SearchGraph()
    for node_id, parents, fit in [(0, [], 2.0), (1, [], 1.0), (2, [0], 2.0), (3, [2], 2.0), (4, [1], 1.0)]:
        add(g, node_id, parents, fitness=fit)
        policy.observe(g, node_id)
    assert (policy.visits[0], policy.visits[1], policy.visits[-1]) == (3, 2, 5)
    uct0, uct1 = _uct(policy, -1, 0, 2.0), _uct(policy, -1, 1, 2.0)
    assert (uct0 > uct1) == (expected == 3)  # exploitation wins at c=1, exploration at c=5
    assert policy.select(g, 1, random.Random(0)) == [Expansion((expected,))]


def test_mcts_spreads_parallel_picks_with_virtual_visits():
    policy = MCTS(drafts=2, branching=1, exploration=1.0, debug_prob=0.0)
    g = SearchGraph()
    for node_id, parents, fit in [(0, [], 2.0), (1, [], 1.0), (2, [0], 2.0), (3, [2], 2.0), (4, [1], 1.0)]:
        add(g, node_id, parents, fitness=fit)
        policy.observe(g, node_id)
    # Alone, c=1 picks #3; with #3's expansion in flight the other line's #4 wins the second slot.
    assert policy.select(g, 2, random.Random(0)) == [Expansion((3,)), Expansion((4,))]


def test_mcts_state_round_trips():
    policy = MCTS(drafts=2)
    g = drive(policy, Landscape(seed=9), steps=10)
    again = MCTS(drafts=2)
    again.load_state_dict(policy.state_dict())
    assert again.select(g, 3, random.Random(4)) == policy.select(g, 3, random.Random(4))


# -- evolutionary ------------------------------------------------------------------------------


@pytest.mark.parametrize("selection", ["tournament", "proportional"])
def test_evolutionary_selection_pressure(selection):
    g = SearchGraph()
    for i in range(8):
        add(g, i, fitness=0.5 + 0.25 * i)  # 0.5 .. 2.25
    policy = Evolutionary(drafts=1, population=8, selection=selection, crossover_rate=0.0)
    rng = random.Random(0)
    picks = Counter(policy.select(g, 1, rng)[0].parents[0] for _ in range(2000))
    mean_pick = sum(g[i].score * c for i, c in picks.items()) / 2000
    mean_pop = sum(g[i].score for i in range(8)) / 8
    assert mean_pick > mean_pop + 0.1
    assert picks[7] > 2 * picks[0]


def test_evolutionary_population_is_the_fittest():
    g = SearchGraph()
    for i in range(10):
        add(g, i, fitness=1.0 + i)
    add(g, 10, failure="incorrect")
    policy = Evolutionary(drafts=1, population=4, debug_prob=0.0)
    parents = {p for _ in range(300) for p in policy.select(g, 1, random.Random(_))[0].parents}
    assert parents <= {6, 7, 8, 9}


def test_evolutionary_crossover_children_have_two_parents():
    policy = Evolutionary(drafts=3, crossover_rate=1.0)
    g = drive(policy, Landscape(seed=4), steps=20)
    crossovers = [n for n in g.nodes() if g.kind(n.id) == "crossover"]
    assert len(crossovers) == 17  # every step after the three drafts
    assert all(len(n.parents) == 2 and n.parents[0] != n.parents[1] for n in crossovers)
    assert all(set(g.g.predecessors(n.id)) == set(n.parents) for n in crossovers)


def test_evolutionary_mixes_mutation_and_crossover():
    g = drive(Evolutionary(drafts=3, crossover_rate=0.3), Landscape(seed=6), steps=60)
    kinds = Counter(g.kind(n.id) for n in g.nodes())
    assert kinds["crossover"] > 5 and kinds["improve"] > 20


# -- greedy under the interpreter: every correct node scores the same ----------------------------


def _untimed(correct=True, failure=None, message=""):
    shapes = [ShapeResult("M=4,N=256 bfloat16", {"M": 4, "N": 256}, "bfloat16", correct, failure, max_abs_err=1e-3)]
    if failure:
        return EvalResult.failed(Failure(failure), message, shapes=shapes)
    return EvalResult(correct=True, shapes=shapes)


def test_greedy_explores_equally_correct_nodes_breadth_first():
    """Was: under the interpreter every correct node ties and greedy only ever expanded node 0."""
    graph = SearchGraph()
    for i in range(3):
        graph.add(Node(i, (), f"# {i}"))
        graph.set_evaluation(i, _untimed())
    policy = make_policy("greedy", drafts=3, max_debug_depth=0)
    rng = random.Random(0)
    chosen = []
    for step in range(6):
        (expansion,) = policy.select(graph, 1, rng)
        chosen.append(expansion.parents[0])
        child = graph.add(Node(3 + step, expansion.parents, "# child"))
        graph.set_evaluation(child.id, _untimed())
    assert chosen[:3] == [0, 1, 2] and len(set(chosen)) > 3


def test_greedy_still_takes_the_fastest_when_timed():
    graph = SearchGraph()
    for i, speed in enumerate([1.0, 2.0, 1.5]):
        shape = ShapeResult("N=8 float32", {"N": 8}, "float32", True, latency_ms=1.0, baseline_ms=speed)
        graph.add(Node(i, (), f"# {i}"))
        graph.set_evaluation(i, EvalResult(correct=True, timed=True, device="cuda", shapes=[shape]))
    policy = make_policy("greedy", drafts=3, max_debug_depth=0)
    assert [e.parents for e in policy.select(graph, 2, random.Random(0))] == [(1,), (1,)]
