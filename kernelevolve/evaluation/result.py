"""What one evaluation of one candidate yields: per-shape outcomes, a failure class, a fitness."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


class Failure(str, Enum):
    """Why a candidate failed. Ordered roughly by how early in its life it broke."""

    NO_CODE = "no_code"  # the operator's reply held no usable ModelNew source
    SYNTAX = "syntax"
    IMPORT = "import"  # module body or ModelNew(...) construction raised, or no ModelNew
    COMPILE = "compile"  # Triton refused the kernel (CompilationError, OutOfResources)
    RUNTIME = "runtime"  # forward raised
    TIMEOUT = "timeout"
    CRASH = "crash"  # the process died (signal, abort, exit without a result)
    INCORRECT = "incorrect"  # ran, but wrong shape/dtype/values, NaN/Inf, or unwritten output

    def __str__(self) -> str:
        return self.value


@dataclass
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

    @property
    def speedup(self) -> float | None:
        if self.latency_ms and self.baseline_ms and self.latency_ms > 0:
            return self.baseline_ms / self.latency_ms
        return None


@dataclass
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
        d = asdict(self)
        d["fitness"] = self.fitness
        for s, shape in zip(d["shapes"], self.shapes):
            s["speedup"] = shape.speedup
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EvalResult":
        d = dict(d)
        d.pop("fitness", None)
        shapes = []
        for s in d.pop("shapes", []):
            s = dict(s)
            s.pop("speedup", None)
            shapes.append(ShapeResult(**s))
        return cls(shapes=shapes, **d)

    @classmethod
    def failed(cls, failure: Failure, message: str, log: str = "", **kw: Any) -> "EvalResult":
        return cls(correct=False, failure=str(failure), message=message.strip().splitlines()[0] if message.strip() else str(failure), log=log, **kw)
