"""Turn one candidate into one EvalResult: a static screen, correctness in a sandbox, then (cuda)
the baseline (in a process of its own, cached) and the candidate's timing, then plausibility marks.

Thread-safe: the search engine calls `evaluate` from several threads. On cuda each GPU takes
`per_gpu` evaluations at once: their checks overlap, their timed phases take the GPU alone
(gpu_gate.GpuGate). Every candidate gets fresh sandboxed processes, but they are started before
it exists (`warm`): a set of processes for the next candidate starts as soon as one is handed
out, and does its imports while the GPU works on others.
The processes themselves are processes.py's; this module decides when each may use the GPU.
"""

from __future__ import annotations

import ast
import atexit
import json
import os
import queue
import secrets
import shutil
import tempfile
import threading
import time
import weakref
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Protocol

from kernelevolve import languages
from kernelevolve.evaluation import plausibility, static_cost
from kernelevolve.evaluation.baselines import BaselineStore, MemoryBaselineStore
from kernelevolve.evaluation.executors import current_node
from kernelevolve.evaluation.gpu_gate import GpuGate
from kernelevolve.evaluation.outside_clock import OutsideClock
from kernelevolve.evaluation.processes import (
    OUTSIDE_LOOPS,
    OUTSIDE_PAD_MS,
    BaselineJob,
    ProcessSet,
    WaitingRun,
    held_bytes,
    fastest_loop,
    outside_calls,
    outside_names,
)
from kernelevolve.records.result import EvalResult, Failure, ShapeResult
from kernelevolve.evaluation.sandbox import Limits, Outcome, clean_environment
from kernelevolve.harness.runtime.screen import screen_source
from kernelevolve import paths
from kernelevolve.spec import Case, Spec, ShapeValue

DEVICES = ("cuda", "interpret")
JUDGES = ("judge", "timed judge")  # the phases whose processes never import the candidate
# A candidate's own median may sit this far (relative, plus an absolute floor) below the outside-timed
# bound before the bound replaces it: the loops' noise on an H200 (measured: see README).
# The outside bound replaces a latency only when it is more than this far above it: on the H200 the
# bound of an honest kernel came within -15%..+27% of its own median (loops of ~30 calls, ~1 ms of wall
# noise a loop); a median forged to a quarter came out 4.8x below its bound.
OUTSIDE_MARGIN = 0.5
OUTSIDE_FLOOR_MS = 0.01
OUTSIDE_NOISE_MS = 1.0  # wall-clock noise of one loop, spread over its calls
PADDING_KEPT = 0.8  # a candidate's outside loop takes at least this share of the padding a call
PADDING_MS = OUTSIDE_PAD_MS
WARM_WAIT_S = 900.0  # how long a warm process waits for a candidate before it leaves
PREPARE_S = 300.0  # the least time a process has to start and prepare before its go
# A check's references plus the candidate's outputs, input copies and workspace, and a timing process's
# timed outputs. An evaluation that still runs out of memory beside others is judged again alone.
MEMORY_MARGIN = 1.25


class Evaluator:
    def __init__(
        self,
        device: str = "interpret",
        gpus: list[int] | None = None,
        timeout_s: float = 300.0,
        baseline_store: BaselineStore | None = None,
        trials: int = 3,
        warmup_ms: float = 25.0,
        rep_ms: float = 100.0,
        keep_workdirs: bool = False,
        scratch_root: Path | None = None,
        max_memory_bytes: int | None = 16 << 30,
        screen: bool = True,
        speedup_bound: float = plausibility.SPEEDUP_BOUND,
        per_gpu: int | None = None,
        warm: bool | None = None,
        knowledge_base: Path | str | None = None,
    ):
        if device not in DEVICES:
            raise ValueError(f"device must be one of {DEVICES}, not {device!r}")
        self.device = device
        self.timeout_s = timeout_s
        self.trials = trials
        self.warmup_ms, self.rep_ms = warmup_ms, rep_ms
        self.keep_workdirs = keep_workdirs
        self.scratch_root = scratch_root  # where per-candidate scratch folders go (default: TMPDIR)
        self.baselines = baseline_store if baseline_store is not None else MemoryBaselineStore()
        self.screen = screen  # the static tampering screen; off only to test the sandbox behind it
        self.speedup_bound = speedup_bound
        # The run's knowledge base: candidates are screened against and may import its kernels/ helpers.
        # None: the process's (--kb, $KERNELEVOLVE_KB, else the bundled one), read when an evaluation starts.
        self.knowledge_base = None if knowledge_base is None else Path(knowledge_base)
        cores = os.cpu_count() or 2
        self.gates: dict[str, GpuGate] = {}
        if device == "cuda":
            if gpus is None:
                import torch

                gpus = list(range(torch.cuda.device_count()))
            if not gpus:
                raise RuntimeError("--device cuda: no CUDA GPU is visible")
            self.gates = {str(g): GpuGate(memory_bytes=_usable_memory(g)) for g in gpus}
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
        self._waiting = 0
        # On the GPU the next candidate's processes start early; on the CPU they would compete with
        # the interpreter for the same cores, so only on request.
        self.warm = device == "cuda" if warm is None else warm
        self._warm_sets: dict[tuple, list[ProcessSet]] = {}
        self._warm_lock = threading.Lock()
        self._starting: list[threading.Thread] = []  # warm sets being put together
        self._memory_need: dict[tuple, int] = {}  # GPU memory an evaluation of (spec, shapes) was seen to hold
        # Address-space limits break CUDA (it reserves huge virtual ranges): CPU only. The resident memory
        # of all of a candidate's processes together is watched from outside on both (sandbox.Limits).
        self.max_memory_bytes = max_memory_bytes if device == "interpret" else None
        self.max_total_rss_bytes = max_memory_bytes if device == "interpret" else _host_share(self.parallelism)
        _LIVE.add(self)

    # ------------------------------------------------------------------------------------
    def evaluate(
        self, spec: Spec, source: str, shapes: list[dict[str, ShapeValue]] | None = None, *, deep: bool = False
    ) -> EvalResult:
        """Screen, check and (cuda) time one candidate. `deep` adds a profiled call on the GPU (where its
        kernels ran and how much GPU time was Triton's): seconds more, so a search spends it on the
        re-evaluation of a new best, and `kernelevolve eval` always."""
        start = time.monotonic()
        cases = spec.cases(self.device, shapes)
        try:
            ast.parse(source)
        except SyntaxError as e:
            return self._finish(
                EvalResult.failed(
                    Failure.SYNTAX, f"line {e.lineno}: {e.msg}", device=self.device, shapes=[_shape(c) for c in cases]
                ),
                start,
            )
        lang = languages.gate(source, spec.languages, self.device)  # kernel language: allowed, runnable here
        if lang.failure is not None:
            return self._finish(
                EvalResult.failed(lang.failure, lang.message, device=self.device, shapes=[_shape(c) for c in cases]),
                start,
            )
        problems = screen_source(source, self._knowledge_base()) if self.screen else []
        if problems:
            more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
            return self._finish(
                EvalResult.failed(
                    Failure.TAMPERING,
                    f"the candidate tampers with its evaluation: {'; '.join(problems[:3])}{more}",
                    log="\n".join(problems),
                    device=self.device,
                    shapes=[_shape(c) for c in cases],
                ),
                start,
            )
        self._waiting += 1
        slot, place = self._slots.get(), self._places.get()
        self._waiting -= 1
        node = current_node()
        self._report(place, slot, "evaluating", node)
        processes = None
        # hook: a static cost estimate to rank untimed candidates by (evaluation/static_cost.py)
        probe = None
        if self.device == "interpret":
            probe = static_cost.start(
                spec, source, cases, self.timeout_s, self.scratch_root, knowledge_base=self._knowledge_base()
            )
        try:
            processes = self._take(spec, cases, slot)
            processes.place = place
            if self.warm:  # the next candidate's processes start now, while this one is judged
                self._start_warm(spec, cases, slot)
            result = self._judge(processes, spec, source, cases, deep)
            if slot in self.gates and _out_of_memory(result):
                # Others on its GPU may have held the memory it lacked: judged again, alone on the GPU.
                processes.discard(keep=self.keep_workdirs)
                processes = self._start_set(spec, cases, slot, warm=False)
                processes.place = place
                first = result.message
                result = self._judge(processes, spec, source, cases, deep, alone=True)
                result.environment["judged_alone_after"] = first
            if probe is not None:
                probe.finish(result)
                probe = None
            return self._finish(result, start)
        finally:
            if probe is not None:
                probe.stop()
            self._report(place, slot, "idle", None)
            self._places.put(place)
            self._slots.put(slot)
            if processes is not None:
                processes.discard(keep=self.keep_workdirs)

    def _report(self, place: int, slot: str, state: str, node_id: int | None) -> None:
        if self.report is not None:
            self.report(place, slot or "cpu", state, node_id, self._waiting)

    @contextmanager
    def gpu(self):
        """One GPU to oneself (a profiler's run): its slot, and no check or timing beside it."""
        slot = self._slots.get()
        try:
            with self.gates[slot].exclusive() if slot in self.gates else nullcontext():
                yield slot
        finally:
            self._slots.put(slot)

    def close(self) -> None:
        """Stop the warm processes (they would otherwise wait for a candidate until they time out). The
        evaluator stays usable: the next evaluation starts afresh."""
        for thread in list(self._starting):
            thread.join(timeout=60)
        with self._warm_lock:
            sets = [p for waiting in self._warm_sets.values() for p in waiting]
            self._warm_sets.clear()
        # A process still importing sees its stop only once it waits: stop them all at once.
        stopping = [threading.Thread(target=p.discard, daemon=True) for p in sets]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join(timeout=60)
        if self.report is not None:
            self.report.close()
        _LIVE.discard(self)

    def _knowledge_base(self) -> Path:
        return self.knowledge_base or paths.knowledge_base()

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _finish(self, result: EvalResult, start: float) -> EvalResult:
        result.duration_s = time.monotonic() - start
        return result

    # -- the processes of one candidate -----------------------------------------------------
    def _take(self, spec: Spec, cases: list[Case], slot: str) -> "ProcessSet":
        """A warm set for this spec, shapes and GPU whose processes are still waiting, else a new one."""
        key = _set_key(spec, cases, slot)
        with self._warm_lock:
            waiting = self._warm_sets.get(key, [])
            while waiting:
                processes = waiting.pop(0)
                if processes.usable():
                    return processes
                stale = processes
                threading.Thread(target=stale.discard, kwargs={"keep": False}, daemon=True).start()
        return self._start_set(spec, cases, slot, warm=False)

    def _start_warm(self, spec: Spec, cases: list[Case], slot: str) -> None:
        """Put the next candidate's set together in the background (rendering its scripts and starting its
        processes took ~0.1 s of the evaluation that asked for it). A set that cannot be made is simply
        not there: the next evaluation starts its own and says why if that fails too."""

        def start() -> None:
            try:
                self._put_warm(self._start_set(spec, cases, slot, warm=True))
            except Exception:  # noqa: BLE001 - see the docstring
                pass

        thread = threading.Thread(target=start, name="kernelevolve-warm-set", daemon=True)
        with self._warm_lock:
            self._starting = [t for t in self._starting if t.is_alive()] + [thread]
        thread.start()

    def _put_warm(self, processes: "ProcessSet") -> None:
        with self._warm_lock:
            self._warm_sets.setdefault(processes.key, []).append(processes)

    def _start_set(self, spec: Spec, cases: list[Case], slot: str, warm: bool) -> "ProcessSet":
        workdir = Path(tempfile.mkdtemp(prefix="kernelevolve-eval-", dir=self.scratch_root))
        shutil.copy(spec.reference, workdir / "reference.py")
        seed = secrets.randbits(30)
        # Each sandboxed process writes only its own folder (its result file included): none can touch
        # the candidate, the reference or another process's signals in `workdir`. The candidate file is
        # written at its go, before which these processes run nothing of it.
        config = {
            "device": self.device,
            "candidate_path": str(workdir / "candidate.py"),
            "reference_path": str(workdir / "reference.py"),
            "result_path": str(workdir / "check" / "result.json"),
            "cases": [{"label": c.label, "params": c.params, "dtype": c.dtype} for c in cases],
            "tolerances": {d: spec.tolerance(d).model_dump() for d in spec.dtypes},
            "trials": self.trials,
            "seed": seed,
            "allow_torch_ops": list(spec.allow_torch_ops),
            "inplace": spec.inplace,
            # Candidates may import the knowledge base's shared launch helpers (_launch_heuristics).
            "import_paths": [str(self._knowledge_base() / "kernels")],
        }
        env = self._environment(workdir, slot, trusted=False)
        limits = Limits(
            timeout_s=self.timeout_s,
            max_memory_bytes=self.max_memory_bytes,
            max_total_rss_bytes=self.max_total_rss_bytes,
            writable=[workdir / "cache"],
        )
        # The judges run no candidate code: their own compile caches, their own folders, and the
        # candidate's outputs read from where its process handed them over.
        trusted_env = self._environment(workdir, slot, trusted=True)
        trusted_limits = Limits(
            timeout_s=self.timeout_s, max_memory_bytes=self.max_memory_bytes, writable=[workdir / "baseline-cache"]
        )
        # A warm set may wait long for its candidate (a model thinking); a stale one is replaced.
        # Preparing runs no candidate code: a busy machine may take its time (the timeout counts from the go).
        waiting_s = WARM_WAIT_S if warm else max(2 * self.timeout_s, PREPARE_S)
        check_config = dict(config, outputs_dir=str(workdir / "check" / "outputs"))
        check = WaitingRun.of("correctness", check_config, workdir / "check", limits, env, waiting_s)

        def judge(mode: str, config: dict, folder: str, secret: bytes | None = None) -> WaitingRun:
            return WaitingRun.of(
                "judge",
                dict(config, mode=mode),
                workdir / folder,
                trusted_limits,
                trusted_env,
                waiting_s,
                prepare=True,
                secret=secret,
            )

        check_judge = judge("check", check_config, "judge")
        baselines = timing = timed_judge = None
        # The outside-timed loops' seeds, drawn now: the timed judge learns them on its stdin (no file a
        # candidate's process could read) and computes its checks of the loops while preparing; the
        # candidate's process learns each one only when its loop is released.
        loop_seeds = {}
        if self.device == "cuda":
            loop_seeds = {name: secrets.randbits(40) for name in outside_names(len(cases))}
            bench = dict(config, mode="candidate", baseline=spec.baseline, warmup_ms=self.warmup_ms, rep_ms=self.rep_ms)
            bench["outputs_dir"] = str(workdir / "bench" / "outputs")
            baselines = BaselineJob(self.baselines, spec, bench, workdir, slot, trusted_env, trusted_limits, waiting_s)
            timing = WaitingRun.of("benchmark", bench, workdir / "bench", limits, env, waiting_s, prepare=True)
            timed_judge = judge("timed", bench, "judge-timed", json.dumps(loop_seeds).encode())
        return ProcessSet(
            _set_key(spec, cases, slot),
            workdir,
            slot,
            seed,
            check,
            baselines,
            timing,
            waiting_s,
            check_judge,
            timed_judge,
            loop_seeds,
        )

    def _judge(
        self, processes: "ProcessSet", spec: Spec, source: str, cases: list[Case], deep: bool, alone: bool = False
    ) -> EvalResult:
        workdir, slot = processes.workdir, processes.slot
        (workdir / "candidate.py").write_text(source)
        result = EvalResult(correct=False, device=self.device, shapes=[_shape(c) for c in cases])
        result.environment["seed"] = processes.seed
        result.environment["baselines_cached"] = sorted(processes.baselines.found) if processes.baselines else []
        gate = self.gates.get(slot)
        if gate is None:
            return self._judge_on(processes, None, spec, result, cases, deep)
        need = None if alone else self._memory_need.get(processes.key[:-1])  # any GPU of the evaluator alike
        with gate.resident(need):  # None: the whole GPU
            return self._judge_on(processes, gate, spec, result, cases, deep)

    def _judge_on(
        self, processes: "ProcessSet", gate, spec: Spec, result: EvalResult, cases: list[Case], deep: bool
    ) -> EvalResult:
        timing, baselines = processes.timing, processes.baselines
        judge, timed_judge = processes.judge, processes.timed_judge
        # The shared phase: the candidate runs while the judge computes the reference and its timing
        # process (and the baseline's, if the cache lacks it) prepares; other candidates' checks may run on
        # this GPU too.
        with gate.shared() if gate is not None else nullcontext():
            judge.prepare()
            if timing is not None:
                timing.prepare()
                baselines.prepare()
                # A loop's call count follows from the baseline: where it is cached, the timing judge computes
                # its checks of the loops now, beside the candidate's checks, not after the timing.
                labels = [s.label for s in result.shapes]
                known = {
                    str(n): outside_calls(baselines.found[x]) for n, x in enumerate(labels) if x in baselines.found
                }
                timed_judge.prepare({"outside_calls": known})
            began = time.monotonic()
            outcome = processes.check.go()
            self._absorb(result, outcome, "correctness")
            if result.failure is None:  # the verdict: the judge's, from the outputs handed over
                self._absorb(result, judge.go(trusted=True), "judge")
                result.correct = result.failure is None and all(s.correct for s in result.shapes)
            else:
                judge.stop()
            result.phases_s["correctness"] = time.monotonic() - began
            if timing is not None:  # no GPU preparation may run on into the timed phase
                baselines.wait_prepared()
                timing.wait_prepared()
                timed_judge.wait_prepared()
                self._learn_memory(processes, result.environment)
                if not result.correct:
                    timing.stop()
                    timed_judge.stop()
        if timing is None:
            return result
        # The timed phase: the GPU alone. A baseline is timed even for a failed candidate: the next
        # one will need it.
        with gate.exclusive():
            self._report(processes.place, processes.slot, "timing", current_node())
            baseline_ms = baselines.finish(result)
            if not result.correct:
                return result
            labels = [s.label for s in result.shapes]

            def plan(name: str, _ready: str) -> dict:  # the candidate's own estimate is not asked for
                n = int(name[1:].split(".")[0])
                return {"seed": processes.loop_seeds[name], "calls": outside_calls(baseline_ms.get(labels[n]))}

            clock = OutsideClock(timing.folder, outside_names(len(labels)), plan, alive=timing.running)
            outcome = timing.go({"profile": deep})
            loops = clock.join()
            result.phases_s["benchmark"] = timing.after_go_s
        self._absorb(result, outcome, "benchmark")
        if result.failure is None and len(loops) < len(labels) * OUTSIDE_LOOPS:
            self._fail(result, Failure.TIMING, "the candidate's process never finished the outside-timed loops", "")
        if result.failure is None:  # the timed calls' outputs and loops, judged where the candidate cannot reach
            began = time.monotonic()
            outside = {
                name: {
                    "seed": loop.payload["seed"],
                    "calls": loop.payload["calls"],
                    "sums": loop.reported.get("sums"),
                }
                for name, loop in loops.items()
            }
            self._absorb(result, timed_judge.go({"outside": outside}, trusted=True), "timed judge")
            result.phases_s["timed judge"] = time.monotonic() - began
            if result.failure is None:
                self._bound_latencies(result, loops, baseline_ms, baselines.slopes)
        else:
            timed_judge.stop()
        for shape in result.shapes:
            shape.baseline_ms = baseline_ms.get(shape.label)
            shape.baseline_cached = shape.label in result.environment.get("baselines_cached", [])
        if result.failure is None:
            result.timed = all(s.latency_ms is not None and s.baseline_ms is not None for s in result.shapes)
            if not result.timed and result.environment.get("baseline_error"):  # correct, but no speedup to give
                result.message = "not timed: " + result.environment["baseline_error"]
        for shape, case in zip(result.shapes, cases):
            nbytes, flops = spec.roofline(case)
            if shape.latency_ms:
                shape.gbps = nbytes / shape.latency_ms / 1e6 if nbytes else None
                shape.tflops = flops / shape.latency_ms / 1e9 if flops else None
        reason = plausibility.suspicious(result, spec.hardware, self.speedup_bound)
        if reason:
            result.marks["suspicious"] = reason
        return result

    @staticmethod
    def _bound_latencies(result: EvalResult, loops: dict, baseline_ms: dict, baseline_walls: dict) -> None:
        """The latency the fitness uses is at least what the outside-timed loops imply: the baseline's
        latency plus the difference of the two loops' wall times per call (the same calls on the same
        shapes: making inputs, flushing and accumulating cost both the same; outside.py). Where the
        candidate's own median is more than OUTSIDE_MARGIN below that, the bound is used instead and
        the result is held for review."""
        bounds = {}
        for n, shape in enumerate(result.shapes):
            loop = fastest_loop(loops, n)
            base, base_wall = baseline_ms.get(shape.label), baseline_walls.get(shape.label)
            if loop is None or base is None or base_wall is None or shape.latency_ms is None:
                continue
            calls = loop.payload["calls"]
            floor = max(base + (loop.wall_ms - base_wall) / calls, 0.0)
            bounds[shape.label] = {"own_ms": shape.latency_ms, "outside_ms": round(floor, 6), "calls": calls}
            bounds[shape.label].update(wall_ms=round(loop.wall_ms, 3), baseline_wall_ms=round(base_wall, 3))
            if floor > (1 + OUTSIDE_MARGIN) * shape.latency_ms + max(OUTSIDE_FLOOR_MS, OUTSIDE_NOISE_MS / calls):
                bounds[shape.label]["used"] = True
                result.marks.setdefault(
                    "suspicious",
                    f"{shape.label}: its process timed {shape.latency_ms:.4f} ms a call, but measured from outside "
                    f"it needs at least {floor:.4f} ms; the outside figure is used",
                )
                shape.latency_ms = floor
            # Every call is padded on the GPU (outside.PAD_CYCLES, ~PADDING_MS): a loop faster than the padding
            # skipped it. The baseline's loop shows what it takes here (no more than PADDING_MS counts: a loaded
            # host slows the baseline's loop too, never the padding).
            padding = min(base_wall / calls - base, PADDING_MS)
            if loop.wall_ms / calls < PADDING_KEPT * padding - OUTSIDE_NOISE_MS / calls:
                result.marks.setdefault(
                    "suspicious",
                    f"{shape.label}: its outside-timed loop took {loop.wall_ms / calls:.4f} ms a call, less than the "
                    f"{padding:.4f} ms its padding alone takes: the loop was not run as given",
                )
        result.environment["outside_timing"] = bounds

    def _learn_memory(self, processes: "ProcessSet", check: dict) -> None:
        """What an evaluation of this (spec, shapes) holds on a GPU: its check's references (reported
        before its candidate ran; the candidate's outputs and copies come on top, hence the margin) and its
        prepared timing and baseline processes, plus room for the largest transient peak among them.
        The largest seen counts."""
        runs = [processes.timing] + ([processes.baselines.run] if processes.baselines.run is not None else [])
        held = [held_bytes(check.get("gpu_prepared_bytes"))] + [r.prepared_bytes for r in runs]
        peaks = [held_bytes(check.get("gpu_peak_bytes"))] + [r.peak_bytes for r in runs]
        need = int(MEMORY_MARGIN * sum(held) + max(max(p - h, 0) for p, h in zip(peaks, held)))
        key = processes.key[:-1]
        if need > 0:
            self._memory_need[key] = max(need, self._memory_need.get(key, 0))

    def _environment(self, workdir: Path, slot: str, trusted: bool) -> dict[str, str]:
        """Compiler caches of this evaluation alone (Triton, inductor, the CUDA driver's), under its
        scratch folder and removed with it: nothing a candidate writes there reaches a later evaluation.
        The candidate's check and timing share theirs (its kernels compile once); the judges and the
        baseline (no candidate code) have their own, which candidates cannot write."""
        caches = workdir / ("baseline-cache" if trusted else "cache")
        caches.mkdir(parents=True, exist_ok=True)
        extra = {
            "HOME": str(workdir),
            "TMPDIR": str(workdir),
            "TRITON_CACHE_DIR": str(caches / "triton"),
            "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
            "CUDA_CACHE_PATH": str(caches / "cuda"),
            "XDG_CACHE_HOME": str(caches),
            "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 2) // self.parallelism)),
        }
        env = clean_environment(extra)
        if self.device == "cuda":
            env.pop("TRITON_INTERPRET", None)
            env["CUDA_VISIBLE_DEVICES"] = slot
        else:
            env["TRITON_INTERPRET"] = "1"
            env["CUDA_VISIBLE_DEVICES"] = ""
            # Interpreter-sized shapes are many short ops: threads only spin against each other and the
            # evaluation's other processes (a float64 1024x8 product took 9 ms on two threads of a loaded
            # 2-core machine, 0.013 ms on one).
            env["OMP_NUM_THREADS"] = "1"
        return env

    def _absorb(self, result: EvalResult, outcome: Outcome, phase: str) -> None:
        """Fold one sandboxed run into the result, classifying how it ended. What a process that ran
        candidate code says can only fail the candidate (its failure, its latencies, bounded later);
        correctness and the figures the evaluator plans with come from the judges."""
        data = outcome.result or {}
        trusted = phase in JUDGES
        environment = data.get("environment") if isinstance(data.get("environment"), dict) else {}
        if trusted:
            result.environment.update(environment)
        else:  # kept apart, for diagnosis only
            result.environment.setdefault("candidate_process", {})[phase] = {
                k: v for k, v in environment.items() if k in ("torch", "triton", "python", "gpu")
            }
        if outcome.sandbox or "sandbox" not in result.environment:  # a judge's early verdict comes without it
            result.environment["sandbox"] = outcome.sandbox
        result.environment.setdefault("stages_s", {})[phase] = data.get("stages_s", {})  # where the time went
        by_label = {s.label: s for s in result.shapes}
        for case in data.get("cases", []) if isinstance(data.get("cases"), list) else []:
            shape = by_label.get(case.get("label")) if isinstance(case, dict) else None
            if shape is None:
                continue
            if phase == "judge":
                for key in ("correct", "failure", "message", "max_abs_err", "max_rel_err"):
                    setattr(shape, key, case.get(key))
            elif phase == "correctness":
                if case.get("failure"):
                    shape.correct, shape.failure, shape.message = False, str(case["failure"]), str(case.get("message"))
            elif phase == "timed judge":
                if case.get("failure"):
                    shape.correct, shape.failure, shape.message = False, str(case["failure"]), str(case.get("message"))
            elif phase == "benchmark":
                latency = case.get("latency_ms")
                shape.latency_ms = float(latency) if isinstance(latency, (int, float)) and latency > 0 else None
        stage = data.get("stage", "start-up")
        failure = data.get("failure")
        log = "\n".join(x for x in ((failure or {}).get("traceback", ""), outcome.stderr.strip()) if x)
        if outcome.memory_exceeded:
            self._fail(
                result,
                Failure.CRASH,
                f"{phase}: its processes together held {outcome.memory_exceeded / 2**30:.1f} GiB of memory, over the "
                f"evaluation's limit of {self.max_total_rss_bytes / 2**30:.1f} GiB (during {stage}); killed",
                log,
            )
        elif outcome.timed_out:
            self._fail(
                result,
                Failure.TIMEOUT,
                f"{phase}: no result after {self.timeout_s:g}s (during {stage}); process group killed",
                log,
            )
        elif failure:
            self._fail(result, Failure.parse(failure["class"]), failure["message"], log)
        elif outcome.signal_name:
            self._fail(result, Failure.CRASH, f"{phase}: process killed by {outcome.signal_name} during {stage}", log)
        elif stage != "done":
            last = outcome.stderr.strip().splitlines()[-1:] or ["no output"]
            self._fail(
                result,
                Failure.CRASH,
                f"{phase}: process exited with status {outcome.returncode} during {stage}: {last[0][:300]}",
                log,
            )
        elif phase == "correctness":
            result.log = outcome.stderr.strip()[-2000:]
        if failure and phase in JUDGES and failure.get("class") == "tampering":
            result.log = (result.log + "\n" + outcome.stderr.strip())[-6000:]

    @staticmethod
    def _fail(result: EvalResult, failure: Failure, message: str, log: str) -> None:
        result.correct = False
        result.failure = str(failure)
        result.message = message.strip().splitlines()[0] if message.strip() else str(failure)
        result.log = log[-6000:]
        # A shape that was in flight when the process died carries the failure too.
        for shape in result.shapes:
            if shape.correct is None and failure in (Failure.TIMEOUT, Failure.CRASH):
                shape.failure = str(failure)
                break


class WorkerReport(Protocol):
    """Where an evaluator says what each of its places does (the experiment database's workers table)."""

    def __call__(self, place: int, gpu: str, state: str, node_id: int | None, queued: int) -> None: ...

    def close(self) -> None: ...


def _out_of_memory(result: EvalResult) -> bool:
    """The GPU ran out of memory in a check or timing (the reference's too: it falls back to float32 first)."""
    text = f"{result.message}\n{result.log[-3000:]}"
    return result.failure in (str(Failure.CRASH), str(Failure.RUNTIME), str(Failure.REFERENCE)) and (
        "CUDA out of memory" in text or "could not run in float64 or float32" in text
    )


def _host_share(evaluations: int) -> int:
    """Host memory one GPU evaluation's candidate processes may hold together: 60% of the host's memory
    shared by the evaluations in flight, at least 8 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        total = 64 << 30
    return max(8 << 30, int(0.6 * total / max(1, evaluations)))


def _usable_memory(gpu: int) -> int | None:
    """What evaluations may hold on a GPU together: most of it (CUDA contexts and fragmentation take the rest)."""
    try:
        import torch

        return int(0.85 * torch.cuda.get_device_properties(gpu).total_memory)
    except Exception:  # no way to know: evaluations go on one at a time
        return None


def _set_key(spec: Spec, cases: list[Case], slot: str) -> tuple:
    """What a set of processes was started for: a warm set serves only the same spec, shapes and GPU."""
    return (spec.fingerprint, str(spec.reference), json.dumps([(c.label, c.params, c.dtype) for c in cases]), slot)


# Warm sets live while their evaluator does: on exit they are stopped, not left waiting.
_LIVE: "weakref.WeakSet[Evaluator]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for evaluator in list(_LIVE):
        evaluator.close()


def _shape(case: Case) -> ShapeResult:
    return ShapeResult(label=case.label, params=dict(case.params), dtype=case.dtype)
