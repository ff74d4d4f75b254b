"""The local evaluator's places in the workers table: what `kernelevolve workers` lists during a search."""

import threading
import time
from pathlib import Path

from kernelevolve.evaluation.executors import EvaluationRequest
from kernelevolve.memory.repository import Repository
from kernelevolve.memory.workers import WorkerRegistry
from kernelevolve.runs.session import RunSettings, make_executor, start_run
from kernelevolve.spec import load_spec

FIXTURES = Path(__file__).parents[1] / "evaluation"


def test_a_local_evaluation_is_listed_while_it_runs_and_retired_after(tmp_path):
    repo = Repository(f"sqlite:///{tmp_path / 'runs.db'}")
    spec = load_spec(FIXTURES / "scale_shift.yaml")
    settings = RunSettings(device="interpret", timeout_s=60)
    run_id = start_run(repo, spec, settings)
    evaluator = make_executor(repo, run_id, settings)
    registry = WorkerRegistry(repo)
    seen: list[tuple] = []
    done = threading.Event()

    def watch():
        while not done.is_set():
            seen.extend((w.executor, w.gpu, w.state, w.node_id) for w in registry.live(run_id=run_id))
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        source = (FIXTURES / "candidates" / "good.py").read_text()
        result = evaluator.run(EvaluationRequest(spec, source, [{"M": 8, "N": 300}], node_id=7))
    finally:
        done.set()
        watcher.join()
    assert result.correct, result.message
    assert ("local", "cpu", "evaluating", 7) in seen
    (after,) = registry.live(run_id=run_id)
    assert (after.state, after.node_id) == ("idle", None)
    evaluator.close()
    assert registry.live(run_id=run_id) == []
