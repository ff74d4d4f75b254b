"""The harnesses' typed report (kernelevolve/harness/runtime/report.py): what a harness writes is what the
evaluator reads back, and a result file a candidate's process wrote itself, however malformed, reads
without an error and never as a pass."""

import json

import pytest

from kernelevolve.evaluation import verdict
from kernelevolve.evaluation.sandbox import Outcome
from kernelevolve.harness.runtime.report import CheckCase, Failed, ProbeReport, Report, TimedCase
from kernelevolve.harness.runtime.state import Result
from kernelevolve.spec import Case

CASES = [
    Case(label="M=4 float32", params={"M": 4}, dtype="float32"),
    Case(label="M=8 float32", params={}, dtype="float32"),
]


def _outcome(data, stderr="") -> Outcome:
    return Outcome(
        returncode=0, timed_out=False, signal_name=None, duration_s=0.1, stdout="", stderr=stderr, result=data
    )


def test_what_a_harness_writes_is_what_the_evaluator_reads(tmp_path):
    path = tmp_path / "result.json"
    result = Result(str(path))
    result.data["environment"] = {"torch": "2.13.0", "gpu": "cpu (triton interpreter)", "gpu_peak_bytes": 4096}
    judged = CheckCase("M=4 float32", correct=True, max_abs_err=1e-7, max_rel_err=2e-8)
    missed = CheckCase("M=8 float32", correct=False, failure="incorrect", message="trial 1: 3 of 8 elements outside")
    result.cases.extend([judged, missed])
    result.stage("comparing")
    result.data["failure"] = Failed("incorrect", "M=8 float32: trial 1: 3 of 8 elements outside")
    result.write()
    report = Report.read(json.loads(path.read_text()), CheckCase)
    assert report.cases == [judged, missed]
    assert report.stage == "comparing" and not report.done
    assert report.failure == Failed("incorrect", "M=8 float32: trial 1: 3 of 8 elements outside")
    assert report.environment.torch == "2.13.0" and report.environment.gpu_peak_bytes == 4096
    assert set(report.stages_s) == {"start"}


@pytest.mark.parametrize(
    "data",
    [
        None,
        [],
        {"stage": 5, "cases": "all correct", "environment": "h200", "stages_s": [1, 2]},
        {"stage": "done", "cases": [1, None, {"label": 3, "correct": True}, {"correct": True}]},
        {"stage": "done", "cases": [{"label": "M=4 float32", "correct": "yes", "max_abs_err": "0"}]},
    ],
)
def test_a_malformed_result_file_reads_as_nothing_believed(data):
    report = Report.read(data, CheckCase)
    assert report.failure is None
    assert all(case.correct is None and case.max_abs_err is None for case in report.cases)
    assert report.environment.torch is None and report.stages_s == {}


@pytest.mark.parametrize("failure", ["tampered", ["class", "correct"], {"message": "no class"}, {"class": 1}])
def test_a_malformed_failure_entry_is_a_crash_not_a_pass(failure):
    """A candidate's process that writes its own failure entry, in any shape, still fails (the evaluator
    used to raise on some shapes)."""
    result = verdict.unjudged("interpret", CASES)
    verdict.absorb(
        result, _outcome({"stage": "done", "failure": failure}), "correctness", timeout_s=60, memory_limit_bytes=1
    )
    assert result.failure == "crash" and result.message


def test_the_candidates_process_can_only_fail_a_shape_and_the_judge_decides():
    result = verdict.unjudged("interpret", CASES)
    forged = [{"label": c.label, "correct": True, "failure": None, "max_abs_err": 0.0} for c in CASES]
    verdict.absorb(
        result, _outcome({"stage": "done", "cases": forged}), "correctness", timeout_s=60, memory_limit_bytes=1
    )
    assert [s.correct for s in result.shapes] == [None, None]  # what it says of itself is not a pass
    judged = [dict(forged[0], max_rel_err=1e-9), dict(forged[1], correct=False, failure="incorrect", message="off")]
    verdict.absorb(result, _outcome({"stage": "done", "cases": judged}), "judge", timeout_s=60, memory_limit_bytes=1)
    verdict.checked(result)
    assert [s.correct for s in result.shapes] == [True, False] and not result.correct
    assert result.shapes[1].message == "off" and result.shapes[0].max_rel_err == 1e-9


def test_a_timing_process_reports_latencies_only_as_positive_numbers():
    cases = [{"label": CASES[0].label, "latency_ms": -1.0}, {"label": CASES[1].label, "latency_ms": True}]
    report = Report.read({"stage": "done", "cases": cases}, TimedCase)
    assert [c.latency_ms for c in report.cases] == [-1.0, None]
    result = verdict.unjudged("cuda", CASES)
    verdict.absorb(result, _outcome({"stage": "done", "cases": cases}), "benchmark", timeout_s=60, memory_limit_bytes=1)
    assert [s.latency_ms for s in result.shapes] == [None, None]


def test_the_static_probes_report_keeps_only_objects():
    report = ProbeReport.read(
        {"stage": "done", "launches": [{"kernel": "k", "bytes": 64}, "x"], "kernels": {"a": {"registers": 32}, "b": 1}}
    )
    assert (
        report.done and report.launches == [{"kernel": "k", "bytes": 64}] and report.kernels == {"a": {"registers": 32}}
    )
    assert ProbeReport.read({"failure": {"class": "x"}}).failure == "{'class': 'x'}"  # any failure stays one
