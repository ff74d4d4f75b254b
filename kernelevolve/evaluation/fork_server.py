"""Sandboxed processes forked from a process that has already imported torch and Triton.

A fresh interpreter spends ~4 s of CPU importing torch and Triton, and a CPU evaluation starts two of
them (the candidate's check and its judge): most of its cost. Under the interpreter (TRITON_INTERPRET=1)
`sandbox.run_script` asks a fork server (sandbox_fork.py) instead: one per distinct import-time
environment, started on first use and kept for the life of this process, which forks a child that goes
through the same boot (sandbox_boot.main) and the same sandbox as a fresh process would. GPU runs keep
fresh processes (a CUDA process cannot fork safely once initialised, and their start-up is paid ahead in
warm sets). `KERNELEVOLVE_FORK_SERVER=0` turns it off.

`start()` returns a process handle with what run_script uses of subprocess.Popen (`pid`, `stdin`,
`wait()`, `returncode`), or None where no server can be had (the caller then starts a fresh process).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

log = logging.getLogger(__name__)

SERVER = Path(__file__).with_name("sandbox_fork.py")
PRELOAD = ("torch", "triton", "triton.language")
# What is read when those modules are imported, so children of one server must agree on it.
IMPORT_TIME = ("TRITON_INTERPRET", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "PYTHONPATH")
START_TIMEOUT_S = 120.0
_PER_RUN = ("HOME", "TMPDIR", "XDG_CACHE_HOME", "CUDA_CACHE_PATH")


def wanted(env: dict[str, str]) -> bool:
    """Whether a run with this environment is started through a fork server."""
    return env.get("TRITON_INTERPRET") == "1" and os.environ.get("KERNELEVOLVE_FORK_SERVER", "1") != "0" and _able()


def _able() -> bool:
    """A child that is not ours is waited for through a pidfd (Linux 5.3+), its fds sent over a socket."""
    global _ABLE
    if _ABLE is None:
        try:
            os.close(os.pidfd_open(os.getpid()))
            _ABLE = hasattr(socket, "send_fds")
        except (AttributeError, OSError):
            _ABLE = False
    return _ABLE


_ABLE: bool | None = None


class Forked:
    """A child of the fork server, as run_script sees a subprocess.Popen."""

    def __init__(self, server: ForkServer, pid: int, stdin) -> None:
        self._server, self.pid, self.stdin, self.returncode = server, pid, stdin, None

    def wait(self) -> int:
        if self.returncode is None:
            status = self._server.reap(self.pid)
            # A child the server could not reap (the server died meanwhile): it ended, how is not known.
            self.returncode = os.waitstatus_to_exitcode(status) if status is not None else 1
        return self.returncode


class ForkServer:
    def __init__(self, env: dict[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._lock = threading.Lock()
        self._sock = ours
        self.owner = os.getpid()  # a process forked from this one must not talk on this socket too
        try:
            self._proc = subprocess.Popen(
                [sys.executable, str(SERVER), str(theirs.fileno()), *PRELOAD],
                cwd=str(SERVER.parent),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,  # not in the caller's process group: Ctrl-C reaches the caller only
            )
        finally:
            theirs.close()
        ours.settimeout(START_TIMEOUT_S)
        ready = json.loads(ours.recv(1 << 16) or b"null")
        ours.settimeout(None)
        if not isinstance(ready, dict) or "ready" not in ready:
            raise OSError("the fork server did not start")
        self.loaded = ready["ready"]

    def _ask(self, request: dict, fds: list[int] = ()) -> dict:
        with self._lock:
            socket.send_fds(self._sock, [json.dumps(request).encode()], list(fds))
            answer = self._sock.recv(1 << 16)
        if not answer:
            raise OSError("the fork server has gone")
        return json.loads(answer)

    def spawn(self, argv: list[str], cwd: str, env: dict, fds: dict[str, int]) -> int:
        answer = self._ask({"op": "spawn", "argv": argv, "cwd": cwd, "env": env, "fds": list(fds)}, list(fds.values()))
        if "pid" not in answer:
            raise OSError(f"the fork server refused: {answer.get('error')}")
        return int(answer["pid"])

    def reap(self, pid: int) -> int | None:
        try:
            return self._ask({"op": "reap", "pid": pid}).get("status")
        except (OSError, ValueError):
            return None

    def alive(self) -> bool:
        return self._proc.poll() is None

    def close(self) -> None:
        try:
            self._sock.close()  # the server exits at EOF
        finally:
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()


_SERVERS: dict[tuple, ForkServer] = {}
_REGISTRY = threading.Lock()


def _server(env: dict[str, str]) -> ForkServer | None:
    key = tuple(env.get(k) for k in IMPORT_TIME) + (sys.executable,)
    with _REGISTRY:
        server = _SERVERS.get(key)
        if server is not None and server.owner == os.getpid() and server.alive():
            return server
        # Not the first run's scratch and caches: the server outlives them.
        base = {k: v for k, v in env.items() if k not in _PER_RUN and not k.endswith("_CACHE_DIR")}
        try:
            server = _SERVERS[key] = ForkServer(base)
        except (OSError, ValueError) as exc:
            log.warning("no fork server (%s): sandboxed processes start fresh", exc)
            _SERVERS.pop(key, None)
            return None
        return server


def start(argv: list[str], *, cwd: str, env: dict[str, str], stdin: bool, stdout: int, stderr: int, keep: dict):
    """A forked child running `argv` ([BOOT, CONFIG, SCRIPT]) like a fresh `python BOOT CONFIG SCRIPT`, with
    `keep` ({CONFIG key: descriptor}) open in it under CONFIG's key; its stdin a pipe whose write end the
    handle holds (`stdin` true) or /dev/null. None where no fork server can be had."""
    server = _server(env)
    if server is None:
        return None
    null = os.open(os.devnull, os.O_RDONLY)
    writer = None
    if stdin:
        reader, writer = os.pipe()
        os.close(null)
        null = reader
    try:
        pid = server.spawn(argv, cwd, env, {"stdin": null, "stdout": stdout, "stderr": stderr, **keep})
    except (OSError, ValueError) as exc:
        log.warning("the fork server failed (%s): this process starts fresh", exc)
        if writer is not None:
            os.close(writer)
        return None
    finally:
        os.close(null)
    return Forked(server, pid, os.fdopen(writer, "wb") if writer is not None else None)
