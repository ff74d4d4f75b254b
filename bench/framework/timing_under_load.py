"""Does the evaluator's clock see the kernels or the host? (harness/runtime/timing.py, on a GPU)

Times three calls with the evaluator's `Clock`, with and without its GPU spin before each timed call
(`lead`), on an idle host and with every CPU core busy (burner processes, as when several evaluations
are in flight), against the calls' device time from CUDA-graph replay (no host in the loop):

- conv1d: `F.conv1d`, FP16, (2048, 96, 96, 200), kernel 3 (specs/conv1d.yaml's production shape);
- small: an in-place add over 64 K floats (a few microseconds: launch-bound);
- slow_host: the same add after 0.15 ms of Python on the host (a candidate whose launch path is slow).

    python bench/framework/timing_under_load.py --out DIR

Writes DIR/timing_under_load.json and DIR/timing_under_load.md.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kernelevolve.harness.runtime.timing import Clock  # noqa: E402


def _burn(stop) -> None:
    x = 0
    while not stop.is_set():
        for _ in range(10000):
            x += 1


def _graph_ms(fn, args, reps: int = 200) -> float:
    """Device time per call: `reps` calls captured once in a CUDA graph, replayed, timed by events."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn(*args)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn(*args)
    times = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / reps)
    return statistics.median(times)


def workloads():
    x = torch.randn(2048, 96, 200, device="cuda", dtype=torch.float16)
    w = torch.randn(96, 96, 3, device="cuda", dtype=torch.float16)
    b = torch.randn(96, device="cuda", dtype=torch.float16)
    small = torch.zeros(1 << 16, device="cuda")

    def conv(x, w, b):
        return F.conv1d(x, w, b, padding=1)

    def add(t):
        return t.add_(1.0)

    def slow_host(t):
        end = time.perf_counter() + 0.00015
        while time.perf_counter() < end:
            pass
        return t.add_(1.0)

    return {
        "conv1d": (conv, [x, w, b], conv),
        "small": (add, [small], add),
        "slow_host": (slow_host, [small], add),  # the graph holds only its kernel
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--rounds", type=int, default=3, help="measurements per setting (median reported)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.backends.cudnn.benchmark = True
    clocks = {"lead": Clock(lead=True), "no_lead": Clock(lead=False)}
    rows = []
    for name, (fn, inputs, graph_fn) in workloads().items():
        device_ms = _graph_ms(graph_fn, inputs)
        for load in ("idle", "busy"):
            stop, burners = mp.Event(), []
            if load == "busy":
                burners = [mp.Process(target=_burn, args=(stop,), daemon=True) for _ in range(os.cpu_count() or 4)]
                for p in burners:
                    p.start()
                time.sleep(0.5)
            try:
                for clock_name, clock in clocks.items():
                    meds, leads = [], []
                    for _ in range(args.rounds):
                        t = clock.measure(fn, [inputs], [inputs], warmup_ms=25, rep_ms=100)
                        meds.append(t.median_ms)
                        leads.append(t.lead_ms)
                    med = statistics.median(meds)
                    rows.append(
                        {
                            "workload": name,
                            "host": load,
                            "clock": clock_name,
                            "median_ms": med,
                            "rounds_ms": meds,
                            "lead_ms": statistics.median(leads),
                            "device_ms": device_ms,
                            "over_device": med / device_ms,
                        }
                    )
                    print(
                        f"{name:9s} {load:4s} {clock_name:7s} {med:.4f} ms  device {device_ms:.4f}  x{med / device_ms:.2f}"
                    )
            finally:
                stop.set()
                for p in burners:
                    p.join(timeout=5)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cpus": os.cpu_count()}
    (args.out / "timing_under_load.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [
        f"# Timing under host load ({meta['gpu']}, {meta['cpus']} CPUs busy in 'busy')",
        "",
        "| workload | host | clock | median ms | spin ms | device ms (graph) | measured / device |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['host']} | {r['clock']} | {r['median_ms']:.4f} | {r['lead_ms']:.3f} | "
            f"{r['device_ms']:.4f} | {r['over_device']:.2f} |"
        )
    (args.out / "timing_under_load.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
