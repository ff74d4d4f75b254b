"""--log-level and the per-run log file: what the engine logs reaches stderr at the chosen level
and, whatever the level, the run's own file."""

import os
import subprocess
import sys

from kernelevolve.paths import REPO_ROOT
from tests.cli.console import kernelevolve_many

CLI = [sys.executable, "-c", "from kernelevolve.cli import main; main()"]


def _cli(*args, env, cwd):
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def test_log_level_and_the_runs_log_file(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELEVOLVE_")}
    env["KERNELEVOLVE_LOG_DIR"] = str(tmp_path / "logs")
    db = f"sqlite:///{tmp_path / 'l.db'}"
    quiet = _cli(
        "run",
        str(REPO_ROOT / "specs" / "softmax.yaml"),
        "--device",
        "interpret",
        "--budget",
        "1",
        "--db",
        db,
        "--no-preflight",
        "--json",
        env=env,
        cwd=tmp_path,
    )
    assert quiet.returncode == 0, quiet.stderr
    assert "kernelevolve.search.engine" not in quiet.stderr  # warning level: nothing went wrong
    run_id = quiet.stdout.split('"id": "')[1].split('"')[0]
    logged = (tmp_path / "logs" / f"{run_id}.log").read_text()
    assert f"run {run_id}: node 0 written (draft" in logged and f"run {run_id}: node 0 draft: correct" in logged
    assert f"run {run_id} stops: nodes" in logged

    loud, bad = kernelevolve_many(  # one start of the CLI for both: --log-level is set by each command line
        [
            ["--log-level", "info", "resume", run_id, "--budget", "2", "--db", db],
            ["--log-level", "loud", "runs", "--db", db],
        ],
        tmp_path,
        env,
    )
    assert loud.returncode == 0, loud.stderr
    assert f"INFO kernelevolve.search.engine: run {run_id}: node 1 draft: correct" in loud.stderr  # 3 drafts first
    assert (tmp_path / "logs" / f"{run_id}.log").read_text().startswith(logged)  # the resume appended

    assert (
        bad.returncode == 2
        and bad.stderr.strip() == "error: --log-level 'loud': use one of debug, info, warning, error"
    )
