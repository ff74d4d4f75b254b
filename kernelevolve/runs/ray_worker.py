"""`--executor ray`, the worker's side: the Ray actor that evaluates and profiles on one GPU (or CPU).

Each actor holds a local Evaluator for its GPU, the run's experiment database (shared baselines, its
row in the `workers` table, heartbeating while it lives) and the run's knowledge base, written from
the files the driver shipped into a folder of its own. Requests arrive as plain data (the spec with
its reference's text, made by ray_executor.wire) and results go back as EvalResult's dict.

Apart from the driver (runs/ray_executor.py) because this code runs in another process, often on
another host; the driver imports it (to make the actor class), never the other way round.
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
from pathlib import Path

from kernelevolve.evaluation.executors import EvaluationKind, EvaluationRequest, gpu_lost
from kernelevolve.records.result import Failure


class GpuLost(RuntimeError):
    """Raised in an actor whose GPU stopped answering: the driver replaces the actor (WorkerLost)."""


class RayWorker:
    """The actor: one Evaluator on one GPU (or CPU), registered in the run's workers table."""

    def __init__(
        self, device: str, db_url: str, run_id: str | None, timeout_s: float, knowledge_base: dict | None = None
    ) -> None:
        import ray

        from kernelevolve import paths

        # The run's knowledge base (None: this worker's bundled one), handed to the Evaluator and profiles.
        self.knowledge_base = _unpack_knowledge_base(knowledge_base) if knowledge_base else paths.BUNDLED_KNOWLEDGE_BASE
        self.kb_path = str(self.knowledge_base)

        from kernelevolve.evaluation.evaluator import Evaluator
        from kernelevolve.memory import Repository
        from kernelevolve.memory.repository import BaselineTable
        from kernelevolve.memory.workers import LiveWorker, WorkerRegistry

        gpus, per_gpu = None, 1  # the interpreter: one evaluation per CPU Ray granted
        self.gpu = "cpu"
        if device == "cuda":
            import torch

            # Ray leaves CUDA_VISIBLE_DEVICES alone here (see RayExecutor._options): the sandbox gets the physical id.
            gpus = [int(ray.get_gpu_ids()[0])]
            self.gpu = str(gpus[0])
            # Checks of several candidates overlap on a GPU (their timings take it alone): as many as the
            # host's cores allow when every GPU of the host has a worker, as a local evaluator would.
            per_gpu = max(1, min(4, (os.cpu_count() or 2) // (3 * max(1, torch.cuda.device_count()))))
        self.repo = Repository(db_url)
        self.evaluator = Evaluator(
            device,
            gpus=gpus,
            timeout_s=timeout_s,
            baseline_store=BaselineTable(self.repo),
            per_gpu=per_gpu,
            knowledge_base=self.knowledge_base,
        )
        self.capacity = self.evaluator.parallelism
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.live = LiveWorker(
            WorkerRegistry(self.repo), host=self.host, gpu=self.gpu, pid=self.pid, executor="ray", run_id=run_id
        )
        self._busy = threading.Semaphore(self.capacity)  # the driver never sends more; this makes sure
        self._lock = threading.Lock()
        self._nodes: dict[int, int | None] = {}  # call -> node, of the evaluations running now
        self._calls = 0
        self._references: dict[str, Path] = {}

    def describe(self) -> dict:
        return {
            "host": self.host,
            "gpu": self.gpu,
            "pid": self.pid,
            "worker_id": self.live.id,
            "capacity": self.capacity,
            "knowledge_base": self.kb_path,
        }

    def evaluate(self, request: dict, queued: int) -> dict:
        """One request as the driver sent it (ray_executor.wire); EvalResult's dict."""
        node_id = request["node_id"]
        spec = self._spec(request["spec"], request["reference"])
        with self._busy:
            with self._lock:
                self._calls += 1
                call = self._calls
                self._nodes[call] = node_id
                self.live.set("evaluating", node_id, queued)
            try:
                result = self.evaluator.run(
                    EvaluationRequest(
                        spec, request["source"], request["shapes"], node_id, EvaluationKind(request["kind"])
                    )
                )
                if self.gpu != "cpu" and result.failure in (Failure.CRASH, Failure.RUNTIME, Failure.TIMEOUT):
                    lost = gpu_lost(self.gpu)  # the GPU's fault, not the candidate's: not its result
                    if lost:
                        raise GpuLost(f"{lost} (on {self.host})")
                return result.to_dict()
            finally:
                with self._lock:  # the heartbeat shows the newest evaluation still running, else idle
                    del self._nodes[call]
                    if self._nodes:
                        self.live.set("evaluating", self._nodes[max(self._nodes)], queued)
                    else:
                        self.live.set("idle")

    def profile(
        self, spec_data: dict, reference: str, source: str, cases: list[dict], tools: list[str], timeout_s, latency_ms
    ) -> dict:
        """A search's profile of one node, on a place of this worker's Evaluator with its GPU alone."""
        import time

        from kernelevolve.profiling.collect import profile_candidate
        from kernelevolve.spec import Case

        spec = self._spec(spec_data, reference)
        device = self.evaluator.device
        with self._busy:
            self.live.set("profiling", None, 0)
            try:
                with self.evaluator.gpu() as slot:
                    t0 = time.monotonic()
                    summaries = profile_candidate(
                        spec,
                        source,
                        [Case(**c) for c in cases],
                        tools,
                        device=device,
                        gpu=slot or "0",
                        timeout_s=timeout_s,
                        latency_ms=latency_ms,
                        knowledge_base=self.knowledge_base,
                    )
                    seconds = time.monotonic() - t0
            finally:
                with self._lock:
                    if self._nodes:
                        self.live.set("evaluating", self._nodes[max(self._nodes)], 0)
                    else:
                        self.live.set("idle")
        return {
            "summaries": [s.model_dump() for s in summaries],
            "seconds": seconds,
            "taken_on": f"{self.host} pid {self.pid} gpu {self.gpu}",
        }

    def close(self) -> None:
        self.live.close()
        self.evaluator.close()  # its warm processes wait for no more candidates
        self.repo.close()

    def _spec(self, data: dict, reference: str):
        """The spec with its reference written on this host (same text: same fingerprint, same baselines)."""
        import hashlib

        from kernelevolve.spec import Spec

        digest = hashlib.sha256(reference.encode()).hexdigest()[:16]
        path = self._references.get(digest)
        if path is None:
            folder = Path(tempfile.mkdtemp(prefix="kernelevolve-ray-reference-"))
            path = folder / Path(data["reference"]).name
            path.write_text(reference)
            self._references[digest] = path
        return Spec.model_validate(dict(data, reference=str(path), path=None))


def _unpack_knowledge_base(kb: dict) -> Path:
    """Actor side: the shipped knowledge base written into a folder of its own; also this process's
    default (--kb, and KERNELEVOLVE_KB for anything that reads the environment): the actor serves one run."""
    from kernelevolve import paths

    root = Path(tempfile.mkdtemp(prefix=f"kernelevolve-ray-kb-{kb['digest']}-")) / kb["name"]
    for name, data in kb["files"].items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    root.mkdir(parents=True, exist_ok=True)
    os.environ["KERNELEVOLVE_KB"] = str(root)
    paths.use_knowledge_base(root)
    return root
