"""What a profiling tool is: one ProfilerTool record, written in its own module of this package.

The record says everything the rest of the package needs of a tool, so nothing else names tools:
the harness module the sandbox runs (kernelevolve/harness/runtime/profile_NAME.py, through the one
template harness_templates/profile.py.j2), what the machine needs for it, the config keys of its
own, the parser of its raw output (into its *part* of a ProfileSummary, stored under its name), the
lines its part adds to an optimise prompt and to `kernelevolve profile`'s output, and the latency it
measured for the roofline line.

`kernelevolve profile`'s output is described here as blocks (Line, Plain, Table) that the command
line prints; this package knows nothing of the console.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable

from pydantic import BaseModel, TypeAdapter


class ProfileParseError(ValueError):
    """A raw profile that cannot be read; str() is one line."""


def read_json(text: str, what: str):
    """The JSON in `text`, or ProfileParseError naming `what` the file should have been."""
    try:
        return json.loads(text)
    except ValueError as e:
        raise ProfileParseError(
            f"{what}: not valid JSON, truncated or another format ({e.msg} at line {e.lineno})"
        ) from None


class KernelTime(BaseModel):
    """One kernel (by name) as a timeline tool saw it, per forward call."""

    name: str
    launches: float  # launches per forward call
    gpu_ms: float  # GPU time per forward call, all its launches


# ---------------------------------------------------------------------------- `kernelevolve profile`'s output


@dataclass(frozen=True)
class Line:
    """A line of facts, wrapped to the console's width (continuation lines indented)."""

    text: str


@dataclass(frozen=True)
class Plain:
    """A line printed as it is (its indent included)."""

    text: str


@dataclass(frozen=True)
class Table:
    """A table when it fits the console, else the same facts as `entries` ((head, text) pairs)."""

    columns: tuple[str, ...]
    rows: list[tuple[str, ...]]
    entries: list[tuple[str, str]]
    left: tuple[str, ...] = ()  # the columns justified left (the others right)


Block = Line | Plain | Table


def kernel_table(kernels: list[KernelTime], head: str) -> list[Block]:
    """A timeline tool's kernels per call: name, launches and GPU ms per call (or one line: none launched)."""
    if not kernels:
        return [Plain(f"  {head.split()[0]}: no GPU kernel launched")]
    rows = [(k.name, f"{k.launches:g}", f"{k.gpu_ms:.4f}") for k in kernels]
    entries = [(f"  {n}:", f"{launches} launches, {ms} ms per call") for n, launches, ms in rows]
    return [Table(columns=(head, "launches/call", "GPU ms/call"), rows=rows, entries=entries, left=(head,))]


# ---------------------------------------------------------------------------- the record


def _no_keys(timeout_s: float) -> dict:
    return {}


@dataclass(frozen=True)
class ProfilerTool:
    """One profiling tool (`--tool NAME`), registered in kernelevolve.profiling.tools.TOOLS."""

    name: str  # --tool NAME; the key of its part in a ProfileSummary (and in the stored JSON)
    what: str  # a few words for --tool's help: "Nsight Compute"
    output: str  # its raw output, for --keep's help: "ncu CSV"
    harness: ModuleType  # run in the sandbox with the config: its `main(config)` (extensions.ProfilerHarness)
    part: Any  # the type of its part of a ProfileSummary (a pydantic model, or list[...] of one)
    parse: Callable[[str, int], Any]  # (raw output's text, forward calls profiled) -> its part; ProfileParseError
    prompt: Callable[[Any, int], list[str]]  # (part, at most this many kernels) -> lines of an optimise prompt
    report: Callable[[Any], list[Block]]  # part -> what `kernelevolve profile` prints of it
    program: str | None = None  # a program it runs that must be on PATH ("ncu")
    on_interpreter: bool = False  # runs under the Triton interpreter too (host time, no GPU kernels)
    config: Callable[[float], dict] = _no_keys  # (timeout per tool, s) -> the harness config's keys of its own
    latency: Callable[[Any], float | None] | None = None  # ms per forward call its part measured, if any
    latency_rank: int = 0  # for the roofline line: the measured latency of the lowest rank is used
    spills: Callable[[Any], bool] | None = None  # does its part show register spills
    _adapter: TypeAdapter = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_adapter", TypeAdapter(self.part))

    def load(self, value: Any) -> Any:
        """Its part from stored JSON (or the part itself)."""
        return self._adapter.validate_python(value)

    def missing(self) -> str | None:
        """What this machine lacks for it beyond a GPU, in a few words; None: nothing."""
        if self.program and shutil.which(self.program) is None:
            return f"{self.program} ({self.what}) is not on PATH"
        return None
