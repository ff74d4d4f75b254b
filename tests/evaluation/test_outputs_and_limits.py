"""Evaluator behaviours at the edges: output count and shape mismatches, exact matching of
integer outputs, the sandbox's memory limit, and invalid environment values (one line, exit 2)."""

import os
import subprocess
import sys

import pytest

from kernelevolve.evaluation.evaluator import Evaluator
from kernelevolve.spec import load_spec

from .conftest import HERE, candidate, with_forward_prologue


@pytest.fixture(scope="module")
def evaluator():
    return Evaluator(device="interpret", timeout_s=60)


def test_two_outputs_where_the_reference_returns_one(evaluator, scale_shift_spec):
    source = candidate("good").replace("        return y\n", "        return y, y.clone()\n")
    result = evaluator.evaluate(scale_shift_spec, source)
    assert result.failure == "incorrect"
    assert "forward returned 2 tensors, reference returns 1" in result.message


def test_an_output_of_the_wrong_shape(evaluator, scale_shift_spec):
    source = candidate("good").replace("        return y\n", "        return y[:, :-1].contiguous()\n")
    result = evaluator.evaluate(scale_shift_spec, source)
    assert result.failure == "incorrect" and "shape (8, 299), expected (8, 300)" in result.message


def test_integer_outputs_must_match_exactly(evaluator):
    """An index one off in a single row fails: integer outputs get no tolerance."""
    spec = load_spec(HERE / "argmax_rows.py")
    good = candidate("argmax_rows")
    result = evaluator.evaluate(spec, good)
    assert result.correct, result.message
    result = evaluator.evaluate(spec, good.replace("OFF=0)", "OFF=1)"))
    assert result.failure == "incorrect"
    assert "1 of 6 elements differ (integer output, exact match required)" in result.message


def test_the_memory_limit_stops_a_hungry_candidate(scale_shift_spec):
    small = Evaluator(device="interpret", timeout_s=60, max_memory_bytes=3 << 30, screen=False)
    source = with_forward_prologue("        hog = bytearray(8 << 30)\n")
    result = small.evaluate(scale_shift_spec, source)
    assert result.failure in ("runtime", "crash"), result.message
    assert "MemoryError" in result.message or "memory" in result.message.lower() or "SIG" in result.message


@pytest.mark.parametrize("var, value", [("KERNELEVOLVE_TEMPERATURE", "warm"), ("KERNELEVOLVE_LLM_RETRIES", "many")])
def test_an_invalid_environment_value_is_one_line_and_exit_2(tmp_path, var, value):
    env = {**os.environ, var: value, "KERNELEVOLVE_DB": f"sqlite:///{tmp_path / 'k.db'}"}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from kernelevolve.cli import main; main()",
            "run",
            str(HERE / "scale_shift.yaml"),
            "--model",
            "openai:some-model",
            "--budget",
            "1",
            "--device",
            "interpret",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-500:])
    err = proc.stderr.strip()
    assert var in err and "Traceback" not in err and len(err.splitlines()) == 1, err
