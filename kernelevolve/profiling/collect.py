"""Profile one candidate with the chosen tools and gather one ProfileSummary per case.

Each tool runs in its own sandboxed process (runner.run_tool); its raw outputs are parsed here
(parsers.py) and the roofline line is computed from the best latency at hand: the evaluator's
timed median when the caller has one, else the sum of ncu's kernel durations, else the GPU time
per call seen by torch.profiler or Proton.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from kernelevolve.profiling.parsers import ProfileParseError, parse_ncu_csv, parse_proton_hatchet, parse_torch_trace
from kernelevolve.profiling.roofline import LATENCY_BELOW, roofline
from kernelevolve.profiling.runner import DEFAULT_CALLS, TOOLS, run_tool, scratch_dir
from kernelevolve.profiling.schema import ProfileSummary
from kernelevolve.spec import Case, Spec


def profile_candidate(
    spec: Spec,
    source: str,
    cases: list[Case],
    tools: list[str] | tuple[str, ...] = TOOLS,
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
    whose kernels/ the candidate may import (None: the process's)."""
    summaries = {c.label: ProfileSummary(label=c.label, tools=[]) for c in cases}
    work = scratch_dir()
    try:
        for tool in tools:
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
                    _absorb(summary, tool, (run.directory / name).read_text())
                except (OSError, UnicodeDecodeError, ProfileParseError) as e:
                    summary.errors[tool] = f"{tool}: {e}"
                    continue
                summary.tools.append(tool)
                if run.dropped_metrics:
                    summary.errors.setdefault("ncu-metrics", "not collected: " + ", ".join(run.dropped_metrics))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for case in cases:
        summary = summaries[case.label]
        measured = _latency(summary, (latency_ms or {}).get(case.label))
        if measured:
            nbytes, flops = spec.roofline(case)
            summary.roofline = roofline(measured[0], measured[1], nbytes, flops, spec.hardware, latency_below)
    return list(summaries.values())


def _absorb(summary: ProfileSummary, tool: str, text: str) -> None:
    if tool == "torch":
        summary.torch = parse_torch_trace(text)
    elif tool == "ncu":
        summary.ncu = parse_ncu_csv(text)
    else:
        summary.proton = parse_proton_hatchet(text, DEFAULT_CALLS)


def _latency(summary: ProfileSummary, benchmark_ms: float | None) -> tuple[float, str] | None:
    if benchmark_ms:
        return benchmark_ms, "benchmark"
    if summary.ncu:
        return sum(k.duration_ms for k in summary.ncu), "ncu"
    if summary.torch and summary.torch.gpu_ms:
        return summary.torch.gpu_ms, "torch"
    if summary.proton and summary.proton.kernels:
        return sum(k.gpu_ms for k in summary.proton.kernels), "proton"
    return None
