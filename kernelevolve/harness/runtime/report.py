"""What a harness process reports: the result file it rewrites after every step (state.Result writes it),
and the typed form the evaluation side reads it back in (`Report.read`).

Standard library only: the harness side runs in the sandbox. The case entries are written as these
dataclasses, so writer and reader share one definition of every field.

Reading is lenient, and never raises: the result file of a process that ran candidate code holds whatever
that code wrote. A value of the wrong type reads as absent (None, "" or False), never as a pass; a failure
entry that is present but malformed reads as a crash. What the evaluator believes of each report is
decided where it is read (evaluation/verdict.py: correctness and the figures it plans with only from the
judges), not here.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

WAITING_FOR_GO = "waiting for the evaluator's go"  # the stage of a process that has prepared


@dataclass
class Failed:
    """Why the process ended its run early: a failure class (records.result.Failure's value), one line,
    the traceback's tail. Written under the key "class"."""

    failure_class: str
    message: str = ""
    traceback: str = ""

    def to_json(self) -> dict[str, str]:
        return {"class": self.failure_class, "message": self.message, "traceback": self.traceback}

    @classmethod
    def read(cls, value: Any) -> Failed | None:
        if not value:
            return None
        if isinstance(value, dict) and isinstance(value.get("class"), str):
            return cls(value["class"], _str(value.get("message")), _str(value.get("traceback")))
        return cls("crash", "the process's result file holds a malformed failure entry")


@dataclass
class Environment:
    """What the process says it runs on, and (judges, timing processes) the GPU memory it holds once
    prepared and the most it held, reported before any candidate code ran in it."""

    torch: str | None = None
    triton: str | None = None
    python: str | None = None
    device: str | None = None
    gpu: str | None = None
    tool: str | None = None  # a profiling harness's
    gpu_prepared_bytes: int | None = None
    gpu_peak_bytes: int | None = None

    @classmethod
    def read(cls, value: Any) -> Environment:
        env = value if isinstance(value, dict) else {}
        texts = {k: _text(env.get(k)) for k in ("torch", "triton", "python", "device", "gpu", "tool")}
        return cls(
            **texts,
            gpu_prepared_bytes=_int(env.get("gpu_prepared_bytes")),
            gpu_peak_bytes=_int(env.get("gpu_peak_bytes")),
        )


@dataclass
class CheckCase:
    """One case of a correctness check: the candidate's side (correctness.py: an early refusal, with its
    params and dtype for a person) or a judge's verdict (judge.py: correct, and the errors it measured)."""

    label: str
    correct: bool | None = None  # None: not judged (an earlier failure stopped the run)
    failure: str | None = None
    message: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None  # ||out - ref|| / ||ref||
    params: dict[str, Any] | None = None
    dtype: str | None = None

    @classmethod
    def read(cls, entry: dict) -> CheckCase:
        failure = entry.get("failure")
        return cls(
            label=entry["label"],
            correct=entry.get("correct") if isinstance(entry.get("correct"), bool) else None,
            failure=str(failure) if failure else None,  # any failure the process named counts as one
            message=_str(entry.get("message")),
            max_abs_err=_num(entry.get("max_abs_err")),
            max_rel_err=_num(entry.get("max_rel_err")),
            params=entry.get("params") if isinstance(entry.get("params"), dict) else None,
            dtype=_text(entry.get("dtype")),
        )


@dataclass
class TimedCase:
    """One case of a candidate's timing process (benchmark.py): its own median over its timed calls (the
    candidate's word: bounded by the outside-timed loops), their count, wall and stream times, and the
    profiled call's findings."""

    label: str
    latency_ms: float | None = None
    calls: int | None = None
    wall_ms: float | None = None
    stream_ms: float | None = None
    lead_ms: float | None = None
    profile: dict[str, Any] | None = None

    @classmethod
    def read(cls, entry: dict) -> TimedCase:
        return cls(
            label=entry["label"],
            latency_ms=_num(entry.get("latency_ms")),
            calls=_int(entry.get("calls")),
            wall_ms=_num(entry.get("wall_ms")),
            stream_ms=_num(entry.get("stream_ms")),
            lead_ms=_num(entry.get("lead_ms")),
            profile=entry.get("profile") if isinstance(entry.get("profile"), dict) else None,
        )


@dataclass
class BaselineCase:
    """One case of the baseline's timing process (benchmark.py, mode "baseline"; never a candidate)."""

    label: str
    baseline_ms: float | None = None

    @classmethod
    def read(cls, entry: dict) -> BaselineCase:
        return cls(label=entry["label"], baseline_ms=_num(entry.get("baseline_ms")))


@dataclass
class PreflightCase:
    """One case of the reference alone (preflight.py): whether it ran, else why not."""

    label: str
    ok: bool = False
    message: str = ""

    @classmethod
    def read(cls, entry: dict) -> PreflightCase:
        return cls(label=entry["label"], ok=entry.get("ok") is True, message=_str(entry.get("message")))


CaseT = TypeVar("CaseT", CheckCase, TimedCase, BaselineCase, PreflightCase)


@dataclass
class Report(Generic[CaseT]):
    """A harness process's result file: the stage it reached ("done" once it finished), why it ended
    early, its cases, what it runs on, the seconds each stage took, whether it left unused (stopped)."""

    stage: str = "start-up"
    failure: Failed | None = None
    cases: list[CaseT] = field(default_factory=list)
    environment: Environment = field(default_factory=Environment)
    stages_s: dict[str, float] = field(default_factory=dict)
    cancelled: bool = False

    @property
    def done(self) -> bool:
        return self.stage == "done"

    @classmethod
    def read(cls, data: Any, case: type[CaseT] | None = None) -> Report[CaseT]:
        """The report in `data` (the JSON the process left, or None) with its cases as `case` (None: its
        cases are not read); entries that are not objects with a string label are left out."""
        data = data if isinstance(data, dict) else {}
        entries = data.get("cases") if case is not None and isinstance(data.get("cases"), list) else []
        return cls(
            stage=data.get("stage") if isinstance(data.get("stage"), str) else "start-up",
            failure=Failed.read(data.get("failure")),
            cases=[case.read(e) for e in entries if isinstance(e, dict) and isinstance(e.get("label"), str)],
            environment=Environment.read(data.get("environment")),
            stages_s=stage_times(data.get("stages_s")),
            cancelled=data.get("cancelled") is True,
        )


@dataclass
class ProbeReport:
    """The static cost probe's result file (evaluation/static_probe.py), of its count or its compile. All of
    it is the candidate's process's word, used only to rank candidates no GPU has timed (static_cost.py)."""

    stage: str = "start-up"
    failure: str | None = None  # one line
    cancelled: bool = False
    launches: list[dict[str, Any]] = field(default_factory=list)  # count: kernel, key, programs, bytes of each
    specs: dict[str, dict[str, Any]] = field(default_factory=dict)  # count: what compiling each kernel needs
    kernels: dict[str, dict[str, Any]] = field(default_factory=dict)  # compile: ptxas's figures by kernel key
    io_bytes: int | None = None  # count: inputs, outputs and parameters once each
    stages_s: dict[str, float] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.stage == "done"

    @classmethod
    def read(cls, data: Any) -> ProbeReport:
        data = data if isinstance(data, dict) else {}

        def objects(key: str) -> dict[str, dict]:
            value = data.get(key)
            return {str(k): v for k, v in value.items() if isinstance(v, dict)} if isinstance(value, dict) else {}

        launches = data.get("launches") if isinstance(data.get("launches"), list) else []
        failure = data.get("failure")
        return cls(
            stage=data.get("stage") if isinstance(data.get("stage"), str) else "start-up",
            failure=str(failure)[:300] if failure else None,
            cancelled=data.get("cancelled") is True,
            launches=[x for x in launches if isinstance(x, dict)],
            specs=objects("specs"),
            kernels=objects("kernels"),
            io_bytes=_int(data.get("io_bytes")),
            stages_s=stage_times(data.get("stages_s")),
        )


def to_json(value: Any) -> Any:
    """json.dump's `default`: a case entry (or a Failed) as the object it is written as."""
    if isinstance(value, Failed):
        return value.to_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def stage_times(value: Any) -> dict[str, float]:
    """A `stages_s` entry: stage -> seconds, other entries dropped."""
    if not isinstance(value, dict):
        return {}
    return {str(k): float(v) for k, v in value.items() if _num(v) is not None and math.isfinite(v)}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _text(value: Any) -> str | None:
    """Short text as a process reported it: a string (200 characters at most), a number as text, else None."""
    if isinstance(value, str):
        return value[:200]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
