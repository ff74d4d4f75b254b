"""Fixes for bugs of Triton's CPU interpreter: they run inside the harness's processes, so their home is
kernelevolve.harness.runtime.interpreter_compat; this path stays for code written against it."""

from kernelevolve.harness.runtime.interpreter_compat import (
    SUPPORTED_TRITON,
    emulate_tf32,
    patch_triton_interpreter,
    round_to_tf32,
    triton_version,
)

__all__ = ["SUPPORTED_TRITON", "emulate_tf32", "patch_triton_interpreter", "round_to_tf32", "triton_version"]
