"""`kernelevolve run` for real: Triton kernels under the interpreter, SIGKILL mid-run, resume."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from kernelevolve.cli import app
from kernelevolve.memory import Repository
from tests.cli.console import kernelevolve_many
from tests.search.conftest import FIXTURES

OPERATOR = f"plugin:{FIXTURES / 'triton_operator.py'}:TritonScaleOperator"
BUDGET = 6
CLI = [sys.executable, "-c", "from kernelevolve.cli import main; main()"]


def _cli(*args, env=None, **kw):
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=300, **kw)


def _env(static=True):
    env = dict(os.environ, SEARCH_TEST_BUG_RATE="0.5")
    env.pop("KERNELEVOLVE_DB", None)
    # static: the static cost probe runs (two sandboxed processes more per correct candidate)
    env["KERNELEVOLVE_STATIC_COST"] = "1" if static else "0"
    return env


PARALLEL = 3  # nodes in flight: the kill finds several written but not evaluated


def _kill_mid_run(db_url, tmp_path, policy, static):
    """Start a run with --parallel 3, SIGKILL it once two nodes are evaluated while two or more are
    in flight; return the run id."""
    proc = subprocess.Popen(
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
            str(BUDGET),
            "--seed",
            "5",
            "--policy",
            policy,
            "--parallel",
            str(PARALLEL),
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(static),
        cwd=tmp_path,
    )
    repo = Repository(db_url)
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            runs = repo.runs()
            counts = repo.node_counts().get(runs[0].id, {}) if runs else {}
            evaluated = counts.get("evaluated", 0)
            if evaluated >= 2 and counts.get("nodes", 0) - evaluated >= 2:
                break
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.1)
        else:
            pytest.fail("the run never had two nodes evaluated and two in flight in 240 s")
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return runs[0].id


def _check_kill_and_resume(db_url, tmp_path, policy="greedy", static=True):
    run_id = _kill_mid_run(db_url, tmp_path, policy, static)
    repo = Repository(db_url)
    assert repo.run(run_id).status == "running"  # killed: nobody got to say otherwise
    before = repo.load_graph(run_id)
    evaluated = {n.id: (n.source, n.evaluation.to_dict()) for n in before.evaluated()}
    assert 2 <= len(evaluated) < BUDGET and before.pending()  # (two were in flight when it was killed)
    assert repo.run(run_id).settings["parallel"] == PARALLEL  # saved: the resume keeps it

    resumed, shown = kernelevolve_many(  # the resume, then the read of what it left: one start of the CLI
        [["resume", run_id, "--db", db_url, "--json"], ["show", run_id, "--db", db_url, "--json"]],
        tmp_path,
        _env(static),
    )
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert (summary["id"], summary["status"], summary["termination_reason"]) == (run_id, "finished", "nodes")

    after = repo.load_graph(run_id)
    assert len(after) == BUDGET and not after.pending()
    for node_id, (source, evaluation) in evaluated.items():
        # Same source, same evaluation (its random seed and duration included): not lost, not redone.
        assert (after[node_id].source, after[node_id].evaluation.to_dict()) == (source, evaluation)
    from sqlalchemy import text

    with repo.engine.connect() as conn:
        rows = conn.execute(text("select node_id from evaluations where run_id = :r"), {"r": run_id}).scalars().all()
    assert sorted(rows) == list(range(BUDGET))
    assert any(n.correct for n in after.nodes())
    # With the static cost probe on, every correct node has its estimate, those made before the kill kept.
    assert all(bool((n.evaluation.static or {}).get("cost")) == static for n in after.nodes() if n.correct)

    data = json.loads(shown.stdout)
    assert data["status"] == "finished" and len(data["nodes"]) == BUDGET
    for node in data["nodes"]:
        assert {"id", "parents", "kind", "fitness", "failure"} <= set(node)
        assert node["fitness"] in (None, 0.0)  # the interpreter never times: no made-up speedups
        assert node["kind"] == after.kind(node["id"])
    return run_id, after


@pytest.mark.timeout(400)
def test_sigkill_mid_run_then_resume_sqlite(tmp_path):
    # The static estimate's kill and resume is the PostgreSQL variant's: this one runs without the probe.
    _, graph = _check_kill_and_resume(f"sqlite:///{tmp_path / 'runs.db'}", tmp_path, static=False)
    failed = [n for n in graph.nodes() if n.failure == "incorrect"]
    # The operator's wrong constant is caught by the real evaluator, and debugged.
    assert all("outside atol" in n.evaluation.message for n in failed)


@pytest.mark.timeout(400)
def test_sigkill_mid_run_then_resume_postgresql(pg_url, tmp_path):
    _check_kill_and_resume(pg_url, tmp_path, policy="mcts")


# -- fast command checks, in process -----------------------------------------------------------


def _seeded_db(tmp_path, spec):
    from tests.search.test_engine import _engine, _start

    repo, run_id = _start(f"sqlite:///{tmp_path / 'c.db'}", spec, nodes=5)
    _engine(repo, run_id).run()
    return repo.url, run_id


def test_runs_and_show(tmp_path, spec):
    url, run_id = _seeded_db(tmp_path, spec)
    runner = CliRunner()
    listed = json.loads(runner.invoke(app, ["runs", "--db", url, "--json"]).stdout)
    assert [(r["id"], r["status"], r["nodes"], r["termination_reason"]) for r in listed] == [
        (run_id, "finished", 5, "nodes")
    ]
    human = runner.invoke(app, ["show", run_id, "--db", url])
    assert human.exit_code == 0 and f"run {run_id}" in human.stdout and "#0 draft" in human.stdout
    node = runner.invoke(app, ["show", run_id, "--db", url, "--node", "0"])
    assert node.stdout.startswith("FITNESS = ")


def test_database_url_from_the_environment(tmp_path, spec, monkeypatch):
    url, run_id = _seeded_db(tmp_path, spec)
    monkeypatch.setenv("KERNELEVOLVE_DB", url)
    listed = json.loads(CliRunner().invoke(app, ["runs", "--json"]).stdout)
    assert [r["id"] for r in listed] == [run_id]


@pytest.mark.parametrize(
    "args, message",
    [
        (["show", "r-00000000"], "no run 'r-00000000'"),
        (["show", "{run}", "--node", "99"], "has no node 99"),
        (["resume", "r-00000000"], "no run 'r-00000000'"),
        (["resume", "{run}"], "already finished (nodes)"),
        (["run", str(FIXTURES / "scale.yaml"), "--policy", "beam"], "--policy 'beam'"),
        (["run", str(FIXTURES / "scale.yaml"), "--budget", "0"], "--budget 0"),
        (
            ["run", str(FIXTURES / "scale.yaml"), "--device", "interpret", "--model", "plugin:/nope.py:X"],
            "plugin:PATH.py:CLASS",
        ),
        (["run", str(FIXTURES / "missing.yaml")], "no such file"),
        (["run", str(FIXTURES / "scale.yaml"), "--parallel", "0"], "--parallel 0"),
        (["run", str(FIXTURES / "scale.yaml"), "--parallel", "2", "--workers", "3"], "old name of --parallel"),
        (["run", str(FIXTURES / "scale.yaml"), "--executor", "k8s"], "--executor 'k8s': use local or ray"),
        (["run", str(FIXTURES / "scale.yaml"), "--ray-address", "h:6379"], "--ray-address needs --executor ray"),
        (["resume", "{run}", "--executor", "k8s"], "--executor 'k8s'"),
        (
            ["run", str(FIXTURES / "scale.yaml"), "--device", "interpret", "--profile", "torch", "--profile-share=0"],
            "--profile-share 0.0: a fraction of the GPU time above 0 and at most 1",
        ),
        (
            ["run", str(FIXTURES / "scale.yaml"), "--device", "interpret", "--profile-share", "1.5"],
            "--profile-share 1.5",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, spec, args, message):
    url, run_id = _seeded_db(tmp_path, spec)
    out = CliRunner().invoke(app, [a.replace("{run}", run_id) for a in args] + ["--db", url])
    assert out.exit_code == 2, out.output
    # In process, an escaped exception never prints a traceback: CliRunner keeps it in out.exception.
    assert isinstance(out.exception, SystemExit), repr(out.exception)
    assert out.output.startswith("error: ") and out.output.count("\n") == 1, out.output  # one line
    assert message in out.output


def test_executor_ray_without_ray_is_one_line_naming_the_extra(tmp_path, spec, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed: importing it raises ImportError
    url, run_id = _seeded_db(tmp_path, spec)
    for args in (
        ["run", str(FIXTURES / "scale.yaml"), "--device", "interpret", "--executor", "ray"],
        ["resume", run_id, "--budget", "9", "--executor", "ray"],
    ):
        out = CliRunner().invoke(app, [*args, "--db", url])
        assert out.exit_code == 2 and isinstance(out.exception, SystemExit), out.output
        assert (
            out.output == "error: --executor ray needs Ray, which is not installed: pip install 'kernelevolve[ray]'\n"
        )
    assert len(Repository(url).runs()) == 1  # nothing was started


@pytest.mark.timeout(300)
def test_run_on_a_bare_reference_module_with_no_correct_kernel_exits_1(tmp_path, monkeypatch):
    monkeypatch.setenv("SEARCH_TEST_BUG_RATE", "1.0")  # every draft wrong, and no debugging allowed
    url = f"sqlite:///{tmp_path / 'fail.db'}"
    out = CliRunner().invoke(
        app,
        [
            "run",
            str(FIXTURES / "scale_ref.py"),
            "--device",
            "interpret",
            "--model",
            OPERATOR,
            "--db",
            url,
            "--budget",
            "2",
            "--drafts",
            "2",
            "--debug-depth",
            "0",
            "--json",
        ],
    )
    assert out.exit_code == 1, out.output
    summary = json.loads(out.stdout)
    assert summary["spec"] == "scale_ref" and summary["best"] is None
    assert [(n["kind"], n["failure"], n["fitness"]) for n in summary["nodes"]] == [("draft", "incorrect", 0.0)] * 2
