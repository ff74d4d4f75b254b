"""`--executor ray`: evaluations on the GPU workers of a Ray cluster.

RayExecutor is an Executor (kernelevolve.evaluation.executors), as the local Evaluator is. It starts one Ray
actor per GPU of the cluster (`num_gpus=1`; on `--device interpret` one per CPU, `num_cpus=1`);
each actor holds a local Evaluator for its GPU and evaluates in its sandbox as usual: on a GPU as
many candidates at once as that Evaluator takes (their checks overlap, their timings take the GPU
alone), on the interpreter one. The request travels as data, its spec with its reference's text (the
actor may be on a host without the driver's files); the result comes back as EvalResult's dict.

The run's knowledge base (`--kb`; None: the worker's bundled one) travels as data too: its files are
put in Ray's object store once and each actor writes them into a folder of its own, which it hands
to its Evaluator and to its profiles (kernelevolve.runs makes the executor with the run's), so
candidates are screened against and import the same kernels as under a local evaluator. The actor's
process serves that one run, so the folder is also its process's default, for what reads that
(the hardware peaks, read once per process). Profiles of the search (search/profiling.py) are taken on a worker as well
(`worker_profiler`: `profile_on_worker`), on a place of its Evaluator and with the GPU to themselves.

Each actor opens the run's experiment database: baselines it times are shared there (use
PostgreSQL when workers are on several hosts: a SQLite file is only reachable on this one) and it
registers in the `workers` table, heartbeating while it lives. An actor that dies (its process
killed, its node lost) or hangs past the deadline is replaced and the evaluation raises
WorkerLost, which the engine retries once.

The actor's side (what runs in the worker's process) is runs/ray_worker.py; this module is the
driver's side: starting, feeding, replacing and retiring the actors.

It lives with the runs, above evaluation/, memory/ and profiling/, because each actor puts those three
together for the run: an Evaluator, the run's database and the profiler.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from pathlib import Path

from kernelevolve.evaluation.executors import EvaluationRequest, Executor, WorkerLost
from kernelevolve.records.result import EvalResult
from kernelevolve.runs.ray_worker import GpuLost, RayWorker

RAY_MISSING = "--executor ray needs Ray, which is not installed: pip install 'kernelevolve[ray]'"
START_TIMEOUT_S = 300.0  # for the first actor to come up (imports, and a free GPU on the cluster)
MAX_START_FAILURES = 3  # workers failing to start in a row before no more are started
KB_LIMIT_BYTES = 64 << 20  # a knowledge base bigger than this is not shipped to the workers
log = logging.getLogger(__name__)


class RayUnavailable(RuntimeError):
    """Ray is missing, or the cluster cannot be reached or has no room for a worker; one line."""


def require_ray():
    try:
        import ray
    except ImportError:
        raise RayUnavailable(RAY_MISSING) from None
    return ray


def absolute_db_url(url: str) -> str:
    """The URL with a SQLite file's path made absolute: actors do not share the driver's directory."""
    from sqlalchemy import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database and parsed.database != ":memory:":
        parsed = parsed.set(database=str(Path(parsed.database).resolve()))
    return parsed.render_as_string(hide_password=False)


class _Slot:
    """One actor as the driver sees it."""

    def __init__(self, actor, ready) -> None:
        self.actor, self.ready = actor, ready
        self.name = "a Ray worker (starting)"
        self.worker_id: int | None = None  # its row in the workers table, once it is up


class RayExecutor(Executor):
    def __init__(
        self,
        device: str,
        *,
        db_url: str,
        run_id: str | None = None,
        address: str | None = None,
        timeout_s: float = 300.0,
        workers: int | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
        deadline_s: float | None = None,
        knowledge_base: str | Path | None = None,
    ) -> None:
        ray = require_ray()
        # Read before anything starts: an unreadable --kb is the user's error, said in one line.
        kb_files = _pack_knowledge_base(Path(knowledge_base)) if knowledge_base else None
        self._ray = ray
        self._died = _died_errors()
        self.device, self.timeout_s = device, timeout_s
        self.db_url, self.run_id, self.address = absolute_db_url(db_url), run_id, address
        # A worker that neither answers nor dies within this is taken for hung (every phase of an
        # evaluation has its own timeout_s inside the sandbox; this is the worker's, not the candidate's).
        self.deadline_s = deadline_s or 6 * timeout_s + 120
        self._started_ray = self._closed = False
        if not ray.is_initialized():
            # No address: a cluster of our own ("local"), not whatever cluster file a dead one left in
            # /tmp/ray (ray.init() would wait minutes for it); $RAY_ADDRESS or --ray-address auto join one.
            target = address or os.environ.get("RAY_ADDRESS") or "local"
            try:
                ray.init(address=target, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
            except Exception as e:  # noqa: BLE001 (ConnectionError, RuntimeError, ValueError by version)
                where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
                raise RayUnavailable(f"cannot start or reach {where}: {_first_line(e)}") from None
            self._started_ray = True
        _quiet_worker_notices()
        resource = "GPU" if device == "cuda" else "CPU"
        count = workers or int(ray.cluster_resources().get(resource, 0))
        if count < 1:
            self.close()
            raise RayUnavailable(f"the Ray cluster has no {resource} for a --device {device} worker")
        self._actor_class = ray.remote(RayWorker)
        self._kb = ray.put(kb_files) if kb_files else None  # once in the object store, for every actor
        self._free: queue.Queue[_Slot] = queue.Queue()
        self._lock = threading.Lock()
        self._waiting = self._start_failures = 0
        self.slots = [self._start() for _ in range(count)]
        self.parallelism = count
        self.gpu_count = count if device == "cuda" else 1  # a profile's GPU share is of these
        self.worker_profiler = self.profile_on_worker  # profiles are taken where the GPUs are
        first, _ = ray.wait([s.ready for s in self.slots], num_returns=1, timeout=start_timeout_s)
        if not first:
            self.close()
            raise RayUnavailable(
                f"no Ray worker started within {start_timeout_s:g}s (is a {resource} free on the cluster?)"
            )
        # Evaluations at once: every worker takes as many as its first one (one GPU each, alike hosts).
        self.parallelism = count * int(ray.get(first[0]).get("capacity", 1))

    # -- the Executor's interface --------------------------------------------------------
    def run(self, request: EvaluationRequest) -> EvalResult:
        data = wire(request)
        return EvalResult.from_dict(self._call(lambda slot, queued: slot.actor.evaluate.remote(data, queued)))

    def profile_on_worker(self, spec, source: str, cases, tools, *, timeout_s: float, latency_ms=None):
        """A search's profile of one node (search/profiling.Profiler.run), taken on a worker's GPU; a
        NodeProfile whose summaries say where (`taken_on`). WorkerLost as for evaluations."""
        from kernelevolve.profiling.schema import NodeProfile, ProfileSummary

        data = spec.model_dump(mode="json")
        cases_data = [c.model_dump(mode="json") for c in cases]
        out = self._call(
            lambda slot, _queued: slot.actor.profile.remote(
                data, spec.reference_source, source, cases_data, list(tools), timeout_s, latency_ms
            )
        )
        summaries = [ProfileSummary.model_validate(dict(s, taken_on=out["taken_on"])) for s in out["summaries"]]
        return NodeProfile(summaries=summaries, seconds=out["seconds"])

    def _call(self, send):
        """Run `send(slot, queued)`'s remote call on the next free place and return its value; a worker
        that dies, hangs past the deadline or loses its GPU is replaced (WorkerLost)."""
        ray = self._ray
        with self._lock:
            self._waiting += 1
        try:
            slot = self._next_free()
        finally:
            with self._lock:
                self._waiting -= 1
                queued = self._waiting
        ref = send(slot, queued)
        try:
            value = ray.get(ref, timeout=self.deadline_s)
        except ray.exceptions.GetTimeoutError:
            self._replace(slot, kill=True)
            raise WorkerLost(f"{slot.name} gave no result within {self.deadline_s:g}s: replaced", slot.name) from None
        except ray.exceptions.RayTaskError as e:  # the Evaluator itself raised: its error, as a local one would
            if isinstance(getattr(e, "cause", None), GpuLost):
                self._replace(slot, kill=True)
                raise WorkerLost(f"{slot.name} lost its GPU: {e.cause}: replaced", slot.name) from None
            self._give_back(slot)  # the worker is fine: only this call failed
            raise e.as_instanceof_cause() from None
        except self._died as e:
            self._replace(slot)
            raise WorkerLost(f"{slot.name} died ({_first_line(e)}): replaced", slot.name) from None
        self._give_back(slot)
        return value

    def _give_back(self, slot: _Slot) -> None:
        with self._lock:
            if slot in self.slots:
                self._free.put(slot)

    def _next_free(self) -> _Slot:
        """A place on a live worker (the queue holds one per evaluation a worker takes at once; those of
        a worker since replaced are dropped here)."""
        while True:
            try:
                slot = self._free.get(timeout=1.0)
            except queue.Empty:
                if self._closed:  # interrupted: the caller's thread must end, not wait for ever
                    raise WorkerLost("the Ray executor was closed", "") from None
                if not self.slots:
                    raise WorkerLost(f"no Ray worker left: {MAX_START_FAILURES} failed to start in a row", "") from None
                continue
            with self._lock:
                if slot in self.slots:
                    return slot

    def close(self) -> None:
        """Retire the actors (their rows in the workers table) and stop a cluster this started."""
        ray = self._ray
        if self._closed:  # the engine closes it when the search ends, the command when it stops
            return
        self._closed = True
        slots = list(getattr(self, "slots", []))
        try:  # all at once: each retires its row; a dead or stuck one is killed below all the same
            ray.wait([slot.actor.close.remote() for slot in slots], num_returns=len(slots), timeout=10)
        except Exception:  # noqa: BLE001
            pass
        for slot in slots:
            ray.kill(slot.actor, no_restart=True)
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False

    # -- actors --------------------------------------------------------------------------
    def _options(self) -> dict:
        if self.device == "cuda":
            # The actor's Evaluator gives each sandbox the physical GPU id it was granted, so Ray must
            # not renumber the GPUs of the actor's process.
            env = {"RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}
            return {"num_gpus": 1, "num_cpus": 1, "runtime_env": {"env_vars": env}, "max_concurrency": 8}
        return {"num_cpus": 1, "max_concurrency": 8}  # its evaluations (at most 4), and describe/close meanwhile

    def _start(self) -> _Slot:
        actor = self._actor_class.options(**self._options()).remote(
            self.device, self.db_url, self.run_id, self.timeout_s, self._kb
        )
        slot = _Slot(actor, actor.describe.remote())
        threading.Thread(target=self._when_ready, args=(slot,), daemon=True, name="kernelevolve-ray-start").start()
        return slot

    def _when_ready(self, slot: _Slot) -> None:
        try:
            info = self._ray.get(slot.ready)
        except Exception as e:  # noqa: BLE001 (it died starting: its replacement is started instead)
            self._start_failures += 1
            log.warning("a Ray worker failed to start (%d in a row): %s", self._start_failures, _first_line(e))
            if self._start_failures >= MAX_START_FAILURES:  # a broken host or image: stop trying
                with self._lock:
                    if slot in self.slots:
                        self.slots.remove(slot)
                return
            if not self._closed:
                self._replace(slot)
            return
        self._start_failures = 0
        slot.worker_id = info["worker_id"]
        slot.name = f"Ray worker {info['worker_id']} ({info['host']}, GPU {info['gpu']}, pid {info['pid']})"
        log.info(
            "%s ready, %d evaluation(s) at once, knowledge base %s",
            slot.name,
            info.get("capacity", 1),
            info.get("knowledge_base"),
        )
        for _ in range(int(info.get("capacity", 1))):
            self._free.put(slot)

    def _replace(self, slot: _Slot, kill: bool = False) -> None:
        if kill:
            try:
                self._ray.kill(slot.actor, no_restart=True)
            except Exception:  # noqa: BLE001
                pass
        if slot.worker_id is not None:  # it cannot retire itself: listed no longer
            self._retire(slot.worker_id)
        if self._closed:
            return
        with self._lock:
            if slot in self.slots:
                self.slots[self.slots.index(slot)] = self._start()
        log.warning("%s lost; a new worker is starting", slot.name)

    def _retire(self, worker_id: int) -> None:
        from kernelevolve.memory import Repository
        from kernelevolve.memory.workers import WorkerRegistry

        try:
            repo = Repository(self.db_url)
            try:
                WorkerRegistry(repo).retire(worker_id)
            finally:
                repo.close()
        except Exception as e:  # noqa: BLE001 (its heartbeat stops all the same: it drops out of the list)
            log.warning("could not retire lost worker %s: %s", worker_id, e)


def wire(request: EvaluationRequest) -> dict:
    """A request as plain data for an actor: its spec with the reference's text (the actor's host may not
    have the file), which `RayWorker.evaluate` (runs/ray_worker.py) turns back into a request."""
    spec = request.spec
    return {
        "spec": spec.model_dump(mode="json"),
        "reference": spec.reference_source,
        "source": request.source,
        "shapes": request.shapes,
        "node_id": request.node_id,
        "kind": request.kind.value,
    }


def _pack_knowledge_base(folder: Path) -> dict:
    """The knowledge base's files as {relative path: bytes} and their digest (RayUnavailable, one line,
    when it cannot be read or is too big to ship)."""
    import hashlib

    if not folder.is_dir():
        raise RayUnavailable(f"--kb {folder}: no such directory")
    files: dict[str, bytes] = {}
    total = 0
    try:
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(folder)
            if not path.is_file() or any(p.startswith(".") or p == "__pycache__" for p in rel.parts):
                continue
            files[rel.as_posix()] = data = path.read_bytes()
            total += len(data)
            if total > KB_LIMIT_BYTES:
                raise RayUnavailable(
                    f"--kb {folder}: more than {KB_LIMIT_BYTES >> 20} MiB, too big to send to the Ray workers"
                )
    except OSError as e:
        raise RayUnavailable(f"--kb {folder}: cannot be read for the Ray workers: {e}") from None
    digest = hashlib.sha256()
    for name, data in files.items():
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return {"name": folder.name, "digest": digest.hexdigest()[:16], "files": files}


def _died_errors() -> tuple[type[BaseException], ...]:
    """Ray's exceptions for a worker (or its node) that is gone, as far as this Ray version has them."""
    import ray.exceptions as e

    names = ("RayActorError", "ObjectLostError", "WorkerCrashedError", "NodeDiedError")
    return tuple(getattr(e, n) for n in names if hasattr(e, n))


def _quiet_worker_notices() -> None:
    """Ray prints its workers' output and death notices on the driver's stdout, where `--json` puts its
    summary; a lost worker is reported here (WorkerLost, then the node's result and the run's log).
    The switch is private to Ray: where a version lacks it, the notices stay."""
    try:
        import ray._private.worker as ray_worker
    except ImportError:
        return
    if hasattr(ray_worker, "_worker_logs_enabled"):
        ray_worker._worker_logs_enabled = False


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__
