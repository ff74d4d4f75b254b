"""What one evaluation of one candidate yields: per-shape outcomes, a failure class, a fitness."""

from __future__ import annotations

import math
from dataclasses import field
from enum import Enum
from typing import Any

from pydantic import ConfigDict, TypeAdapter, computed_field
from pydantic.dataclasses import dataclass

# Evaluations are stored as JSON in the database and read back by older and newer versions: keys a
# newer version added are ignored on load; assignment is not validated (the evaluator fills results
# in field by field, and that path must stay cheap).
_STORED = ConfigDict(extra="ignore", validate_assignment=False)


class Failure(str, Enum):
    """Why a candidate failed. Ordered roughly by how early in its life it broke."""

    NO_CODE = "no_code"  # the operator's reply held no usable ModelNew source
    OPERATOR = "operator"  # the operator itself raised (building the prompt, calling the model): the tool's error
    SYNTAX = "syntax"
    IMPORT = "import"  # module body or ModelNew(...) construction raised, or no ModelNew
    COMPILE = "compile"  # Triton refused the kernel (CompilationError, OutOfResources)
    RUNTIME = "runtime"  # forward raised
    TIMEOUT = "timeout"
    CRASH = "crash"  # the process died (signal, abort, exit without a result)
    INCORRECT = "incorrect"  # ran, but wrong shape/dtype/values, NaN/Inf, or unwritten output
    # What a candidate that games its evaluation gets (see kernelevolve/harness/runtime/kernel_monitor.py):
    NOT_A_KERNEL = "not_a_kernel"  # no kernel of the spec's language, or the work done by torch ops
    MUTATES_INPUT = "mutates_input"  # wrote into an input, or returned (a view of) one
    INCONSISTENT = "inconsistent"  # later or timed calls returned wrong results (cached / stale output)
    TIMING = "timing"  # work outside the timed region (side stream), or timer and wall clock disagree
    TAMPERING = "tampering"  # patches torch/triton/the harness, reaches frames/globals, kills or forks
    REFERENCE = "reference"  # the reference itself could not run at this shape: not the candidate's fault
    NEEDS_GPU = "needs_gpu"  # a GPU-only kernel language (CuTe DSL) under the CPU interpreter: not run, no fault

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: str | None) -> "Failure | None":
        """The member for a stored string (None for None); unknown strings count as crashes."""
        if value is None:
            return None
        try:
            return cls(value)
        except ValueError:
            return cls.CRASH


# Why a failure class was given, for people and for the model's debug prompt.
EXPLANATIONS: dict[str, str] = {
    "not_a_kernel": "the evaluator watched the forward: it must launch kernels of the spec's language and do its "
    "computation in them; torch calls are allowed only as glue (allocation, views, reshapes, casts)",
    "mutates_input": "the inputs were compared before and after the call: a kernel must leave its inputs unchanged "
    "and return new output tensors, not (views of) its inputs",
    "inconsistent": "the same module was called repeatedly on buffers whose values changed between calls, and "
    "those outputs were checked: results must not be cached on pointers or shapes, and every "
    "call must compute its result",
    "timing": "timed calls must do their work on the caller's current CUDA stream, inside the timed region; "
    "launching on another stream or returning before the work is done is not allowed",
    "tampering": "the candidate's source or behaviour tampers with the evaluation (patching torch, triton or the "
    "harness, reaching frames, globals or builtins, dynamic imports, processes, files): write a plain "
    "kernel module that imports only torch, triton and the standard math helpers",
    "reference": "the reference module itself could not run at this shape: choose smaller shapes (--shape) or "
    "the spec's interpret_shapes",
}


@dataclass(config=_STORED)
class ShapeResult:
    label: str
    params: dict[str, Any]
    dtype: str
    correct: bool | None = None  # None: never checked (an earlier failure stopped the run)
    failure: str | None = None
    message: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None  # ||out - ref|| / ||ref||
    latency_ms: float | None = None  # candidate median (cuda only)
    baseline_ms: float | None = None  # reference median, eager or torch.compile (cuda only)
    baseline_cached: bool = False
    gbps: float | None = None
    tflops: float | None = None

    @computed_field  # stored with the shape for people and queries, recomputed on load
    @property
    def speedup(self) -> float | None:
        if self.latency_ms and self.baseline_ms and self.latency_ms > 0:
            return self.baseline_ms / self.latency_ms
        return None


def _text(value: Any) -> str | None:
    """A version string as a process reported it (a candidate's process may report anything): short text or None."""
    if isinstance(value, str):
        return value[:200]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


@dataclass(config=_STORED)
class Versions:
    """The GPU and software an evaluation ran on, as a process reported them at its start."""

    gpu: str | None = None  # the GPU's name ("cpu (triton interpreter)" under the interpreter)
    torch: str | None = None
    triton: str | None = None
    python: str | None = None

    @classmethod
    def reported(cls, environment: Any) -> "Versions":
        """From a harness process's `environment` entry, whatever it holds (unknown keys and odd values dropped)."""
        env = environment if isinstance(environment, dict) else {}
        return cls(
            gpu=_text(env.get("gpu")),
            torch=_text(env.get("torch")),
            triton=_text(env.get("triton")),
            python=_text(env.get("python")),
        )


@dataclass(config=_STORED)
class OutsideBound:
    """One case's outside-timed bound (evaluation/verdict.py `bound_latencies`): the candidate's own median,
    the least latency its outside-timed loop allows, and the two loops' wall times."""

    own_ms: float
    outside_ms: float
    calls: int
    wall_ms: float
    baseline_wall_ms: float
    used: bool = False  # the bound was more than the margin above the own median, and replaced it


@dataclass(config=_STORED)
class Diagnostics:
    """For a person looking into an evaluation; nothing here decides its verdict."""

    seed: int | None = None  # the trials' inputs are drawn from it
    sandbox: dict[str, Any] = field(default_factory=dict)  # the isolation the OS granted (sandbox.Outcome.sandbox)
    stages_s: dict[str, dict[str, float]] = field(default_factory=dict)  # phase -> its process's stage -> seconds
    # phase -> what a process that ran candidate code said it ran on (kept apart: never believed)
    candidate_process: dict[str, Versions] = field(default_factory=dict)
    outside_timing: dict[str, OutsideBound] = field(default_factory=dict)  # case label -> its outside bound
    baseline_error: str | None = None  # why a baseline could not be timed (a correct candidate is then untimed)
    other: dict[str, Any] = field(default_factory=dict)  # keys of an older stored `environment` no field holds

    @staticmethod
    def stage_times(stages: Any) -> dict[str, float]:
        """A process's `stages_s` report, whatever it holds: stage -> seconds, other entries dropped."""
        if not isinstance(stages, dict):
            return {}
        return {
            str(k): float(v)
            for k, v in stages.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        }


@dataclass(config=_STORED)
class Scheduling:
    """How the evaluator scheduled the evaluation: what happened on its way, not what it says of the candidate."""

    # Ran out of GPU memory beside other evaluations: that first verdict's message; then judged again alone.
    judged_alone_after: str | None = None
    phases_in_sequence: bool = False  # its timing prepared only after its check (these shapes ran out of memory)
    worker_lost: str | None = None  # its worker was lost once (why): evaluated again on a fresh one
    # GPU memory its check's judge held once prepared, and at most: what the evaluator plans sharing a GPU with
    gpu_prepared_bytes: int | None = None
    gpu_peak_bytes: int | None = None


@dataclass(config=_STORED)
class Retimed:
    """What an evaluation replaced by `kernelevolve retime` said (its first one, when retimed again)."""

    device: str
    correct: bool
    failure: str | None = None
    fitness: float | None = None
    shapes: list[str] = field(default_factory=list)  # its case labels
    static_cost: float | None = None  # its static estimate (the interpreter's ranking), if any


@dataclass(config=_STORED)
class EvalResult:
    correct: bool
    failure: str | None = None
    message: str = ""  # one line
    log: str = ""  # trimmed stdout/stderr/traceback of the sandboxed process
    shapes: list[ShapeResult] = field(default_factory=list)
    device: str = "interpret"
    timed: bool = False  # True only when GPU latencies were measured
    duration_s: float = 0.0
    phases_s: dict[str, float] = field(default_factory=dict)  # correctness / benchmark wall time
    versions: Versions = field(default_factory=Versions)  # as the judges' processes reported them
    scheduling: Scheduling = field(default_factory=Scheduling)
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    # Flags for a person: "suspicious" (implausible speedup or throughput) and "unstable" (a fresh
    # re-evaluation disagreed); mark -> reason. A marked node is never reported as a run's best.
    marks: dict[str, str] = field(default_factory=dict)
    recheck: dict[str, Any] | None = None  # the elite re-evaluation: fitness and per-shape latencies
    # Untimed (interpreter) only: the static cost estimate of kernelevolve/evaluation/static_cost.py, never a timing.
    static: dict[str, Any] | None = None
    retimed_from: Retimed | None = None  # `kernelevolve retime` replaced this evaluation of the node

    @computed_field  # stored like speedup: written for readers of the JSON, never read back
    @property
    def fitness(self) -> float | None:
        """Geometric mean speedup over the shapes; 0 when anything failed; None when untimed."""
        if not self.correct or any(s.correct is not True for s in self.shapes):
            return 0.0
        if not self.timed:
            return None
        speedups = [s.speedup for s in self.shapes]
        if not speedups or any(x is None for x in speedups):
            return None
        return math.exp(sum(math.log(x) for x in speedups) / len(speedups))

    def to_dict(self) -> dict[str, Any]:
        """The stored form: every field, plus `fitness` and each shape's `speedup` (`static` and
        `retimed_from` only when set)."""
        out = _EVAL_RESULT.dump_python(self)
        for optional in ("static", "retimed_from"):
            if out.get(optional) is None:
                out.pop(optional, None)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EvalResult":
        """Read a stored form back; the computed keys and keys this version does not know are dropped. The
        one `environment` dict of older versions is filed into `versions`, `scheduling`, `diagnostics` and
        `retimed_from` (`legacy_sections`)."""
        if isinstance(d, dict) and "environment" in d:
            d = {k: v for k, v in d.items() if k != "environment"} | {
                k: v for k, v in legacy_sections(d["environment"]).items() if k not in d
            }
        return _EVAL_RESULT.validate_python(d)

    @classmethod
    def failed(cls, failure: Failure, message: str, log: str = "", **kw: Any) -> "EvalResult":
        return cls(
            correct=False,
            failure=str(failure),
            message=message.strip().splitlines()[0] if message.strip() else str(failure),
            log=log,
            **kw,
        )


_EVAL_RESULT = TypeAdapter(EvalResult)

# Where each key of an older version's `environment` goes now (section, field); `baselines_cached` was the
# evaluator's own bookkeeping (each shape's `baseline_cached` keeps it) and `device` repeated the result's.
_LEGACY = {
    "gpu": ("versions", "gpu"),
    "torch": ("versions", "torch"),
    "triton": ("versions", "triton"),
    "python": ("versions", "python"),
    "judged_alone_after": ("scheduling", "judged_alone_after"),
    "phases_in_sequence": ("scheduling", "phases_in_sequence"),
    "worker_lost": ("scheduling", "worker_lost"),
    "gpu_prepared_bytes": ("scheduling", "gpu_prepared_bytes"),
    "gpu_peak_bytes": ("scheduling", "gpu_peak_bytes"),
    "seed": ("diagnostics", "seed"),
    "sandbox": ("diagnostics", "sandbox"),
    "stages_s": ("diagnostics", "stages_s"),
    "candidate_process": ("diagnostics", "candidate_process"),
    "outside_timing": ("diagnostics", "outside_timing"),
    "baseline_error": ("diagnostics", "baseline_error"),
}
_DROPPED = ("baselines_cached", "device")
_SECTIONS = {
    "versions": TypeAdapter(Versions),
    "scheduling": TypeAdapter(Scheduling),
    "diagnostics": TypeAdapter(Diagnostics),
    "retimed_from": TypeAdapter(Retimed),
}


def legacy_sections(environment: Any) -> dict[str, Any]:
    """An older stored `environment` as the fields that replaced it: {"versions": {...}, "scheduling": {...},
    "diagnostics": {...}, and "retimed_from" when it held one}. Values that do not fit a field's type are
    kept in `diagnostics.other` under their old key, so that every stored row loads."""
    env = environment if isinstance(environment, dict) else {}
    out: dict[str, Any] = {"versions": {}, "scheduling": {}, "diagnostics": {}}
    other: dict[str, Any] = {}
    for key, value in env.items():
        if key == "retimed_from" and isinstance(value, dict):
            out["retimed_from"] = value
        elif key in _LEGACY:
            section, name = _LEGACY[key]
            out[section][name] = value
        elif key not in _DROPPED:
            other[key] = value
    for section in ("versions", "scheduling", "diagnostics"):
        for name, value in list(out[section].items()):
            try:
                _SECTIONS[section].validate_python({name: value})
            except ValueError:
                other[name] = out[section].pop(name)  # the old key is the field's name
    if "retimed_from" in out:
        try:
            _SECTIONS["retimed_from"].validate_python(out["retimed_from"])
        except ValueError:
            other["retimed_from"] = out.pop("retimed_from")
    if other:
        out["diagnostics"]["other"] = other
    return out


def static_score(static: dict | None) -> float | None:
    """A selection score in (0.5, 1.0) for a correct, untimed node from its static cost estimate
    (`EvalResult.static`, kernelevolve/evaluation/static_cost.py; lower cost: higher), None without one.
    Below any correct timed kernel that is not slower than its baseline; never shown as a speedup."""
    cost = (static or {}).get("cost")
    if not isinstance(cost, (int, float)) or cost < 0 or math.isnan(cost):
        return None
    return 0.5 + 0.5 / (1.0 + cost)
