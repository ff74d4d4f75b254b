"""The stored form of an evaluation: what databases already hold loads unchanged, what is written keeps
the keys older versions read, and keys from a newer version are ignored."""

from __future__ import annotations

import copy
import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from pydantic import ValidationError

from kernelevolve.evaluation.result import EvalResult, Failure, ShapeResult

OLD_DATABASE = Path(__file__).parents[1] / "memory" / "fixtures" / "pre_migrations" / "experiments.sqlite"

# A timed, marked, rechecked evaluation as the dataclass version wrote it (keys in its order).
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
    "environment": {"gpu": "NVIDIA H200", "torch": "2.11.0", "stages_s": {"correctness": {"import": 0.1}}},
    "marks": {"unstable": "a re-evaluation measured 0.61x"},
    "recheck": {"fitness": 0.61, "failure": None, "latency_ms": [1.6, 1.7]},
    "fitness": 1.0,
}


def stored_evaluations() -> list[dict]:
    """The evaluations in the database file an earlier version wrote (tests/memory's fixture)."""
    # immutable: the file is in WAL mode, and a plain read would leave -wal/-shm files beside it
    with closing(sqlite3.connect(f"file:{OLD_DATABASE}?mode=ro&immutable=1", uri=True)) as conn:
        rows = conn.execute("SELECT result FROM evaluations ORDER BY node_id").fetchall()
    return [json.loads(r) for (r,) in rows]


def test_an_old_database_evaluations_round_trip_unchanged():
    stored = stored_evaluations()
    assert stored, "the fixture database holds no evaluations"
    for d in stored:
        loaded = EvalResult.from_dict(d)
        assert loaded.correct and loaded.shapes[0].params == d["shapes"][0]["params"]
        again = loaded.to_dict()
        assert again == d and list(again) == list(d)  # same keys, in the same order, same values
        assert [list(s) for s in again["shapes"]] == [list(s) for s in d["shapes"]]
        assert json.loads(json.dumps(again)) == d


def test_a_timed_evaluation_round_trips_with_its_computed_keys():
    loaded = EvalResult.from_dict(copy.deepcopy(TIMED))
    assert loaded.fitness == pytest.approx(1.0) and [s.speedup for s in loaded.shapes] == [2.0, 0.5]
    assert loaded.marks == {"unstable": "a re-evaluation measured 0.61x"} and loaded.recheck["latency_ms"] == [1.6, 1.7]
    assert loaded.to_dict() == TIMED


def test_written_keys_are_the_ones_the_previous_version_reads():
    # The previous from_dict dropped `fitness` and each `speedup`, then passed every other key to the
    # constructor: a key it did not know would have been a TypeError.
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
