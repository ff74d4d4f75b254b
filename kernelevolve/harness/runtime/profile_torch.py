"""torch.profiler harness: `main(config)` records one Chrome trace per case.

Each trace covers config["calls"] forward calls, each inside a `record_function` range named
CALL_RANGE, with CPU and CUDA activity and memory events; the parser
(kernelevolve/profiling/tools/torch.py) turns it into kernels per call, GPU time per kernel, host
time between launches and peak memory. Under the interpreter (CPU) the trace has no GPU kernels.
"""

from __future__ import annotations

import os

from kernelevolve.harness.runtime import profiled
from kernelevolve.harness.runtime.state import one_line

CALL_RANGE = "kernelevolve.call"


def main(config: dict) -> None:
    result, device = profiled.begin(config, "torch")
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    for case in profiled.prepare(config, result, device):
        result.stage(f"{case.label} torch.profiler")
        path = os.path.join(config["output_dir"], f"torch_trace_{case.index}.json")
        try:
            with profile(activities=activities, profile_memory=True) as prof, torch.no_grad():
                for _ in range(config["calls"]):
                    with record_function(CALL_RANGE):
                        case.model(*case.inputs)
                if device == "cuda":
                    torch.cuda.synchronize()
            prof.export_chrome_trace(path)
        except Exception as exc:
            result.finish("runtime", f"{case.label}: torch.profiler: " + one_line(exc), exc)
        result.cases.append({"label": case.label, "output": os.path.basename(path), "calls": config["calls"]})
        result.write()
    result.finish()
