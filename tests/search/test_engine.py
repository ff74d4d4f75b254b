"""The engine: budgets, crash recovery from the database, memory hooks, operator failures."""

import itertools

import pytest

from kernelevolve.runs.session import RunSettings, build_engine, start_run
from kernelevolve.spec import Budget
from tests.search.helpers import SimulatedKill, SyntheticEvaluator, SyntheticOperator
from kernelevolve.memory import Repository


def _start(db_url, spec, policy="greedy", nodes=12, seed=3, **limits):
    repo = Repository(db_url)
    settings = RunSettings(
        policy=policy,
        policy_options={"drafts": 3},
        limits=Budget(max_nodes=nodes, **limits),
        device="interpret",
        seed=seed,
    )
    return repo, start_run(repo, spec, settings)


def _engine(repo, run_id, operator=None, evaluator=None, **kw):
    return build_engine(
        repo,
        run_id,
        operator=operator or SyntheticOperator(fail_rate=0.2),
        evaluator=evaluator or SyntheticEvaluator(parallelism=2),
        **kw,
    )


@pytest.mark.parametrize("policy", ["greedy", "mcts", "evolutionary"])
def test_run_spends_its_node_budget_and_records_everything(tmp_path, spec, policy):
    repo, run_id = _start(f"sqlite:///{tmp_path / 'e.db'}", spec, policy, nodes=15)
    engine = _engine(repo, run_id)
    assert engine.run() == "nodes"
    run = repo.run(run_id)
    graph = repo.load_graph(run_id)
    assert (run.status, run.termination_reason) == ("finished", "nodes")
    assert len(graph) == 15 and not graph.pending()
    assert sorted(engine.evaluator.calls) == _expected_calls(graph)  # each node once, a new best twice
    assert {graph.kind(n.id) for n in graph.nodes()} >= {"draft", "improve"}
    assert len(graph.roots()) >= 3


def test_same_seed_same_search(tmp_path, spec):
    databases = itertools.count()

    def search(seed):
        repo, run_id = _start(f"sqlite:///{tmp_path / f'{seed}-{next(databases)}.db'}", spec, "mcts", seed=seed)
        _engine(repo, run_id, evaluator=SyntheticEvaluator(parallelism=1)).run()
        return [(n.parents, n.source) for n in repo.load_graph(run_id).nodes()]

    assert search(11) == search(11)
    assert search(11) != search(12)


def _expected_calls(graph) -> list[str]:
    """Every node's source once, and once more for each new best (the elite re-evaluation)."""
    return sorted(
        [n.source for n in graph.nodes() if n.source]
        + [n.source for n in graph.evaluated() if n.evaluation.recheck is not None]
    )


def _kill_after(n_nodes):
    def on_event(event, engine, node):
        if event == "node" and len(engine.graph) == n_nodes:
            raise SimulatedKill()  # dies right after the pending write, before the evaluation

    return on_event


@pytest.mark.parametrize("policy", ["greedy", "mcts", "evolutionary"])
def test_resume_after_a_crash_loses_and_redoes_nothing(tmp_path, spec, policy):
    repo, run_id = _start(f"sqlite:///{tmp_path / 'k.db'}", spec, policy, nodes=14)
    first = SyntheticEvaluator(parallelism=1)
    with pytest.raises(SimulatedKill):
        _engine(repo, run_id, evaluator=first, on_event=_kill_after(6)).run()
    before = repo.load_graph(run_id)
    done_before = {n.id: (n.source, n.evaluation.to_dict()) for n in before.evaluated()}
    assert [n.id for n in before.pending()] == [5] and len(done_before) == 5

    second = SyntheticEvaluator(parallelism=2)
    assert _engine(Repository(repo.url), run_id, evaluator=second).run() == "nodes"
    after = repo.load_graph(run_id)
    assert len(after) == 14 and not after.pending()
    for node_id, (source, evaluation) in done_before.items():  # never lost, never redone
        assert (after[node_id].source, after[node_id].evaluation.to_dict()) == (source, evaluation)
    assert second.calls[0] == before[5].source  # the interrupted node is evaluated first, once
    assert sorted(first.calls + second.calls) == _expected_calls(after)


def test_resumed_mcts_keeps_its_statistics(tmp_path, spec):
    repo, run_id = _start(f"sqlite:///{tmp_path / 'm.db'}", spec, "mcts", nodes=12)
    with pytest.raises(SimulatedKill):
        _engine(repo, run_id, on_event=_kill_after(7)).run()
    _engine(repo, run_id).run()
    engine = _engine(repo, run_id)  # rebuilt from the database only
    graph = engine.graph
    for n in graph.nodes():
        assert engine.policy.visits[n.id] == 1 + len(graph.descendants(n.id))


def test_resume_with_a_bigger_budget(tmp_path, spec):
    repo, run_id = _start(f"sqlite:///{tmp_path / 'b.db'}", spec, nodes=5)
    _engine(repo, run_id).run()
    assert _engine(repo, run_id, max_nodes=8).run() == "nodes"
    assert len(repo.load_graph(run_id)) == 8 and repo.run(run_id).settings["limits"]["max_nodes"] == 8


def test_a_problem_without_a_family_reads_only_insights_of_its_own_kind(tmp_path, spec):
    """A KernelBench problem has no `family:`; its insights are filed under the family its reference shows
    (here elementwise), so a campaign's attention problem never reads its MLP problem's notes."""
    spec = spec.model_copy(update={"family": ""})
    repo, run_id = _start(f"sqlite:///{tmp_path / 'f.db'}", spec, nodes=4)
    repo.add_insight("r-other", 0, "", spec.hardware, "a note of another problem without a family", source="t")
    repo.add_insight("r-other", 1, "matmul", spec.hardware, "a matmul note", source="t")
    repo.add_insight("r-other", 2, "elementwise", spec.hardware, "an elementwise note", source="t")
    repo.add_insight(run_id, 0, "", spec.hardware, "this run's own note, filed before", source="t")

    def insight_writer(spec_, child, parents, record_llm_call):
        return f"node {child.node_id}"

    op = SyntheticOperator()
    _engine(repo, run_id, operator=op, evaluator=SyntheticEvaluator(parallelism=1), insight_writer=insight_writer).run()
    first = op.contexts[0].insights
    assert "an elementwise note" in first and "this run's own note, filed before" in first
    assert "a matmul note" not in first and "a note of another problem without a family" not in first
    mine = [i for i in repo.insights(None, spec.hardware) if i.run_id == run_id and i.text.startswith("node ")]
    assert mine and {i.family for i in mine} == {"elementwise"}


def test_operator_sees_memory_and_its_calls_are_recorded(tmp_path, spec):
    repo, run_id = _start(f"sqlite:///{tmp_path / 'i.db'}", spec, nodes=8)
    repo.add_insight("r-older", 0, spec.family, spec.hardware, "masking the tail matters", source="test")
    written = []

    def insight_writer(spec_, child, parents, record_llm_call):
        written.append((child.node_id, [p.node_id for p in parents]))
        return f"node {child.node_id} was {child.kind}" if child.kind == "improve" else None

    op = SyntheticOperator()
    _engine(repo, run_id, operator=op, evaluator=SyntheticEvaluator(parallelism=1), insight_writer=insight_writer).run()
    graph = repo.load_graph(run_id)
    assert len(written) == 8 and all(parents == list(graph[c].parents) for c, parents in written)
    texts = [i.text for i in repo.insights(spec.family, spec.hardware)]
    improves = [n.id for n in graph.nodes() if graph.kind(n.id) == "improve"]
    assert improves and set(texts) == {f"node {i} was improve" for i in improves} | {"masking the tail matters"}
    # Later operator calls see the insights written by earlier nodes, newest first.
    assert "masking the tail matters" in op.contexts[0].insights
    assert any(c.insights[0].startswith("node ") for c in op.contexts[-2:])
    deep = [c for c in op.contexts if c.ancestry]
    assert deep and all(a.evaluation is None or a.evaluation.log == "" for c in deep for a in c.ancestry)
    calls = repo.llm_calls(run_id)
    assert sorted(c.node_id for c in calls) == list(range(8))
    assert repo.totals(run_id) == (8 * 15, pytest.approx(0.08))


def test_no_code_proposals_become_failed_nodes_that_get_debugged(tmp_path, spec):
    repo, run_id = _start(f"sqlite:///{tmp_path / 'n.db'}", spec, nodes=12)
    _engine(repo, run_id, operator=SyntheticOperator(no_code_rate=0.4)).run()
    graph = repo.load_graph(run_id)
    empty = [n for n in graph.nodes() if n.source is None]
    assert empty and all(n.failure == "no_code" for n in empty)
    assert any(graph.kind(c) == "debug" for n in empty for c in graph.children(n.id))


def test_a_broken_operator_stops_the_run(tmp_path, spec):
    repo, run_id = _start(f"sqlite:///{tmp_path / 'o.db'}", spec, nodes=20)
    assert _engine(repo, run_id, operator=SyntheticOperator(raise_always=True)).run() == "operator_error"
    graph = repo.load_graph(run_id)
    assert 3 <= len(graph) <= 4 and all("ConnectionError" in n.evaluation.message for n in graph.nodes())


def test_stall_and_wall_clock_stop_the_run(tmp_path, spec):
    repo, run_id = _start(f"sqlite:///{tmp_path / 's.db'}", spec, nodes=200, stall=4)
    assert _engine(repo, run_id).run() == "stall"
    assert repo.run(run_id).termination_reason == "stall"
    repo, run_id = _start(f"sqlite:///{tmp_path / 'w.db'}", spec, nodes=10_000, wall_clock_s=0.5)
    assert _engine(repo, run_id).run() == "wall_clock"
