"""`kernelevolve retime`: an interpreter run's nodes evaluated again by the real evaluator, the results stored
as the nodes' evaluations, the best recomputed and confirmed, the run's state left for an exact resume.

On this CPU machine: the GPU's processes faked as tests/test_fitness.py fakes them (everything between their
JSON and the stored result is the real evaluator and the real command code), and the whole command in a
subprocess with --device interpret (real sandboxed evaluations, static estimates included)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from kernelevolve.cli.retime_cmd import retime_run
from kernelevolve.evaluation import evaluator as evaluator_module
from kernelevolve.evaluation import processes as processes_module
from kernelevolve.evaluation.result import EvalResult, ShapeResult
from kernelevolve.records.result import Retimed
from kernelevolve.memory.repository import BaselineTable, Repository
from kernelevolve.paths import KNOWLEDGE_BASE, SPECS
from kernelevolve.search.random_state import rng_state
from kernelevolve.search.graph import Node
from kernelevolve.spec import load_spec
from tests.cli.console import kernelevolve_many
from tests.test_fitness import FakeGPU

pytestmark = pytest.mark.static_cost  # the estimate is part of what these tests check

TWO_PASS = (Path(__file__).parents[1] / "search" / "fixtures" / "softmax_two_pass.py").read_text()
ONE_PASS = (KNOWLEDGE_BASE / "kernels" / "softmax.py").read_text()


def _interpreter_run(db: str, sources: list[tuple[str | None, bool, float | None]]) -> str:
    """A run as an interpreter search leaves it: (source, correct, static cost) per node, node i the child of 0."""
    spec = load_spec(SPECS / "softmax.yaml")
    repo = Repository(db)
    run_id = repo.create_run(
        spec=spec,
        policy="greedy",
        device="interpret",
        settings={"device": "interpret", "timeout_s": 120.0, "shapes": None},
        rng_state=rng_state(random.Random(5)),
        policy_state={"seen": 3},
        snapshot=spec.path.read_text(),
    )
    labels = [c.label for c in spec.cases("interpret", None)]
    for i, (source, correct, cost) in enumerate(sources):
        node = Node(id=i, parents=(0,) if i else (), source=source)
        repo.add_node(run_id, node, rng_state=rng_state(random.Random(i)), elapsed_s=10.0 * i)
        shapes = [ShapeResult(label=x, params={}, dtype="bfloat16", correct=correct) for x in labels]
        result = EvalResult(correct=correct, shapes=shapes, failure=None if correct else "incorrect")
        if cost is not None:
            result.static = {"cost": cost, "launches": 1, "bytes": 1, "minimal_bytes": 1}
        repo.record_evaluation(
            run_id, i, result, policy_state={"seen": i + 1}, rng_state=rng_state(random.Random(i)), elapsed_s=42.0
        )
    repo.close()
    return run_id


class PerCandidateGPU(FakeGPU):
    """The fake GPU, but a candidate's latency depends on its source: the two-pass softmax is slower."""

    class _Latency:
        def __init__(self, base: dict, candidate: Path):
            self.base, self.candidate = base, candidate

        def get(self, label, default=None):  # asked once the candidate is written (after the go)
            slow = "_row_stats" in self.candidate.read_text()
            return self.base[label] * (2.0 if slow else 1.0) if label in self.base else default

    def run_script(self, script, workdir, **kw):
        # The evaluation's candidate file, beside each process's folder (a judge is not told where it is).
        self.latency_ms = self._Latency(self.base, Path(workdir).parent / "candidate.py")
        outcome = super().run_script(script, workdir, **kw)
        for case in (outcome.result or {}).get("cases", []):
            case.setdefault("message", "")  # as the real judge writes it (stored results are read back)
        return outcome


@pytest.fixture
def gpu(monkeypatch):
    spec = load_spec(SPECS / "softmax.yaml")
    labels = [c.label for c in spec.cases("cuda", None)]
    fake = PerCandidateGPU(latency_ms={}, baseline_ms={label: 1.0 for label in labels})
    fake.base = {label: 0.5 for label in labels}  # the one-pass kernel: 2x over the baseline
    monkeypatch.setattr(processes_module, "run_script", fake.run_script)
    monkeypatch.setattr(processes_module, "render", fake.render)
    monkeypatch.setattr(processes_module, "_software", lambda slot: ("NVIDIA H200", "2.13.0", "3.6.0"))
    monkeypatch.setattr(evaluator_module, "OUTSIDE_MARGIN", 1e9)  # the fake's sleeps are too noisy for the bound
    return fake


def test_retime_on_a_gpu_stores_timings_recomputes_the_best_and_leaves_the_run_resumable(tmp_path, gpu):
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    # By the static estimate the two-pass node 0 leads (as a CPU search may believe); the GPU says otherwise.
    run_id = _interpreter_run(
        db, [(TWO_PASS, True, 0.8), (ONE_PASS, True, 1.0), (TWO_PASS, False, None), (None, False, None)]
    )
    repo = Repository(db)
    before = repo.run(run_id)
    assert repo.load_graph(run_id).best().id == 0
    lines: list[str] = []
    evaluator = evaluator_module.Evaluator(
        device="cuda", gpus=[0], baseline_store=BaselineTable(repo), scratch_root=tmp_path, warm=False
    )
    with evaluator:
        summary = retime_run(repo, before, evaluator, None, say=lines.append)
    graph = repo.load_graph(run_id)
    slow, fast = graph[0].evaluation, graph[1].evaluation
    assert slow.timed and fast.timed and slow.device == fast.device == "cuda"
    assert fast.fitness == pytest.approx(2.0) and slow.fitness == pytest.approx(1.0)
    assert [s.label for s in fast.shapes] == [c.label for c in load_spec(SPECS / "softmax.yaml").cases("cuda", None)]
    assert fast.retimed_from == Retimed(
        device="interpret",
        correct=True,
        failure=None,
        fitness=None,
        shapes=["M=4,N=256 bfloat16", "M=3,N=1000 bfloat16"],
        static_cost=1.0,
    )
    assert graph[2].evaluation.device == "interpret" and graph[3].evaluation.failure == "incorrect"  # not correct: left
    assert graph.best().id == 1 and summary["best"]["id"] == 1 and summary["best_before"]["id"] == 0
    assert fast.recheck is not None and fast.recheck["fitness"] == pytest.approx(2.0)  # confirmed as a search does
    assert summary["rechecked"] == [1] and not fast.marks
    assert lines[0] == f"run {run_id} (softmax): 2 nodes to evaluate on cuda (2 others left as they are)"
    assert any("node 1: 2.000x (was correct (untimed) est. cost 1.00" in line for line in lines), lines
    assert lines[-1] == f"run {run_id}: best node 1 2.000x (before: node 0 correct (untimed) est. cost 0.80)"
    after = repo.run(run_id)  # what resume reads: as the search left it
    assert (after.rng_state, after.policy_state, after.elapsed_s) == (before.rng_state, before.policy_state, 42.0)
    assert after.status == before.status and len(graph) == 4

    lines.clear()  # a second retime (after an interruption, say) skips what is done
    with evaluator_module.Evaluator(device="cuda", gpus=[0], baseline_store=BaselineTable(repo), warm=False) as again:
        retime_run(repo, after, again, None, say=lines.append)
    assert lines[0].endswith("0 nodes to evaluate on cuda (4 others left as they are)")
    repo.close()


def test_retime_command_on_the_interpreter_and_its_errors(tmp_path):
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    run_id = _interpreter_run(db, [(TWO_PASS, True, None), (ONE_PASS, True, None)])  # no estimates: node 0 leads
    nogpu, missing, done = kernelevolve_many(  # one start of the CLI: its two errors, then the retime
        [
            ["retime", run_id, "--db", db],
            ["retime", "nosuchrun", "--device", "interpret", "--db", db],
            ["retime", run_id, "--device", "interpret", "--json", "--db", db],
        ],
        tmp_path,
        dict(os.environ),
        timeout=600,
    )
    assert nogpu.returncode == 2 and nogpu.stderr.startswith("error: --device cuda: no CUDA GPU is visible")
    assert missing.returncode == 2 and "no run or campaign 'nosuchrun'" in missing.stderr
    assert f"recent runs: {run_id}" in missing.stderr and "Traceback" not in missing.stderr

    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert [e["node"] for e in summary["evaluated"]] == [0, 1]
    assert summary["best_before"]["id"] == 0 and summary["best"]["id"] == 1  # the estimate now tells them apart
    assert "[2/2] node 1: correct (untimed) est. cost" in done.stderr
    graph = Repository(db).load_graph(run_id)
    assert graph[0].evaluation.static["launches"] == 2 and graph[1].evaluation.static["launches"] == 1
    assert graph[1].evaluation.retimed_from.device == "interpret"


def test_a_run_made_elsewhere_finds_its_spec_here_or_is_told_to_give_it(tmp_path):
    from types import SimpleNamespace

    from kernelevolve.cli.retime_cmd import RetimeError, _spec_of

    fingerprint = load_spec(SPECS / "softmax.yaml").fingerprint
    laptop = SimpleNamespace(
        id="r-1", spec_path="/home/someone/kernelevolve/specs/softmax.yaml", spec_fingerprint=fingerprint
    )
    assert _spec_of(laptop).path == SPECS / "softmax.yaml"  # the same file name among the bundled specs
    changed = SimpleNamespace(id="r-2", spec_path=str(SPECS / "softmax.yaml"), spec_fingerprint="0" * 16)
    with pytest.raises(RetimeError, match=r"^run r-2: the reference of .*softmax.yaml is not the run's"):
        _spec_of(changed)
    with pytest.raises(RetimeError, match=r"give it with --spec PATH"):
        _spec_of(SimpleNamespace(id="r-3", spec_path="/nowhere/mine.yaml", spec_fingerprint=fingerprint))


def test_retime_evaluates_the_runs_best_first(tmp_path):
    """A retime cut short (a device call's time limit, Ctrl-C) has timed the nodes the run ranks highest:
    the interpreter's estimate orders them (lower cost first), failed ones last under --all."""
    from kernelevolve.cli.retime_cmd import targets

    db = f"sqlite:///{tmp_path / 'order.db'}"
    run_id = _interpreter_run(
        db, [(ONE_PASS, True, 3.0), (TWO_PASS, True, 1.5), (ONE_PASS, False, None), (TWO_PASS, True, 2.0)]
    )
    graph = Repository(db).load_graph(run_id)
    assert [n.id for n in targets(graph, False, "cuda", False)] == [1, 3, 0]
    assert [n.id for n in targets(graph, True, "cuda", False)] == [1, 3, 0, 2]


def test_a_node_whose_retime_failed_in_the_reference_is_retimed_again(tmp_path):
    """The reference ran out of GPU memory at the problem's own sizes: the node's last evaluation is a
    `reference` failure, which says nothing of the node. A later retime takes it again (without --all or
    --again); a node the GPU found incorrect stays as it is."""
    from kernelevolve.cli.retime_cmd import targets

    db = f"sqlite:///{tmp_path / 'again.db'}"
    run_id = _interpreter_run(db, [(ONE_PASS, True, 1.0), (TWO_PASS, True, 2.0), (ONE_PASS, True, 3.0)])
    repo = Repository(db)
    labels = [c.label for c in load_spec(SPECS / "softmax.yaml").cases("cuda", None)]
    for node, failure in ((0, "reference"), (1, "incorrect")):
        shapes = [ShapeResult(label=x, params={}, dtype="bfloat16", correct=False) for x in labels]
        result = EvalResult(correct=False, shapes=shapes, failure=failure, device="cuda")
        result.retimed_from = Retimed(device="interpret", correct=True)
        repo.record_evaluation(
            run_id, node, result, policy_state={"seen": 9}, rng_state=rng_state(random.Random(9)), elapsed_s=50.0
        )
    graph = repo.load_graph(run_id)
    repo.close()
    assert [n.id for n in targets(graph, False, "cuda", False)] == [2, 0]  # the correct one first, as ranked
