"""Run one generated harness script in its own process, safely.

Own process group (killed whole on timeout), resource limits and no network (applied by
sandbox_boot.py inside the child), a scratch working directory, secrets stripped from the
environment, stdout/stderr to files whose size is capped and of which only the tail is read.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

BOOT = Path(__file__).with_name("sandbox_boot.py")
_SECRET = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)
LOG_TAIL_CHARS = 8000


@dataclass
class Limits:
    timeout_s: float = 300.0
    max_open_files: int = 4096
    max_processes: int = 4096  # threads count too, and torch starts many
    max_file_bytes: int = 256 << 20  # caps each file the candidate writes, logs included
    max_memory_bytes: int | None = None  # address space; leave None on CUDA (it maps huge ranges)
    isolate_network: bool = True


@dataclass
class Outcome:
    returncode: int | None  # None when killed for the timeout
    timed_out: bool
    signal_name: str | None
    duration_s: float
    stdout: str
    stderr: str
    result: dict | None  # the harness's JSON, if it wrote one
    sandbox: dict = field(default_factory=dict)  # what isolation the child achieved


def _tail(path: Path, chars: int = LOG_TAIL_CHARS) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - chars * 4))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return text[-chars:]


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def clean_environment(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not _SECRET.search(k)}
    env.update(extra)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_script(script: str, workdir: Path, *, limits: Limits, env: dict[str, str], result_path: Path) -> Outcome:
    """Write `script` into `workdir`, run it sandboxed, and collect the JSON it left at `result_path`."""
    workdir.mkdir(parents=True, exist_ok=True)
    script_path = workdir / "harness.py"
    script_path.write_text(script)
    shutil.copy(BOOT, workdir / "sandbox_boot.py")
    result_path.unlink(missing_ok=True)
    limits_json = json.dumps({k: getattr(limits, k) for k in ("max_open_files", "max_processes", "max_file_bytes", "max_memory_bytes", "isolate_network")})
    start = time.monotonic()
    with open(workdir / "stdout.txt", "wb") as out, open(workdir / "stderr.txt", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, str(workdir / "sandbox_boot.py"), limits_json, str(script_path)],
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,  # its own process group, so a timeout kills every child too
        )
        timed_out = False
        try:
            proc.wait(timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_group(proc)
    rc = None if timed_out else proc.returncode
    sig = None
    if rc is not None and rc < 0:
        try:
            sig = signal.Signals(-rc).name
        except ValueError:
            sig = f"signal {-rc}"
    return Outcome(
        returncode=rc,
        timed_out=timed_out,
        signal_name=sig,
        duration_s=time.monotonic() - start,
        stdout=_tail(workdir / "stdout.txt"),
        stderr=_tail(workdir / "stderr.txt"),
        result=_read_json(result_path),
        sandbox=_read_json(workdir / "sandbox.json") or {},
    )


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the whole process group (the harness and anything it spawned)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
