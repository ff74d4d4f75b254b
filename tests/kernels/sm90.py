"""Compiling Gluon kernels for sm_90a on a machine without a GPU (tests/kernels/test_*_hopper.py).

Compile scripts run in a fresh interpreter (with TRITON_INTERPRET set when triton is imported, as in
this suite, Gluon's helpers are interpreter objects and nothing compiles): PREAMBLE points Triton's JIT
at a Hopper target and puts the knowledge base's kernels folder (argv[1]) on the import path. One such
interpreter (Compiler, the `sm90` fixture of tests/kernels/conftest.py) runs every script of a test
session in turn: its start (torch and Triton imported, ~4 s of CPU) and Triton's hash of its own
installation (the first compile's cache key, ~3 s) are paid once, not once per compiled kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
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


# Runs in the compile interpreter after PREAMBLE: one job a line on stdin ({"script", "argv"}), each script
# executed in a copy of PREAMBLE's globals with sys.argv = [-c, *argv]; a reply a line on the real stdout
# (the scripts' own prints go to stderr).
_SERVE = """
_globals = dict(globals())
import json, traceback

_replies, sys.stdout = sys.stdout, sys.stderr
for _line in sys.stdin:
    _job = json.loads(_line)
    sys.argv = [sys.argv[0], *_job["argv"]]
    try:
        exec(compile(_job["script"], "<sm90 compile script>", "exec"), dict(_globals))
        _reply = {"error": None}
    except BaseException:
        _reply = {"error": traceback.format_exc()}
    _replies.write(json.dumps(_reply) + "\\n")
    _replies.flush()
"""


class Compiler:
    """One compile interpreter (PREAMBLE, no interpreter mode, its own Triton cache under `folder`),
    started at the first run() and reused by the next ones."""

    def __init__(self, folder: Path):
        self.folder, self.process = folder, None

    def run(self, script: str, args: list[str], timeout: float = 300) -> None:
        """PREAMBLE + script as `python -c` with `args` as sys.argv[1:] would run them (args[0]: the
        kernels folder); raises with the script's traceback if it fails."""
        if self.process is None or self.process.poll() is not None:
            self.folder.mkdir(parents=True, exist_ok=True)
            env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
            env["TRITON_CACHE_DIR"] = str(self.folder / "cache")
            self.log = self.folder / "stderr.txt"
            with self.log.open("ab") as log:
                self.process = subprocess.Popen(
                    [sys.executable, "-c", PREAMBLE + _SERVE, args[0]],
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    text=True,
                )
        self.process.stdin.write(json.dumps({"script": script, "argv": args}) + "\n")
        self.process.stdin.flush()
        reply: list[str] = []
        reader = threading.Thread(target=lambda: reply.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if not reply or not reply[0]:
            what = f"no reply in {timeout:.0f} s" if not reply else "the compile interpreter exited"
            self.close()
            raise RuntimeError(f"{what}; its stderr ends:\n{self.log.read_text()[-4000:]}")
        error = json.loads(reply[0])["error"]
        if error:
            raise RuntimeError(f"compile script failed:\n{error}")

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None
