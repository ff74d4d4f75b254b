"""Where evaluations run: one request in, one result out.

An `Executor` takes an `EvaluationRequest` (the spec, the candidate's source, the shapes, the node and
what kind of evaluation it is) and returns its EvalResult (`run`). It says how many evaluations it runs
at once (`parallelism`), on which device and on how many GPUs, and what it can do beyond evaluations:
`gpu()` lends a GPU of this process to a profile, and `worker_profiler`, where set, takes a search's
profiles on the worker that holds the GPU instead. Those are declared here, with their defaults, so that
callers read them instead of probing for them. The local Evaluator (evaluator.py) is one;
kernelevolve.runs.ray_executor.RayExecutor sends each request to a Ray actor; tests have doubles. Each
subclasses `Executor` for its defaults.

A candidate that crashes or hangs is the candidate's failure (the sandbox reports it as an
EvalResult). A *worker* that dies (its process killed, its node gone, its GPU lost, or hung past
the executor's deadline) says nothing about the candidate: the executor replaces the worker and
raises WorkerLost, and the engine evaluates the node once more on a fresh worker before it records
the node as a crash.
"""

from __future__ import annotations

import shutil
import subprocess
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from kernelevolve.records.result import EvalResult
from kernelevolve.spec import Case, ShapeValue, Spec


class EvaluationKind(str, Enum):
    """Why a candidate is evaluated."""

    FIRST = "first"  # a node's first evaluation (a search's, a campaign's solution file)
    RECHECK = "recheck"  # a would-be best again, in fresh processes with new seeds, before it counts
    RETIME = "retime"  # a stored node again, on this host's device (kernelevolve retime)
    FILE = "file"  # one file against a spec (kernelevolve eval)

    def __str__(self) -> str:
        return self.value


# Kinds that add a profiled call on the GPU (where the kernels ran, how much GPU time was the kernels'):
# seconds more, spent on what decides a run's best and on a person's single evaluation.
DEEP_KINDS = frozenset({EvaluationKind.RECHECK, EvaluationKind.FILE})


@dataclass(frozen=True)
class EvaluationRequest:
    """One evaluation to run: the candidate `source` against `spec` at `shapes` (None: the spec's shapes
    for the executor's device), for node `node_id` (None: no node, e.g. `kernelevolve eval`)."""

    spec: Spec
    source: str
    shapes: list[dict[str, ShapeValue]] | None = None
    node_id: int | None = None
    kind: EvaluationKind = EvaluationKind.FIRST

    @property
    def deep(self) -> bool:
        """Whether it adds a profiled call on the GPU (DEEP_KINDS)."""
        return self.kind in DEEP_KINDS

    def cases(self, device: str) -> list[Case]:
        return self.spec.cases(device, self.shapes)


class WorkerProfiler(Protocol):
    """Takes a search's profile of one node on a worker that holds the GPU (RayExecutor.profile_on_worker):
    a kernelevolve.profiling.schema.NodeProfile. WorkerLost as for evaluations."""

    def __call__(
        self,
        spec: Spec,
        source: str,
        cases: list[Case],
        tools: list[str],
        *,
        timeout_s: float,
        latency_ms: dict[str, float] | None = None,
    ) -> Any: ...


class Executor(Protocol):
    """Where evaluations run. `run` is the one way in; the rest says what it offers (defaults here)."""

    device: str  # cuda | interpret
    parallelism: int  # evaluations it runs at once
    gpu_count: int = 1  # GPUs it evaluates on (a profile's share of GPU time is of these)
    # Set where profiles are taken on the executor's workers; None: in this process, on a GPU from gpu().
    worker_profiler: WorkerProfiler | None = None

    def run(self, request: EvaluationRequest) -> EvalResult:
        """Evaluate one candidate (WorkerLost: the worker, not the candidate, failed)."""
        raise NotImplementedError

    def gpu(self) -> AbstractContextManager[str | None]:
        """One GPU of this process to oneself (a profile's run): its slot ("" or None: none to hold)."""
        return nullcontext(None)

    def close(self) -> None:
        """Stop what waits for more work (warm processes, workers); an executor may have nothing to stop."""
        return None


class WorkerLost(RuntimeError):
    """The worker evaluating a candidate died, hung past its deadline or lost its GPU (one line).

    `worker` names it (host, GPU or pid) for messages."""

    def __init__(self, message: str, worker: str = "") -> None:
        super().__init__(message)
        self.worker = worker


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
