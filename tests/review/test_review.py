"""Review and export on a real (small) search run under the interpreter."""

import json

import pytest

from tests.review.conftest import REPO, copy_of, kernelevolve


@pytest.fixture(scope="module")
def run(real_run, tmp_path_factory):
    """A copy of the session's real search (tests/review/conftest.py): its node 0 is correct."""
    where = tmp_path_factory.mktemp("review")
    return where, copy_of(real_run, where), real_run[2]


def test_export_needs_an_approval(run):
    where, db, run_id = run
    proc = kernelevolve("export", run_id, "0", "--db", db, cwd=where)
    assert proc.returncode == 2 and "has not been reviewed" in proc.stderr and "Traceback" not in proc.stderr
    assert kernelevolve("review", run_id, "0", "--reject", "--note", "not yet", "--db", db, cwd=where).returncode == 0
    proc = kernelevolve("export", run_id, "0", "--db", db, cwd=where)
    assert proc.returncode == 2 and "was rejected" in proc.stderr


def test_approved_kernel_exports_as_a_working_candidate(run):
    where, db, run_id = run
    proc = kernelevolve(
        "review",
        run_id,
        "0",
        "--approve",
        "--reviewer",
        "ada",
        "--note",
        "masks checked",
        "--db",
        db,
        "--json",
        cwd=where,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["verdict"] == "approve"
    out = where / "softmax_kernel.py"
    assert kernelevolve("export", run_id, "0", "-o", str(out), "--db", db, cwd=where).returncode == 0
    text = out.read_text()
    assert f"run {run_id}, node 0" in text and "approve by ada: masks checked" in text
    assert "correct, untimed" in text and "class ModelNew" in text
    proc = kernelevolve(
        "eval", str(REPO / "specs" / "softmax.yaml"), str(out), "--device", "interpret", "--json", cwd=where
    )
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
