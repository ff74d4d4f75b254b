"""How a harness process that judges or profiles on the reference's device starts: the result
file, torch and Triton imported (a broken environment exits 3: not the candidate's fault), the
interpreter patched on CPU, and the environment entry of the result."""

from __future__ import annotations

import sys

from kernelevolve.harness.runtime.state import Result


def begin(config: dict) -> tuple[Result, str]:
    """(result, torch device: "cuda" or "cpu")."""
    result = Result(config["result_path"])
    device = "cuda" if config["device"] == "cuda" else "cpu"
    try:
        import torch
        import triton
    except Exception as exc:  # the environment, not the candidate, is broken
        print(f"harness: cannot import torch/triton: {exc}", file=sys.stderr)
        sys.exit(3)
    if device == "cpu":
        from kernelevolve.evaluation.interpreter_compat import emulate_tf32, patch_triton_interpreter

        patch_triton_interpreter()
        emulate_tf32()  # float32 dots as the GPU computes them (the spec's tf32 policy decides what passes)
    result.data["environment"] = {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": sys.version.split()[0],
        "device": config["device"],
        "gpu": torch.cuda.get_device_name(0) if device == "cuda" else "cpu (triton interpreter)",
    }
    return result, device
