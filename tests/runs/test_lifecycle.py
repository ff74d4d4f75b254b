"""kernelevolve.runs.start / open: a run's spec and knowledge base travel with it (no process-wide
setting), its executor is made and closed once, a caller's spec is the one searched."""

from pathlib import Path

import pytest

from kernelevolve import paths, runs
from kernelevolve.evaluation.evaluator import Evaluator
from kernelevolve.memory import Repository
from kernelevolve.spec import load_spec

FIXTURES = Path(__file__).parents[1] / "search" / "fixtures"
OWN_KB = FIXTURES / "own_kb"
KB_OPERATOR = f"plugin:{FIXTURES / 'kb_operator.py'}:KbScaleOperator"


def _config(**evaluation) -> runs.RunConfig:
    return runs.RunConfig(
        policy=runs.policy_options("greedy", {"drafts": 1}),
        limits={"max_nodes": 1},
        model=runs.ModelConfig(name=KB_OPERATOR),
        evaluation=runs.EvaluationConfig(device="interpret", timeout_s=120, **evaluation),
        knowledge_base=OWN_KB.resolve(),
        seed=3,
    )


@pytest.mark.timeout(240)
def test_a_run_evaluates_with_its_own_knowledge_base_and_closes_its_evaluator_once(tmp_path, monkeypatch):
    """The candidate imports _scale_helper, a kernel only the run's knowledge base has: the run's
    evaluator screens and imports against it while the process's stays the bundled one."""
    closed = []
    real_close = Evaluator.close
    monkeypatch.setattr(Evaluator, "close", lambda self: (closed.append(self), real_close(self)))
    assert paths.knowledge_base() == paths.BUNDLED_KNOWLEDGE_BASE
    repo = Repository(f"sqlite:///{tmp_path / 'kb.db'}")
    with runs.start(repo, load_spec(FIXTURES / "scale.yaml"), _config(parallel=1)) as run:
        assert run.search() == "nodes"
        evaluator = run.engine().evaluator
        assert isinstance(evaluator, Evaluator) and evaluator.knowledge_base == OWN_KB.resolve()
        assert closed == []  # the engine leaves the run's executor to the run
    (node,) = repo.load_graph(run.id).nodes()
    assert node.correct, node.evaluation.message
    assert closed == [evaluator]  # once, by the run
    run.close()
    assert closed == [evaluator]
    assert paths.knowledge_base() == paths.BUNDLED_KNOWLEDGE_BASE  # never switched for the process
    assert repo.run(run.id).settings["knowledge_base"] == str(OWN_KB.resolve())


def test_open_searches_the_callers_spec_and_refuses_one_whose_reference_changed(tmp_path):
    """A campaign hands its spec (its baseline) to the run: the engine searches that object, nothing
    is reloaded from disk; a spec of another reference is refused in one line."""
    repo = Repository(f"sqlite:///{tmp_path / 's.db'}")
    spec = load_spec(FIXTURES / "scale.yaml")
    run_id, _ = runs.create(repo, spec, _config())
    compiled = spec.model_copy(update={"baseline": "torch.compile"})
    run = runs.open(repo, run_id, spec=compiled, executor=Evaluator("interpret"))
    assert run.engine().spec is compiled
    other = tmp_path / "other_ref.py"
    other.write_text(spec.reference_source + "\n# changed\n")
    with pytest.raises(runs.RunError, match=f"run {run_id}: the reference of .* changed since the run started"):
        runs.open(repo, run_id, spec=spec.model_copy(update={"reference": other}))


def test_open_of_an_unknown_run_or_an_unusable_operator_is_one_line(tmp_path):
    repo = Repository(f"sqlite:///{tmp_path / 'u.db'}")
    with pytest.raises(runs.RunError, match="no run 'r-nope'"):
        runs.open(repo, "r-nope")
    config = _config().model_copy(update={"model": runs.ModelConfig(name=f"plugin:{tmp_path / 'gone.py'}:X")})
    with pytest.raises(runs.RunError, match="expected plugin:PATH.py:CLASS with an existing file"):
        runs.make_operator(config)
