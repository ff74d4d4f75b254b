"""The hostile corpus (hostile/) under the Triton interpreter.

corpus.py: every cheat must end with fitness 0 and a failure class that names it, first with the static
tampering screen on (what users get), then, where the screen is what refused it, with it off, so that
the sandbox, the tripwire and the harness's own checks are shown to stop what would slip past the screen.

documented.py: the cheats public kernel benchmarks and competitions documented, each asserted to get what
a correct evaluator answers. Those the evaluator does not catch yet are strict xfails naming the change
they wait for: an entry that becomes caught fails as XPASS until its mark (and its `caught_today`) goes.
Entries whose mechanism needs a GPU run in bench/hostile_corpus.py; here they are only listed.

The test process and a search survive every entry; the honest control stays correct.
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from kernelevolve.evaluation.evaluator import Evaluator
from kernelevolve.harness.runtime.screen import screen_source
from kernelevolve.spec import load_spec

from .hostile import catalogue
from .hostile.corpus import ABOUT, CORPUS, SPEC
from .hostile.documented import (
    ANSWERS,
    CHEATS,
    FIGURES_NOT_BELIEVED,
    NOTHING_PERSISTS,
    SPECS,
    meets,
)

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-test-secret-do-not-leak"


@pytest.fixture(scope="module")
def spec():
    return load_spec(SPEC)


@pytest.fixture(scope="module")
def specs():
    return {name: load_spec(path) for name, path in SPECS.items()}


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
        "not_a_kernel",
        "mutates_input",
        "tampering",
        "crash",
        "timeout",
        "runtime",
        "incorrect",
        "correct",
    } <= classes


def test_corpus_covers_what_was_documented():
    """At least 50 kinds of cheat, each saying what it does, where it was documented and what a correct
    evaluator answers; together they cite every write-up the KernelEvolve red-team named."""
    kinds = [n for n in CORPUS if n != "honest"] + list(CHEATS)
    assert len(kinds) == len(set(kinds)) >= 50
    assert set(ABOUT) == set(CORPUS)
    classes = {"incorrect", "not_a_kernel", "mutates_input", "inconsistent", "timing", "tampering", "crash"}
    for name, c in CHEATS.items():
        assert c.kind and c.source and c.where in ("cpu", "gpu"), name
        assert c.answer in ANSWERS or c.answer in classes, (name, c.answer)
        assert c.caught_today is not False or c.needs, f"{name}: an entry not caught today names the change it needs"
        assert c.caught_today is not None, f"{name}: recorded (CPU entries by the tests, GPU ones on an H200)"
        assert "\n" not in c.kind + c.source, name
    sources = " ".join(c.source for c in CHEATS.values()) + " ".join(s for _, s in ABOUT.values())
    for writeup in ("KernelBench", "GPU MODE", "CUDA-L1", "Kevin", "METR", "Makora", "Sakana", "KernelEvolve red-team"):
        assert writeup in sources, writeup
    assert {c.where for c in CHEATS.values()} == {"cpu", "gpu"}


def test_readme_table_is_the_catalogue():
    """tests/evaluation/hostile/README.md's table is catalogue.py's (python -m tests.evaluation.hostile.catalogue --write)."""
    assert catalogue.readme_table() == catalogue.table()


def test_bench_script_lists_every_entry():
    """bench/hostile_corpus.py runs every entry on a GPU: on a CPU it at least imports and lists them."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "hostile_corpus.py"), "--list"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    listed = {line.split()[0] for line in out.stdout.splitlines() if line.strip()}
    assert listed == set(CORPUS) | set(CHEATS)


def _screen_refuses(name: str) -> bool:
    return bool(screen_source(CORPUS[name].source))


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_screened(screened, spec, name, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    hostile = CORPUS[name]
    result = screened.evaluate(spec, hostile.source)
    if hostile.screened == "correct":
        assert result.correct, f"{result.failure}: {result.message}"
        return
    assert not result.correct and result.fitness == 0.0
    assert result.failure == hostile.screened, (result.failure, result.message)
    assert hostile.words in result.message, result.message
    assert "\n" not in result.message
    assert SECRET not in result.log + result.message


# With the screen off only where the screen is what refused the entry: for the others the run is the same.
@pytest.mark.parametrize(
    "name", sorted(n for n, h in CORPUS.items() if h.unscreened is not None and _screen_refuses(n))
)
def test_unscreened(unscreened, scratch, spec, name, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
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
    assert SECRET not in result.log + result.message
    # Nothing of the candidate outlives its verdict, and nothing it wrote escaped its scratch.
    assert not _processes_under(scratch)  # the candidate's: run_script returns once every one of them is gone
    assert not list(Path("/tmp").glob("kernelevolve-escape-*"))


# Every documented CPU entry with KERNELEVOLVE_HOSTILE=all; by default the core ones (each check that
# catches an entry today, once) and every entry not caught today: an evaluation costs ~6 s of CPU (two
# processes importing torch), and the whole corpus would take the CPU test past its time.
ALL = os.environ.get("KERNELEVOLVE_HOSTILE", "") == "all"


def _documented_cpu() -> list:
    params = []
    for name, c in sorted(CHEATS.items()):
        if c.where != "cpu":
            continue
        if c.caught_today is False:
            marks = [pytest.mark.xfail(strict=True, reason=f"needs {c.needs}")]
        elif c.core or ALL:
            marks = []
        else:
            marks = [pytest.mark.skip(reason="the same check as a core entry: KERNELEVOLVE_HOSTILE=all runs it")]
        params.append(pytest.param(name, marks=marks, id=name))
    return params


MARKER = "kernelevolve-hostile-*"


def _markers(scratch: Path) -> list[Path]:
    """The marker files the corpus's candidates write, wherever a later evaluation could find them."""
    found = list(scratch.rglob(MARKER))
    for place in (Path("/dev/shm"), Path(tempfile.gettempdir())):
        found += list(place.glob(MARKER)) + list(place.glob(f"kernelevolve-*/**/{MARKER}"))
    triton_home = Path.home() / ".triton"
    if triton_home.is_dir():
        found += list(triton_home.rglob(MARKER))
    return found


@pytest.mark.parametrize("name", _documented_cpu())
def test_documented(specs, name, tmp_path, monkeypatch):
    """What a correct evaluator answers for each documented cheat whose mechanism exists on a CPU."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    cheat = CHEATS[name]
    limits = {"max_memory_bytes": cheat.memory_limit} if cheat.memory_limit else {}
    before = set(_markers(tmp_path)) if cheat.check == NOTHING_PERSISTS else set()
    with Evaluator(device="interpret", timeout_s=60, screen=cheat.screen, scratch_root=tmp_path, **limits) as ev:
        result = ev.evaluate(specs[cheat.spec], cheat.code)
    # Whatever the answer: one line, a class when it failed, nothing secret, fitness 0 unless correct.
    assert "\n" not in result.message and (result.correct or (result.failure and result.message)), result
    assert SECRET not in result.log + result.message
    problem = meets(cheat.answer, result.correct, result.failure, result.fitness, result.marks)
    assert problem is None, f"{problem}: {result.message}"
    if cheat.check == NOTHING_PERSISTS:
        left = set(_markers(tmp_path)) - before
        assert not left, f"files the candidate wrote outlive its verdict: {sorted(left)[:3]}"
    if cheat.check == FIGURES_NOT_BELIEVED:
        figures = (result.scheduling.gpu_prepared_bytes, result.scheduling.gpu_peak_bytes)
        assert 2**50 not in figures, result.scheduling
    assert not _processes_under(tmp_path)


def test_a_search_survives_cheats_that_forge_their_verdict(tmp_path, specs):
    """A search whose model proposes cheats that replace their process or finish the harness's result
    early goes on: each is a failed node with a class and one line, and the honest control is the best."""
    from kernelevolve.memory import Repository
    from kernelevolve.operators.base import BaseOperator, Proposal
    from kernelevolve.runs.session import RunSettings, build_engine, start_run
    from kernelevolve.spec import Budget

    order = ["execv_forged_result", "finishes_its_result_object", "honest"]
    sources = [CHEATS[n].code if n in CHEATS else CORPUS[n].source for n in order]

    class Scripted(BaseOperator):
        name = "scripted"

        def __init__(self):
            self.served = 0

        def _next(self) -> Proposal:
            source = sources[self.served % len(sources)]
            self.served += 1
            return Proposal(source=source, note=order[(self.served - 1) % len(order)])

        def draft(self, spec, context):
            return self._next()

        def improve(self, parents, context):
            return self._next()

    repo = Repository(f"sqlite:///{tmp_path / 'hostile.db'}")
    settings = RunSettings(
        policy="greedy",
        policy_options={"drafts": len(order)},
        limits=Budget(max_nodes=len(order)),
        device="interpret",
        seed=5,
    )
    run_id = start_run(repo, specs["strict"], settings)
    with Evaluator(device="interpret", timeout_s=60, scratch_root=tmp_path) as evaluator:
        engine = build_engine(repo, run_id, operator=Scripted(), evaluator=evaluator, parallel=1)
        assert engine.run() == "nodes"
    graph = repo.load_graph(run_id)
    nodes = sorted(graph.nodes(), key=lambda n: n.id)
    assert len(nodes) == len(order) and not graph.pending()
    by_source = {n.source.strip(): n for n in nodes}
    for name, source in zip(order, sources):
        node = by_source[source.strip()]
        if name == "honest":
            assert node.correct, node.evaluation.message
            continue
        assert not node.correct and node.fitness == 0.0, name
        assert node.failure and node.evaluation.message and "\n" not in node.evaluation.message, name
    best = max((n for n in nodes if n.correct), key=lambda n: n.score)
    assert best.source.strip() == CORPUS["honest"].source.strip()
    assert not _processes_under(tmp_path)


def _processes_under(scratch: Path) -> set[int]:
    """Processes of this test's evaluations (a candidate's forks carry the harness's command line). A judge
    (no candidate code) is believed once its verdict is written and may still be exiting: it must be gone
    within seconds; every other process, at once."""
    deadline = time.monotonic() + 15
    while True:
        found = {}
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if str(scratch).encode() in cmd:
                    found[int(pid)] = b"/judge/" in cmd or b"/judge-timed/" in cmd
        candidates = {pid for pid, judge in found.items() if not judge}
        if candidates or not found or time.monotonic() > deadline:
            return set(found) if not candidates and found else candidates
        time.sleep(0.1)


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
