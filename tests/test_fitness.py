"""The CPU-testable half of timing: fitness (geometric mean of speedups), the evaluator's reading of
the benchmark processes' JSON, GB/s and TFLOP/s from the spec's bytes/flops, and the baseline store.

The GPU processes are replaced by a fake `run_script` that answers with the JSON a harness process
would leave; everything between that JSON and the EvalResult is the real evaluator.
"""

from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path

import pytest

from kernelevolve.evaluation import evaluator as evaluator_module
from kernelevolve.evaluation import processes as processes_module
from kernelevolve.memory.repository import BaselineTable, Repository
from kernelevolve.evaluation.result import EvalResult, Failure, ShapeResult
from kernelevolve.evaluation.sandbox import Outcome
from kernelevolve.paths import SPECS
from kernelevolve.records.baselines import BaselineKey
from kernelevolve.spec import load_spec


def timed(*pairs: tuple[float, float], correct: bool = True) -> EvalResult:
    """A timed result with one shape per (latency_ms, baseline_ms)."""
    shapes = [
        ShapeResult(label=f"s{i}", params={}, dtype="bfloat16", correct=True, latency_ms=lat, baseline_ms=base)
        for i, (lat, base) in enumerate(pairs)
    ]
    return EvalResult(correct=correct, shapes=shapes, device="cuda", timed=True)


# -- fitness ---------------------------------------------------------------------------------------


def test_fitness_is_geometric():
    # Speedups 4x and 1x: geometric mean 2.0, arithmetic mean 2.5.
    assert timed((1.0, 4.0), (2.0, 2.0)).fitness == pytest.approx(2.0)
    # 2x faster on one shape and 2x slower on another is no gain (arithmetic: 1.25).
    assert timed((1.0, 2.0), (2.0, 1.0)).fitness == pytest.approx(1.0)
    # Three shapes: (8 * 1 * 1) ** (1/3) = 2 (arithmetic: 3.33; median: 1).
    assert timed((0.5, 4.0), (3.0, 3.0), (1.0, 1.0)).fitness == pytest.approx(2.0)
    assert timed((1.0, 1.5)).fitness == pytest.approx(1.5)


def test_fitness_is_zero_when_anything_failed_and_none_when_untimed():
    one_wrong = timed((1.0, 4.0), (1.0, 4.0))
    one_wrong.shapes[1].correct = False
    assert one_wrong.fitness == 0.0
    unchecked = timed((1.0, 4.0), (1.0, 4.0))
    unchecked.shapes[1].correct = None  # an earlier failure stopped the run before this shape
    assert unchecked.fitness == 0.0
    assert timed((1.0, 4.0), correct=False).fitness == 0.0
    assert EvalResult.failed(Failure.COMPILE, "boom").fitness == 0.0
    untimed = timed((1.0, 4.0))
    untimed.timed = False  # the interpreter: correct, no speedup to claim
    assert untimed.fitness is None
    missing = timed((1.0, 4.0), (None, 2.0))  # a shape without a latency
    assert missing.fitness is None
    assert ShapeResult("x", {}, "bfloat16", latency_ms=0.0, baseline_ms=1.0).speedup is None  # never infinite


def test_fitness_and_speedups_survive_a_round_trip():
    result = timed((0.5, 1.0), (2.0, 1.0))
    stored = json.loads(json.dumps(result.to_dict()))
    assert stored["fitness"] == pytest.approx(1.0) and [s["speedup"] for s in stored["shapes"]] == [2.0, 0.5]
    again = EvalResult.from_dict(stored)
    assert again.fitness == pytest.approx(result.fitness) and again.shapes == result.shapes


# -- the evaluator's timing path, with the GPU processes faked ------------------------------------

SOURCE = "import torch\nimport triton\n"
SHAPES = [{"M": 32768, "N": 4096}, {"M": 1024, "N": 262144}]


class FakeGPU:
    """Stands in for run_script: answers each harness process with the JSON it would leave."""

    def __init__(self, latency_ms: dict, baseline_ms: dict, candidate_failure: dict | None = None):
        self.latency_ms, self.baseline_ms, self.candidate_failure = latency_ms, baseline_ms, candidate_failure
        self.runs: list[tuple[str, list[str]]] = []  # (phase, case labels)
        self.intervals: list[tuple[str, float, float]] = []  # (phase, from, to) of each process's work after its go
        self.hold_s = 0.0  # how long each process works after its go
        self.planned: list[dict] = []  # per timed judge: the loops' call counts it was told while preparing

    @staticmethod
    def _outside_loops(folder, latencies: list[float]) -> None:
        """The process's side of the outside-timed loops (harness/runtime/outside.py): each takes its
        calls times the latency this fake says; the fake judge believes any digests."""
        from kernelevolve.harness.runtime import outside

        for n, latency_ms in enumerate(latencies):
            for idx in range(outside.LOOPS):
                payload = outside.await_release(str(folder), f"c{n}.{idx}", None, latency_ms, timeout_s=10)
                time.sleep(payload["calls"] * latency_ms / 1e3)
                outside.report_done(str(folder), f"c{n}.{idx}", [[1.0]] * payload["calls"])

    def render(self, name: str, config: dict) -> str:
        return json.dumps({"name": name, "config": config})

    def run_script(
        self,
        script: str,
        workdir,
        *,
        limits,
        env,
        result_path,
        clock=None,
        prepare_timeout_s=0.0,
        cancel=None,
        stdin_bytes=None,
    ) -> Outcome:
        rendered = json.loads(script)
        config = rendered["config"]
        if clock is not None:  # a process that prepares when told, then waits for the evaluator's go (or stop)
            deadline = time.monotonic() + 10
            while not (workdir / "go").exists():
                assert time.monotonic() < deadline, "the evaluator never said go or stop"
                if (workdir / "stop").exists() or (cancel is not None and cancel.is_set()):
                    name = rendered["name"]
                    self.runs.append(
                        ("stopped " + (f"judge {config['mode']}" if name == "judge" else config.get("mode", name)), [])
                    )
                    return Outcome(
                        returncode=0,
                        timed_out=False,
                        signal_name=None,
                        duration_s=0.01,
                        stdout="",
                        stderr="",
                        result={"stage": "done", "cancelled": True},
                    )
                ready = "prepare_path" not in config or (workdir / "prepare").exists()
                if ready and not Path(result_path).exists():
                    prepared = {"stage": "waiting for the evaluator's go", "environment": {"gpu_prepared_bytes": 1000}}
                    Path(result_path).write_text(json.dumps(prepared))
                time.sleep(0.005)
        labels = [c["label"] for c in config["cases"]]
        if rendered["name"] == "judge" and config["mode"] == "timed":  # what the evaluator hands the timed judge
            loops = json.loads((workdir / "go").read_text())["outside"]
            from kernelevolve.harness.runtime import outside

            assert sorted(loops) == [f"c{n}.{i}" for n in range(len(labels)) for i in range(outside.LOOPS)], loops
            assert all(len(loop["sums"]) == loop["calls"] for loop in loops.values()), loops
            # The loops ran on the seeds the judge learned on its stdin, and with the call counts it was told
            # while preparing (where the baseline was cached then): it could compute its checks beforehand.
            assert json.loads(stdin_bytes) == {name: loop["seed"] for name, loop in loops.items()}
            planned = json.loads((workdir / "prepare").read_text()).get("outside_calls", {})
            assert all(loops[f"c{n}.{i}"]["calls"] == c for n, c in planned.items() for i in range(outside.LOOPS))
            self.planned.append(planned)
        else:
            assert stdin_bytes is None  # only the timing judge is told anything on its stdin
        name = rendered["name"]
        phase = {"correctness": "correctness", "judge": f"judge {config.get('mode')}"}.get(name) or config["mode"]
        self.runs.append((phase, labels))
        began = time.monotonic()
        time.sleep(self.hold_s)
        self.intervals.append((phase, began, time.monotonic()))
        data = {"stage": "done", "environment": {"gpu": "NVIDIA H200", "gpu_prepared_bytes": 1000}}
        if phase == "correctness":  # the candidate's side: outputs handed over, no verdict of its own
            data["cases"] = [{"label": label, "correct": None} for label in labels]
        elif phase.startswith("judge"):
            data["cases"] = [{"label": label, "correct": True, "max_abs_err": 0.0} for label in labels]
        elif phase == "baseline":
            data["cases"] = [{"label": label, "baseline_ms": self.baseline_ms[label]} for label in labels]
            self._outside_loops(workdir, [self.baseline_ms[label] for label in labels])
        elif self.candidate_failure is not None:
            data.update(stage="timing", failure=self.candidate_failure, cases=[])
        else:
            data["cases"] = [{"label": label, "latency_ms": self.latency_ms.get(label)} for label in labels]
            self._outside_loops(workdir, [self.latency_ms.get(label, 1.0) for label in labels])
        return Outcome(
            returncode=0, timed_out=False, signal_name=None, duration_s=0.01, stdout="", stderr="", result=data
        )


@pytest.fixture
def spec():
    return load_spec(SPECS / "softmax.yaml")  # bytes: 2*M*N*e, flops: 5*M*N


@pytest.fixture
def gpu(monkeypatch, spec):
    labels = [c.label for c in spec.cases("cuda", SHAPES)]
    fake = FakeGPU(latency_ms={labels[0]: 0.5, labels[1]: 2.0}, baseline_ms={labels[0]: 1.0, labels[1]: 1.0})
    monkeypatch.setattr(processes_module, "run_script", fake.run_script)
    monkeypatch.setattr(processes_module, "render", fake.render)
    monkeypatch.setattr(processes_module, "_software", lambda slot: ("NVIDIA H200", "2.13.0", "3.6.0"))
    # The fake's outside-timed loops sleep: on a loaded CPU their slopes are too noisy for the bound, which
    # test_a_latency_below_what_its_loops_take_from_outside_is_replaced_and_marked tests with a wide gap.
    monkeypatch.setattr(evaluator_module, "OUTSIDE_MARGIN", 1e9)
    fake.labels = labels
    return fake


def _evaluator(tmp_path, store=None):
    return evaluator_module.Evaluator(
        device="cuda",
        gpus=[0],
        baseline_store=store or BaselineTable(Repository(f"sqlite:///{tmp_path / 'b.db'}")),
        scratch_root=tmp_path,
        warm=False,  # no processes started ahead: each test counts the harness runs of its own candidates
    )


def test_timed_evaluation_reads_latencies_and_derives_speedup_bandwidth_and_throughput(tmp_path, spec, gpu):
    result = _evaluator(tmp_path).evaluate(spec, SOURCE, shapes=SHAPES)
    assert result.correct and result.timed and result.failure is None, result.message
    first, second = result.shapes
    assert (first.latency_ms, first.baseline_ms, second.latency_ms, second.baseline_ms) == (0.5, 1.0, 2.0, 1.0)
    assert (first.speedup, second.speedup) == (2.0, 0.5)
    assert result.fitness == pytest.approx(1.0)  # 2x and 0.5x: no gain overall
    for shape, params in zip(result.shapes, SHAPES):
        seconds = shape.latency_ms / 1e3
        moved = 2 * params["M"] * params["N"] * 2  # bf16: 2 bytes an element, read once and written once
        assert shape.gbps == pytest.approx(moved / seconds / 1e9)
        assert shape.tflops == pytest.approx(5 * params["M"] * params["N"] / seconds / 1e12)
    assert first.gbps == pytest.approx(1073.741824)  # 2^29 bytes in 0.5 ms
    assert "suspicious" not in result.marks


def test_a_shape_without_a_latency_leaves_the_result_untimed(tmp_path, spec, gpu):
    del gpu.latency_ms[gpu.labels[1]]
    result = _evaluator(tmp_path).evaluate(spec, SOURCE, shapes=SHAPES)
    assert result.correct and not result.timed and result.fitness is None
    assert result.shapes[1].gbps is None and result.shapes[0].gbps == pytest.approx(1073.741824)


def test_a_failure_reported_by_the_benchmark_process_is_the_results_failure(tmp_path, spec, gpu):
    gpu.candidate_failure = {
        "class": "timing",
        "message": "work launched on another stream\nmore detail",
        "traceback": "Traceback ...\nTimingError",
    }
    result = _evaluator(tmp_path).evaluate(spec, SOURCE, shapes=SHAPES)
    assert (result.correct, result.failure, result.message) == (False, "timing", "work launched on another stream")
    assert result.fitness == 0.0 and "TimingError" in result.log


def test_baselines_are_timed_once_then_cached_per_gpu_and_software(tmp_path, spec, gpu, monkeypatch):
    store = BaselineTable(Repository(f"sqlite:///{tmp_path / 'b.db'}"))
    first = _evaluator(tmp_path, store).evaluate(spec, SOURCE, shapes=SHAPES)
    # The baseline and candidate timing processes start beside the candidate's correctness check and
    # time only after it (and its judge), one after the other; the timed calls' judge comes last.
    assert [p for p, _ in gpu.runs] == ["correctness", "judge check", "baseline", "candidate", "judge timed"]
    assert dict(gpu.runs)["baseline"] == gpu.labels and not any(s.baseline_cached for s in first.shapes)
    keys = {k: v for k, v in store.lookup(spec.fingerprint).items() if k.kind == spec.baseline}
    assert sorted(keys.values()) == [1.0, 1.0]
    assert {(k.fingerprint, k.gpu, k.torch, k.triton) for k in keys} == {
        (spec.fingerprint, "NVIDIA H200", "2.13.0", "3.6.0")
    }

    gpu.runs.clear()
    gpu.baseline_ms = {}  # a second baseline run would raise KeyError
    again = _evaluator(tmp_path, store).evaluate(spec, SOURCE, shapes=SHAPES)
    assert [p for p, _ in gpu.runs] == ["correctness", "judge check", "candidate", "judge timed"]
    assert all(s.baseline_cached for s in again.shapes) and again.fitness == pytest.approx(first.fitness)
    assert gpu.planned[0] == {} and sorted(gpu.planned[-1]) == ["0", "1"]  # cached: the judge knew the loops' size

    # Another Triton is another baseline: timed afresh, never read from the other version's entry.
    monkeypatch.setattr(processes_module, "_software", lambda slot: ("NVIDIA H200", "2.13.0", "3.9.0"))
    gpu.runs.clear()
    gpu.baseline_ms = {gpu.labels[0]: 3.0, gpu.labels[1]: 3.0}
    other = _evaluator(tmp_path, store).evaluate(spec, SOURCE, shapes=SHAPES)
    assert [p for p, _ in gpu.runs] == ["correctness", "judge check", "baseline", "candidate", "judge timed"]
    assert [s.baseline_ms for s in other.shapes] == [3.0, 3.0] and len(
        store.lookup(spec.fingerprint)
    ) == 8  # latency and outside slope


def test_a_candidate_that_fails_its_checks_is_never_timed_but_its_baseline_is(tmp_path, spec, gpu, monkeypatch):
    store = BaselineTable(Repository(f"sqlite:///{tmp_path / 'b.db'}"))
    real = gpu.run_script

    def wrong(script, workdir, **kw):
        outcome = real(script, workdir, **kw)
        if json.loads(script)["name"] == "judge" and json.loads(script)["config"]["mode"] == "check":
            outcome.result["cases"][0].update(correct=False, failure="incorrect", message="outside atol")
        return outcome

    monkeypatch.setattr(processes_module, "run_script", wrong)
    result = _evaluator(tmp_path, store).evaluate(spec, SOURCE, shapes=SHAPES)
    assert not result.correct and result.fitness == 0.0 and "benchmark" not in result.phases_s
    assert [p for p, _ in gpu.runs] == [
        "correctness",
        "judge check",
        "stopped candidate",
        "stopped judge timed",
        "baseline",
    ]
    timed = {k: v for k, v in store.lookup(spec.fingerprint).items() if k.kind == spec.baseline}
    assert sorted(timed.values()) == [1.0, 1.0]  # the next candidate will need it


# -- the baseline store ----------------------------------------------------------------------------


def test_evaluations_sharing_a_gpu_check_side_by_side_and_time_alone(tmp_path, spec, gpu, monkeypatch):
    monkeypatch.setattr(evaluator_module, "_usable_memory", lambda index: 10**9)  # room for both
    evaluator = evaluator_module.Evaluator(
        device="cuda",
        gpus=[0],
        per_gpu=2,
        warm=False,
        baseline_store=BaselineTable(Repository(f"sqlite:///{tmp_path / 'b.db'}")),
        scratch_root=tmp_path,
    )
    assert evaluator.parallelism == 2
    assert evaluator.evaluate(spec, SOURCE, SHAPES).timed  # caches the baselines, learns what it holds
    gpu.intervals.clear()
    gpu.hold_s = 0.3
    results = []
    both = [threading.Thread(target=lambda: results.append(evaluator.evaluate(spec, SOURCE, SHAPES))) for _ in "ab"]
    for thread in both:
        thread.start()
    for thread in both:
        thread.join()
    assert [r.timed for r in results] == [True, True]
    checks = [(a, b) for phase, a, b in gpu.intervals if phase == "correctness"]
    timings = [(a, b) for phase, a, b in gpu.intervals if phase == "candidate"]
    assert len(checks) == 2 and len(timings) == 2

    def overlap(x, y):
        return x[0] < y[1] and y[0] < x[1]

    assert overlap(*checks)  # the two checks shared the GPU
    assert not overlap(*timings)
    assert not any(overlap(t, c) for t in timings for c in checks)  # nothing ran beside a timing


def test_the_database_baseline_store_persists_across_processes_by_spec(tmp_path):
    url = f"sqlite:///{tmp_path / 'k.db'}"
    store = BaselineTable(Repository(url))
    assert store.lookup("abc") == {}
    m1, m2 = (BaselineKey("abc", f"M={m} bfloat16", "torch.compile", "H200", "2.13", "3.6") for m in (1, 2))
    store.save(m1, 0.25)
    store.save(m2, 0.5)
    store.save(BaselineKey("xyz", "M=1 bfloat16", "eager", "H200", "2.13", "3.6"), 9.0)
    fresh = BaselineTable(Repository(url))  # another process, later
    assert fresh.lookup("abc") == {m1: 0.25, m2: 0.5}
    assert list(fresh.lookup("xyz").values()) == [9.0]
    fresh.save(m1, 0.3)  # re-timed: the newest counts
    assert store.lookup("abc")[m1] == 0.3
    eager = BaselineKey("abc", "M=1 bfloat16", "eager", "H200", "2.13", "3.6")
    assert eager not in store.lookup("abc")  # another baseline kind is another timing


SOFTWARE = ("eager", "H200", "2.13", "3.6")


def test_the_database_baseline_store_keeps_every_concurrent_save(tmp_path):
    store = BaselineTable(Repository(f"sqlite:///{tmp_path / 'k.db'}"))
    threads = [
        threading.Thread(target=lambda i=i: store.save(BaselineKey("spec", f"shape {i}", *SOFTWARE), float(i)))
        for i in range(16)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.lookup("spec") == {BaselineKey("spec", f"shape {i}", *SOFTWARE): float(i) for i in range(16)}


def test_geometric_mean_matches_the_log_formula_on_many_shapes():
    pairs = [(1.0, 1.0 + 0.37 * i) for i in range(7)]
    expected = math.exp(sum(math.log(b / lat) for lat, b in pairs) / len(pairs))
    assert timed(*pairs).fitness == pytest.approx(expected)
    assert timed(*pairs).fitness < sum(b / lat for lat, b in pairs) / len(pairs)  # strictly below the arithmetic mean


def test_a_latency_below_what_its_loops_take_from_outside_is_replaced_and_marked(tmp_path, spec, gpu, monkeypatch):
    """A process that reports 0.5 ms a call but whose outside-timed loops take 3 ms a call (a patched
    timer) gets the outside figure, and the result is held for review."""
    monkeypatch.setattr(evaluator_module, "OUTSIDE_MARGIN", 0.2)
    own = FakeGPU._outside_loops

    def slow(folder, latencies):
        own(folder, [3.0 if lat == 0.5 else lat for lat in latencies])

    monkeypatch.setattr(FakeGPU, "_outside_loops", staticmethod(slow))
    result = _evaluator(tmp_path).evaluate(spec, SOURCE, shapes=SHAPES)
    first = result.shapes[0]
    assert result.correct and first.latency_ms > 1.5, first.latency_ms  # the outside bound, not the claimed 0.5
    assert "measured from outside" in result.marks["suspicious"]
    assert result.diagnostics.outside_timing[first.label].own_ms == 0.5


@pytest.mark.parametrize("skips", [False, True])
def test_a_candidate_whose_outside_loop_skips_its_padding_is_held(tmp_path, spec, gpu, monkeypatch, skips):
    """Every outside-timed call is padded on the GPU (2 ms here), the baseline's loop shows it: a candidate's
    loop that takes less than the padding a call was not run as given (held), one that pads is not."""
    from kernelevolve.harness.runtime import outside

    def padded(folder, latencies):  # the baselines take 1.0 ms here, the candidate 0.5 and 2.0
        for n, latency_ms in enumerate(latencies):
            for idx in range(outside.LOOPS):
                payload = outside.await_release(str(folder), f"c{n}.{idx}", None, latency_ms, timeout_s=10)
                pad = 2.0 if (latency_ms == 1.0 or not skips) else 0.0
                time.sleep(payload["calls"] * (latency_ms + pad) / 1e3)
                outside.report_done(str(folder), f"c{n}.{idx}", [[1.0]] * payload["calls"])

    monkeypatch.setattr(FakeGPU, "_outside_loops", staticmethod(padded))
    monkeypatch.setattr(evaluator_module, "PADDING_MS", 2.0)  # what the padding takes on this fake GPU
    result = _evaluator(tmp_path).evaluate(spec, SOURCE, shapes=SHAPES)
    assert result.correct, result.message
    if skips:
        assert "suspicious" in result.marks, result.diagnostics.outside_timing
        assert "less than the" in result.marks["suspicious"] and "not run as given" in result.marks["suspicious"]
    else:
        assert "suspicious" not in result.marks, result.marks
