"""The hostile corpus (hostile/corpus.py) under the Triton interpreter.

Every cheat must end with fitness 0 and a failure class that names it, first with the static
tampering screen on (what users get), then with it off, so that the sandbox, the tripwire and
the harness's own checks are shown to stop what would slip past the screen. The test process
survives all of them; the honest control stays correct.
"""

import os
from pathlib import Path

import pytest

from kernelevolve.evaluation.evaluator import Evaluator
from kernelevolve.spec import load_spec

from .hostile.corpus import CORPUS, SPEC


@pytest.fixture(scope="module")
def spec():
    return load_spec(SPEC)


@pytest.fixture(scope="module")
def screened():
    return Evaluator(device="interpret", timeout_s=60)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("hostile-scratch")


@pytest.fixture(scope="module")
def unscreened(scratch):
    return Evaluator(device="interpret", timeout_s=25, screen=False, scratch_root=scratch)


def test_corpus_has_the_kinds_the_issue_names():
    assert len([n for n in CORPUS if n != "honest"]) >= 16
    classes = {h.screened for h in CORPUS.values()} | {h.unscreened for h in CORPUS.values()}
    assert {
        "inconsistent",
        "not_a_kernel",
        "mutates_input",
        "tampering",
        "crash",
        "timeout",
        "runtime",
        "incorrect",
        "correct",
    } <= classes


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_screened(screened, spec, name, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-secret-do-not-leak")
    hostile = CORPUS[name]
    result = screened.evaluate(spec, hostile.source)
    if hostile.screened == "correct":
        assert result.correct, f"{result.failure}: {result.message}"
        return
    assert not result.correct and result.fitness == 0.0
    assert result.failure == hostile.screened, (result.failure, result.message)
    assert hostile.words in result.message, result.message
    assert "\n" not in result.message
    assert "sk-test-secret-do-not-leak" not in result.log + result.message


@pytest.mark.parametrize("name", sorted(n for n, h in CORPUS.items() if h.unscreened is not None))
def test_unscreened(unscreened, scratch, spec, name, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-secret-do-not-leak")
    hostile = CORPUS[name]
    evaluator = unscreened
    if name == "fork_bomb":  # 150 forks of a process holding torch: over 25 s on a loaded 2-core machine
        evaluator = Evaluator(device="interpret", timeout_s=120, screen=False, scratch_root=scratch)
    elif name == "sleeps_past_timeout":  # it sleeps for an hour: 10 s show the timeout as well as 25 s
        evaluator = Evaluator(device="interpret", timeout_s=10, screen=False, scratch_root=scratch)
    result = evaluator.evaluate(spec, hostile.source)
    if hostile.unscreened == "correct":
        assert result.correct, f"{result.failure}: {result.message}"
    else:
        assert result.failure == hostile.unscreened, (result.failure, result.message)
        assert result.fitness == 0.0
    if name == "sleeps_past_timeout":  # timed out in the candidate's own call, not before it
        assert "float32 trial 0" in result.message, result.message
    assert "sk-test-secret-do-not-leak" not in result.log + result.message
    # Nothing of the candidate outlives its verdict, and nothing it wrote escaped its scratch.
    assert not _processes_under(scratch)  # run_script returns once every process of the run is gone
    assert not list(Path("/tmp").glob("kernelevolve-escape-*"))


def _processes_under(scratch: Path) -> set[int]:
    """Processes of this test's evaluations (a candidate's forks carry the harness's command line)."""
    out = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if str(scratch).encode() in cmd:
                out.add(int(pid))
    return out


REWRITES_ITS_JUDGES = CORPUS["honest"].source.replace(
    "class ModelNew",
    """import os as _os

for _name in ("../reference.py", "../candidate.py", "../bench/go", "../baseline/go", "../check.json"):
    try:
        with open(_name, "w") as _f:
            _f.write("tampered")
    except OSError:
        pass


class ModelNew""",
    1,
)


def test_a_candidate_cannot_write_beside_its_own_folder(spec, tmp_path):
    """The evaluation folder holds the candidate, the reference every later process loads, and the
    go/stop signals of the processes that wait: a candidate's process may write only its own folder."""
    evaluator = Evaluator(device="interpret", timeout_s=60, screen=False, scratch_root=tmp_path, keep_workdirs=True)
    result = evaluator.evaluate(spec, REWRITES_ITS_JUDGES)
    assert result.correct, f"{result.failure}: {result.message}"
    (workdir,) = tmp_path.iterdir()
    assert (workdir / "reference.py").read_text() == Path(spec.reference).read_text()
    assert (workdir / "candidate.py").read_text() == REWRITES_ITS_JUDGES
    assert not (workdir / "bench").exists() and not (workdir / "check.json").exists()
