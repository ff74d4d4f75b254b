"""torch.profiler: what one forward call launches, GPU time per kernel, what it costs the host, memory.

Its harness (kernelevolve/harness/runtime/profile_torch.py) records one Chrome trace per case; the
only tool that also runs under the interpreter (host time; no GPU kernels there).
"""

from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel

from kernelevolve.harness.runtime import profile_torch
from kernelevolve.harness.runtime.profile_torch import CALL_RANGE
from kernelevolve.profiling.tools.base import (
    Block,
    KernelTime,
    Line,
    ProfileParseError,
    ProfilerTool,
    kernel_table,
    read_json,
)


class TorchProfile(BaseModel):
    """torch.profiler: what one forward call launches and what it costs the host."""

    calls: int
    kernels: list[KernelTime]
    gpu_ms: float  # kernel time per forward call
    host_ms: float  # CPU time of one forward call (Python, launches), per call
    launch_api_ms: float  # of which inside the CUDA launch API
    peak_allocated_bytes: int | None = None  # the allocator's high-water mark during the profile
    allocated_bytes_per_call: int = 0  # bytes the candidate allocates per forward call


def parse_torch_trace(text: str) -> TorchProfile:
    """A Chrome trace from profile_torch: kernels per call, GPU and host time, memory."""
    data = read_json(text, "torch.profiler trace")
    events = data.get("traceEvents") if isinstance(data, dict) else None
    if not isinstance(events, list):
        raise ProfileParseError("torch.profiler trace: no traceEvents list (not a Chrome trace)")
    calls = sorted(
        (e for e in events if e.get("cat") == "user_annotation" and e.get("name") == CALL_RANGE), key=lambda e: e["ts"]
    )
    if not calls:
        raise ProfileParseError(
            f"torch.profiler trace: no '{CALL_RANGE}' ranges (not a trace of the profiling harness)"
        )
    n = len(calls)
    per_kernel: dict[str, list[float]] = defaultdict(list)
    for e in events:
        if e.get("cat") == "kernel":
            per_kernel[str(e.get("name", "?"))].append(float(e.get("dur", 0)) / 1e3)
    kernels = sorted(
        (KernelTime(name=k, launches=len(d) / n, gpu_ms=sum(d) / n) for k, d in per_kernel.items()),
        key=lambda k: -k.gpu_ms,
    )
    spans = [(c["ts"], c["ts"] + c.get("dur", 0)) for c in calls]

    def inside(e) -> bool:
        return any(a <= e.get("ts", -1) <= b for a, b in spans)

    launch_us = sum(
        e.get("dur", 0)
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "Launch" in str(e.get("name", "")) and inside(e)
    )
    memory = [e for e in events if e.get("name") == "[memory]"]
    on_device = [e for e in memory if e.get("args", {}).get("Device Id", -1) >= 0] or memory  # GPU, else host
    allocated = sum(e["args"].get("Bytes", 0) for e in on_device if e["args"].get("Bytes", 0) > 0 and inside(e))
    return TorchProfile(
        calls=n,
        kernels=kernels,
        gpu_ms=sum(k.gpu_ms for k in kernels),
        host_ms=sum(b - a for a, b in spans) / n / 1e3,
        launch_api_ms=launch_us / n / 1e3,
        peak_allocated_bytes=max((e["args"].get("Total Allocated", 0) for e in on_device), default=None),
        allocated_bytes_per_call=int(allocated / n),
    )


def prompt_lines(t: TorchProfile, max_kernels: int) -> list[str]:
    ks = ", ".join(f"{k.name[:60]} x{k.launches:g} {k.gpu_ms:.4f} ms" for k in t.kernels[:max_kernels])
    return [
        f"torch.profiler: {sum(k.launches for k in t.kernels):g} kernel launches per call "
        f"({ks}); GPU {t.gpu_ms:.4f} ms, host {t.host_ms:.4f} ms per call (under the profiler)"
        + (f"; allocates {t.allocated_bytes_per_call / 2**20:.1f} MiB per call" if t.allocated_bytes_per_call else "")
    ]


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.1f} KiB"


def report(t: TorchProfile) -> list[Block]:
    return [
        Line(
            f"torch.profiler: GPU {t.gpu_ms:.4f} ms and host {t.host_ms:.4f} ms per call (host time under the "
            f"profiler; {t.launch_api_ms:.4f} ms in launch calls); allocates {_bytes(t.allocated_bytes_per_call)} "
            f"per call, peak {_bytes(t.peak_allocated_bytes)}"
        ),
        *kernel_table(t.kernels, "torch.profiler kernel"),
    ]


TOOL = ProfilerTool(
    name="torch",
    what="torch.profiler",
    output="Chrome trace",
    harness=profile_torch,
    part=TorchProfile,
    parse=lambda text, calls: parse_torch_trace(text),
    prompt=prompt_lines,
    report=report,
    on_interpreter=True,
    latency=lambda t: t.gpu_ms or None,
    latency_rank=1,
)
