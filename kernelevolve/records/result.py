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
    # What a candidate that games its evaluation gets (see kernelevolve/harness/runtime/guard.py):
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
    environment: dict[str, Any] = field(default_factory=dict)  # gpu, torch, triton versions
    # Flags for a person: "suspicious" (implausible speedup or throughput) and "unstable" (a fresh
    # re-evaluation disagreed); mark -> reason. A marked node is never reported as a run's best.
    marks: dict[str, str] = field(default_factory=dict)
    recheck: dict[str, Any] | None = None  # the elite re-evaluation: fitness and per-shape latencies
    # Untimed (interpreter) only: the static cost estimate of kernelevolve/evaluation/static_cost.py, never a timing.
    static: dict[str, Any] | None = None

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
        """The stored form: every field, plus `fitness` and each shape's `speedup` (`static` only when set:
        an evaluation without one reads and writes as before it existed)."""
        out = _EVAL_RESULT.dump_python(self)
        if out.get("static") is None:
            out.pop("static", None)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EvalResult":
        """Read a stored form back; the computed keys and keys this version does not know are dropped."""
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


def static_score(static: dict | None) -> float | None:
    """A selection score in (0.5, 1.0) for a correct, untimed node from its static cost estimate
    (`EvalResult.static`, kernelevolve/evaluation/static_cost.py; lower cost: higher), None without one.
    Below any correct timed kernel that is not slower than its baseline; never shown as a speedup."""
    cost = (static or {}).get("cost")
    if not isinstance(cost, (int, float)) or cost < 0 or math.isnan(cost):
        return None
    return 0.5 + 0.5 / (1.0 + cost)
