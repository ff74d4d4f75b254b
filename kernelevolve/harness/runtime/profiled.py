"""What every profiling harness does before its tool looks: the candidate's model per case, warm.

Profiles are taken of candidates that already passed the sandboxed correctness and benchmark
harnesses, so nothing here judges; it builds the reference's inputs and the candidate's model
with the same helpers as those harnesses (modules.py, state.import_candidate), calls it once
outside any profiled region (compile, autotune), and hands it to the tool.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelevolve.harness.runtime import start
from kernelevolve.harness.runtime.state import Result, import_candidate, one_line


@dataclass
class Prepared:
    index: int
    label: str
    model: object
    inputs: list


def begin(config: dict, tool: str) -> tuple[Result, str]:
    """The result file and the torch device (start.begin), the tool named in the environment entry."""
    result, device = start.begin(config)
    result.data["environment"]["tool"] = tool
    return result, device


def prepare(config: dict, result: Result, device: str):
    """Yield one warm `Prepared` per case of config["cases"]; a failure ends the process with its verdict."""
    import torch

    from kernelevolve.harness.runtime import modules

    refs = []
    for n, case in enumerate(config["cases"]):  # the references first, before any candidate code
        result.stage(f"{case['label']} reference")
        ref_mod = modules.load_module(config["reference_path"], f"kernelevolve_reference_{n}", case["params"])
        dtype = modules.dtype_of(case)
        reference = modules.build_reference(ref_mod, config["seed"], dtype, device)
        refs.append((n, case, ref_mod, dtype, reference))
    candidate = import_candidate(config, result)
    for n, case, ref_mod, dtype, reference in refs:
        result.stage(f"{case['label']} warm-up")
        try:
            model = modules.build_candidate(ref_mod, candidate, reference, config["seed"], dtype, device)
            inputs = modules.make_inputs(ref_mod, config["seed"] + 17, dtype, device)
            with torch.no_grad():
                model(*inputs)  # compile / autotune outside the profiled region
            if device == "cuda":
                torch.cuda.synchronize()
        except Exception as exc:
            result.finish("runtime", f"{case['label']}: " + one_line(exc), exc)
        yield Prepared(n, case["label"], model, inputs)
