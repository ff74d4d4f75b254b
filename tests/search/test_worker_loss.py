"""A worker killed mid-evaluation: the node is evaluated once more on a fresh worker, and recorded
as a crash when that worker is lost too. The workers are real processes killed with
SIGKILL while they evaluate."""

import json
import os
import signal
import subprocess
import sys
import threading

from kernelevolve.evaluation.executors import EvaluationRequest, Executor, WorkerLost
from kernelevolve.evaluation.result import EvalResult
from tests.search.helpers import SyntheticOperator, result
from tests.search.test_engine import _engine, _start

# The worker: says it has started, works a little, then answers with the fitness its source states.
WORKER = r"""
import json, re, sys, time
source = sys.stdin.read()
print("started", flush=True)
time.sleep(0.2)
print(json.dumps({"fitness": float(re.search(r"FITNESS = ([0-9.e-]+)", source).group(1)),
                  "fails": "FAILS = True" in source}), flush=True)
"""


class ProcessWorkers(Executor):
    """An executor whose every evaluation runs in a worker process; `doomed` maps a node id to how
    many of its workers are SIGKILLed once they have started. Like a real executor, it turns a worker
    that died into WorkerLost and keeps the node's result otherwise."""

    def __init__(self, doomed: dict[int, int], parallelism: int = 2) -> None:
        self.doomed, self.parallelism, self.device = dict(doomed), parallelism, "interpret"
        self.calls: list[tuple[int, bool, int]] = []  # (node, deep, worker's exit status)
        self._lock = threading.Lock()

    def run(self, request: EvaluationRequest) -> EvalResult:
        node, source, deep = request.node_id, request.source, request.deep
        worker = subprocess.Popen(
            [sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        worker.stdin.write(source)
        worker.stdin.close()
        assert worker.stdout.readline().strip() == "started"
        with self._lock:
            doom = self.doomed.get(node, 0) > 0
            if doom:
                self.doomed[node] -= 1
        if doom:
            os.kill(worker.pid, signal.SIGKILL)  # mid-evaluation: it sleeps before answering
        answer = worker.stdout.read()
        status = worker.wait()
        with self._lock:
            self.calls.append((node, deep, status))
        if status < 0:
            raise WorkerLost(f"worker pid {worker.pid} killed by {signal.Signals(-status).name}", f"pid {worker.pid}")
        data = json.loads(answer)
        return result(failure="incorrect") if data["fails"] else result(data["fitness"])


def test_a_lost_worker_is_retried_once_then_the_node_is_a_crash(tmp_path, spec):
    repo, run_id = _start(f"sqlite:///{tmp_path / 'w.db'}", spec, nodes=7)
    workers = ProcessWorkers(doomed={1: 1, 4: 2})
    engine = _engine(repo, run_id, operator=SyntheticOperator(fail_rate=0.0), evaluator=workers)
    assert engine.run() == "nodes"

    graph = repo.load_graph(run_id)
    assert len(graph) == 7 and not graph.pending()
    killed = [(node, status) for node, _, status in workers.calls if status != 0]
    assert sorted(killed) == [(1, -signal.SIGKILL), (4, -signal.SIGKILL), (4, -signal.SIGKILL)]

    # Node 1 lost its worker once: evaluated again, its result kept, the loss said with it.
    one = graph[1].evaluation
    assert one.failure is None and one.correct
    assert "SIGKILL" in one.scheduling.worker_lost
    # Node 4 lost two workers: a crash that says so, not a failure of the kernel's own.
    four = graph[4].evaluation
    assert four.failure == "crash"
    assert "lost twice" in four.message and four.message.count("SIGKILL") == 2

    # Every other node: one worker, never killed; each node's result written once.
    for node in graph.nodes():
        answered = [c for c in workers.calls if c[0] == node.id and c[2] == 0 and not c[1]]
        assert len(answered) == (0 if node.id == 4 else 1), node.id
    from sqlalchemy import text

    with repo.engine.connect() as conn:
        rows = conn.execute(text("select node_id from evaluations where run_id = :r"), {"r": run_id}).scalars().all()
    assert sorted(rows) == list(range(7))


FAKE_NVIDIA_SMI = """#!/bin/sh
# GPU 1 fell off the bus; GPU 2 hangs; the others answer.
case "$2" in
  1) echo "Unable to determine the device handle for GPU0000:1B:00.0: GPU is lost.  Reboot the system"; exit 15;;
  2) exec sleep 30;;
  *) echo "00000000:18:00.0";;
esac
"""


def test_a_lost_gpu_is_told_from_a_failing_candidate(tmp_path, monkeypatch):
    """What a worker asks before blaming a candidate for a crash: does nvidia-smi still reach its GPU?"""
    from kernelevolve.evaluation.executors import gpu_lost

    smi = tmp_path / "nvidia-smi"
    smi.write_text(FAKE_NVIDIA_SMI)
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert gpu_lost("0") is None
    assert gpu_lost("1") == (
        "nvidia-smi cannot reach GPU 1: Unable to determine the device handle for GPU0000:1B:00.0: GPU is lost.  "
        "Reboot the system"
    )
    assert gpu_lost("2", timeout_s=0.5) == "nvidia-smi gave no answer about GPU 2 within 0.5s"
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert gpu_lost("1") is None  # nothing to ask: the candidate's failure stands
