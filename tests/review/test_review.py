"""Review and export on a real (small) search run under the interpreter."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def kernelevolve(*args, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELEVOLVE_DB", "ANTHROPIC", "OPENAI"))}
    return subprocess.run([sys.executable, "-m", "kernelevolve", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    where = tmp_path_factory.mktemp("review")
    db = f"sqlite:///{where / 'runs.db'}"
    proc = kernelevolve("run", str(REPO / "specs" / "softmax.yaml"), "--device", "interpret", "--budget", "2",
                        "--drafts", "1", "--seed", "1", "--db", db, "--json", cwd=where)
    assert proc.returncode == 0, proc.stderr
    return where, db, json.loads(proc.stdout)["id"]


def test_export_needs_an_approval(run):
    where, db, run_id = run
    proc = kernelevolve("export", run_id, "0", "--db", db, cwd=where)
    assert proc.returncode == 2 and "has not been reviewed" in proc.stderr and "Traceback" not in proc.stderr
    assert kernelevolve("review", run_id, "0", "--reject", "--note", "not yet", "--db", db, cwd=where).returncode == 0
    proc = kernelevolve("export", run_id, "0", "--db", db, cwd=where)
    assert proc.returncode == 2 and "was rejected" in proc.stderr


def test_approved_kernel_exports_as_a_working_candidate(run):
    where, db, run_id = run
    proc = kernelevolve("review", run_id, "1", "--approve", "--reviewer", "ada", "--note", "masks checked",
                        "--db", db, "--json", cwd=where)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["verdict"] == "approve"
    out = where / "softmax_kernel.py"
    assert kernelevolve("export", run_id, "1", "-o", str(out), "--db", db, cwd=where).returncode == 0
    text = out.read_text()
    assert f"run {run_id}, node 1" in text and "approve by ada: masks checked" in text
    assert "correct, untimed" in text and "class ModelNew" in text
    proc = kernelevolve("eval", str(REPO / "specs" / "softmax.yaml"), str(out), "--device", "interpret", "--json", cwd=where)
    assert proc.returncode == 0 and json.loads(proc.stdout)["correct"]


def test_bad_reviews_get_one_line_errors(run):
    where, db, run_id = run
    for args, words in [
        (("review", run_id, "9", "--approve"), "has no node 9"),
        (("review", "r-nothere", "0", "--approve"), "no run r-nothere"),
        (("review", run_id, "0"), "exactly one of --approve or --reject"),
    ]:
        proc = kernelevolve(*args, "--db", db, cwd=where)
        assert proc.returncode == 2 and words in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
