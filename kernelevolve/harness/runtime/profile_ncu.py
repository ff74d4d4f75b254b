"""Nsight Compute harness: `main(config)` runs `ncu` on one child process for all cases.

The child (`target`) builds each case's model, calls it once outside the profiled region, then
once between cudaProfilerStart/Stop after a marker kernel; ncu (`--profile-from-start off`)
profiles only those calls' kernels, with the fixed metric set METRICS; the report is exported as
CSV (raw page, base units) and cut at the markers into one CSV per case for
kernelevolve/profiling/tools/ncu.py.

Clock control: `--clock-control none`. By default ncu locks the GPU to its base clock, so its
durations come out longer than what do_bench and the benchmark harness measure at the clocks the
GPU really runs at; without the lock they compare. `--cache-control all` (flush caches before
each replay pass) matches the benchmark's flushed L2. Both ncu and its target run inside the
evaluation sandbox like every harness: ncu needs the GPU's performance counters to be open to
the sandbox's unprivileged user (NVreg_RestrictProfilingToAdminUsers=0) and its target
connection working in the sandbox's network namespace; when either is refused, ncu's own error
line becomes the failure message.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
import time

from kernelevolve.harness.runtime import profiled
from kernelevolve.harness.runtime.state import Result, one_line

STALL_REASONS = (
    "barrier",
    "branch_resolving",
    "dispatch_stall",
    "drain",
    "imc_miss",
    "lg_throttle",
    "long_scoreboard",
    "math_pipe_throttle",
    "membar",
    "mio_throttle",
    "misc",
    "no_instruction",
    "not_selected",
    "selected",
    "short_scoreboard",
    "sleeping",
    "tex_throttle",
    "wait",
)
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"

# The one documented metric set (names as Nsight Compute spells them on sm_80 and later).
METRICS = {
    "duration_ns": "gpu__time_duration.sum",
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_write_bytes": "dram__bytes_write.sum",
    "dram_throughput_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "registers_per_thread": "launch__registers_per_thread",
    "local_load_bytes": "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
    "local_store_bytes": "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",
    "static_shared_bytes_per_block": "launch__shared_mem_per_block_static",
    "dynamic_shared_bytes_per_block": "launch__shared_mem_per_block_dynamic",
    "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
    "grid_size": "launch__grid_size",
    "block_size": "launch__block_size",
    **{f"stall_{r}": STALL_METRIC.format(r) for r in STALL_REASONS},
}
FLAGS = [
    "--profile-from-start",
    "off",
    "--clock-control",
    "none",
    "--cache-control",
    "all",
    "--replay-mode",
    "kernel",
    "--target-processes",
    "all",
]
_UNKNOWN_METRIC = re.compile(r"Failed to find metric\s+(?:regex:)?\^?([A-Za-z0-9_.]+)")


def main(config: dict) -> None:
    result, device = profiled.begin(config, "ncu")
    if device != "cuda":
        result.finish("runtime", "ncu needs a CUDA GPU")
    ncu = config["ncu_path"]
    deadline = time.monotonic() + config["ncu_timeout_s"]
    metrics = list(METRICS.values())
    cases = config["cases"]
    out = config["output_dir"]
    # One profiled process for all cases (a process per case costs seconds of start-up each); a
    # marker kernel opens each case's profiled call, so the report's rows split back into cases.
    result.stage("ncu")
    child_cfg = dict(config, result_path=os.path.join(out, "ncu_target.json"))
    cfg_path = os.path.join(out, "ncu_target.cfg.json")
    with open(cfg_path, "w") as f:
        json.dump(child_cfg, f)
    report = os.path.join(out, "ncu")
    target = [sys.executable, "-c", _TARGET_CODE, config["package_root"], cfg_path]
    launches = (config["ncu_launch_count"] + 1) * len(cases)
    for _attempt in range(2):  # a metric this ncu or GPU does not know is dropped once, and said so
        proc = _run(
            [
                ncu,
                *FLAGS,
                "--launch-count",
                str(launches),
                "--metrics",
                ",".join(metrics),
                "--export",
                report,
                "--force-overwrite",
                *target,
            ],
            deadline,
            result,
            "ncu",
        )
        unknown = set(_UNKNOWN_METRIC.findall(proc.stdout + proc.stderr)) & set(metrics)
        if proc.returncode == 0 or not unknown:
            break
        metrics = [m for m in metrics if m not in unknown]
        result.data.setdefault("dropped_metrics", []).extend(sorted(unknown))
    child = _read(child_cfg["result_path"])
    if child.get("failure"):
        result.finish(child["failure"]["class"], f"under ncu: {child['failure']['message']}")
    if proc.returncode != 0 or not os.path.exists(report + ".ncu-rep"):
        result.finish("runtime", f"ncu failed (exit {proc.returncode}): {_ncu_error(proc)}")
    export = _run(
        [ncu, "--import", report + ".ncu-rep", "--csv", "--page", "raw", "--print-units", "base"],
        deadline,
        result,
        "ncu --import",
    )
    if export.returncode != 0:
        result.finish("runtime", f"ncu --import failed: {_ncu_error(export)}")
    with open(os.path.join(out, "ncu_all.csv"), "w") as f:
        f.write(export.stdout)
    try:
        parts = split_cases(export.stdout, len(cases))
    except ValueError as exc:
        result.finish("runtime", f"ncu report: {exc}")
    for n, (case, text) in enumerate(zip(cases, parts)):
        name = f"ncu_{n}.csv"
        with open(os.path.join(out, name), "w") as f:
            f.write(text)
        result.cases.append({"label": case["label"], "output": name, "metrics": len(metrics)})
    result.write()
    result.finish()


def split_cases(text: str, n_cases: int) -> list[str]:
    """The raw-page CSV of one report cut at the marker kernels: one CSV (header, units, the
    case's kernel rows, markers left out) per case, in order."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise ValueError("no CSV header row (nothing was profiled?)")
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    if len(rows) < 2 or "Kernel Name" not in rows[0]:
        raise ValueError("no Kernel Name column")
    name = rows[0].index("Kernel Name")
    parts: list[list[list[str]]] = []
    for row in rows[2:]:
        if len(row) > name and row[name].startswith(MARKER):
            parts.append([])
        elif parts:
            parts[-1].append(row)
    if len(parts) != n_cases:
        raise ValueError(f"{len(parts)} case markers for {n_cases} cases (a case's call launched too many kernels?)")
    texts = []
    for part in parts:
        buf = io.StringIO()
        csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows([rows[0], rows[1], *part])
        texts.append(buf.getvalue())
    return texts


def _run(cmd: list[str], deadline: float, result: Result, label: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        result.finish("timeout", f"{label}: ncu did not finish within the profile's time limit")
    except OSError as exc:
        result.finish("runtime", f"{label}: cannot start ncu: " + one_line(exc))


def _ncu_error(proc: subprocess.CompletedProcess) -> str:
    """ncu's own error line (ERR_NVGPUCTRPERM, a connection failure...), else its last line."""
    lines = [ln.strip() for ln in (proc.stdout + "\n" + proc.stderr).splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("==ERROR==")]
    return ((errors or lines or ["no output"])[0])[:400]


def _read(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def target(config: dict) -> None:
    """The process ncu profiles: per case, the marker kernel then one warm call, between
    cudaProfilerStart and Stop (each case is warmed up outside the profiled region)."""
    result, device = profiled.begin(config, "ncu-target")
    import torch

    marker = _marker_kernel()
    flag = torch.zeros(1, device="cuda")
    marker[(1,)](flag)  # compiled before anything is profiled
    for case in profiled.prepare(config, result, device):
        result.stage(f"{case.label} profiled call")
        try:
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            marker[(1,)](flag)
            with torch.no_grad():
                case.model(*case.inputs)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
        except Exception as exc:
            result.finish("runtime", f"{case.label}: " + one_line(exc), exc)
        result.cases.append({"label": case.label})
    result.finish()


MARKER = "kernelevolve_case_marker"


def _marker_kernel():
    import triton
    import triton.language as tl

    def kernelevolve_case_marker(flag_ptr):
        tl.store(flag_ptr, tl.load(flag_ptr) + 1)

    return triton.jit(kernelevolve_case_marker)


_TARGET_CODE = (
    "import json, sys; sys.path.insert(0, sys.argv[1]); "
    "from kernelevolve.harness.runtime import profile_ncu; "
    "profile_ncu.target(json.load(open(sys.argv[2])))"
)
