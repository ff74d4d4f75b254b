"""One profile summary per (candidate, case), whatever tools produced it.

Stored per node in the experiment database (as its JSON), printed by `kernelevolve profile` and
`show --node`, and given to the operators: `prompt_text()` is what an optimise prompt carries.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Bound = Literal["memory", "compute", "latency", "unknown"]


class KernelTime(BaseModel):
    """One kernel (by name) as a timeline tool saw it, per forward call."""

    name: str
    launches: float  # launches per forward call
    gpu_ms: float  # GPU time per forward call, all its launches


class ScopeTime(BaseModel):
    name: str
    gpu_ms: float  # GPU time of the kernels inside the scope, per forward call


class TorchProfile(BaseModel):
    """torch.profiler: what one forward call launches and what it costs the host."""

    calls: int
    kernels: list[KernelTime]
    gpu_ms: float  # kernel time per forward call
    host_ms: float  # CPU time of one forward call (Python, launches), per call
    launch_api_ms: float  # of which inside the CUDA launch API
    peak_allocated_bytes: int | None = None  # the allocator's high-water mark during the profile
    allocated_bytes_per_call: int = 0  # bytes the candidate allocates per forward call


class StallReason(BaseModel):
    reason: str
    cycles_per_issue: float  # warps stalled for this reason, per issued instruction


class NcuKernel(BaseModel):
    """Nsight Compute's fixed metric set for one kernel launch (see harness/runtime/profile_ncu.py)."""

    name: str
    duration_ms: float
    dram_read_bytes: float | None = None
    dram_write_bytes: float | None = None
    dram_throughput_pct: float | None = None
    sm_throughput_pct: float | None = None
    achieved_occupancy_pct: float | None = None
    registers_per_thread: int | None = None
    local_load_bytes: float | None = None
    local_store_bytes: float | None = None
    shared_bytes_per_block: float | None = None
    l2_hit_rate_pct: float | None = None
    grid_size: int | None = None
    block_size: int | None = None
    top_stalls: list[StallReason] = Field(default_factory=list)

    @property
    def spills(self) -> bool:
        """Local-memory traffic: registers spilled (or a local array) in this launch."""
        return bool((self.local_load_bytes or 0) + (self.local_store_bytes or 0))


class ProtonProfile(BaseModel):
    calls: int
    kernels: list[KernelTime]
    scopes: list[ScopeTime]  # the candidate's own proton scopes (the harness's call scope left out)


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
    """Everything the profiling tools said about one candidate at one case."""

    label: str  # the case, e.g. "M=32768,N=4096 bfloat16"
    tools: list[str]  # the tools that produced a profile
    torch: TorchProfile | None = None
    ncu: list[NcuKernel] | None = None
    proton: ProtonProfile | None = None
    roofline: Roofline | None = None
    errors: dict[str, str] = Field(default_factory=dict)  # tool -> why it gave no profile
    seconds: float = 0.0  # wall time the profiles took
    taken_on: str | None = None  # a Ray worker's "HOST pid PID gpu GPU"; None: the host that ran the search

    @property
    def spills(self) -> bool:
        return any(k.spills for k in self.ncu or [])

    def prompt_text(self, max_kernels: int = 4) -> str:
        """A few plain lines for a model: where the time goes and what limits it."""
        lines = [f"Profile at {self.label}:"]
        if self.roofline:
            lines.append("- " + self.roofline.line())
        if self.torch:
            t = self.torch
            ks = ", ".join(f"{k.name[:60]} x{k.launches:g} {k.gpu_ms:.4f} ms" for k in t.kernels[:max_kernels])
            lines.append(
                f"- torch.profiler: {sum(k.launches for k in t.kernels):g} kernel launches per call "
                f"({ks}); GPU {t.gpu_ms:.4f} ms, host {t.host_ms:.4f} ms per call (under the profiler)"
                + (
                    f"; allocates {t.allocated_bytes_per_call / 2**20:.1f} MiB per call"
                    if t.allocated_bytes_per_call
                    else ""
                )
            )
        for k in sorted(self.ncu or [], key=lambda k: -k.duration_ms)[:max_kernels]:
            lines.append("- ncu " + ncu_line(k))
        if self.proton and self.proton.scopes:
            lines.append("- proton scopes: " + ", ".join(f"{s.name} {s.gpu_ms:.4f} ms" for s in self.proton.scopes))
        for tool, err in self.errors.items():
            lines.append(f"- {tool}: no profile ({err})")
        return "\n".join(lines)


def _pct(v: float | None) -> str:
    return "?" if v is None else f"{v:.0f}%"


def ncu_line(k: NcuKernel) -> str:
    dram = (k.dram_read_bytes or 0) + (k.dram_write_bytes or 0)
    stalls = ", ".join(f"{s.reason} {s.cycles_per_issue:.1f}" for s in k.top_stalls) or "?"
    spill = (
        f"{((k.local_load_bytes or 0) + (k.local_store_bytes or 0)) / 1024:.1f} KiB local-memory traffic (spills)"
        if k.spills
        else "no spills"
    )
    return (
        f"{k.name[:60]}: {k.duration_ms:.4f} ms, DRAM {dram / 2**20:.1f} MiB at {_pct(k.dram_throughput_pct)} of peak, "
        f"SM {_pct(k.sm_throughput_pct)}, occupancy {_pct(k.achieved_occupancy_pct)}, "
        f"{k.registers_per_thread if k.registers_per_thread is not None else '?'} registers/thread, {spill}, "
        f"shared {((k.shared_bytes_per_block or 0) / 1024):.1f} KiB/block, L2 hit {_pct(k.l2_hit_rate_pct)}, "
        f"grid {k.grid_size}, block {k.block_size}, top stalls: {stalls}"
    )


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
