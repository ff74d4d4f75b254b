"""KERNELEVOLVE_TEST_SHARE (tests/conftest.py): CI's second Triton environment runs a share of each
parametrized test's cases; what it keeps and what it refuses."""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = """
import pytest

@pytest.mark.parametrize("i", range(7))
def test_many(i):
    pass

@pytest.mark.parametrize("i", [0])
def test_one(i):
    pass

def test_plain():
    pass
"""


def _collect(tmp_path, share: str | None) -> tuple[int, list[str], str]:
    (tmp_path / "test_cases.py").write_text(TESTS)
    env = {k: v for k, v in os.environ.items() if k != "KERNELEVOLVE_TEST_SHARE"}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    if share is not None:
        env["KERNELEVOLVE_TEST_SHARE"] = share
    proc = subprocess.run(
        # The project's conftest as a plugin, on a test file of its own (no torch to import).
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest"]
        + ["--rootdir", str(tmp_path), "-o", "addopts=", str(tmp_path / "test_cases.py")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    ids = [line.split("::", 1)[1] for line in proc.stdout.splitlines() if "::" in line]
    return proc.returncode, ids, proc.stdout + proc.stderr


def test_a_share_keeps_every_nth_case_of_each_parametrized_test_and_every_plain_test(tmp_path):
    _, everything, out = _collect(tmp_path, None)
    assert len(everything) == 9, out
    _, second, out = _collect(tmp_path, "1/3")
    # Cases 1 and 4 of seven; a test with one case keeps it; a plain test always runs.
    assert second == ["test_many[1]", "test_many[4]", "test_one[0]", "test_plain"], out
    assert "5 deselected" in out
    _, first, _ = _collect(tmp_path, "0/2")
    assert first == ["test_many[0]", "test_many[2]", "test_many[4]", "test_many[6]", "test_one[0]", "test_plain"]


def test_a_malformed_share_is_a_usage_error(tmp_path):
    code, _, out = _collect(tmp_path, "2/2")
    assert code != 0 and "KERNELEVOLVE_TEST_SHARE='2/2': give K/N with 0 <= K < N" in out, out
