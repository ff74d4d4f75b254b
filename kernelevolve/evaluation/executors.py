"""What the search engine needs to know about where evaluations run.

An executor is anything with the Evaluator's interface: `evaluate(spec, source, shapes=None,
deep=False) -> EvalResult`, `.parallelism` (evaluations it runs at once) and `.device`. The local
Evaluator is one; kernelevolve.runs.ray_executor.RayExecutor sends each evaluation to a Ray
actor.

A candidate that crashes or hangs is the candidate's failure (the sandbox reports it as an
EvalResult). A *worker* that dies (its process killed, its node gone, its GPU lost, or hung past
the executor's deadline) says nothing about the candidate: the executor replaces the worker and
raises WorkerLost, and the engine evaluates the node once more on a fresh worker before it records
the node as a crash.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
from typing import Iterator


class WorkerLost(RuntimeError):
    """The worker evaluating a candidate died, hung past its deadline or lost its GPU (one line).

    `worker` names it (host, GPU or pid) for messages."""

    def __init__(self, message: str, worker: str = "") -> None:
        super().__init__(message)
        self.worker = worker


_current = threading.local()


@contextlib.contextmanager
def evaluating(node_id: int | None) -> Iterator[None]:
    """Tell the executor (and its workers' heartbeats) which node the calling thread evaluates.

    The engine wraps each `evaluate` call in it; the call runs on the same thread, so an executor
    reads `current_node()` without the node id crossing the Evaluator's interface."""
    before = getattr(_current, "node_id", None)
    _current.node_id = node_id
    try:
        yield
    finally:
        _current.node_id = before


def current_node() -> int | None:
    """The node the calling thread evaluates (see `evaluating`), else None."""
    return getattr(_current, "node_id", None)


def gpu_lost(index: str, timeout_s: float = 30.0) -> str | None:
    """Why GPU `index` (its number on this host) is lost, or None when nvidia-smi still reaches it
    (or there is no nvidia-smi to ask). A worker whose candidate failed calls it before blaming the
    candidate: a GPU that fell off the bus fails every candidate, and is the worker's loss."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "-i", str(index), "--query-gpu=pci.bus_id", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return f"nvidia-smi gave no answer about GPU {index} within {timeout_s:g}s"
    if out.returncode == 0:
        return None
    said = (out.stdout + out.stderr).strip().splitlines()
    return f"nvidia-smi cannot reach GPU {index}: {said[0][:200] if said else f'exit status {out.returncode}'}"
