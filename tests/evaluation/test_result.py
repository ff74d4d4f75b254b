"""The stored form of an evaluation: what databases already hold loads (the one `environment` dict of older
versions filed into `versions`, `scheduling`, `diagnostics` and `retimed_from`), what is written reads back
the same, and keys from a newer version are ignored."""

from __future__ import annotations

import copy
import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from pydantic import ValidationError

from kernelevolve.evaluation.result import EvalResult, Failure, ShapeResult
from kernelevolve.records.result import OutsideBound, Retimed, Scheduling, Versions

OLD_DATABASE = Path(__file__).parents[1] / "memory" / "fixtures" / "pre_migrations" / "experiments.sqlite"

# A timed, marked, rechecked evaluation as this version writes it (keys in its order).
TIMED = {
    "correct": True,
    "failure": None,
    "message": "",
    "log": "",
    "shapes": [
        {
            "label": "M=32768,N=4096 bfloat16",
            "params": {"M": 32768, "N": 4096},
            "dtype": "bfloat16",
            "correct": True,
            "failure": None,
            "message": "",
            "max_abs_err": 0.0039,
            "max_rel_err": 0.0036,
            "latency_ms": 0.5,
            "baseline_ms": 1.0,
            "baseline_cached": True,
            "gbps": 2100.5,
            "tflops": None,
            "speedup": 2.0,
        },
        {
            "label": "M=1024,N=262144 bfloat16",
            "params": {"M": 1024, "N": 262144},
            "dtype": "bfloat16",
            "correct": True,
            "failure": None,
            "message": "",
            "max_abs_err": 0.0041,
            "max_rel_err": 0.0035,
            "latency_ms": 2.0,
            "baseline_ms": 1.0,
            "baseline_cached": False,
            "gbps": 1050.0,
            "tflops": None,
            "speedup": 0.5,
        },
    ],
    "device": "cuda",
    "timed": True,
    "duration_s": 12.5,
    "phases_s": {"correctness": 3.0, "benchmark": 9.5},
    "versions": {"gpu": "NVIDIA H200", "torch": "2.11.0", "triton": None, "python": None},
    "scheduling": {
        "judged_alone_after": None,
        "phases_in_sequence": False,
        "worker_lost": None,
        "gpu_prepared_bytes": None,
        "gpu_peak_bytes": None,
    },
    "diagnostics": {
        "seed": None,
        "sandbox": {},
        "stages_s": {"correctness": {"import": 0.1}},
        "candidate_process": {},
        "outside_timing": {},
        "baseline_error": None,
        "other": {},
    },
    "marks": {"unstable": "a re-evaluation measured 0.61x"},
    "recheck": {"fitness": 0.61, "failure": None, "latency_ms": [1.6, 1.7]},
    "fitness": 1.0,
}


# The same evaluation as versions before the split wrote it: one `environment` dict.
OLD_TIMED = {k: v for k, v in TIMED.items() if k not in ("versions", "scheduling", "diagnostics")}
OLD_TIMED["environment"] = {"gpu": "NVIDIA H200", "torch": "2.11.0", "stages_s": {"correctness": {"import": 0.1}}}


def stored_evaluations() -> list[dict]:
    """The evaluations in the database file an earlier version wrote (tests/memory's fixture)."""
    # immutable: the file is in WAL mode, and a plain read would leave -wal/-shm files beside it
    with closing(sqlite3.connect(f"file:{OLD_DATABASE}?mode=ro&immutable=1", uri=True)) as conn:
        rows = conn.execute("SELECT result FROM evaluations ORDER BY node_id").fetchall()
    return [json.loads(r) for (r,) in rows]


def test_an_old_database_evaluations_load_with_their_environment_filed_by_concern():
    stored = stored_evaluations()
    assert stored, "the fixture database holds no evaluations"
    for d in stored:
        env = d["environment"]
        loaded = EvalResult.from_dict(d)
        assert loaded.correct and loaded.shapes[0].params == d["shapes"][0]["params"]
        assert loaded.versions == Versions(
            gpu=env["gpu"], torch=env["torch"], triton=env["triton"], python=env["python"]
        )
        assert loaded.diagnostics.sandbox == env["sandbox"] and loaded.diagnostics.sandbox["network"]
        assert loaded.diagnostics.stages_s == env["stages_s"] and loaded.diagnostics.other == {}
        assert loaded.scheduling == Scheduling()  # nothing happened to them on their way
        again = loaded.to_dict()
        # Every other key as it was stored, in the same order; the environment's place taken by the sections.
        assert {k: v for k, v in again.items() if k not in ("versions", "scheduling", "diagnostics")} == {
            k: v for k, v in d.items() if k != "environment"
        }
        assert [list(s) for s in again["shapes"]] == [list(s) for s in d["shapes"]]
        assert json.loads(json.dumps(again)) == again and EvalResult.from_dict(again).to_dict() == again


def test_an_old_environment_with_every_key_lands_in_its_field():
    old = copy.deepcopy(OLD_TIMED)
    old["environment"] = {
        "seed": 337975363,
        "baselines_cached": ["M=32768,N=4096 bfloat16"],  # the evaluator's bookkeeping: each shape keeps it
        "torch": "2.11.0+cu130",
        "triton": "3.6.0",
        "python": "3.12.3",
        "device": "cuda",  # the result's own `device`
        "gpu": "NVIDIA H200",
        "gpu_prepared_bytes": 1797259264,
        "gpu_peak_bytes": 18979225600,
        "sandbox": {"network": "netns", "pid": "pidns"},
        "stages_s": {"correctness": {"start": 3.191}, "benchmark": {"warming Triton": 1.5}},
        "candidate_process": {"correctness": {"torch": "2.11.0+cu130", "gpu": "NVIDIA H200"}},
        "outside_timing": {
            "M=32768,N=4096 bfloat16": {
                "own_ms": 0.5,
                "outside_ms": 0.51,
                "calls": 64,
                "wall_ms": 40.0,
                "baseline_wall_ms": 72.0,
            }
        },
        "baseline_error": "the baseline process ended without timings (SIGKILL)",
        "judged_alone_after": "runtime: CUDA out of memory",
        "phases_in_sequence": True,
        "worker_lost": "Ray worker 3 died: replaced",
        "retimed_from": {"device": "interpret", "correct": True, "failure": None, "fitness": None, "shapes": ["x"]},
        "a_key_of_its_own": [1, 2],
    }
    loaded = EvalResult.from_dict(old)
    assert loaded.versions == Versions(gpu="NVIDIA H200", torch="2.11.0+cu130", triton="3.6.0", python="3.12.3")
    assert loaded.scheduling == Scheduling(
        judged_alone_after="runtime: CUDA out of memory",
        phases_in_sequence=True,
        worker_lost="Ray worker 3 died: replaced",
        gpu_prepared_bytes=1797259264,
        gpu_peak_bytes=18979225600,
    )
    diagnostics = loaded.diagnostics
    assert diagnostics.seed == 337975363 and diagnostics.sandbox == {"network": "netns", "pid": "pidns"}
    assert diagnostics.stages_s["benchmark"] == {"warming Triton": 1.5}
    assert diagnostics.candidate_process["correctness"] == Versions(gpu="NVIDIA H200", torch="2.11.0+cu130")
    assert diagnostics.outside_timing["M=32768,N=4096 bfloat16"] == OutsideBound(0.5, 0.51, 64, 40.0, 72.0)
    assert diagnostics.baseline_error.startswith("the baseline process ended")
    assert diagnostics.other == {"a_key_of_its_own": [1, 2]}  # kept, not lost
    assert loaded.retimed_from == Retimed(device="interpret", correct=True, shapes=["x"])
    assert [s.baseline_cached for s in loaded.shapes] == [True, False]  # stored with each shape all along
    written = loaded.to_dict()
    assert "environment" not in written and "baselines_cached" not in json.dumps(written)
    assert EvalResult.from_dict(written) == loaded


def test_an_old_environment_value_that_fits_no_field_is_kept_aside_and_the_row_still_loads():
    old = copy.deepcopy(OLD_TIMED)
    old["environment"] = {"gpu": "NVIDIA H200", "seed": "not a number", "outside_timing": {"x": {"own_ms": 1}}}
    loaded = EvalResult.from_dict(old)
    assert loaded.versions.gpu == "NVIDIA H200" and loaded.diagnostics.seed is None
    assert loaded.diagnostics.other == {"seed": "not a number", "outside_timing": {"x": {"own_ms": 1}}}
    assert loaded.fitness == pytest.approx(1.0)


def test_the_old_and_the_new_form_of_one_evaluation_load_alike():
    assert EvalResult.from_dict(copy.deepcopy(OLD_TIMED)).to_dict() == TIMED


def test_a_timed_evaluation_round_trips_with_its_computed_keys():
    loaded = EvalResult.from_dict(copy.deepcopy(TIMED))
    assert loaded.fitness == pytest.approx(1.0) and [s.speedup for s in loaded.shapes] == [2.0, 0.5]
    assert loaded.marks == {"unstable": "a re-evaluation measured 0.61x"} and loaded.recheck["latency_ms"] == [1.6, 1.7]
    assert loaded.to_dict() == TIMED


def test_written_keys_are_every_field_in_order():
    result = EvalResult.failed(Failure.COMPILE, "CompilationError: at 3:4\nmore", log="trace", device="cuda")
    result.shapes.append(ShapeResult("s", {"M": 1}, "float32", correct=False, failure="compile"))
    written = result.to_dict()
    assert list(written) == list(TIMED)
    assert list(written["shapes"][0]) == list(TIMED["shapes"][0])
    assert written["failure"] == "compile" and written["message"] == "CompilationError: at 3:4"
    assert written["fitness"] == 0.0 and written["shapes"][0]["speedup"] is None


def test_keys_from_a_newer_version_are_ignored():
    newer = copy.deepcopy(TIMED)
    newer["attempts"] = 3  # a field a later version might add
    newer["shapes"][0]["power_w"] = 612.0
    newer["fitness"] = 99.0  # computed keys are recomputed, never trusted
    loaded = EvalResult.from_dict(newer)
    assert loaded.fitness == pytest.approx(1.0)
    assert loaded.to_dict() == TIMED


def test_a_wrong_stored_value_is_a_clear_error():
    broken = copy.deepcopy(TIMED)
    broken["shapes"][1]["latency_ms"] = "fast"
    with pytest.raises(ValidationError, match="latency_ms"):
        EvalResult.from_dict(broken)
