"""The profiling tools' raw outputs, read into the schema.

Each parser takes the file's text and says in one line (ProfileParseError) why a file is not what
it should be: truncated, another tool's output, or a profile of something else (no call ranges).
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict

from kernelevolve.harness.runtime.profile_ncu import METRICS, STALL_REASONS
from kernelevolve.harness.runtime.profile_proton import CALL_SCOPE
from kernelevolve.harness.runtime.profile_torch import CALL_RANGE
from kernelevolve.profiling.schema import KernelTime, NcuKernel, ProtonProfile, ScopeTime, StallReason, TorchProfile

TOP_STALLS = 3


class ProfileParseError(ValueError):
    """A raw profile that cannot be read; str() is one line."""


def _json(text: str, what: str):
    try:
        return json.loads(text)
    except ValueError as e:
        raise ProfileParseError(
            f"{what}: not valid JSON, truncated or another format ({e.msg} at line {e.lineno})"
        ) from None


# ---------------------------------------------------------------------------- torch.profiler


def parse_torch_trace(text: str) -> TorchProfile:
    """A Chrome trace from profile_torch: kernels per call, GPU and host time, memory."""
    data = _json(text, "torch.profiler trace")
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


# ---------------------------------------------------------------------------- Nsight Compute

_TIME_MS = {
    "ns": 1e-6,
    "nsecond": 1e-6,
    "us": 1e-3,
    "usecond": 1e-3,
    "ms": 1.0,
    "msecond": 1.0,
    "s": 1e3,
    "second": 1e3,
}
_BYTES = {
    "byte": 1.0,
    "Kbyte": 1e3,
    "Mbyte": 1e6,
    "Gbyte": 1e9,
    "Tbyte": 1e12,
    "KB": 1024.0,
    "MB": 2.0**20,
    "GB": 2.0**30,
}
_PLAIN = {"", "%", "inst", "register", "block", "thread", "warp", "cycle"}


def _scale(unit: str) -> float | None:
    """Factor to ms (times) or bytes (sizes) for a unit of the CSV's unit row ("byte/block": per block)."""
    head = unit.split("/")[0].strip()
    return _TIME_MS.get(head) or _BYTES.get(head) or (1.0 if head in _PLAIN else None)


def parse_ncu_csv(text: str) -> list[NcuKernel]:
    """`ncu --import R --csv --page raw` output: one NcuKernel per profiled launch."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise ProfileParseError('ncu CSV: no header row starting with "ID" (not `ncu --csv --page raw` output)')
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = rows[0]
    missing = [m for m in ("Kernel Name", METRICS["duration_ns"]) if m not in header]
    if missing:
        raise ProfileParseError(f"ncu CSV: no column {missing[0]!r} (another metric set or page)")
    if len(rows) < 3:
        raise ProfileParseError("ncu CSV: no kernel rows (nothing was profiled, or the file is cut short)")
    units = rows[1]
    col = {name: i for i, name in enumerate(header)}
    kernels = []
    for r, row in enumerate(rows[2:], start=start + 3):
        if len(row) != len(header):
            raise ProfileParseError(f"ncu CSV: line {r} has {len(row)} of {len(header)} fields (truncated)")

        def value(key: str) -> float | None:
            i = col.get(METRICS[key])
            if i is None or row[i].strip() in ("", "n/a"):
                return None
            try:
                number = float(row[i].replace(",", ""))
            except ValueError:
                raise ProfileParseError(f"ncu CSV: line {r}: {METRICS[key]} is {row[i]!r}, not a number") from None
            unit = units[i] if i < len(units) else ""
            factor = _scale(unit)
            if factor is None:
                raise ProfileParseError(f"ncu CSV: unknown unit {unit!r} for {METRICS[key]}")
            return number * factor

        stalls = [(reason, value(f"stall_{reason}")) for reason in STALL_REASONS if reason != "selected"]
        top = sorted(((r_, v) for r_, v in stalls if v), key=lambda x: -x[1])[:TOP_STALLS]
        static, dynamic = value("static_shared_bytes_per_block"), value("dynamic_shared_bytes_per_block")
        regs, grid, block = value("registers_per_thread"), value("grid_size"), value("block_size")
        kernels.append(
            NcuKernel(
                name=row[col["Kernel Name"]],
                duration_ms=value("duration_ns") or 0.0,
                dram_read_bytes=value("dram_read_bytes"),
                dram_write_bytes=value("dram_write_bytes"),
                dram_throughput_pct=value("dram_throughput_pct"),
                sm_throughput_pct=value("sm_throughput_pct"),
                achieved_occupancy_pct=value("achieved_occupancy_pct"),
                registers_per_thread=None if regs is None else int(regs),
                local_load_bytes=value("local_load_bytes"),
                local_store_bytes=value("local_store_bytes"),
                shared_bytes_per_block=None if static is None and dynamic is None else (static or 0) + (dynamic or 0),
                l2_hit_rate_pct=value("l2_hit_rate_pct"),
                grid_size=None if grid is None else int(grid),
                block_size=None if block is None else int(block),
                top_stalls=[StallReason(reason=r_, cycles_per_issue=v) for r_, v in top],
            )
        )
    return kernels


# ---------------------------------------------------------------------------- Proton


def parse_proton_hatchet(text: str, calls: int) -> ProtonProfile:
    """Proton's hatchet tree: GPU time per kernel and per scope of the candidate, per forward call."""
    data = _json(text, "Proton hatchet")
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
