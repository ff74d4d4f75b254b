"""The experiment database round-trips a run: graph, evaluations, state, memory, calls, reviews."""

import random

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from kernelevolve.memory import DatabaseError, Repository, database_url
from kernelevolve.memory.repository import prompt_sha256
from kernelevolve.operators.base import LLMCallRecord
from kernelevolve.records.baselines import BaselineKey
from kernelevolve.search.random_state import restore_rng, rng_state
from kernelevolve.search.graph import Node
from tests.search.helpers import result


def _run(repo, spec, seed=7):
    return repo.create_run(
        spec=spec,
        policy="mcts",
        device="interpret",
        settings={"limits": {"max_nodes": 9}},
        rng_state=rng_state(random.Random(seed)),
        policy_state={},
        snapshot="name: x\n",
    )


def _write(repo, run_id, node, res=None):
    repo.add_node(run_id, node, rng_state=rng_state(random.Random(node.id)), elapsed_s=float(node.id))
    if res is not None:
        repo.record_evaluation(
            run_id,
            node.id,
            res,
            policy_state={"visits": {"0": node.id + 1}},
            rng_state=rng_state(random.Random(100 + node.id)),
            elapsed_s=node.id + 0.5,
        )


def test_graph_and_state_round_trip(db_url, spec):
    repo = Repository(db_url)
    run_id = _run(repo, spec)
    assert run_id.startswith("r-") and len(run_id) == 10
    _write(repo, run_id, Node(0, source="a", note="first", tokens=30, cost_usd=0.5), result(1.5))
    _write(repo, run_id, Node(1, source=None, note="empty reply"), result(failure="no_code"))
    _write(repo, run_id, Node(2, parents=(1,), source="b", tokens=20), result(2.0))
    _write(repo, run_id, Node(3, parents=(2, 0), source="c"))  # pending: written, never evaluated

    g = Repository(db_url).load_graph(run_id)  # a fresh connection sees it all
    assert [g.kind(i) for i in range(4)] == ["draft", "draft", "debug", "crossover"]
    assert g[3].parents == (2, 0) and g[3].state == "pending" and g[3].evaluation is None
    assert (g[0].fitness, g[0].note, g[0].source, g[1].source, g[1].failure) == (1.5, "first", "a", None, "no_code")
    assert g[2].evaluation.shapes[0].speedup == pytest.approx(2.0)
    run = repo.run(run_id)
    assert run.policy_state == {"visits": {"0": 3}} and run.elapsed_s == 3.0
    # The rng state written last is the one after node 3 was written (pending writes carry it too).
    assert restore_rng(run.rng_state).random() == random.Random(3).random()
    assert repo.totals(run_id) == (50, 0.5)
    assert repo.node_counts()[run_id] == {"nodes": 4, "evaluated": 3, "correct": 2}


def test_re_evaluation_replaces_and_never_duplicates(db_url, spec):
    repo = Repository(db_url)
    run_id = _run(repo, spec)
    _write(repo, run_id, Node(0, source="a"), result(failure="timeout"))
    repo.record_evaluation(run_id, 0, result(1.2), policy_state={}, rng_state=rng_state(random.Random(1)), elapsed_s=1)
    with repo.engine.connect() as conn:
        assert conn.execute(text("select count(*) from evaluations where run_id = :r"), {"r": run_id}).scalar() == 1
    assert repo.load_graph(run_id)[0].fitness == pytest.approx(1.2)


def test_edges_need_existing_nodes(db_url, spec):
    repo = Repository(db_url)
    run_id = _run(repo, spec)
    with pytest.raises(IntegrityError):
        repo.add_node(run_id, Node(5, parents=(4,), source="x"), rng_state={}, elapsed_s=0)
    assert len(repo.load_graph(run_id)) == 0  # the failed transaction left nothing behind


def test_insights_across_runs_filtered_and_newest_first(db_url, spec):
    repo = Repository(db_url)
    a, b = _run(repo, spec), _run(repo, spec)
    family = "fam-" + a
    repo.add_insight(a, 0, family, "h200", "first", source="t")
    repo.add_insight(b, 3, family, "h200", "second", source="t")
    repo.add_insight(b, 4, family, "mi300", "other hardware", source="t")
    repo.add_insight(b, 5, "other-family", "h200", "other family", source="t")
    assert [i.text for i in repo.insights(family, "h200")] == ["second", "first"]
    assert [i.text for i in repo.insights(family, None)] == ["other hardware", "second", "first"]
    assert [i.text for i in repo.insights(family, "h200", limit=1)] == ["second"]
    assert repo.insights(family, "h200")[0].run_id == b


def test_llm_calls_are_recorded_with_their_node(db_url, spec):
    repo = Repository(db_url)
    run_id = _run(repo, spec)
    prompt = f"write a kernel for {run_id}"
    failed = repo.record_llm_call(run_id, None, LLMCallRecord("p", "m", prompt, "", error="rate limited"))
    ok = repo.record_llm_call(
        run_id,
        None,
        LLMCallRecord(
            "p", "m", prompt, "```python\nclass ModelNew: ...```", input_tokens=120, output_tokens=80, cost_usd=0.02
        ),
    )
    repo.add_node(run_id, Node(0, source="x"), rng_state={}, elapsed_s=0, llm_call_ids=[failed, ok])
    calls = repo.llm_calls(run_id)
    assert [(c.node_id, c.input_tokens, c.error) for c in calls] == [(0, 0, "rate limited"), (0, 120, None)]
    assert calls[1].prompt_sha256 == prompt_sha256(prompt) and calls[1].reply.startswith("```python")


def test_reviews_and_baselines(db_url, spec):
    repo = Repository(db_url)
    run_id = _run(repo, spec)
    _write(repo, run_id, Node(0, source="a"), result(1.8))
    repo.add_review(run_id, 0, "alice", "approved", "checked the masking")
    assert [(r.reviewer, r.verdict) for r in repo.reviews(run_id)] == [("alice", "approved")]
    # Baselines are the evaluator's (BaselineTable), never copied from a candidate's evaluation.
    assert repo.baseline_timings(spec.fingerprint) == {}
    key = BaselineKey(spec.fingerprint, "N=8 float32", "eager", "NVIDIA H200", "2.11", "3.6")
    repo.save_baseline(key, 1.8)
    assert repo.baseline_timings(spec.fingerprint) == {key: 1.8}
    (row,) = repo.baselines(spec.fingerprint)  # as older versions wrote and read the row
    assert (row.shape, row.device, row.software) == ("N=8 float32", "NVIDIA H200", "eager|2.11|3.6")


def test_sqlite_uses_wal_and_foreign_keys(tmp_path):
    repo = Repository(f"sqlite:///{tmp_path / 'x.db'}")
    with repo.engine.connect() as conn:
        assert conn.execute(text("pragma journal_mode")).scalar() == "wal"
        assert conn.execute(text("pragma foreign_keys")).scalar() == 1


def test_url_from_option_then_environment_then_default(monkeypatch):
    monkeypatch.delenv("KERNELEVOLVE_DB", raising=False)
    assert database_url() == "sqlite:///kernelevolve.db"
    monkeypatch.setenv("KERNELEVOLVE_DB", "sqlite:////tmp/team.db")
    from kernelevolve.settings import settings

    settings.cache_clear()  # the environment is read once per process: as a new process would
    assert database_url() == "sqlite:////tmp/team.db"
    assert database_url("sqlite:///mine.db") == "sqlite:///mine.db"


def test_bad_urls_are_one_line_errors():
    with pytest.raises(DatabaseError, match="not a usable SQLAlchemy URL"):
        Repository("nosuchdialect://x")
    with pytest.raises(DatabaseError, match=r"cannot open the database postgresql\+psycopg://u:\*\*\*@127.0.0.1:1/x"):
        Repository("postgresql+psycopg://u:secret@127.0.0.1:1/x")
