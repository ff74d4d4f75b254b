"""How a harness process that judges or profiles on the reference's device starts: the result
file, torch and Triton imported (a broken environment exits 3: not the candidate's fault), the
interpreter patched on CPU, and the environment entry of the result."""

from __future__ import annotations

import sys

from kernelevolve.harness.runtime.state import Result, setting


def begin(config, kernels: bool = True) -> tuple[Result, str]:
    """(result, torch device: "cuda" or "cpu") of a typed configuration (configs.py) or a profiling
    harness's dict. `kernels`: this process runs Triton (the judges do not: they compute the reference
    with torch, and skip Triton's import and the interpreter's patches)."""
    result = Result(setting(config, "result_path"))
    device = "cuda" if setting(config, "device") == "cuda" else "cpu"
    try:
        import torch

        triton = None
        if kernels:
            import triton
    except Exception as exc:  # the environment, not the candidate, is broken
        print(f"harness: cannot import torch/triton: {exc}", file=sys.stderr)
        sys.exit(3)
    if device == "cpu" and kernels:
        from kernelevolve.harness.runtime.interpreter_compat import emulate_tf32, patch_triton_interpreter

        patch_triton_interpreter()
        emulate_tf32()  # float32 dots as the GPU computes them (the spec's tf32 policy decides what passes)
    result.data["environment"] = {
        "torch": torch.__version__,
        "triton": triton.__version__ if triton is not None else _installed("triton"),
        "python": sys.version.split()[0],
        "device": setting(config, "device"),
        "gpu": torch.cuda.get_device_name(0) if device == "cuda" else "cpu (triton interpreter)",
    }
    return result, device


def _installed(name: str) -> str | None:
    """A package's installed version, without importing it."""
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
