"""The evaluator on real candidates, one per failure class, under the Triton interpreter.

Every candidate runs in its own sandboxed process; a candidate that hangs, raises or kills itself
becomes a failed result and the test process carries on.
"""

import os
import time

import pytest

from kernelevolve.evaluation.evaluator import Evaluator
from kernelevolve.evaluation.result import Failure
from kernelevolve.spec import load_spec

from .conftest import HERE, candidate, with_forward_prologue


@pytest.fixture(scope="module")
def evaluator():
    return Evaluator(device="interpret", timeout_s=60)


@pytest.fixture(scope="module")
def unscreened():
    """The static tampering screen off, so the sandbox behind it is what is tested."""
    return Evaluator(device="interpret", timeout_s=60, screen=False)


def test_correct_triton_candidate_passes(evaluator, scale_shift_spec):
    result = evaluator.evaluate(scale_shift_spec, candidate("good"))
    assert result.correct, result.message
    assert result.failure is None
    assert [s.correct for s in result.shapes] == [True] * 4
    for s in result.shapes:  # compared in float64 against the reference, within the dtype's tolerance
        assert (
            0 < s.max_abs_err < scale_shift_spec.tolerance(s.dtype).atol + 5 * scale_shift_spec.tolerance(s.dtype).rtol
        )
    assert result.fitness is None  # the interpreter never produces speedups
    assert not result.timed and all(s.latency_ms is None for s in result.shapes)


@pytest.mark.parametrize(
    "name, failure, words",
    [
        ("wrong", Failure.INCORRECT, "outside atol"),
        ("partial", Failure.INCORRECT, "NaN"),  # unwritten elements read back as the poison
        ("wrong_dtype", Failure.INCORRECT, "dtype torch.float64"),
        ("raises", Failure.RUNTIME, "candidate gave up"),
        ("syntax_error", Failure.SYNTAX, "line 25"),
        ("no_modelnew", Failure.IMPORT, "no class ModelNew"),
        ("bad_kernel", Failure.COMPILE, "no_such_op"),
        ("segfault", Failure.CRASH, "SIGSEGV"),
    ],
)
def test_failure_classes(unscreened, scale_shift_spec, name, failure, words):
    result = unscreened.evaluate(scale_shift_spec, candidate(name))
    assert not result.correct
    assert result.failure == failure.value, (result.failure, result.message)
    assert words in result.message
    assert result.fitness == 0.0
    assert "\n" not in result.message


def test_hanging_candidate_is_killed_with_its_children(scale_shift_spec, tmp_path):
    marker = f"kernelevolve-hang-{os.getpid()}-{time.monotonic_ns()}"
    source = with_forward_prologue(
        "        import subprocess, time\n"
        f"        subprocess.Popen(['sh', '-c', 'sleep 300; echo {marker}'])\n"
        "        time.sleep(300)\n",
    )
    evaluator = Evaluator(device="interpret", timeout_s=8, scratch_root=tmp_path, screen=False)
    result = evaluator.evaluate(scale_shift_spec, source)
    assert result.failure == "timeout"
    assert "M=8,N=300 float32" in result.message  # says where it hung
    assert result.duration_s < 30
    assert not _processes_with(marker)  # the grandchild died with the run


def _processes_with(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and marker.encode() in open(f"/proc/{pid}/cmdline", "rb").read():
                found.append(int(pid))
        except OSError:
            pass
    return found


def test_candidate_has_no_network(unscreened, scale_shift_spec):
    """A server listens on this machine's loopback; the candidate's connection to it must fail."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        source = with_forward_prologue(
            f"        import socket\n        socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n",
        )
        result = unscreened.evaluate(scale_shift_spec, source)
    finally:
        server.close()
    assert result.diagnostics.sandbox["network"] in ("netns", "userns+netns"), result.diagnostics.sandbox
    assert result.failure == "runtime", result.message
    assert "unreachable" in result.message or "refused" in result.message, result.message


def test_candidate_sees_no_secrets(evaluator, scale_shift_spec, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-secret")
    source = "import os\n" + with_forward_prologue("        assert 'ANTHROPIC_API_KEY' not in os.environ, 'leaked'\n")
    result = evaluator.evaluate(scale_shift_spec, source)
    assert result.correct, result.message


def test_fresh_random_inputs_every_evaluation(evaluator, scale_shift_spec):
    """A candidate that memorises the first answer it saw fails on the next trial's inputs."""
    source = candidate("good").replace(
        "        return y\n",
        "        if not hasattr(ModelNew, 'memo'):\n            ModelNew.memo = y.clone()\n        return ModelNew.memo.clone() if ModelNew.memo.shape == y.shape else y\n",
    )
    result = evaluator.evaluate(scale_shift_spec, source)
    assert result.failure == "incorrect"
    assert "trial 1" in result.shapes[0].message


def test_kernelbench_module_with_int64_input_as_spec(evaluator):
    spec = load_spec(HERE / "gather_rows.py")
    assert spec.dtypes == ["native"] and spec.shapes == [{}]
    result = evaluator.evaluate(spec, candidate("gather_rows"))
    assert result.correct, result.message
    result = evaluator.evaluate(spec, candidate("gather_rows"), shapes=[{"ROWS": 7, "DIM": 129, "PICKS": 30}])
    assert result.correct and result.shapes[0].params == {"ROWS": 7, "DIM": 129, "PICKS": 30}


def test_kernel_with_a_runtime_loop_bound_runs_under_the_interpreter(evaluator, scale_shift_spec):
    """triton 3.6's interpreter with numpy >= 2.3 needs interpreter_compat for `range(runtime)`."""
    looped = (
        candidate("good")
        .replace(
            "    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)\n    if True:\n",
            "    for start in range(0, n_cols, BLOCK):\n        offs = start + tl.arange(0, BLOCK)\n",
        )
        .replace("triton.cdiv(n, 256))", "1)")
    )
    assert "range(0, n_cols, BLOCK)" in looped
    result = evaluator.evaluate(scale_shift_spec, looped)
    assert result.correct, result.message
