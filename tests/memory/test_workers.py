"""The workers table and `kernelevolve workers`: live workers listed, dead and retired ones not."""

import json
import time

from sqlalchemy import update
from typer.testing import CliRunner

from kernelevolve.cli import app
from kernelevolve.memory import Repository
from kernelevolve.memory.workers import LiveWorker, WorkerRegistry, WorkerRow


def _workers(url, *args):
    return CliRunner().invoke(app, ["workers", "--db", url, *args])


def test_live_workers_are_listed_until_they_retire_or_stop_beating(tmp_path):
    url = f"sqlite:///{tmp_path / 'w.db'}"
    repo = Repository(url)
    registry = WorkerRegistry(repo)
    gpu0 = registry.register("host-a", "0", 4242, "local", "r-1")
    gpu1 = registry.register("host-a", "1", 4243, "local", "r-1")
    actor = registry.register("host-b", "3", 777, "ray", "r-2")
    registry.heartbeat(gpu0, "evaluating", node_id=7, queued=2)
    registry.heartbeat(actor, "timing", node_id=3)
    with repo.Session.begin() as s:  # gpu1 died a minute ago: its heartbeat stopped then
        s.execute(update(WorkerRow).where(WorkerRow.id == gpu1).values(heartbeat_at=time.time() - 60))

    listed = json.loads(_workers(url, "--json").stdout)
    assert [(w["host"], w["gpu"], w["state"], w["node"], w["queued"]) for w in listed] == [
        ("host-a", "0", "evaluating", 7, 2),
        ("host-b", "3", "timing", 3, 0),
    ]
    assert [w["id"] for w in json.loads(_workers(url, "--run", "r-2", "--json").stdout)] == [actor]
    human = _workers(url)
    assert human.exit_code == 0
    assert "evaluating node 7" in human.stdout and "4243" not in human.stdout

    registry.retire(gpu0)
    registry.retire(actor)
    registry.heartbeat(actor, "idle")  # a late heartbeat does not bring a retired worker back
    empty = _workers(url)
    assert empty.exit_code == 0
    assert empty.stdout.startswith("no live workers in sqlite:///") and "last 20 s" in empty.stdout
    assert json.loads(_workers(url, "--json").stdout) == []


def test_a_waiting_worker_keeps_beating_and_close_retires_it(tmp_path):
    repo = Repository(f"sqlite:///{tmp_path / 'b.db'}")
    registry = WorkerRegistry(repo)
    worker = LiveWorker(registry, host="h", gpu="cpu", pid=1, executor="ray", run_id=None, interval_s=0.05)
    worker.set("evaluating", 5, 1)
    first = registry.live()[0].heartbeat_at
    time.sleep(0.3)  # no state change: the heartbeat thread alone refreshes it
    (row,) = registry.live()
    assert row.heartbeat_at > first and (row.state, row.node_id, row.queued) == ("evaluating", 5, 1)
    worker.close()
    assert registry.live() == []
