"""fast_p, the geometric mean and --baseline on a timed campaign. No GPU here: the campaign's runs
get evaluations with GPU latencies written into a real SQLite database, and scoring reads them back."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from kernelevolve.campaign.problems import load_problems
from kernelevolve.campaign.runner import SOLUTIONS, CampaignSettings, create
from kernelevolve.campaign.scoring import score
from kernelevolve.evaluation.result import EvalResult, Failure, ShapeResult
from kernelevolve.records.baselines import BaselineKey
from kernelevolve.records.result import Versions
from kernelevolve.memory import Repository
from kernelevolve.memory import campaigns as store
from kernelevolve.search.random_state import rng_state
from kernelevolve.search.graph import Node
from kernelevolve.runs.session import RunSettings, start_run

from tests.search.conftest import pg_url  # noqa: F401  (fixture: a fresh PostgreSQL database, or skip)

PROBLEMS = Path(__file__).parent / "problems"
GPU = "NVIDIA H200"


def _timed(pairs: list[tuple[float, float]]) -> EvalResult:
    """A correct evaluation: (kernel ms, torch.compile ms) per shape."""
    shapes = [
        ShapeResult(
            label=f"N={i} native", params={"N": i}, dtype="native", correct=True, latency_ms=ms, baseline_ms=base
        )
        for i, (ms, base) in enumerate(pairs)
    ]
    return EvalResult(correct=True, shapes=shapes, device="cuda", timed=True, versions=Versions(gpu=GPU))


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    return f"sqlite:///{tmp_path / 'timed.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")


def test_fast_p_geomean_and_another_baseline(db_url, capsys):
    repo = Repository(db_url)
    problems = load_problems([str(PROBLEMS / f"{n}.py") for n in ("relu", "matmul", "layernorm", "bmm", "conv2d")])
    settings = CampaignSettings(kind=SOLUTIONS, device="cuda", baseline="torch.compile")
    campaign_id = create(repo, problems, settings, skip={"conv2d": "no solution file"})
    results = {
        "relu": _timed([(1.0, 2.0), (1.0, 0.5)]),  # speedups 2 and 0.5: geometric mean 1.0 (not above 1.0)
        "matmul": _timed([(1.0, 1.6)]),  # 1.6x
        "layernorm": _timed([(2.0, 1.8)]),  # 0.9x
        "bmm": EvalResult.failed(Failure.COMPILE, "the kernel did not compile", device="cuda"),
    }
    for row in store.problems(repo, campaign_id):
        if row.name not in results:
            continue
        spec = next(p.spec for p in problems if p.name == row.name)
        run_id = start_run(repo, spec, RunSettings(device="cuda", model="solutions"))
        state = rng_state(random.Random(0))
        repo.add_node(run_id, Node(id=0, source="# kernel"), rng_state=state, elapsed_s=0.0)
        repo.record_evaluation(run_id, 0, results[row.name], policy_state={}, rng_state=state, elapsed_s=1.0)
        store.update_problem(repo, campaign_id, row.position, run_id=run_id, state=store.DONE)
        if row.name == "matmul":  # an eager timing of matmul's shape, cached by an earlier evaluation
            repo.save_baseline(BaselineKey(spec.fingerprint, "N=0 native", "eager", GPU, "2.13", "3.6"), 3.0)

    s = score(repo, campaign_id)
    assert s.timed and s.total == 5 and s.correct == 3 and s.baseline == "torch.compile"
    assert s.fast_p == {"0.0": 3, "0.5": 3, "0.8": 3, "1.0": 1, "1.5": 1, "2.0": 0}
    assert math.isclose(s.geomean_speedup, (1.0 * 1.6 * 0.9) ** (1 / 3))
    assert s.failures == {"compile": 1, "skipped": 1}
    by = {p.name: p for p in s.problems}
    assert math.isclose(by["relu"].speedup, 1.0) and by["bmm"].failure == "compile" and by["matmul"].best_node == 0

    eager = score(repo, campaign_id, baseline="eager")  # only matmul has an eager timing
    by = {p.name: p for p in eager.problems}
    assert math.isclose(by["matmul"].speedup, 3.0) and by["relu"].speedup is None and by["layernorm"].speedup is None
    assert eager.correct == 3 and eager.fast_p["2.0"] == 1 and eager.fast_p["0.0"] == 1
    assert "2 correct problem(s) have no eager timing" in eager.note

    from kernelevolve.cli import app

    app(["score", "--db", db_url, "--json"], standalone_mode=False)  # no CAMPAIGN: the list
    listed = {c["id"]: c for c in json.loads(capsys.readouterr().out)}
    assert listed[campaign_id]["problems"] == 5 and listed[campaign_id]["done"] == 4
