"""Proton (triton.profiler) harness: `main(config)` writes one hatchet tree per case.

Proton's launch hook names each Triton kernel; the forward calls run inside the scope
CALL_SCOPE, and any `proton.scope` the candidate opens itself appears below it in the tree
(kernelevolve/profiling/tools/proton.py reads both). Proton needs CUPTI: GPU only.
"""

from __future__ import annotations

import os

from kernelevolve.harness.runtime import profiled
from kernelevolve.harness.runtime.state import one_line

CALL_SCOPE = "kernelevolve.call"


def main(config: dict) -> None:
    result, device = profiled.begin(config, "proton")
    if device != "cuda":
        result.finish("runtime", "proton needs a CUDA GPU (its CUPTI backend does not run under the interpreter)")
    import torch
    import triton.profiler as proton

    for case in profiled.prepare(config, result, device):
        result.stage(f"{case.label} proton")
        stem = os.path.join(config["output_dir"], f"proton_{case.index}")
        try:
            proton.start(stem, hook="triton")
            with torch.no_grad():
                for _ in range(config["calls"]):
                    with proton.scope(CALL_SCOPE):
                        case.model(*case.inputs)
            torch.cuda.synchronize()
            proton.finalize()
        except Exception as exc:
            result.finish("runtime", f"{case.label}: proton: " + one_line(exc), exc)
        result.cases.append(
            {"label": case.label, "output": os.path.basename(stem) + ".hatchet", "calls": config["calls"]}
        )
        result.write()
    result.finish()
