"""Compiling Gluon kernels for sm_90a on a machine without a GPU (tests/kernels/test_*_hopper.py).

A compile script runs in a fresh interpreter (with TRITON_INTERPRET set when triton is imported, as in
this suite, Gluon's helpers are interpreter objects and nothing compiles): PREAMBLE points Triton's JIT
at a Hopper target and puts the knowledge base's kernels folder (argv[1]) on the import path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PREAMBLE = """
import sys
import torch
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import language as gl
from triton.runtime import driver

sys.path.insert(0, sys.argv[1])


class HopperTarget:  # just enough of a driver for the JIT to compile (not launch) for sm_90a
    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)


driver.set_active(HopperTarget())
"""


def tool(name: str) -> Path:
    """One of the CUDA binaries Triton ships (nvdisasm, cuobjdump)."""
    import triton

    return Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name


def compile_script(script: str, args: list[str], cache: Path) -> None:
    """Run PREAMBLE + script in a fresh interpreter, its own Triton cache, no interpreter mode."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(cache)
    subprocess.run([sys.executable, "-c", PREAMBLE + script, *args], env=env, check=True, timeout=300)
