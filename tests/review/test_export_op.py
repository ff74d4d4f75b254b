"""`kernelevolve export --as-op`: an approved node of a real run as a PyTorch custom op whose
generated test passes under the interpreter (torch.compile included), and whose benchmark runs."""

import json
import re
import subprocess
import sys

import pytest

from tests.review.conftest import copy_of, kernelevolve

# Three tests read one `exported` (two exports and their generated tests, torch.compile included):
# made once, on one worker.
pytestmark = pytest.mark.xdist_group("review-export-op")


@pytest.fixture(scope="module")
def exported(real_run, tmp_path_factory):
    """The run's correct node, approved, exported twice: as kev::softmax_ke, and as kev::softmax_bad
    with its kernel then broken (the generated test must catch it)."""
    _, _, run_id = real_run
    from kernelevolve.memory import Repository
    from kernelevolve.review import ReviewError, review
    from kernelevolve.review.export_op import export_package

    root = tmp_path_factory.mktemp("op")
    db = copy_of(real_run, root)
    repo = Repository(db)
    node = next(n for n in repo.load_graph(run_id).nodes() if n.correct)
    with pytest.raises(ReviewError, match="has not been reviewed"):
        export_package(repo, run_id, node.id, root / "refused", "kev::softmax_ke")
    assert not (root / "refused").exists()
    review(repo, run_id, node.id, "approve", reviewer="ada")
    # The command in process (its start-up would be most of its time; the refusal test below runs the
    # console script).
    from typer.testing import CliRunner

    from kernelevolve.cli import app

    out = CliRunner().invoke(
        app, ["export", run_id, str(node.id), "-o", str(root / "good"), "--as-op", "kev::softmax_ke", "--db", db]
    )
    assert out.exit_code == 0, out.output
    export_package(repo, run_id, node.id, root / "bad", "kev::softmax_bad")
    kernel = root / "bad" / "softmax_bad_kernel.py"
    assert "return softmax_forward(x)" in kernel.read_text()
    kernel.write_text(kernel.read_text().replace("return softmax_forward(x)", "return softmax_forward(x).flip(-1)"))
    # Both generated tests in one pytest process (one interpreter start-up): their op names and
    # module names differ. Of the broken op's, only the comparisons with the reference (what must catch
    # it): its torch.compile check traces the same op code as the good one's, which runs.
    tests = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-v",
            "-p",
            "no:cacheprovider",
            str(root / "good" / "softmax_ke_test.py"),
            str(root / "bad" / "softmax_bad_test.py") + "::test_matches_the_reference",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return root, node, tests


def _outcomes(stdout: str, test_file: str) -> dict[str, str]:
    return dict(re.findall(rf"{test_file}::(.+?) (PASSED|FAILED|ERROR)", stdout))


def test_the_exported_op_passes_its_own_test_and_compiles_without_graph_breaks(exported):
    root, node, tests = exported
    record = json.loads((root / "good" / "softmax_ke_export.json").read_text())
    assert record["review"]["verdict"] == "approve" and record["node"] == node.id
    assert "torch.library.custom_op" in (root / "good" / "softmax_ke_op.py").read_text()
    good = _outcomes(tests.stdout, "softmax_ke_test.py")
    # Every interpreter case of the spec, two seeds each, and the torch.compile(fullgraph=True) check.
    matches = [k for k in good if k.startswith("test_matches_the_reference[")]
    assert len(matches) == 2 * len(record["cases_interpret"]) and all(good[k] == "PASSED" for k in matches), (
        tests.stdout[-3000:]
    )
    assert good["test_torch_compile_traces_the_op_without_graph_breaks"] == "PASSED"


def test_the_generated_test_fails_a_wrong_kernel(exported):
    _, _, tests = exported
    bad = _outcomes(tests.stdout, "softmax_bad_test.py")
    assert bad and all(v == "FAILED" for k, v in bad.items() if k.startswith("test_matches")), tests.stdout[-3000:]
    assert "elements outside atol" in tests.stdout and tests.returncode == 1


def test_the_benchmark_checks_itself_on_cpu_and_asks_for_a_gpu(exported, tmp_path):
    root, _, _ = exported
    bench = root / "good" / "softmax_ke_bench.py"
    proc = subprocess.run(
        [sys.executable, str(bench), "--out", str(tmp_path / "dry"), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((tmp_path / "dry" / "summary.json").read_text())
    assert summary["dry_run"] and summary["cases"] and all(c.get("ran") for c in summary["cases"])
    proc = subprocess.run(
        [sys.executable, str(bench), "--out", str(tmp_path / "gpu")], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0 and "no CUDA GPU" in proc.stderr


def test_suspicious_or_bad_exports_are_refused(tmp_path):
    from kernelevolve.memory import Repository
    from kernelevolve.review import ReviewError
    from kernelevolve.review.export_op import export_package
    from tests.review.synthetic import write_synthetic_run

    db = f"sqlite:///{tmp_path / 's.db'}"
    run_id = write_synthetic_run(db, 6, seed=1, suspicious=5)
    repo = Repository(db)
    for node, name, unreviewed, words in [
        (5, "kev::x", False, "is marked suspicious"),
        (5, "not-a-name", True, "give NAMESPACE::NAME"),
        (99, "kev::x", True, "has no node 99"),
    ]:
        with pytest.raises(ReviewError, match=words):
            export_package(repo, run_id, node, tmp_path / "op", name, allow_unreviewed=unreviewed)
    proc = kernelevolve(
        "export", run_id, "5", "-o", str(tmp_path / "op"), "--as-op", "kev::x", "--db", db, cwd=tmp_path
    )
    assert proc.returncode == 2 and "is marked suspicious" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    export_package(repo, run_id, 5, tmp_path / "op", "kev::x", allow_unreviewed=True)
    assert "NOT REVIEWED" in (tmp_path / "op" / "x_kernel.py").read_text()
    # An op checked against another reference than the run's would lie: refused, as `resume` refuses.
    repo.update_run(run_id, spec_fingerprint="0" * 16)
    with pytest.raises(ReviewError, match=f"run {run_id}: the reference of .*softmax.yaml changed since the run"):
        export_package(repo, run_id, 4, tmp_path / "op2", "kev::x", allow_unreviewed=True)
    repo.update_run(run_id, spec_path=str(tmp_path / "gone.yaml"))
    with pytest.raises(ReviewError, match="its spec cannot be loaded any more: .*gone.yaml: no such file"):
        export_package(repo, run_id, 4, tmp_path / "op2", "kev::x", allow_unreviewed=True)
    assert not (tmp_path / "op2").exists()
