"""Live evaluation workers: who evaluates what, where, right now.

Every worker (a local evaluator slot, a Ray actor) registers a row in table `workers` of the run's
experiment database and keeps it fresh with heartbeats: host, GPU, pid, executor, run, state
(idle | evaluating | timing), the node it is on and how many evaluations wait for a worker.
`kernelevolve workers` lists those whose heartbeat is recent; a worker that died simply stops
beating and drops out of the list. Heartbeat times are the workers' own clocks (hosts are
expected to keep time with NTP).

Two levels of API:
- `WorkerRegistry(repo)`: register(host, gpu, pid, executor, run_id) -> id, heartbeat(id, state,
  node_id, queued), retire(id), live();
- `LiveWorker(registry, ...)`: one registered worker whose heartbeat a daemon thread keeps fresh
  while it waits; `set(state, node_id, queued)` records a change at once, `close()` retires it.
"""

from __future__ import annotations

import logging
import threading
import time

from sqlalchemy import Float, Integer, String, delete, select, update
from sqlalchemy.orm import Mapped, mapped_column

from kernelevolve.memory.models import Base

IDLE, EVALUATING, TIMING, RETIRED = "idle", "evaluating", "timing", "retired"
STATES = (IDLE, EVALUATING, TIMING)
HEARTBEAT_S = 5.0  # how often a waiting worker says it is alive
STALE_S = 20.0  # no heartbeat for this long: not listed as live (dead, or its host unreachable)
FORGET_S = 24 * 3600.0  # rows of workers gone this long are deleted when a new worker registers
log = logging.getLogger(__name__)


class WorkerRow(Base):
    __tablename__ = "workers"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    host: Mapped[str] = mapped_column(String(200))
    gpu: Mapped[str] = mapped_column(String(64))  # the GPU's index on its host, or "cpu"
    pid: Mapped[int] = mapped_column(Integer)
    executor: Mapped[str] = mapped_column(String(16))  # local | ray
    run_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    state: Mapped[str] = mapped_column(String(16))  # idle | evaluating | timing | retired
    node_id: Mapped[int | None] = mapped_column(Integer, nullable=True)  # the node being evaluated
    queued: Mapped[int] = mapped_column(Integer, default=0)  # evaluations waiting for a worker
    started_at: Mapped[float] = mapped_column(Float)
    heartbeat_at: Mapped[float] = mapped_column(Float, index=True)


class WorkerRegistry:
    """The workers table of one experiment database (a Repository); safe across threads, processes
    and hosts (every call is its own short transaction)."""

    def __init__(self, repo) -> None:
        self.repo = repo

    def register(self, host: str, gpu: str, pid: int, executor: str, run_id: str | None) -> int:
        now = time.time()
        with self.repo.Session.begin() as s:
            s.execute(delete(WorkerRow).where(WorkerRow.heartbeat_at < now - FORGET_S))
            row = WorkerRow(
                host=host,
                gpu=str(gpu),
                pid=pid,
                executor=executor,
                run_id=run_id,
                state=IDLE,
                node_id=None,
                queued=0,
                started_at=now,
                heartbeat_at=now,
            )
            s.add(row)
            s.flush()
            return row.id

    def heartbeat(self, worker_id: int, state: str, node_id: int | None = None, queued: int = 0) -> None:
        if state not in STATES:
            raise ValueError(f"worker state {state!r}: use one of {', '.join(STATES)}")
        with self.repo.Session.begin() as s:
            s.execute(
                update(WorkerRow)
                .where(WorkerRow.id == worker_id, WorkerRow.state != RETIRED)
                .values(state=state, node_id=node_id, queued=queued, heartbeat_at=time.time())
            )

    def retire(self, worker_id: int) -> None:
        with self.repo.Session.begin() as s:
            s.execute(update(WorkerRow).where(WorkerRow.id == worker_id).values(state=RETIRED, node_id=None, queued=0))

    def live(self, within_s: float = STALE_S, run_id: str | None = None) -> list[WorkerRow]:
        """Workers not retired whose last heartbeat is at most `within_s` old, by host, GPU and id."""
        q = select(WorkerRow).where(WorkerRow.state != RETIRED, WorkerRow.heartbeat_at >= time.time() - within_s)
        if run_id is not None:
            q = q.where(WorkerRow.run_id == run_id)
        with self.repo.Session() as s:
            return list(s.scalars(q.order_by(WorkerRow.host, WorkerRow.gpu, WorkerRow.id)))


class LiveWorker:
    """One registered worker. `set()` records its state at once; between changes a daemon thread
    repeats the last state every `interval_s` so that a worker waiting for work stays listed. A
    failed database write is logged, never raised: a heartbeat must not fail an evaluation."""

    def __init__(
        self,
        registry: WorkerRegistry,
        *,
        host: str,
        gpu: str,
        pid: int,
        executor: str,
        run_id: str | None,
        interval_s: float = HEARTBEAT_S,
    ) -> None:
        self.registry = registry
        self.id = registry.register(host, gpu, pid, executor, run_id)
        self._state: tuple[str, int | None, int] = (IDLE, None, 0)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._beat, args=(interval_s,), name=f"kernelevolve-heartbeat-{self.id}", daemon=True
        )
        self._thread.start()

    @classmethod
    def here(cls, repo, gpu: str, run_id: str | None, executor: str = "local", **kw) -> "LiveWorker":
        """A worker of this process on this host (an evaluator's GPU slot: `gpu` its index, or "cpu")."""
        import os
        import socket

        return cls(
            WorkerRegistry(repo),
            host=socket.gethostname(),
            gpu=gpu,
            pid=os.getpid(),
            executor=executor,
            run_id=run_id,
            **kw,
        )

    def set(self, state: str, node_id: int | None = None, queued: int = 0) -> None:
        with self._lock:
            self._state = (state, node_id, queued)
            self._write()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            self.registry.retire(self.id)
        except Exception as e:  # noqa: BLE001 (the database may be gone; the row then goes stale)
            log.warning("worker %s: could not retire its row: %s", self.id, e)

    def _beat(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            with self._lock:
                self._write()

    def _write(self) -> None:
        try:
            self.registry.heartbeat(self.id, *self._state)
        except Exception as e:  # noqa: BLE001
            log.warning("worker %s: heartbeat not written: %s", self.id, e)


# -- is a run's process still there? ----------------------------------------------------------------

ALIVE, GONE, SILENT = "alive", "gone", "silent"


def run_processes(repo, runs) -> dict[str, str]:
    """For each run whose row says `running`: `alive` (its process answers), `gone` (its process on
    this host is no more: killed, crashed, the machine restarted) or `silent` (on another host, or a
    pid now reused, and its workers' heartbeats stopped more than STALE_S ago). Runs not listed are
    not running, or cannot be told (another host, no worker registered yet: taken as alive)."""
    import socket

    from sqlalchemy import func

    running = [r for r in runs if r.status == "running"]
    if not running:
        return {}
    with repo.Session() as s:
        rows = s.execute(
            select(WorkerRow.run_id, func.max(WorkerRow.heartbeat_at))
            .where(WorkerRow.run_id.in_([r.id for r in running]), WorkerRow.state != RETIRED)
            .group_by(WorkerRow.run_id)
        ).all()
    beats = {run_id: at for run_id, at in rows}
    now, here = time.time(), socket.gethostname()
    out: dict[str, str] = {}
    for run in running:
        host, _, pid = (run.owner or "").rpartition(":")
        beat = beats.get(run.id)
        stale = beat is not None and now - beat > STALE_S
        if host == here and pid.isdigit() and not pid_alive(int(pid)):
            out[run.id] = GONE
        elif stale:
            out[run.id] = SILENT
        else:
            out[run.id] = ALIVE
    return out


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid lives on this host (one we may not signal counts as alive)."""
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
