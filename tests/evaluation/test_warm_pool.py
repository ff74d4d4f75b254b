"""Warm evaluation processes (started before their candidate exists) and the GPU gate.

Under the interpreter, with real sandboxed processes: a candidate is judged by a set of processes
started while the previous one was judged, each set serves exactly one candidate, nothing of one
candidate reaches the next, and closing the evaluator leaves no process behind.
"""

import textwrap
import threading
import time
from pathlib import Path

from kernelevolve.evaluation.evaluator import Evaluator
from kernelevolve.evaluation.gpu_gate import GpuGate
from kernelevolve.evaluation.result import Failure

from .conftest import candidate, with_forward_prologue
from .test_sandbox import processes_mentioning

# Tries to plant a candidate, a go signal and a harness in every other evaluation folder it can reach.
INTRUDER = with_forward_prologue(
    textwrap.indent(
        "import glob, os\n"
        "mine = os.path.dirname(os.getcwd())\n"
        "for d in glob.glob(os.path.join(os.environ.get('KE_SCRATCH', '/tmp'), 'kernelevolve-eval-*')):\n"
        "    for name in ('candidate.py', 'check/go', 'check/harness.py', 'reference.py'):\n"
        "        if d == mine and name.startswith('check/'):\n"
        "            continue\n"
        "        try:\n"
        "            with open(os.path.join(d, name), 'w') as f:\n"
        "                f.write('planted')\n"
        "        except OSError:\n"
        "            continue\n"
        "        raise RuntimeError('planted ' + os.path.join(d, name))\n",
        " " * 8,
    )
)

ONE_SHAPE = [{"M": 8, "N": 300}]  # two cases (its dtypes): the interpreter is slow


def test_warm_sets_judge_one_candidate_each_are_replaced_when_stale_and_leave_nothing(
    tmp_path, scale_shift_spec, monkeypatch
):
    monkeypatch.setenv("KE_SCRATCH", str(tmp_path))
    evaluator = Evaluator(
        device="interpret", timeout_s=60, per_gpu=1, warm=True, screen=False, scratch_root=tmp_path, keep_workdirs=True
    )
    try:
        first = evaluator.evaluate(scale_shift_spec, INTRUDER, ONE_SHAPE)
        assert first.correct, first.message  # it found nothing it could write
        (waiting,) = [s for sets in evaluator._warm_sets.values() for s in sets]
        assert waiting.usable()  # started while the first was judged, still waiting for a candidate
        assert not (waiting.workdir / "candidate.py").exists()

        before = time.monotonic()
        second = evaluator.evaluate(scale_shift_spec, candidate("wrong"), ONE_SHAPE)
        assert waiting.check.started < before  # judged by the set started earlier...
        assert (waiting.workdir / "candidate.py").read_text() == candidate("wrong")  # ...for this candidate
        assert second.failure == Failure.INCORRECT.value, second.message  # its own verdict, not the first's
        assert second.diagnostics.seed != first.diagnostics.seed
        assert (waiting.workdir / "reference.py").read_text() == Path(scale_shift_spec.reference).read_text()
        (stale,) = [s for sets in evaluator._warm_sets.values() for s in sets]  # the next one waits
        stale.expires = time.monotonic() - 1  # as if it had waited until almost giving up on a candidate
        fresh = evaluator._take(scale_shift_spec, scale_shift_spec.cases("interpret", ONE_SHAPE), "")
        assert fresh is not stale and fresh.check.waiting
        fresh.discard()
        deadline = time.monotonic() + 20
        while stale.workdir.exists() and time.monotonic() < deadline:  # discarded in the background
            time.sleep(0.1)
        assert not stale.workdir.exists()
    finally:
        evaluator.close()
    assert not [s for sets in evaluator._warm_sets.values() for s in sets]
    deadline = time.monotonic() + 20
    while processes_mentioning(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_mentioning(str(tmp_path)) == []


def test_gpu_gate_checks_overlap_and_a_timing_runs_alone():
    gate = GpuGate()
    events: list[str] = []
    lock = threading.Lock()

    def note(what):
        with lock:
            events.append(what)

    def check(name, hold):
        with gate.shared():
            note(f"{name}+")
            time.sleep(hold)
            note(f"{name}-")

    def timing():
        with gate.exclusive():
            note("T+")
            time.sleep(0.05)
            note("T-")

    a = threading.Thread(target=check, args=("a", 0.3))
    a.start()
    time.sleep(0.05)
    b = threading.Thread(target=check, args=("b", 0.1))  # overlaps a
    b.start()
    time.sleep(0.05)
    t = threading.Thread(target=timing)  # waits for a and b
    t.start()
    time.sleep(0.05)
    c = threading.Thread(target=check, args=("c", 0.01))  # arrives while the timing waits: goes after it
    c.start()
    for thread in (a, b, t, c):
        thread.join()
    assert events.index("b+") < events.index("a-")  # the checks overlapped
    assert events.index("T+") > max(events.index("a-"), events.index("b-"))
    assert events.index("T-") == events.index("T+") + 1  # nothing ran beside the timing
    assert events.index("c+") > events.index("T-")  # a waiting timing is not starved by new checks
    assert gate.waited_s > 0.1


def test_gpu_gate_lets_evaluations_on_while_their_memory_fits():
    gate = GpuGate(memory_bytes=100)
    order: list[str] = []

    def stay(name, need, hold):
        with gate.resident(need):
            order.append(f"{name}+")
            time.sleep(hold)
            order.append(f"{name}-")

    threads = [
        threading.Thread(target=stay, args=("a", 40, 0.3)),
        threading.Thread(target=stay, args=("b", 50, 0.1)),  # fits beside a
        threading.Thread(target=stay, args=("c", 30, 0.05)),  # does not fit beside a and b: waits for b
        threading.Thread(target=stay, args=("unknown", None, 0.2)),  # unknown need: waits until it is alone
        threading.Thread(target=stay, args=("late", 10, 0.01)),
    ]
    for thread in threads:
        thread.start()
        time.sleep(0.03)
    for thread in threads:
        thread.join()
    assert order.index("b+") < order.index("a-")
    assert order.index("c+") > order.index("b-")
    assert order.index("unknown+") > max(order.index("a-"), order.index("c-"))
    assert order.index("late+") > order.index("unknown-")  # nothing gets on beside an unknown need


def test_out_of_memory_is_told_from_a_failing_candidate():
    from kernelevolve.evaluation.verdict import out_of_memory as _out_of_memory
    from kernelevolve.evaluation.result import EvalResult

    oom = "correctness: process exited with status 1 during M=8,N=300 trial 0: torch.OutOfMemoryError: CUDA out of memory."
    assert _out_of_memory(EvalResult.failed(Failure.CRASH, oom))
    assert _out_of_memory(
        EvalResult.failed(Failure.REFERENCE, "M=1: RuntimeError: the reference could not run in float64 or float32")
    )
    assert not _out_of_memory(EvalResult.failed(Failure.INCORRECT, "CUDA out of memory"))  # a wrong answer is wrong
    assert not _out_of_memory(EvalResult.failed(Failure.RUNTIME, "RuntimeError: index out of bounds"))
