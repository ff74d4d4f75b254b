"""Where and when the evaluator judges its candidates: its places, its GPUs' gates, its warm process sets.

`Places` are the evaluations it runs at once. On cuda each GPU takes `per_gpu` of them (consecutive
slots on different GPUs) and has a gpu_gate.GpuGate: checks share the GPU within the memory an
evaluation of the same spec and shapes was seen to hold (`MemoryNeeds`), timed phases take it alone. On
the interpreter there is one place per two cores. Each place is a worker for `kernelevolve workers`
(`Places.report`). `WarmSets` hold the sandboxed processes of the next candidates, started before those
exist and handed out by (spec, shapes, GPU) while they still wait.

What a candidate's processes report is judged elsewhere (verdict.py); evaluator.py puts the two together.
"""

from __future__ import annotations

import json
import os
import queue
import threading
from contextlib import contextmanager, nullcontext
from typing import Callable, Protocol

from kernelevolve.evaluation.gpu_gate import GpuGate
from kernelevolve.evaluation.processes import ProcessSet
from kernelevolve.spec import Case, Spec

# A check's references plus the candidate's outputs, input copies and workspace, and a timing process's
# timed outputs. An evaluation that still runs out of memory beside others is judged again alone.
MEMORY_MARGIN = 1.25


class WorkerReport(Protocol):
    """Where an evaluator says what each of its places does (the experiment database's workers table)."""

    def __call__(self, place: int, gpu: str, state: str, node_id: int | None, queued: int) -> None: ...

    def close(self) -> None: ...


class Places:
    """The evaluations run at once: a slot each (its GPU's id; "" on the interpreter) and a place (a worker
    number), taken for one evaluation and given back."""

    def __init__(
        self, device: str, gpus: list[int] | None, per_gpu: int | None, memory_of: Callable[[int], int | None]
    ) -> None:
        cores = os.cpu_count() or 2
        self.gates: dict[str, GpuGate] = {}
        if device == "cuda":
            if gpus is None:
                import torch

                gpus = list(range(torch.cuda.device_count()))
            if not gpus:
                raise RuntimeError("--device cuda: no CUDA GPU is visible")
            self.gates = {str(g): GpuGate(memory_bytes=memory_of(g)) for g in gpus}
            # Each evaluation keeps two or three processes busy on the CPU while it is checked.
            per_gpu = per_gpu or max(1, min(4, cores // (3 * len(gpus))))
            slots = [str(g) for _ in range(per_gpu) for g in gpus]  # consecutive slots on different GPUs
        else:
            # The interpreter is single-threaded numpy: one evaluation per core, at most.
            slots = [""] * (per_gpu or max(1, cores // 2))
        self._slots: queue.Queue[str] = queue.Queue()
        for s in slots:
            self._slots.put(s)
        self.parallelism = len(slots)
        # Who evaluates what, for `kernelevolve workers`: set by whoever keeps the registry (a search).
        self.report: WorkerReport | None = None
        self._places: queue.Queue[int] = queue.Queue()  # one per evaluation at once: a worker each
        for place in range(len(slots)):
            self._places.put(place)
        self.waiting = 0

    def take(self) -> tuple[str, int]:
        """A slot and a place for one evaluation (waits for both)."""
        self.waiting += 1
        slot, place = self._slots.get(), self._places.get()
        self.waiting -= 1
        return slot, place

    def give_back(self, slot: str, place: int) -> None:
        self.tell(place, slot, "idle", None)
        self._places.put(place)
        self._slots.put(slot)

    def tell(self, place: int, slot: str, state: str, node_id: int | None) -> None:
        """What a place does now, for the report (if any)."""
        if self.report is not None:
            self.report(place, slot or "cpu", state, node_id, self.waiting)

    @contextmanager
    def alone(self):
        """One GPU to oneself (a profiler's run): its slot, and no check or timing beside it."""
        slot = self._slots.get()
        try:
            with self.gates[slot].exclusive() if slot in self.gates else nullcontext():
                yield slot
        finally:
            self._slots.put(slot)

    def close(self) -> None:
        if self.report is not None:
            self.report.close()


class WarmSets:
    """Process sets started for candidates not known yet, waiting by `set_key` (spec, shapes, slot)."""

    def __init__(self) -> None:
        self.sets: dict[tuple, list[ProcessSet]] = {}
        self._lock = threading.Lock()
        self._starting: list[threading.Thread] = []  # warm sets being put together

    def take(self, key: tuple) -> ProcessSet | None:
        """A waiting set for `key` whose processes are all still waiting (stale ones are discarded in the
        background), else None."""
        with self._lock:
            waiting = self.sets.get(key, [])
            while waiting:
                processes = waiting.pop(0)
                if processes.usable():
                    return processes
                stale = processes
                threading.Thread(target=stale.discard, kwargs={"keep": False}, daemon=True).start()
        return None

    def start(self, make: Callable[[], ProcessSet]) -> None:
        """Put the next candidate's set together in the background (rendering its scripts and starting its
        processes took ~0.1 s of the evaluation that asked for it). A set that cannot be made is simply
        not there: the next evaluation starts its own and says why if that fails too."""

        def start() -> None:
            try:
                self.put(make())
            except Exception:  # noqa: BLE001 - see the docstring
                pass

        thread = threading.Thread(target=start, name="kernelevolve-warm-set", daemon=True)
        with self._lock:
            self._starting = [t for t in self._starting if t.is_alive()] + [thread]
        thread.start()

    def put(self, processes: ProcessSet) -> None:
        with self._lock:
            self.sets.setdefault(processes.key, []).append(processes)

    def close(self) -> None:
        """Stop every waiting set (they would otherwise wait for a candidate until they time out)."""
        for thread in list(self._starting):
            thread.join(timeout=60)
        with self._lock:
            sets = [p for waiting in self.sets.values() for p in waiting]
            self.sets.clear()
        # A process still importing sees its stop only once it waits: stop them all at once.
        stopping = [threading.Thread(target=p.discard, daemon=True) for p in sets]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join(timeout=60)


class MemoryNeeds:
    """GPU memory an evaluation of one (spec, shapes) was seen to hold, on any GPU of the evaluator alike."""

    def __init__(self) -> None:
        self.needs: dict[tuple, int] = {}  # by set_key without the slot
        self._in_sequence: set[tuple] = set()

    def of(self, processes: ProcessSet) -> int | None:
        return self.needs.get(processes.key[:-1])

    def in_sequence(self, processes: ProcessSet) -> bool:
        """Whether evaluations of this (spec, shapes) prepare their timing only after their check: one ran
        out of GPU memory with its check and its timing's preparation side by side."""
        return processes.key[:-1] in self._in_sequence

    def one_phase_at_a_time(self, processes: ProcessSet) -> None:
        self._in_sequence.add(processes.key[:-1])

    def learn(self, processes: ProcessSet) -> None:
        """What an evaluation of this (spec, shapes) holds on a GPU: its check's references (as its judge,
        which never imports the candidate, reported them prepared; the candidate's outputs and copies come on
        top, hence the margin) and its prepared timing and baseline processes, plus room for the largest
        transient peak among them. The largest seen counts."""
        runs = [processes.judge, processes.timing]
        runs += [processes.baselines.run] if processes.baselines.run is not None else []
        held = [r.prepared_bytes for r in runs]
        peaks = [r.peak_bytes for r in runs]
        need = int(MEMORY_MARGIN * sum(held) + max(max(p - h, 0) for p, h in zip(peaks, held)))
        key = processes.key[:-1]
        if need > 0:
            self.needs[key] = max(need, self.needs.get(key, 0))


def set_key(spec: Spec, cases: list[Case], slot: str) -> tuple:
    """What a set of processes was started for: a warm set serves only the same spec, shapes and GPU."""
    return (spec.fingerprint, str(spec.reference), json.dumps([(c.label, c.params, c.dtype) for c in cases]), slot)


def host_share(evaluations: int) -> int:
    """Host memory one GPU evaluation's candidate processes may hold together: 60% of the host's memory
    shared by the evaluations in flight, at least 8 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        total = 64 << 30
    return max(8 << 30, int(0.6 * total / max(1, evaluations)))


def usable_memory(gpu: int) -> int | None:
    """What evaluations may hold on a GPU together: most of it (CUDA contexts and fragmentation take the rest)."""
    try:
        import torch

        return int(0.85 * torch.cuda.get_device_properties(gpu).total_memory)
    except Exception:  # no way to know: evaluations go on one at a time
        return None
