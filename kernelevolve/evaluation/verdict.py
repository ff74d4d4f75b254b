"""The verdict pipeline: what decides a candidate's EvalResult (correct, failure class, latencies, marks)
from what its sandboxed processes report.

Before any process runs, `refusal` answers what the source alone decides: a syntax error, a kernel
language the spec does not allow (or cannot run here), the static tampering screen. Then each process's
outcome is folded in with `absorb`: correctness, and the figures the evaluator plans with, come only from
the judges, whose processes never import the candidate; what a process that ran candidate code says can
only fail it. `checked` gives the verdict after the judge; `bound_latencies` holds a latency to what the
outside-timed loops imply; `settle` adds the baselines, throughput and plausibility marks once the timed
phase is over. When and where each process runs is decided elsewhere: evaluator.py orders the phases,
scheduling.py keeps the places, the GPUs' gates and the warm process sets.
"""

from __future__ import annotations

from pathlib import Path

from kernelevolve import pysource
from kernelevolve import languages
from kernelevolve.evaluation import plausibility
from kernelevolve.evaluation.processes import OUTSIDE_PAD_MS, fastest_loop
from kernelevolve.evaluation.sandbox import Outcome
from kernelevolve.harness.runtime.report import CheckCase, TimedCase
from kernelevolve.harness.runtime.screen import screen_source
from kernelevolve.records.result import EvalResult, Failure, OutsideBound, ShapeResult, Versions
from kernelevolve.spec import Case, Spec

JUDGES = ("judge", "timed judge")  # the phases whose processes never import the candidate
# A candidate's own median may sit this far (relative, plus an absolute floor) below the outside-timed
# bound before the bound replaces it: the loops' noise on an H200 (measured: see README).
# The outside bound replaces a latency only when it is more than this far above it: on the H200 the
# bound of an honest kernel came within -15%..+27% of its own median (loops of ~30 calls, ~1 ms of wall
# noise a loop); a median forged to a quarter came out 4.8x below its bound.
OUTSIDE_MARGIN = 0.5
OUTSIDE_FLOOR_MS = 0.01
OUTSIDE_NOISE_MS = 1.0  # wall-clock noise of one loop, spread over its calls
PADDING_KEPT = 0.8  # a candidate's outside loop takes at least this share of the padding a call
PADDING_MS = OUTSIDE_PAD_MS


def shape_of(case: Case) -> ShapeResult:
    return ShapeResult(label=case.label, params=dict(case.params), dtype=case.dtype)


def unjudged(device: str, cases: list[Case]) -> EvalResult:
    """The result a judged candidate starts from: not correct until the judge says so."""
    return EvalResult(correct=False, device=device, shapes=[shape_of(c) for c in cases])


def refusal(spec: Spec, source: str, device: str, cases: list[Case], screen_with: Path | None) -> EvalResult | None:
    """The failed result the source alone earns (syntax, kernel language, the tampering screen against
    the knowledge base `screen_with`; None: not screened), else None: it goes on to its processes."""
    try:
        pysource.parse(source)
    except SyntaxError as e:
        return EvalResult.failed(
            Failure.SYNTAX, f"line {e.lineno}: {e.msg}", device=device, shapes=[shape_of(c) for c in cases]
        )
    lang = languages.gate(source, spec.languages, device)  # kernel language: allowed, runnable here
    if lang.failure is not None:
        return EvalResult.failed(lang.failure, lang.message, device=device, shapes=[shape_of(c) for c in cases])
    problems = screen_source(source, screen_with) if screen_with is not None else []
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return EvalResult.failed(
            Failure.TAMPERING,
            f"the candidate tampers with its evaluation: {'; '.join(problems[:3])}{more}",
            log="\n".join(problems),
            device=device,
            shapes=[shape_of(c) for c in cases],
        )
    return None


def absorb(result: EvalResult, outcome: Outcome, phase: str, *, timeout_s: float, memory_limit_bytes) -> None:
    """Fold one sandboxed run into the result, classifying how it ended. What a process that ran
    candidate code says can only fail the candidate (its failure, its latencies, bounded later);
    correctness and the figures the evaluator plans with come from the judges. `timeout_s` and
    `memory_limit_bytes` are the limits the run had, for the messages."""
    report = outcome.report(TimedCase if phase == "benchmark" else CheckCase)
    trusted = phase in JUDGES
    env = report.environment
    versions = Versions(gpu=env.gpu, torch=env.torch, triton=env.triton, python=env.python)
    if not trusted:  # kept apart, for diagnosis only
        result.diagnostics.candidate_process[phase] = versions
    elif versions != Versions():  # a judge that said nothing leaves what the other one said
        result.versions = versions
    if outcome.sandbox or not result.diagnostics.sandbox:  # a judge's early verdict comes without it
        result.diagnostics.sandbox = outcome.sandbox or {}
    result.diagnostics.stages_s[phase] = dict(report.stages_s)  # where the time went
    by_label = {s.label: s for s in result.shapes}
    for case in report.cases:
        shape = by_label.get(case.label)
        if shape is None:
            continue
        if phase == "judge":  # the verdict: a process that never imported the candidate
            shape.correct, shape.failure, shape.message = case.correct, case.failure, case.message
            shape.max_abs_err, shape.max_rel_err = case.max_abs_err, case.max_rel_err
        elif phase in ("correctness", "timed judge"):  # can only fail a shape
            if case.failure:
                shape.correct, shape.failure, shape.message = False, case.failure, case.message
        elif phase == "benchmark":
            latency = case.latency_ms
            shape.latency_ms = latency if latency is not None and latency > 0 else None
    stage, failure = report.stage, report.failure
    log = "\n".join(x for x in (failure.traceback if failure else "", outcome.stderr.strip()) if x)
    if outcome.memory_exceeded:
        fail(
            result,
            Failure.CRASH,
            f"{phase}: its processes together held {outcome.memory_exceeded / 2**30:.1f} GiB of memory, over the "
            f"evaluation's limit of {memory_limit_bytes / 2**30:.1f} GiB (during {stage}); killed",
            log,
        )
    elif outcome.timed_out:
        fail(
            result,
            Failure.TIMEOUT,
            f"{phase}: no result after {timeout_s:g}s (during {stage}); process group killed",
            log,
        )
    elif failure:
        fail(result, Failure.parse(failure.failure_class), failure.message, log)
    elif outcome.signal_name:
        fail(result, Failure.CRASH, f"{phase}: process killed by {outcome.signal_name} during {stage}", log)
    elif stage != "done":
        last = outcome.stderr.strip().splitlines()[-1:] or ["no output"]
        fail(
            result,
            Failure.CRASH,
            f"{phase}: process exited with status {outcome.returncode} during {stage}: {last[0][:300]}",
            log,
        )
    elif phase == "correctness":
        result.log = outcome.stderr.strip()[-2000:]
    if failure and phase in JUDGES and failure.failure_class == "tampering":
        result.log = (result.log + "\n" + outcome.stderr.strip())[-6000:]


def fail(result: EvalResult, failure: Failure, message: str, log: str) -> None:
    result.correct = False
    result.failure = str(failure)
    result.message = message.strip().splitlines()[0] if message.strip() else str(failure)
    result.log = log[-6000:]
    # A shape that was in flight when the process died carries the failure too.
    for shape in result.shapes:
        if shape.correct is None and failure in (Failure.TIMEOUT, Failure.CRASH):
            shape.failure = str(failure)
            break


def checked(result: EvalResult) -> None:
    """The verdict after the judge: correct when nothing failed and the judge passed every shape."""
    result.correct = result.failure is None and all(s.correct for s in result.shapes)


def bound_latencies(
    result: EvalResult,
    loops: dict,
    baseline_ms: dict,
    baseline_walls: dict,
    *,
    margin: float,
    padding_ms: float,
) -> None:
    """The latency the fitness uses is at least what the outside-timed loops imply: the baseline's
    latency plus the difference of the two loops' wall times per call (the same calls on the same
    shapes: making inputs, flushing and accumulating cost both the same; outside.py). Where the
    candidate's own median is more than `margin` (OUTSIDE_MARGIN) below that, the bound is used instead
    and the result is held for review. `padding_ms` is what a call's padding takes (PADDING_MS)."""
    bounds = {}
    for n, shape in enumerate(result.shapes):
        loop = fastest_loop(loops, n)
        base, base_wall = baseline_ms.get(shape.label), baseline_walls.get(shape.label)
        if loop is None or base is None or base_wall is None or shape.latency_ms is None:
            continue
        calls = loop.payload["calls"]
        floor = max(base + (loop.wall_ms - base_wall) / calls, 0.0)
        bounds[shape.label] = OutsideBound(
            own_ms=shape.latency_ms,
            outside_ms=round(floor, 6),
            calls=calls,
            wall_ms=round(loop.wall_ms, 3),
            baseline_wall_ms=round(base_wall, 3),
        )
        if floor > (1 + margin) * shape.latency_ms + max(OUTSIDE_FLOOR_MS, OUTSIDE_NOISE_MS / calls):
            bounds[shape.label].used = True
            result.marks.setdefault(
                "suspicious",
                f"{shape.label}: its process timed {shape.latency_ms:.4f} ms a call, but measured from outside "
                f"it needs at least {floor:.4f} ms; the outside figure is used",
            )
            shape.latency_ms = floor
        # Every call is padded on the GPU (outside.PAD_CYCLES, ~PADDING_MS): a loop faster than the padding
        # skipped it. The baseline's loop shows what it takes here (no more than PADDING_MS counts: a loaded
        # host slows the baseline's loop too, never the padding).
        padding = min(base_wall / calls - base, padding_ms)
        if loop.wall_ms / calls < PADDING_KEPT * padding - OUTSIDE_NOISE_MS / calls:
            result.marks.setdefault(
                "suspicious",
                f"{shape.label}: its outside-timed loop took {loop.wall_ms / calls:.4f} ms a call, less than the "
                f"{padding:.4f} ms its padding alone takes: the loop was not run as given",
            )
    result.diagnostics.outside_timing = bounds


def settle(result: EvalResult, spec: Spec, cases: list[Case], baseline_ms: dict, speedup_bound: float) -> None:
    """After the timed phase: each shape's baseline, whether the result is timed, its throughput, and the
    plausibility mark (evaluation/plausibility.py)."""
    for shape in result.shapes:
        shape.baseline_ms = baseline_ms.get(shape.label)
    if result.failure is None:
        result.timed = all(s.latency_ms is not None and s.baseline_ms is not None for s in result.shapes)
        if not result.timed and result.diagnostics.baseline_error:  # correct, but no speedup to give
            result.message = "not timed: " + result.diagnostics.baseline_error
    for shape, case in zip(result.shapes, cases):
        nbytes, flops = spec.roofline(case)
        if shape.latency_ms:
            shape.gbps = nbytes / shape.latency_ms / 1e6 if nbytes else None
            shape.tflops = flops / shape.latency_ms / 1e9 if flops else None
    reason = plausibility.suspicious(result, spec.hardware, speedup_bound)
    if reason:
        result.marks["suspicious"] = reason


def out_of_memory(result: EvalResult) -> bool:
    """The GPU ran out of memory in a check or timing (the reference's too: it falls back to float32 first)."""
    text = f"{result.message}\n{result.log[-3000:]}"
    return result.failure in (Failure.CRASH, Failure.RUNTIME, Failure.REFERENCE) and (
        "CUDA out of memory" in text or "could not run in float64 or float32" in text
    )
