"""What each harness process is told: one frozen dataclass per harness, built by the evaluation side,
embedded in the generated script as the JSON of `to_dict()` and read back once at the harness's entry
(`load`), which names any missing, unknown or ill-typed key in one line.

Standard library only: the harness runs in the sandbox, beside the candidate. The candidate can read
(and, in its own process, change) its harness's configuration, so nothing here is a secret and nothing
it holds is believed by the evaluator: the judges' configurations come from the evaluator alone.

Settings known only later (the evaluator's prepare and go signals: `outside_calls`, `profile`,
`outside`) are fields too, filled by `signalled(payload)` from what the evaluator wrote.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal


C = typing.TypeVar("C", bound="HarnessConfig")


class ConfigError(ValueError):
    """A configuration that does not fit its harness (the evaluator's fault, never the candidate's)."""


@dataclass(frozen=True)
class Case:
    """One case: its label, the reference's constant overrides and constructor parameters, its dtype."""

    label: str
    params: dict[str, Any]
    dtype: str


@dataclass(frozen=True)
class Tolerance:
    """Per dtype: every element within atol + rtol * |ref|, and the output as a whole within
    norm_rtol * ||ref|| (default rtol): spec.Tolerance, as the judge reads it."""

    atol: float
    rtol: float
    norm_rtol: float | None = None

    @property
    def norm_bound(self) -> float:
        """The largest ||out - ref|| / ||ref|| accepted."""
        return float(self.norm_rtol) if self.norm_rtol else max(float(self.rtol), 1e-6)


@dataclass(frozen=True, kw_only=True)
class HarnessConfig:
    """What every harness process gets: where its result goes, and the evaluator's signals (files in its
    own folder: `prepare_path` lets it use the GPU, `go_path` run its candidate or judge, `stop_path`
    leave unused), given by the process that starts it (evaluation/processes.py)."""

    TOOL: typing.ClassVar[str] = ""
    LATE: typing.ClassVar[tuple[str, ...]] = ()  # fields the prepare and go signals may set

    result_path: str = ""
    go_path: str | None = None
    stop_path: str | None = None
    prepare_path: str | None = None
    go_timeout_s: float = 600.0

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form embedded in the script (fields left at None omitted)."""
        return {
            f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self) if getattr(self, f.name) is not None
        }

    @classmethod
    def parse(cls: type[C], data: Any) -> C:
        """The configuration from its JSON form; ConfigError names what does not fit."""
        what = f"the {cls.TOOL or cls.__name__} configuration"
        config = _build(cls, data, what)
        if not config.result_path:
            raise ConfigError(f"{what} has no 'result_path'")
        return config

    @classmethod
    def load(cls: type[C], data: Any) -> C:
        """`parse` at a harness's entry: a configuration that does not fit ends the process in one line."""
        try:
            return cls.parse(data)
        except ConfigError as exc:
            _exit_with(exc)

    def signalled(self: C, payload: dict) -> C:
        """This configuration with the settings the evaluator sent with a signal (LATE fields only)."""
        if not payload:
            return self
        what = f"the evaluator's signal to the {self.TOOL or type(self).__name__} harness"
        unknown = sorted(set(payload) - set(self.LATE)) if isinstance(payload, dict) else []
        if unknown:
            _exit_with(ConfigError(f"{what} has unknown key {unknown[0]!r} (it may set: {', '.join(self.LATE)})"))
        try:
            hints = typing.get_type_hints(type(self))
            changes = {k: _convert(v, hints[k], f"{what}: {k!r}") for k, v in payload.items()}
        except ConfigError as exc:
            _exit_with(exc)
        return dataclasses.replace(self, **changes)

    def with_signals(self: C, **signals: Any) -> C:
        """This configuration with the result and signal paths of the process that runs it."""
        return dataclasses.replace(self, **signals)


@dataclass(frozen=True, kw_only=True)
class CorrectnessConfig(HarnessConfig):
    """The candidate's side of the correctness check (correctness.py): its trials and repeated calls,
    outputs handed over to `outputs_dir`. No tolerances: this process judges nothing."""

    TOOL = "correctness"

    device: Literal["cuda", "interpret"]
    candidate_path: str
    reference_path: str
    outputs_dir: str
    cases: tuple[Case, ...]
    trials: int
    seed: int
    allow_torch_ops: tuple[str, ...] = ()
    inplace: bool = False
    import_paths: tuple[str, ...] = ()  # where candidates may import helpers from (the knowledge base's kernels)


@dataclass(frozen=True, kw_only=True)
class JudgeConfig(HarnessConfig):
    """The judge (judge.py): the reference from the same seeds, compared with what was handed over to
    `outputs_dir`. Mode "check": the correctness trials and repeated calls; "timed": the timed calls a
    timing process kept, and its outside-timed loops. It is never told where the candidate is."""

    TOOL = "judge"
    LATE = ("outside_calls", "outside")

    device: Literal["cuda", "interpret"]
    mode: Literal["check", "timed"]
    reference_path: str
    outputs_dir: str
    cases: tuple[Case, ...]
    tolerances: dict[str, Tolerance]
    trials: int
    seed: int
    input_sets: int = 2
    # Prepare signal ("timed"): calls of case n's outside-timed loops, where the baseline fixed them early.
    outside_calls: dict[str, int] = field(default_factory=dict)
    # Go signal ("timed"): each loop's seed, calls and the sums of squares its process reported (checked
    # by the judge itself: they come from the candidate's process).
    outside: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class BenchmarkConfig(HarnessConfig):
    """The timing process (benchmark.py, GPU only). Mode "baseline": the reference timed, never a
    candidate; "candidate": the candidate's timed calls, their kept outputs handed over to `outputs_dir`."""

    TOOL = "benchmark"
    LATE = ("profile",)

    device: Literal["cuda", "interpret"]
    mode: Literal["baseline", "candidate"]
    candidate_path: str
    reference_path: str
    outputs_dir: str
    cases: tuple[Case, ...]
    seed: int
    baseline: str  # "eager" or "torch.compile"
    warmup_ms: float
    rep_ms: float
    allow_torch_ops: tuple[str, ...] = ()
    import_paths: tuple[str, ...] = ()
    input_sets: int = 2
    profile: bool = False  # go signal: one profiled call per case (where its kernels ran)


@dataclass(frozen=True, kw_only=True)
class PreflightConfig(HarnessConfig):
    """The reference alone at every case (preflight.py): no candidate, no signals."""

    TOOL = "preflight"

    device: Literal["cuda", "interpret"]
    reference_path: str
    cases: tuple[Case, ...]
    seed: int


@dataclass(frozen=True, kw_only=True)
class ProbeConfig(HarnessConfig):
    """The static cost probe (evaluation/static_probe.py). Phase "count": one interpreted forward at
    `case`, counted; "compile": the kernels the count saw (its `go_path` holds them) compiled for `arch`."""

    TOOL = "static probe"

    phase: Literal["count", "compile"]
    candidate_path: str
    reference_path: str
    case: Case
    seed: int
    import_paths: tuple[str, ...] = ()
    wait_s: float = 300.0  # how long it waits for its go before leaving quietly
    arch: int | None = None  # compile: the target's compute capability (90 for sm_90)
    compile_budget_s: float = 60.0


# -- parsing -------------------------------------------------------------------------------
_KINDS = {int: "an integer", str: "a string", bool: "true or false"}


def _exit_with(exc: ConfigError) -> typing.NoReturn:
    print(f"harness: {exc}", file=sys.stderr)
    sys.stderr.flush()
    sys.exit(2)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _build(cls: type, data: Any, what: str):
    if not isinstance(data, dict):
        raise ConfigError(f"{what} is a {type(data).__name__}, not a JSON object")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{what} has unknown key {unknown[0]!r}")
    missing = [
        name
        for name, f in fields.items()
        if name not in data and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ConfigError(f"{what} has no {missing[0]!r}")
    hints = typing.get_type_hints(cls)
    return cls(**{k: _convert(v, hints[k], f"{what}: {k!r}") for k, v in data.items()})


def _convert(value: Any, hint: Any, what: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        kinds = [a for a in args if a is not type(None)]
        return _convert(value, kinds[0] if len(kinds) == 1 else Any, what)
    if origin is Literal:
        if value in args:
            return value
        raise ConfigError(f"{what} is {value!r}, not one of {', '.join(map(repr, args))}")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise ConfigError(f"{what} is {value!r}, not a number")
    if hint in _KINDS:
        if isinstance(value, hint) and (hint is bool or not isinstance(value, bool)):
            return value
        raise ConfigError(f"{what} is {value!r}, not {_KINDS[hint]}")
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{what} is {value!r}, not a list")
        return tuple(_convert(v, args[0], f"{what}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise ConfigError(f"{what} is {value!r}, not an object")
        return {k: _convert(v, args[1], f"{what}[{k!r}]") for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, what)
    raise ConfigError(f"{what}: no rule for {hint!r}")  # a field of a type this module does not read
