"""Profile one candidate with the chosen tools and gather one ProfileSummary per case.

Each tool runs in its own sandboxed process (runner.run_tool); its raw outputs are parsed here by
the tool's parser (tools/NAME.py) into its part of the summary, and the roofline line is computed
from the best latency at hand: the evaluator's timed median when the caller has one, else the
latency of the tool of the lowest `latency_rank` that measured one (ncu's kernel durations, then
the GPU time per call seen by torch.profiler, then Proton's).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from kernelevolve.profiling.roofline import LATENCY_BELOW, roofline
from kernelevolve.profiling.runner import DEFAULT_CALLS, run_tool, scratch_dir
from kernelevolve.profiling.schema import ProfileSummary
from kernelevolve.profiling.tools import TOOLS, ProfileParseError
from kernelevolve.spec import Case, Spec


def profile_candidate(
    spec: Spec,
    source: str,
    cases: list[Case],
    tools: list[str] | tuple[str, ...] | None = None,
    *,
    device: str = "cuda",
    gpu: str = "0",
    timeout_s: float = 300.0,
    latency_ms: dict[str, float] | None = None,
    raw_dir: Path | None = None,
    latency_below: float = LATENCY_BELOW,
    knowledge_base: Path | None = None,
) -> list[ProfileSummary]:
    """One summary per case; a tool that failed leaves its one-line reason in `errors`.

    `raw_dir`: keep each tool's raw outputs there (<raw_dir>/<tool>/...). `knowledge_base`: the run's,
    whose kernels/ the candidate may import (None: the process's). `tools`: None, all of TOOLS."""
    summaries = {c.label: ProfileSummary(label=c.label, tools=[]) for c in cases}
    work = scratch_dir()
    try:
        for tool in list(TOOLS) if tools is None else tools:
            t0 = time.monotonic()
            run = run_tool(
                tool,
                spec,
                source,
                cases,
                work,
                device=device,
                gpu=gpu,
                timeout_s=timeout_s,
                calls=DEFAULT_CALLS,
                knowledge_base=knowledge_base,
            )
            share = (time.monotonic() - t0) / max(1, len(cases))
            if raw_dir is not None:
                keep = Path(raw_dir) / tool
                keep.mkdir(parents=True, exist_ok=True)
                for name in run.outputs.values():
                    if (run.directory / name).is_file():
                        shutil.copy(run.directory / name, keep / name)
            for label, summary in summaries.items():
                summary.seconds += share
                name = run.outputs.get(label)
                if name is None:
                    summary.errors[tool] = run.error or f"{tool}: no output for this case"
                    continue
                try:
                    summary.parts[tool] = TOOLS[tool].parse((run.directory / name).read_text(), DEFAULT_CALLS)
                except (OSError, UnicodeDecodeError, ProfileParseError) as e:
                    summary.errors[tool] = f"{tool}: {e}"
                    continue
                summary.tools.append(tool)
                if run.dropped_metrics:
                    summary.errors.setdefault(f"{tool}-metrics", "not collected: " + ", ".join(run.dropped_metrics))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for case in cases:
        summary = summaries[case.label]
        measured = _latency(summary, (latency_ms or {}).get(case.label))
        if measured:
            nbytes, flops = spec.roofline(case)
            summary.roofline = roofline(measured[0], measured[1], nbytes, flops, spec.hardware, latency_below)
    return list(summaries.values())


def _latency(summary: ProfileSummary, benchmark_ms: float | None) -> tuple[float, str] | None:
    if benchmark_ms:
        return benchmark_ms, "benchmark"
    for tool in sorted((t for t in TOOLS.values() if t.latency), key=lambda t: t.latency_rank):
        if tool.name in summary.parts:
            ms = tool.latency(summary.parts[tool.name])
            if ms is not None:
                return ms, tool.name
    return None
