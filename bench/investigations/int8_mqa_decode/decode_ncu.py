"""Nsight Compute metrics of int8_mqa_decode configurations (the tl kernel's): where the decode
step's time goes (DRAM, issue, shared memory, stalls).

    python bench/investigations/int8_mqa_decode/decode_ncu.py OUT_DIR [BATCH KV_LEN Q_LEN]
    python bench/investigations/int8_mqa_decode/decode_ncu.py --host OUT_DIR

Runs ncu on this script's child mode: every configuration of CONFIGS is built and run once
(compile, plan), then run once more between cudaProfilerStart/Stop; ncu profiles those launches
(clocks not locked, caches flushed before each replay pass, as do_bench flushes L2). Writes
OUT_DIR/ncu.csv (raw page) and OUT_DIR/ncu_summary.json (one row per configuration).
"""

import csv
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2]
REPO = BENCH.parent
CONFIGS = [
    dict(CONVERT="cast", BLOCK_N=128, PROGRAMS_PER_SM=1, num_warps=4, num_stages=3),
    dict(CONVERT="f16", BLOCK_N=128, PROGRAMS_PER_SM=1, num_warps=4, num_stages=3),
    dict(CONVERT="f16", BLOCK_N=64, PROGRAMS_PER_SM=2, num_warps=4, num_stages=3),
    dict(CONVERT="f16", BLOCK_N=64, PROGRAMS_PER_SM=2, num_warps=2, num_stages=3),
    dict(CONVERT="f16", BLOCK_N=128, PROGRAMS_PER_SM=1, num_warps=4, num_stages=2, WARP_SPLIT=True),
    dict(CONVERT="f16", BLOCK_N=64, PROGRAMS_PER_SM=2, num_warps=4, num_stages=3, V_IN_REGS=True),
]
STALLS = ["barrier", "long_scoreboard", "short_scoreboard", "mio_throttle", "lg_throttle", "wait", "math_pipe_throttle",
          "not_selected", "selected", "no_instruction", "dispatch_stall", "membar", "branch_resolving", "drain", "sleeping"]  # fmt: skip
METRICS = {
    "us": "gpu__time_duration.sum",
    "dram_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_read_MB": "dram__bytes_read.sum",
    "sm_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "regs": "launch__registers_per_thread",
    "ipc": "sm__inst_executed.avg.per_cycle_active",
    "issue_active_pct": "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "l1tex_pct": "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "smem_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    "smem_bank_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "lsu_pipe_pct": "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
    "alu_pipe_pct": "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
    "fma_pipe_pct": "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "tensor_pipe_pct": "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "cycles": "sm__cycles_elapsed.avg",
    "inst": "smsp__inst_executed.sum",
    **{f"stall_{s}": f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio" for s in STALLS},
}


def child(shape: list[int]) -> None:
    import torch

    sys.path.insert(0, str(BENCH))
    from benchlib import KERNELS, load_module

    ref = load_module(
        REPO / "specs" / "int8_mqa_decode.py", "ref_decode", dict(zip(["BATCH", "KV_LEN", "Q_LEN"], shape))
    )
    kernel = load_module(KERNELS / "int8_mqa_decode.py", "kernel_decode")
    torch.manual_seed(0)
    xs = [x.cuda().to(torch.bfloat16) if x.is_floating_point() else x.cuda() for x in ref.get_inputs()]
    defaults = dict(kernel.CONFIG)
    models = []
    for config in CONFIGS:
        kernel.CONFIG.clear()
        kernel.CONFIG.update(defaults, **config)
        model = kernel.ModelNew()
        with torch.no_grad():
            model(*xs)
            model(*xs)
        models.append((dict(kernel.CONFIG), model))
    torch.cuda.synchronize()
    with torch.no_grad():
        for config, model in models:
            kernel.CONFIG.clear()
            kernel.CONFIG.update(config)
            torch.cuda.cudart().cudaProfilerStart()
            model(*xs)
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStop()


def host(out: Path) -> None:
    """Host time per call of the decode launcher's parts (B256 KV1024, the file's CONFIG), calls
    queued without waiting: where the 30-40 us of host time per call measured in call 1 go."""
    import time

    import torch

    sys.path.insert(0, str(BENCH))
    from benchlib import KERNELS, load_module

    ref = load_module(REPO / "specs" / "int8_mqa_decode.py", "ref_decode", {})
    kernel = load_module(KERNELS / "int8_mqa_decode.py", "kernel_decode")
    torch.manual_seed(0)
    q, kc, ks, vc, vs = [x.cuda().to(torch.bfloat16) if x.is_floating_point() else x.cuda() for x in ref.get_inputs()]
    with torch.no_grad():
        kernel.int8_mqa_decode(q, kc, ks, vc, vs)
    plan = next(iter(kernel._PLANS.values()))
    o = torch.empty_like(q)
    args = tuple(x if x is not None else o for x in (q, kc, ks, vc, vs, o, plan.part_acc, plan.part_ml, plan.counters))
    driver = kernel.triton.runtime.driver.active

    def jit_call():
        kernel.CONFIG["LAUNCH"] = "jit"
        kernel.int8_mqa_decode(q, kc, ks, vc, vs)
        kernel.CONFIG["LAUNCH"] = "cached"

    parts = {
        "int8_mqa_decode": lambda: kernel.int8_mqa_decode(q, kc, ks, vc, vs),
        "int8_mqa_decode_jit_launch": jit_call,
        "direct_launch_only": lambda: kernel._direct_launch(plan, args),
        "jit_launch_only": lambda: kernel._int8_mqa_decode_split[plan.grid](*args, *plan.tail, **plan.consts),
        "empty_like": lambda: torch.empty_like(q),
        "plan_key": lambda: (q.shape, q.stride(), q.dtype, q.device, kc.shape, kc.stride(), vc.stride(), ks.stride(),
                             vs.stride(), kc.dtype, vc.dtype, ks.shape, vs.shape, ks.dtype, vs.dtype, tuple(kernel.CONFIG.values())),
        "data_ptr_x9": lambda: [a.data_ptr() & 15 for a in args],
        "current_stream": lambda: driver.get_current_stream(driver.get_current_device()),
        "torch_add_small": lambda: torch.add(o[0], o[0]),
    }  # fmt: skip
    result = {"compiled": plan.compiled is not None, "direct_launch_error": kernel.DIRECT_LAUNCH_ERROR}
    for name, fn in parts.items():
        fn()
        torch.cuda.synchronize()
        best = []
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(100):
                fn()
            best.append((time.perf_counter() - t0) / 100 * 1e6)
            torch.cuda.synchronize()
        result[name + "_us"] = round(min(best), 2)
    print(json.dumps(result), flush=True)
    (out / "host_us.json").write_text(json.dumps(result, indent=1))


def main() -> None:
    out = Path(sys.argv[1])
    shape = [int(x) for x in sys.argv[2:5]] or [256, 1024, 1]
    out.mkdir(parents=True, exist_ok=True)
    ncu = shutil.which("ncu") or next(iter(sorted(Path("/usr/local").glob("cuda*/bin/ncu"))), None)
    metrics = dict(METRICS)
    for _ in range(3):  # a metric this ncu does not know is dropped, and said so
        cmd = [str(ncu), "--profile-from-start", "off", "--clock-control", "none", "--cache-control", "all",
               "--replay-mode", "kernel", "--metrics", ",".join(metrics.values()), "--export", str(out / "ncu"),
               "--force-overwrite", sys.executable, __file__, "--child", *map(str, shape)]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        unknown = set(re.findall(r"Failed to find metric\s+(?:regex:)?\^?([A-Za-z0-9_.]+)", proc.stdout + proc.stderr))
        if proc.returncode == 0 or not unknown:
            break
        print("dropping unknown metrics", unknown, flush=True)
        metrics = {k: v for k, v in metrics.items() if v not in unknown}
    print(proc.stdout[-3000:], proc.stderr[-3000:], flush=True)
    raw = subprocess.run([str(ncu), "--import", str(out / "ncu.ncu-rep"), "--csv", "--page", "raw", "--print-units", "base"],
                         capture_output=True, text=True).stdout  # fmt: skip
    (out / "ncu.csv").write_text(raw)
    rows = list(csv.DictReader(io.StringIO(raw)))
    rows = [r for r in rows if "decode" in r.get("Kernel Name", "")]
    summary = []
    for config, row in zip(CONFIGS, rows):
        item = {"config": config, "shape": shape}
        for key, name in metrics.items():
            try:
                item[key] = round(float(str(row.get(name, "nan")).replace(",", "")), 3)
            except ValueError:
                item[key] = row.get(name)
        item["us"] = round(item["us"] / 1e3, 2) if isinstance(item.get("us"), float) else item.get("us")
        if isinstance(item.get("dram_read_MB"), float):
            item["dram_read_MB"] = round(item["dram_read_MB"] / 1e6, 2)
        summary.append(item)
        print(json.dumps(item), flush=True)
    (out / "ncu_summary.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        child([int(x) for x in sys.argv[2:5]])
    elif sys.argv[1] == "--host":
        host(Path(sys.argv[2]))
    else:
        main()
