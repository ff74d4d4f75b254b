"""--parallel is saved with a run: a resume keeps it unless given another, which is then saved."""

from kernelevolve.runs.session import RunSettings
from tests.search.test_engine import _engine, _start


def test_parallel_is_saved_and_a_resume_may_change_it(tmp_path, spec):
    repo, run_id = _start(f"sqlite:///{tmp_path / 'p.db'}", spec, nodes=4)
    repo.update_run(run_id, settings=dict(repo.run(run_id).settings, parallel=3))
    engine = _engine(repo, run_id)  # the evaluator offers 2 at once; the run asked for 3
    assert engine.max_in_flight == 3
    engine.run()
    assert _engine(repo, run_id, max_nodes=6, parallel=1).max_in_flight == 1
    assert repo.run(run_id).settings["parallel"] == 1
    assert _engine(repo, run_id).max_in_flight == 1  # the next resume keeps what the last one said


def test_runs_saved_with_workers_read_it_as_parallel():
    """Runs written before --parallel had its name stored it as "workers"."""
    old = RunSettings.model_validate({"policy": "greedy", "workers": 4})
    assert old.parallel == 4 and old.executor == "local" and old.ray_address is None
    assert "workers" not in old.model_dump() and old.model_dump()["parallel"] == 4
