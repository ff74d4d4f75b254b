"""What goes wrong during a search, and what the engine and the CLI make of it: an evaluator that
raises, an insight writer that fails, an interrupted run, the database failing mid-run, Ctrl-C,
the resume guards (a live owner, --force, a changed reference), and `kernelevolve insights`.

In-process CLI searches evaluate with the synthetic evaluator (see `synthetic_search`), so they
take milliseconds; the Ctrl-C test sends a real SIGINT to a real `kernelevolve run`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError
from typer.testing import CliRunner

from kernelevolve.cli import app
from kernelevolve.memory import Repository
from kernelevolve.memory.repository import Repository as RepositoryClass
from kernelevolve.runs import lifecycle
from kernelevolve.runs.session import RunSettings, build_engine, start_run
from kernelevolve.spec import Budget
from tests.search.conftest import FIXTURES
from tests.search.helpers import SimulatedKill, SyntheticEvaluator, SyntheticOperator

HERE = Path(__file__).parent
SYNTHETIC = f"plugin:{HERE / 'helpers.py'}:SyntheticOperator"


def _start(db_url, spec, nodes=8, model=None, seed=3):
    repo = Repository(db_url)
    settings = RunSettings(
        policy="greedy",
        policy_options={"drafts": 2},
        limits=Budget(max_nodes=nodes),
        device="interpret",
        seed=seed,
        model=model,
    )
    return repo, start_run(repo, spec, settings)


def _invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture
def synthetic_search(monkeypatch):
    """CLI searches in this process evaluate with SyntheticEvaluator instead of the sandbox."""
    monkeypatch.setattr(lifecycle, "make_executor", _synthetic_executor)


def _synthetic_executor(repo, run_id, config):
    return SyntheticEvaluator(parallelism=1)


# -- the engine ---------------------------------------------------------------------------------


class RaisingEvaluator(SyntheticEvaluator):
    """Raises on its 2nd and 5th calls, as an evaluator bug or a lost GPU would."""

    def run(self, request):
        result = super().run(request)
        if len(self.calls) in (2, 5):
            raise RuntimeError("the GPU fell off the bus")
        return result


def test_an_evaluator_exception_becomes_a_crash_node_and_the_search_goes_on(tmp_path, spec):
    repo, run_id = _start(f"sqlite:///{tmp_path / 'e.db'}", spec, nodes=8)
    evaluator = RaisingEvaluator(parallelism=1)
    engine = build_engine(repo, run_id, operator=SyntheticOperator(), evaluator=evaluator)
    assert engine.run() == "nodes"
    graph = repo.load_graph(run_id)  # as written to the database
    crashed = [n for n in graph.nodes() if n.failure == "crash"]
    assert len(graph) == 8 and not graph.pending() and crashed
    for node in crashed:
        assert node.evaluation.message == "evaluator error: RuntimeError: the GPU fell off the bus"
        assert node.fitness == 0.0 and not node.correct
    assert any(n.correct for n in graph.nodes())
    assert repo.run(run_id).status == "finished"


def test_a_failing_insight_writer_is_a_warning_not_a_failed_search(tmp_path, spec):
    repo, run_id = _start(f"sqlite:///{tmp_path / 'i.db'}", spec, nodes=6)
    family_before = len(repo.insights(spec.family, spec.hardware))

    def insight_writer(spec_, child, parents, record_llm_call):
        raise ValueError("the model returned nothing")

    engine = build_engine(
        repo,
        run_id,
        operator=SyntheticOperator(),
        evaluator=SyntheticEvaluator(parallelism=1),
        insight_writer=insight_writer,
    )
    assert engine.run() == "nodes"
    assert len(repo.load_graph(run_id)) == 6 and repo.run(run_id).status == "finished"
    assert engine.warnings and set(engine.warnings) == {"insight writer failed: the model returned nothing"}
    assert len(repo.insights(spec.family, spec.hardware)) == family_before


@pytest.mark.parametrize("interruption", [KeyboardInterrupt, SimulatedKill])
def test_an_interrupted_run_is_marked_interrupted_and_resumes(tmp_path, spec, interruption):
    repo, run_id = _start(f"sqlite:///{tmp_path / 'k.db'}", spec, nodes=8)

    def on_event(event, engine, node):
        if event == "evaluated" and len(engine.graph.evaluated()) == 3:
            time.sleep(0.05)  # some search time to account for
            raise interruption()

    with pytest.raises(interruption):
        build_engine(
            repo, run_id, operator=SyntheticOperator(), evaluator=SyntheticEvaluator(parallelism=1), on_event=on_event
        ).run()
    run = repo.run(run_id)
    assert run.status == "interrupted" and run.termination_reason is None and run.elapsed_s >= 0.05
    assert len(repo.load_graph(run_id).evaluated()) == 3
    assert (
        build_engine(repo, run_id, operator=SyntheticOperator(), evaluator=SyntheticEvaluator(parallelism=1)).run()
        == "nodes"
    )
    assert repo.run(run_id).status == "finished" and len(repo.load_graph(run_id).evaluated()) == 8


class FailingDatabase:
    """Repository.record_evaluation raises OperationalError from its `after`-th call on."""

    def __init__(self, monkeypatch, after: int):
        self.calls, self.after = 0, after
        original = RepositoryClass.record_evaluation

        def record_evaluation(repo, *args, **kwargs):
            self.calls += 1
            if self.calls >= self.after:
                raise OperationalError("UPDATE evaluations", {}, Exception("server closed the connection unexpectedly"))
            return original(repo, *args, **kwargs)

        monkeypatch.setattr(RepositoryClass, "record_evaluation", record_evaluation)


def test_a_database_failure_mid_run_stops_the_search_and_loses_nothing_committed(tmp_path, spec, monkeypatch):
    repo, run_id = _start(f"sqlite:///{tmp_path / 'd.db'}", spec, nodes=8)
    down = FailingDatabase(monkeypatch, after=4)
    with pytest.raises(OperationalError):
        build_engine(repo, run_id, operator=SyntheticOperator(), evaluator=SyntheticEvaluator(parallelism=1)).run()
    before = repo.load_graph(run_id)
    evaluated = {n.id: n.evaluation.to_dict() for n in before.evaluated()}
    assert len(evaluated) == 3 and before.pending() and repo.run(run_id).status == "interrupted"

    monkeypatch.undo()  # the database is back
    assert down.calls == 4
    assert (
        build_engine(repo, run_id, operator=SyntheticOperator(), evaluator=SyntheticEvaluator(parallelism=1)).run()
        == "nodes"
    )
    after = repo.load_graph(run_id)
    assert len(after.evaluated()) == 8 and all(after[i].evaluation.to_dict() == e for i, e in evaluated.items())


# -- the CLI ------------------------------------------------------------------------------------


def test_cli_database_failure_mid_run_is_one_line_with_the_resume_command(
    tmp_path, spec, monkeypatch, synthetic_search
):
    url = f"sqlite:///{tmp_path / 'cli-d.db'}"
    FailingDatabase(monkeypatch, after=3)
    out = _invoke(
        "run",
        FIXTURES / "scale.yaml",
        "--device",
        "interpret",
        "--model",
        SYNTHETIC,
        "--db",
        url,
        "--budget",
        6,
        "--seed",
        1,
        "--json",
    )
    assert out.exit_code == 2 and isinstance(out.exception, SystemExit), out.output
    run_id = Repository(url).runs()[0].id
    last = out.output.strip().splitlines()[-1]
    assert last.startswith("error: database error during the search (OperationalError: ")
    assert last.endswith(f"once it is back: `kernelevolve resume {run_id} --db {url}`")
    monkeypatch.undo()  # the database is back (and the synthetic evaluator gone with the same undo: put it back)
    monkeypatch.setattr(lifecycle, "make_executor", _synthetic_executor)
    resumed = _invoke("resume", run_id, "--db", url, "--json")
    assert resumed.exit_code == 0, resumed.output
    assert len(Repository(url).load_graph(run_id).evaluated()) == 6


def test_cli_insight_writer_failure_is_a_warning_and_exit_0(tmp_path, synthetic_search):
    plugin = tmp_path / "operator.py"
    plugin.write_text(
        "from tests.search.helpers import SyntheticOperator\n\n\n"
        "class NoInsights(SyntheticOperator):\n"
        "    def write_insight(self, spec, child, parents, record_llm_call):\n"
        "        raise TimeoutError('insight model timed out')\n"
    )
    out = _invoke(
        "run",
        FIXTURES / "scale.yaml",
        "--device",
        "interpret",
        "--model",
        f"plugin:{plugin}:NoInsights",
        "--db",
        f"sqlite:///{tmp_path / 'w.db'}",
        "--budget",
        4,
        "--seed",
        2,
    )
    assert out.exit_code == 0, out.output
    assert "warning: insight writer failed: insight model timed out" in out.output
    assert "finished: nodes; 4 nodes" in out.output


def _live_process():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def test_resume_refuses_a_run_a_live_process_holds_unless_forced(tmp_path, spec, synthetic_search):
    url = f"sqlite:///{tmp_path / 'o.db'}"
    repo, run_id = _start(url, spec, nodes=4, model=SYNTHETIC)
    holder = _live_process()
    try:
        repo.update_run(run_id, status="running", owner=f"{socket.gethostname()}:{holder.pid}")
        refused = _invoke("resume", run_id, "--db", url)
        assert refused.exit_code == 2 and refused.output.count("\n") == 1, refused.output
        assert (
            f"run {run_id} is being searched by process {holder.pid} on this host (stop it, or pass --force)"
            in refused.output
        )
        assert repo.load_graph(run_id).nodes() == []  # nothing was searched
        forced = _invoke("resume", run_id, "--db", url, "--force", "--json")
        assert forced.exit_code == 0, forced.output
        assert json.loads(forced.stdout)["status"] == "finished"
        assert repo.run(run_id).owner == f"{socket.gethostname()}:{os.getpid()}"  # the run is ours now
    finally:
        holder.kill()
        holder.wait()


def test_resume_takes_over_a_run_whose_owner_died(tmp_path, spec, synthetic_search):
    url = f"sqlite:///{tmp_path / 'dead.db'}"
    repo, run_id = _start(url, spec, nodes=4, model=SYNTHETIC)
    holder = _live_process()
    holder.kill()
    holder.wait()
    repo.update_run(run_id, status="running", owner=f"{socket.gethostname()}:{holder.pid}")  # killed -9 mid-run
    out = _invoke("resume", run_id, "--db", url, "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["status"] == "finished"


def test_resume_refuses_a_run_whose_reference_changed(tmp_path, synthetic_search):
    from kernelevolve.spec import load_spec

    for name in ("scale.yaml", "scale_ref.py"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    url = f"sqlite:///{tmp_path / 'c.db'}"
    repo, run_id = _start(url, load_spec(tmp_path / "scale.yaml"), nodes=4, model=SYNTHETIC)
    reference = tmp_path / "scale_ref.py"
    reference.write_text(reference.read_text().replace("x * self.alpha + 1.0", "x * self.alpha + 2.0"))
    out = _invoke("resume", run_id, "--db", url)
    assert out.exit_code == 2 and isinstance(out.exception, SystemExit), out.output
    error = out.output.strip().splitlines()[-1]
    assert error.startswith(
        f"error: run {run_id}: the reference of {tmp_path / 'scale.yaml'} changed since the run started (fingerprint "
    ), out.output
    reference.unlink()
    gone = _invoke("resume", run_id, "--db", url)
    assert gone.exit_code == 2 and f"error: run {run_id}: its spec cannot be loaded any more" in gone.output
    assert repo.load_graph(run_id).nodes() == []


@pytest.mark.timeout(300)
def test_ctrl_c_exits_130_with_the_resume_command_and_marks_the_run_interrupted(tmp_path):
    url = f"sqlite:///{tmp_path / 'ctrl-c.db'}"
    # COLUMNS: rich hard-wraps stderr at 80 columns when it is no terminal (the resume command included).
    env = dict(os.environ, SEARCH_TEST_BUG_RATE="0.0", COLUMNS="400")
    env.pop("KERNELEVOLVE_DB", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from kernelevolve.cli import main; main()",
            "run",
            str(FIXTURES / "scale.yaml"),
            "--device",
            "interpret",
            "--model",
            f"plugin:{FIXTURES / 'triton_operator.py'}:TritonScaleOperator",
            "--db",
            url,
            "--budget",
            "30",
            "--seed",
            "4",
            "--workers",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
        # As from a terminal: a test run started in the background of a non-interactive shell (`pytest &`)
        # ignores SIGINT, and a child inherits that (it then ran all 30 nodes and exited 0).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    repo = Repository(url)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            runs = repo.runs()
            if runs and repo.node_counts().get(runs[0].id, {}).get("evaluated", 0) >= 1:
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    run_id = repo.runs()[0].id
    run = repo.run(run_id)
    evaluated = len(repo.load_graph(run_id).evaluated())
    assert proc.returncode == 130, (stderr, stdout[-3000:], run.status, run.termination_reason, evaluated)
    assert f"interrupted: resume with `kernelevolve resume {run_id} --db {url}`" in stderr
    assert "Traceback" not in stderr  # a real process: a traceback would show here
    assert run.status == "interrupted" and evaluated < 30


# -- kernelevolve insights ------------------------------------------------------------------------


def test_insights_command_filters_orders_limits_and_reports_none(tmp_path, spec):
    url = f"sqlite:///{tmp_path / 'n.db'}"
    repo, run_id = _start(url, spec)
    repo.add_insight(run_id, 0, "rmsnorm", "h200", "BLOCK 4096 regressed long rows 0.8x", source="rules")
    repo.add_insight(run_id, 1, "rmsnorm", "h200", "two warps per row won 12%", source="rules")
    repo.add_insight(run_id, 2, "rmsnorm", "mi300x", "wave64 wants wider tiles", source="rules")
    repo.add_insight(None, None, "softmax", "h200", "online softmax saved a pass", source="model")

    listed = json.loads(_invoke("insights", "--family", "rmsnorm", "--hardware", "h200", "--json", "--db", url).stdout)
    assert [(i["text"], i["run_id"], i["node_id"]) for i in listed] == [
        ("two warps per row won 12%", run_id, 1),
        ("BLOCK 4096 regressed long rows 0.8x", run_id, 0),
    ]
    assert {i["family"] for i in listed} == {"rmsnorm"} and {i["hardware"] for i in listed} == {"h200"}
    everything = json.loads(_invoke("insights", "--json", "--db", url).stdout)
    assert [i["text"] for i in everything][0] == "online softmax saved a pass" and len(everything) == 4  # newest first
    assert len(json.loads(_invoke("insights", "--limit", "1", "--json", "--db", url).stdout)) == 1

    human = _invoke("insights", "--family", "rmsnorm", "--db", url)
    assert human.exit_code == 0 and "mi300x" in human.output and "wave64" in human.output  # both hardware
    assert "softmax" not in human.output and run_id in human.output
    none = _invoke("insights", "--family", "conv", "--hardware", "h200", "--db", url)
    assert none.exit_code == 0 and " ".join(none.output.split()).startswith(
        "no insights for family conv hardware h200 in"
    )
    bad = _invoke("insights", "--limit", "0", "--db", url)
    assert bad.exit_code == 2 and bad.output == "error: --limit 0: must be 1 or more\n"
