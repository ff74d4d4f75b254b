"""Nsight Compute harness: `main(config)` runs `ncu` on a child process per case.

The child (`target`) builds the case's model, calls it once outside the profiled region, then
once between cudaProfilerStart/Stop; ncu (`--profile-from-start off`) profiles only that call's
kernels, with the fixed metric set METRICS, then the report is exported as CSV (raw page, base
units) for kernelevolve/profiling/parsers.py.

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

import json
import os
import re
import subprocess
import sys
import time

from kernelevolve.harness.runtime import profiled
from kernelevolve.harness.runtime.state import Result, one_line

STALL_REASONS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle",
                 "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction",
                 "not_selected", "selected", "short_scoreboard", "sleeping", "tex_throttle", "wait")
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
FLAGS = ["--profile-from-start", "off", "--clock-control", "none", "--cache-control", "all",
         "--replay-mode", "kernel", "--target-processes", "all"]
_UNKNOWN_METRIC = re.compile(r"Failed to find metric\s+(?:regex:)?\^?([A-Za-z0-9_.]+)")


def main(config: dict) -> None:
    result, device = profiled.begin(config, "ncu")
    if device != "cuda":
        result.finish("runtime", "ncu needs a CUDA GPU")
    ncu = config["ncu_path"]
    deadline = time.monotonic() + config["ncu_timeout_s"]
    metrics = list(METRICS.values())
    for n, case in enumerate(config["cases"]):
        result.stage(f"{case['label']} ncu")
        child_cfg = dict(config, cases=[case], result_path=os.path.join(config["output_dir"], f"ncu_target_{n}.json"))
        cfg_path = os.path.join(config["output_dir"], f"ncu_target_{n}.cfg.json")
        with open(cfg_path, "w") as f:
            json.dump(child_cfg, f)
        report = os.path.join(config["output_dir"], f"ncu_{n}")
        target = [sys.executable, "-c", _TARGET_CODE, config["package_root"], cfg_path]
        for _attempt in range(2):  # a metric this ncu or GPU does not know is dropped once, and said so
            proc = _run([ncu, *FLAGS, "--launch-count", str(config["ncu_launch_count"]), "--metrics", ",".join(metrics),
                         "--export", report, "--force-overwrite", *target], deadline, result, case["label"])
            unknown = set(_UNKNOWN_METRIC.findall(proc.stdout + proc.stderr)) & set(metrics)
            if proc.returncode == 0 or not unknown:
                break
            metrics = [m for m in metrics if m not in unknown]
            result.data.setdefault("dropped_metrics", []).extend(sorted(unknown))
        child = _read(child_cfg["result_path"])
        if child.get("failure"):
            result.finish(child["failure"]["class"], f"{case['label']} (under ncu): {child['failure']['message']}")
        if proc.returncode != 0 or not os.path.exists(report + ".ncu-rep"):
            result.finish("runtime", f"{case['label']}: ncu failed (exit {proc.returncode}): {_ncu_error(proc)}")
        csv_path = os.path.join(config["output_dir"], f"ncu_{n}.csv")
        export = _run([ncu, "--import", report + ".ncu-rep", "--csv", "--page", "raw", "--print-units", "base"],
                      deadline, result, case["label"])
        if export.returncode != 0:
            result.finish("runtime", f"{case['label']}: ncu --import failed: {_ncu_error(export)}")
        with open(csv_path, "w") as f:
            f.write(export.stdout)
        result.cases.append({"label": case["label"], "output": os.path.basename(csv_path),
                             "report": os.path.basename(report) + ".ncu-rep", "metrics": len(metrics)})
        result.write()
    result.finish()


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
    """The process ncu profiles: one warm call per case between cudaProfilerStart and Stop."""
    result, device = profiled.begin(config, "ncu-target")
    import torch

    for case in profiled.prepare(config, result, device):
        result.stage(f"{case.label} profiled call")
        try:
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            with torch.no_grad():
                case.model(*case.inputs)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
        except Exception as exc:
            result.finish("runtime", f"{case.label}: " + one_line(exc), exc)
        result.cases.append({"label": case.label})
    result.finish()


_TARGET_CODE = (
    "import json, sys; sys.path.insert(0, sys.argv[1]); "
    "from kernelevolve.harness.runtime import profile_ncu; "
    "profile_ncu.target(json.load(open(sys.argv[2])))"
)
