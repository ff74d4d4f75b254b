"""`run --executor ray` on a real two-CPU Ray cluster (started with `ray start`, joined through
--ray-address): real Triton kernels under the interpreter, a worker SIGKILLed mid-evaluation, and
`kernelevolve workers` while it runs. 30-60 s on a busy 2-core machine, Ray's start-up much of it."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from typer.testing import CliRunner

import ray  # noqa: F401  (in the test extra: missing, this module fails rather than skips)

from kernelevolve.cli import app
from kernelevolve.memory import Repository
from kernelevolve.memory.workers import WorkerRegistry, WorkerRow
from tests.search.conftest import FIXTURES
from tests.search.test_cli import CLI, OPERATOR

# A throw-away local cluster: no token to hand around.
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
pytestmark = pytest.mark.xdist_group("ray-cluster")  # one Ray head (ray_address) for the module, on one worker


@pytest.fixture(scope="module")
def ray_address():
    """A Ray head with two CPUs, in a process group of its own that teardown ends (and nothing else),
    its files (and its address file) in a folder of its own: none left in /tmp/ray for a later ray.init."""
    temp_dir = tempfile.mkdtemp(prefix="ke-ray-")  # short: Ray's socket paths live under it
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from ray.scripts.scripts import main; main()",
            "start",
            "--head",
            "--num-cpus=2",
            "--port=0",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={temp_dir}",
            "--block",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ, **RAY_ENV),
        start_new_session=True,
    )
    address, seen = None, []
    deadline = time.monotonic() + 120
    while address is None and time.monotonic() < deadline and proc.poll() is None:
        line = proc.stdout.readline()
        seen.append(line)
        found = re.search(r"ray start --address='([^']+)'", line)
        address = found.group(1) if found else None
    if address is None:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("ray start gave no address:\n" + "".join(seen[-20:]))
    yield address
    os.killpg(proc.pid, signal.SIGKILL)  # the cluster's processes: ray start, its GCS, raylet, workers
    proc.wait()
    shutil.rmtree(temp_dir, ignore_errors=True)


def _workers(db_url) -> list[dict]:
    out = CliRunner().invoke(app, ["workers", "--db", db_url, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


@pytest.mark.timeout(300)
def test_a_search_on_two_ray_workers_survives_a_killed_worker(ray_address, tmp_path):
    db_url = f"sqlite:///{tmp_path / 'ray.db'}"
    env = dict(os.environ, SEARCH_TEST_BUG_RATE="0.3", **RAY_ENV)
    env.pop("KERNELEVOLVE_DB", None)
    run = subprocess.Popen(
        [
            *CLI,
            "run",
            str(FIXTURES / "scale.yaml"),
            "--device",
            "interpret",
            "--model",
            OPERATOR,
            "--db",
            db_url,
            "--budget",
            "4",
            "--parallel",
            "2",
            "--executor",
            "ray",
            "--ray-address",
            ray_address,
            "--no-preflight",
            "--seed",
            "5",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    repo = Repository(db_url)
    registry = WorkerRegistry(repo)
    listed = victim = None
    deadline = time.monotonic() + 200
    try:
        while victim is None and time.monotonic() < deadline and run.poll() is None:
            live = registry.live()
            busy = [w for w in live if w.state == "evaluating" and w.node_id is not None]
            if len(live) == 2 and busy:
                listed = _workers(db_url)  # what a person sees while the search runs
                victim = busy[0]
                os.kill(victim.pid, signal.SIGKILL)  # mid-evaluation: the interpreter takes seconds
            time.sleep(0.1)
        out, err = run.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if run.poll() is None:
            run.kill()
    assert victim is not None, f"no Ray worker was seen evaluating: {err[-2000:]}"
    assert run.returncode in (0, 1), err
    summary = json.loads(out)
    assert "note: Ray workers on other hosts cannot open sqlite:///" in err  # said before the search
    assert (summary["status"], summary["termination_reason"], len(summary["nodes"])) == ("finished", "nodes", 4)

    run_id = summary["id"]
    assert len(listed) == 2 and {w["executor"] for w in listed} == {"ray"} and {w["gpu"] for w in listed} == {"cpu"}
    assert {w["run_id"] for w in listed} == {run_id}
    assert any(w["state"] == "evaluating" and w["node"] == victim.node_id for w in listed)

    graph = repo.load_graph(run_id)
    assert not graph.pending() and len(graph.evaluated()) == 4
    # The killed worker's node was evaluated again on another worker, and says so; the kernels were
    # really checked (the operator's wrong constants fail as incorrect, never as a crash).
    retried = graph[victim.node_id].evaluation
    assert "died" in retried.scheduling.worker_lost
    assert all(n.failure in (None, "incorrect") for n in graph.nodes())
    assert any(n.correct for n in graph.nodes())

    # Three workers served the run (the killed one replaced); the killed one was retired by the run when
    # it found it dead, the others when the run ended.
    with repo.Session() as s:
        rows = s.query(WorkerRow).filter_by(run_id=run_id).all()
    assert len(rows) == 3 and len({r.pid for r in rows}) == 3
    assert {r.state for r in rows} == {"retired"}
    assert _workers(db_url) == []
    repo.close()


@pytest.mark.timeout(120)
def test_a_hung_ray_worker_is_replaced_after_the_deadline(ray_address, tmp_path, spec, monkeypatch):
    """A worker that stops answering (SIGSTOP: alive, silent) is killed at the deadline and replaced."""
    from kernelevolve.evaluation.executors import EvaluationRequest, WorkerLost
    from kernelevolve.runs.ray_executor import RayExecutor

    for name, value in RAY_ENV.items():
        monkeypatch.setenv(name, value)
    db_url = f"sqlite:///{tmp_path / 'hung.db'}"
    executor = RayExecutor("interpret", db_url=db_url, address=ray_address, workers=1, deadline_s=4)
    try:
        quick = EvaluationRequest(spec, "def broken(:\n")  # answered without a sandbox: the round trip alone
        assert executor.run(quick).failure == "syntax"
        (worker,) = WorkerRegistry(Repository(db_url)).live()
        os.kill(worker.pid, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(WorkerLost, match="gave no result within 4s"):
            executor.run(quick)
        assert 4 <= time.monotonic() - started < 30
        assert executor.run(quick).failure == "syntax"  # on its replacement
        (fresh,) = WorkerRegistry(Repository(db_url)).live()
        assert fresh.pid != worker.pid
    finally:
        executor.close()


OWN_KB = FIXTURES / "own_kb"
KB_OPERATOR = f"plugin:{FIXTURES / 'kb_operator.py'}:KbScaleOperator"


@pytest.mark.timeout(300)
def test_a_kb_run_evaluates_and_profiles_on_ray_workers_with_its_own_knowledge_base(ray_address, tmp_path, spec):
    """The candidates import a kernel of the run's own --kb (fixtures/own_kb): the workers must screen
    and import against it, as a local evaluator does; the best node's profile is taken on a worker."""
    from kernelevolve.evaluation.evaluator import Evaluator
    from kernelevolve.memory.profiles import load_profiles
    from tests.search.fixtures.kb_operator import TEMPLATE

    # Against the bundled knowledge base the same candidate is refused before it runs.
    with Evaluator("interpret") as bundled:
        refused = bundled.evaluate(spec, TEMPLATE.format(block=128))
    assert refused.failure == "tampering" and "_scale_helper" in refused.message

    db_url = f"sqlite:///{tmp_path / 'kb.db'}"
    env = dict(os.environ, **RAY_ENV)
    env.pop("KERNELEVOLVE_DB", None)
    env.pop("KERNELEVOLVE_KB", None)
    out = subprocess.run(
        [
            *CLI,
            "--kb",
            str(OWN_KB),
            "run",
            str(FIXTURES / "scale.yaml"),
            "--device",
            "interpret",
            "--model",
            KB_OPERATOR,
            "--db",
            db_url,
            "--budget",
            "2",
            "--parallel",
            "2",
            "--executor",
            "ray",
            "--ray-address",
            ray_address,
            "--profile",
            "torch",
            "--profile-share",
            "1",
            "--no-preflight",
            "--seed",
            "3",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=280,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout)
    assert summary["settings"]["knowledge_base"] == str(OWN_KB.resolve())
    assert [n["failure"] for n in summary["nodes"]] == [None, None], summary["nodes"]  # both correct
    repo = Repository(db_url)
    with repo.Session() as s:
        workers = {r.pid: r for r in s.query(WorkerRow).filter_by(run_id=summary["id"]).all()}
    assert workers and all(w.executor == "ray" for w in workers.values())
    # The best node was profiled, on one of the run's Ray workers (not by the search's own process).
    profiles = load_profiles(repo, summary["id"])
    assert summary["best"]["id"] in profiles
    for row in profiles.values():
        (taken,) = row.summaries
        assert taken["tools"] == ["torch"] and not taken["errors"], taken
        assert int(taken["taken_on"].split(" pid ")[1].split()[0]) in workers, taken["taken_on"]
    # The share spent is printed at the end and stored with the run.
    spent = summary["settings"]["time_spent"]
    assert spent["profiles"] == len(profiles) and spent["profiling_s"] > 0 and spent["profile_share"] == 1.0
    said = " ".join(out.stderr.split())  # progress and summary lines wrap at 80 columns in a pipe
    assert f"profiles: {len(profiles)} (" in said and "of GPU time (limit 100%)" in said
    repo.close()
