"""Nsight Compute: one fixed metric set per kernel launch of one forward call.

Its harness (kernelevolve/harness/runtime/profile_ncu.py) runs `ncu` on one child process for all
cases and cuts the report's raw-page CSV into one file per case; GPU only, `ncu` on PATH. Its
kernel durations are the roofline's latency when the caller has no timed median (ncu times each
launch alone, with the caches flushed, as the benchmark does).
"""

from __future__ import annotations

import csv
import io
import shutil

from pydantic import BaseModel, Field

from kernelevolve.harness.runtime import profile_ncu
from kernelevolve.harness.runtime.profile_ncu import METRICS, STALL_REASONS
from kernelevolve.profiling.tools.base import Block, ProfileParseError, ProfilerTool, Table

TOP_STALLS = 3
LAUNCH_COUNT = 32  # kernels per ncu profile at most: a candidate launching more is cut there


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


def find_ncu() -> str | None:
    return shutil.which("ncu")


# ---------------------------------------------------------------------------- the CSV

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


# ---------------------------------------------------------------------------- what it says


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


def prompt_lines(kernels: list[NcuKernel], max_kernels: int) -> list[str]:
    return ["ncu " + ncu_line(k) for k in sorted(kernels, key=lambda k: -k.duration_ms)[:max_kernels]]


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


COLUMNS = (
    "ncu kernel",
    "ms",
    "DRAM MiB",
    "DRAM %",
    "SM %",
    "occ %",
    "regs",
    "spill KiB",
    "smem KiB",
    "L2 hit %",
    "top stalls",
)


def report(kernels: list[NcuKernel]) -> list[Block]:
    if not kernels:
        return []
    rows = [
        (
            k.name[:40],
            f"{k.duration_ms:.4f}",
            f"{((k.dram_read_bytes or 0) + (k.dram_write_bytes or 0)) / 2**20:.1f}",
            _f(k.dram_throughput_pct),
            _f(k.sm_throughput_pct),
            _f(k.achieved_occupancy_pct),
            str(k.registers_per_thread if k.registers_per_thread is not None else "-"),
            f"{((k.local_load_bytes or 0) + (k.local_store_bytes or 0)) / 1024:.1f}",
            f"{(k.shared_bytes_per_block or 0) / 1024:.1f}",
            _f(k.l2_hit_rate_pct),
            ", ".join(f"{x.reason} {x.cycles_per_issue:.1f}" for x in k.top_stalls),
        )
        for k in kernels
    ]
    entries = [(f"  ncu, launch {i + 1}:", ncu_line(k)) for i, k in enumerate(kernels)]
    return [Table(columns=COLUMNS, rows=rows, entries=entries, left=("ncu kernel", "top stalls"))]


def config_keys(timeout_s: float) -> dict:
    return {
        "ncu_path": find_ncu() or "ncu",
        "ncu_launch_count": LAUNCH_COUNT,
        "ncu_timeout_s": max(1.0, timeout_s - 30.0),  # leaves the harness time to write its verdict
    }


TOOL = ProfilerTool(
    name="ncu",
    what="Nsight Compute",
    output="ncu CSV",
    harness=profile_ncu,
    part=list[NcuKernel],
    parse=lambda text, calls: parse_ncu_csv(text),
    prompt=prompt_lines,
    report=report,
    program="ncu",
    config=config_keys,
    latency=lambda kernels: sum(k.duration_ms for k in kernels) if kernels else None,
    latency_rank=0,
    spills=lambda kernels: any(k.spills for k in kernels),
)
