"""Proton (triton.profiler): GPU time per Triton kernel and per `proton.scope` of the candidate.

Its harness (kernelevolve/harness/runtime/profile_proton.py) writes one hatchet tree per case; GPU
only (CUPTI).
"""

from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel

from kernelevolve.harness.runtime import profile_proton
from kernelevolve.harness.runtime.profile_proton import CALL_SCOPE
from kernelevolve.profiling.tools.base import (
    Block,
    KernelTime,
    Plain,
    ProfileParseError,
    ProfilerTool,
    kernel_table,
    read_json,
)


class ScopeTime(BaseModel):
    name: str
    gpu_ms: float  # GPU time of the kernels inside the scope, per forward call


class ProtonProfile(BaseModel):
    calls: int
    kernels: list[KernelTime]
    scopes: list[ScopeTime]  # the candidate's own proton scopes (the harness's call scope left out)


def parse_proton_hatchet(text: str, calls: int) -> ProtonProfile:
    """Proton's hatchet tree: GPU time per kernel and per scope of the candidate, per forward call."""
    data = read_json(text, "Proton hatchet")
    if not (
        isinstance(data, list) and data and isinstance(data[0], dict) and "frame" in data[0] and "children" in data[0]
    ):
        raise ProfileParseError("Proton hatchet: not a hatchet tree (expected [root frame, device info])")
    per_kernel: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    scopes: dict[str, float] = defaultdict(float)
    seen_call_scope = False

    def walk(node: dict, path: tuple[str, ...]) -> float:
        nonlocal seen_call_scope
        name = str(node.get("frame", {}).get("name", "?"))
        if name.startswith("__proton"):  # Proton's own launch-metadata frames
            return 0.0
        seen_call_scope |= name == CALL_SCOPE
        metrics = node.get("metrics", {})
        own = float(metrics.get("time (ns)", 0.0)) if "device_id" in metrics else 0.0
        if own:
            per_kernel[name][0] += float(metrics.get("count", 1))
            per_kernel[name][1] += own
        total = own + sum(walk(c, path + (name,)) for c in node.get("children", []))
        if not own and name not in ("ROOT", CALL_SCOPE) and total and CALL_SCOPE in path:
            scopes[name] += total
        return total

    walk(data[0], ())
    if not seen_call_scope:
        raise ProfileParseError(f"Proton hatchet: no '{CALL_SCOPE}' scope (not a profile of the profiling harness)")
    kernels = sorted(
        (KernelTime(name=k, launches=c / calls, gpu_ms=t / calls / 1e6) for k, (c, t) in per_kernel.items()),
        key=lambda k: -k.gpu_ms,
    )
    return ProtonProfile(
        calls=calls, kernels=kernels, scopes=[ScopeTime(name=s, gpu_ms=t / calls / 1e6) for s, t in scopes.items()]
    )


def prompt_lines(p: ProtonProfile, max_kernels: int) -> list[str]:
    if not p.scopes:
        return []
    return ["proton scopes: " + ", ".join(f"{s.name} {s.gpu_ms:.4f} ms" for s in p.scopes)]


def report(p: ProtonProfile) -> list[Block]:
    return [
        *kernel_table(p.kernels, "proton kernel"),
        *(Plain(f"  proton scope {s.name}: {s.gpu_ms:.4f} ms per call") for s in p.scopes),
    ]


TOOL = ProfilerTool(
    name="proton",
    what="triton.profiler",
    output="Proton hatchet",
    harness=profile_proton,
    part=ProtonProfile,
    parse=parse_proton_hatchet,
    prompt=prompt_lines,
    report=report,
    latency=lambda p: sum(k.gpu_ms for k in p.kernels) if p.kernels else None,
    latency_rank=2,
)
