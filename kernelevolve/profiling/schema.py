"""One profile summary per (candidate, case), whatever tools produced it.

Stored per node in the experiment database (as its JSON), printed by `kernelevolve profile` and
`show --node`, and given to the operators: `prompt_text()` is what an optimise prompt carries. Each
tool's part of it is that tool's own schema (kernelevolve/profiling/tools/NAME.py).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_serializer, model_validator

from kernelevolve.profiling.tools import TOOLS

Bound = Literal["memory", "compute", "latency", "unknown"]


class Roofline(BaseModel):
    """Achieved throughput from the spec's bytes/flops, as fractions of the GPU's peaks."""

    latency_ms: float
    latency_source: str  # "benchmark" (the evaluator's timed median), "ncu", "torch" or "proton"
    gbps: float | None = None
    tflops: float | None = None
    peak_gbps: float | None = None
    peak_tflops: float | None = None
    peak_source: str = "datasheet"  # "measured" where the hardware document has measured figures
    memory_fraction: float | None = None
    compute_fraction: float | None = None
    bound: Bound = "unknown"

    @property
    def fraction(self) -> float | None:
        """The larger fraction: how close the kernel is to the roof that limits it."""
        fs = [f for f in (self.memory_fraction, self.compute_fraction) if f is not None]
        return max(fs) if fs else None

    def line(self) -> str:
        parts = [f"roofline: {self.latency_ms:.4f} ms ({self.latency_source})"]
        if self.gbps is not None:
            parts.append(
                f"{self.gbps:.0f} GB/s"
                + (
                    f" = {100 * self.memory_fraction:.0f}% of {self.peak_gbps:.0f}"
                    if self.memory_fraction is not None
                    else ""
                )
            )
        if self.tflops is not None:
            parts.append(
                f"{self.tflops:.2f} TFLOP/s"
                + (
                    f" = {100 * self.compute_fraction:.1f}% of {self.peak_tflops:.0f}"
                    if self.compute_fraction is not None
                    else ""
                )
            )
        peaks = f" ({self.peak_source} peaks)" if self.peak_gbps or self.peak_tflops else ""
        return ", ".join(parts) + f"{peaks}; {self.bound}-bound"


class ProfileSummary(BaseModel):
    """Everything the profiling tools said about one candidate at one case.

    Each tool's part is in `parts` under the tool's name. Stored and dumped flat, as it always was: one
    top-level key per registered tool (null when it gave none), so stored rows load as they were
    written and `ProfileSummary(ncu=[...])` gives the ncu part."""

    label: str  # the case, e.g. "M=32768,N=4096 bfloat16"
    tools: list[str]  # the tools that produced a profile
    parts: dict[str, Any] = Field(default_factory=dict)  # tool -> its part (of type TOOLS[tool].part)
    roofline: Roofline | None = None
    errors: dict[str, str] = Field(default_factory=dict)  # tool -> why it gave no profile
    seconds: float = 0.0  # wall time the profiles took
    taken_on: str | None = None  # a Ray worker's "HOST pid PID gpu GPU"; None: the host that ran the search

    @model_validator(mode="before")
    @classmethod
    def _parts_under_tool_names(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        parts = dict(data.pop("parts", None) or {})
        for name in TOOLS:
            value = data.pop(name, None)
            if value is not None:
                parts[name] = value
        data["parts"] = {name: TOOLS[name].load(v) if name in TOOLS else v for name, v in parts.items()}
        return data

    @model_serializer(mode="wrap")
    def _flat(self, handler) -> dict[str, Any]:
        data = handler(self)
        parts = data.pop("parts")
        head = {"label": data.pop("label"), "tools": data.pop("tools")}
        return {**head, **{name: parts.get(name) for name in TOOLS}, **parts, **data}

    @property
    def spills(self) -> bool:
        return any(tool.spills(self.parts[name]) for name, tool in TOOLS.items() if tool.spills and name in self.parts)

    def prompt_text(self, max_kernels: int = 4) -> str:
        """A few plain lines for a model: where the time goes and what limits it."""
        lines = [f"Profile at {self.label}:"]
        if self.roofline:
            lines.append("- " + self.roofline.line())
        for name, tool in TOOLS.items():
            if name in self.parts:
                lines += ["- " + line for line in tool.prompt(self.parts[name], max_kernels)]
        for tool, err in self.errors.items():
            lines.append(f"- {tool}: no profile ({err})")
        return "\n".join(lines)


class NodeProfile(BaseModel):
    """A search node's profiles (one summary per profiled case); str() is what a prompt shows."""

    summaries: list[ProfileSummary]
    seconds: float = 0.0

    @property
    def roofline_fraction(self) -> float | None:
        fs = [s.roofline.fraction for s in self.summaries if s.roofline and s.roofline.fraction is not None]
        return max(fs) if fs else None

    @property
    def spills(self) -> bool:
        return any(s.spills for s in self.summaries)

    def __str__(self) -> str:
        return "\n".join(s.prompt_text() for s in self.summaries)
