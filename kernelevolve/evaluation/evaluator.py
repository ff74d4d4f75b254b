"""Turn one candidate into one EvalResult: a static screen, correctness in a sandbox, then (cuda)
the baseline (in a process of its own, cached) and the candidate's timing, then plausibility marks.

Thread-safe: the search engine calls `evaluate` from several threads. On cuda each GPU takes
`per_gpu` evaluations at once: their checks overlap, their timed phases take the GPU alone
(gpu_gate.GpuGate). Every candidate gets fresh sandboxed processes, but they are started before
it exists (`warm`): a set of processes for the next candidate starts as soon as one is handed
out, and does its imports while the GPU works on others.

This module orders an evaluation's phases and makes its processes (processes.py's); what decides the
verdict from their reports is verdict.py's; the places, the GPUs' gates, the warm sets and the memory
an evaluation needs are scheduling.py's.
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import shutil
import tempfile
import time
import weakref
from contextlib import nullcontext
from pathlib import Path

from kernelevolve import paths
from kernelevolve.evaluation import plausibility, static_cost, verdict
from kernelevolve.evaluation.baselines import BaselineStore, MemoryBaselineStore
from kernelevolve.evaluation.executors import EvaluationKind, EvaluationRequest, Executor
from kernelevolve.evaluation.outside_clock import OutsideClock
from kernelevolve.evaluation.processes import (
    OUTSIDE_LOOPS,
    BaselineJob,
    ProcessSet,
    WaitingRun,
    outside_calls,
    outside_names,
)
from kernelevolve.evaluation.sandbox import Limits, Outcome, clean_environment
from kernelevolve.evaluation.scheduling import (
    MEMORY_MARGIN,
    MemoryNeeds,
    Places,
    WarmSets,
    WorkerReport,
    host_share,
    set_key,
)
from kernelevolve.evaluation.scheduling import usable_memory as _usable_memory
from kernelevolve.harness.runtime import configs
from kernelevolve.evaluation.verdict import (
    JUDGES,
    OUTSIDE_FLOOR_MS,
    OUTSIDE_MARGIN,
    OUTSIDE_NOISE_MS,
    PADDING_KEPT,
    PADDING_MS,
)
from kernelevolve.records.result import EvalResult, Failure
from kernelevolve.spec import Case, Spec, ShapeValue

DEVICES = ("cuda", "interpret")
WARM_WAIT_S = 900.0  # how long a warm process waits for a candidate before it leaves
PREPARE_S = 300.0  # the least time a process has to start and prepare before its go
# Named here too for code written against this module (the verdict's figures, the schedule's margin).
__all__ = [
    "DEVICES",
    "JUDGES",
    "MEMORY_MARGIN",
    "OUTSIDE_FLOOR_MS",
    "OUTSIDE_MARGIN",
    "OUTSIDE_NOISE_MS",
    "PADDING_KEPT",
    "PADDING_MS",
    "PREPARE_S",
    "WARM_WAIT_S",
    "Evaluator",
    "WorkerReport",
]


class Evaluator(Executor):
    """The local executor: evaluations in sandboxed processes of this host, on its GPUs or the interpreter."""

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
        self.places = Places(device, gpus, per_gpu, memory_of=_usable_memory)
        self.gates = self.places.gates
        self.parallelism = self.places.parallelism
        self.gpu_count = max(1, len(self.gates))
        # On the GPU the next candidate's processes start early; on the CPU they would compete with
        # the interpreter for the same cores, so only on request.
        self.warm = device == "cuda" if warm is None else warm
        self.warm_sets = WarmSets()
        self._warm_sets = self.warm_sets.sets  # the sets waiting now, by set_key (tests look at them)
        self.memory = MemoryNeeds()
        self._memory_need = self.memory.needs  # as bench/framework/throughput.py reads it
        # Address-space limits break CUDA (it reserves huge virtual ranges): CPU only. The resident memory
        # of all of a candidate's processes together is watched from outside on both (sandbox.Limits).
        self.max_memory_bytes = max_memory_bytes if device == "interpret" else None
        self.max_total_rss_bytes = max_memory_bytes if device == "interpret" else host_share(self.parallelism)
        _LIVE.add(self)

    # ------------------------------------------------------------------------------------
    def evaluate(
        self, spec: Spec, source: str, shapes: list[dict[str, ShapeValue]] | None = None, *, deep: bool = False
    ) -> EvalResult:
        """`run` for code that has no request at hand (tests, benchmarks): `deep` evaluates as
        `kernelevolve eval` does (EvaluationKind.FILE), else as a node's first evaluation."""
        kind = EvaluationKind.FILE if deep else EvaluationKind.FIRST
        return self.run(EvaluationRequest(spec, source, shapes, kind=kind))

    def run(self, request: EvaluationRequest) -> EvalResult:
        """Screen, check and (cuda) time one candidate. A deep request (a recheck, `kernelevolve eval`) adds
        a profiled call on the GPU (where its kernels ran and how much GPU time was Triton's): seconds more."""
        start = time.monotonic()
        spec, source, deep, node = request.spec, request.source, request.deep, request.node_id
        cases = request.cases(self.device)
        refused = verdict.refusal(spec, source, self.device, cases, self._knowledge_base() if self.screen else None)
        if refused is not None:
            return self._finish(refused, start)
        slot, place = self.places.take()
        self.places.tell(place, slot, "evaluating", node)
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
                self.warm_sets.start(lambda: self._start_set(spec, cases, slot, warm=True))
            result = self._judge(processes, spec, source, cases, deep, node)
            if slot in self.gates and verdict.out_of_memory(result) and not self.memory.in_sequence(processes):
                # Others on its GPU, or its own processes side by side, held the memory it lacked: judged
                # again alone on the GPU, one phase after the other (and so are later evaluations of these
                # shapes: KernelBench's 4096 x 393216 softmaxes take 6.4 GB an input).
                self.memory.one_phase_at_a_time(processes)
                processes.discard(keep=self.keep_workdirs)
                processes = self._start_set(spec, cases, slot, warm=False)
                processes.place = place
                first = result.message
                result = self._judge(processes, spec, source, cases, deep, node, alone=True)
                result.scheduling.judged_alone_after = first
            if probe is not None:
                probe.finish(result)
                probe = None
            return self._finish(result, start)
        finally:
            if probe is not None:
                probe.stop()
            self.places.give_back(slot, place)
            if processes is not None:
                processes.discard(keep=self.keep_workdirs)

    @property
    def report(self) -> WorkerReport | None:
        """Who evaluates what, for `kernelevolve workers`: set by whoever keeps the registry (a search)."""
        return self.places.report

    @report.setter
    def report(self, value: WorkerReport | None) -> None:
        self.places.report = value

    def gpu(self):
        """One GPU to oneself (a profiler's run): its slot, and no check or timing beside it."""
        return self.places.alone()

    def close(self) -> None:
        """Stop the warm processes (they would otherwise wait for a candidate until they time out). The
        evaluator stays usable: the next evaluation starts afresh."""
        self.warm_sets.close()
        self.places.close()
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
    def _take(self, spec: Spec, cases: list[Case], slot: str) -> ProcessSet:
        """A warm set for this spec, shapes and GPU whose processes are still waiting, else a new one."""
        return self.warm_sets.take(set_key(spec, cases, slot)) or self._start_set(spec, cases, slot, warm=False)

    def _start_set(self, spec: Spec, cases: list[Case], slot: str, warm: bool) -> ProcessSet:
        workdir = Path(tempfile.mkdtemp(prefix="kernelevolve-eval-", dir=self.scratch_root))
        shutil.copy(spec.reference, workdir / "reference.py")
        seed = secrets.randbits(30)
        # Each sandboxed process writes only its own folder (its result file included): none can touch
        # the candidate, the reference or another process's signals in `workdir`. The candidate file is
        # written at its go, before which these processes run nothing of it.
        harness_cases = tuple(configs.Case(c.label, dict(c.params), c.dtype) for c in cases)
        candidate, reference = str(workdir / "candidate.py"), str(workdir / "reference.py")
        # Candidates may import the knowledge base's shared launch helpers (_launch_heuristics).
        import_paths = (str(self._knowledge_base() / "kernels"),)
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
        check_config = configs.CorrectnessConfig(
            device=self.device,
            candidate_path=candidate,
            reference_path=reference,
            outputs_dir=str(workdir / "check" / "outputs"),
            cases=harness_cases,
            trials=self.trials,
            seed=seed,
            allow_torch_ops=tuple(spec.allow_torch_ops),
            inplace=spec.inplace,
            import_paths=import_paths,
        )
        check = WaitingRun.of(check_config, workdir / "check", limits, env, waiting_s)

        def judge(mode: str, outputs_dir: str, folder: str, secret: bytes | None = None) -> WaitingRun:
            config = configs.JudgeConfig(
                device=self.device,
                mode=mode,
                reference_path=reference,
                outputs_dir=outputs_dir,
                cases=harness_cases,
                tolerances={d: configs.Tolerance(**spec.tolerance(d).model_dump()) for d in spec.dtypes},
                trials=self.trials,
                seed=seed,
            )
            return WaitingRun.of(
                config,
                workdir / folder,
                trusted_limits,
                trusted_env,
                waiting_s,
                prepare=True,
                secret=secret,
            )

        check_judge = judge("check", check_config.outputs_dir, "judge")
        baselines = timing = timed_judge = None
        # The outside-timed loops' seeds, drawn now: the timed judge learns them on its stdin (no file a
        # candidate's process could read) and computes its checks of the loops while preparing; the
        # candidate's process learns each one only when its loop is released.
        loop_seeds = {}
        if self.device == "cuda":
            loop_seeds = {name: secrets.randbits(40) for name in outside_names(len(cases))}
            bench = configs.BenchmarkConfig(
                device=self.device,
                mode="candidate",
                candidate_path=candidate,
                reference_path=reference,
                outputs_dir=str(workdir / "bench" / "outputs"),
                cases=harness_cases,
                seed=seed,
                baseline=spec.baseline,
                warmup_ms=self.warmup_ms,
                rep_ms=self.rep_ms,
                allow_torch_ops=tuple(spec.allow_torch_ops),
                import_paths=import_paths,
            )
            baselines = BaselineJob(self.baselines, spec, bench, workdir, slot, trusted_env, trusted_limits, waiting_s)
            timing = WaitingRun.of(bench, workdir / "bench", limits, env, waiting_s, prepare=True)
            timed_judge = judge("timed", bench.outputs_dir, "judge-timed", json.dumps(loop_seeds).encode())
        return ProcessSet(
            set_key(spec, cases, slot),
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
        self,
        processes: ProcessSet,
        spec: Spec,
        source: str,
        cases: list[Case],
        deep: bool,
        node_id: int | None,
        alone: bool = False,
    ) -> EvalResult:
        workdir, slot = processes.workdir, processes.slot
        (workdir / "candidate.py").write_text(source)
        result = verdict.unjudged(self.device, cases)
        result.diagnostics.seed = processes.seed
        gate = self.gates.get(slot)
        if gate is None:
            return self._judge_on(processes, None, spec, result, cases, deep, node_id)
        need = None if alone else self.memory.of(processes)
        with gate.resident(need):  # None: the whole GPU
            return self._judge_on(processes, gate, spec, result, cases, deep, node_id)

    def _judge_on(
        self,
        processes: ProcessSet,
        gate,
        spec: Spec,
        result: EvalResult,
        cases: list[Case],
        deep: bool,
        node_id: int | None,
    ) -> EvalResult:
        timing, baselines = processes.timing, processes.baselines
        judge, timed_judge = processes.judge, processes.timed_judge
        # The shared phase: the candidate runs while the judge computes the reference and its timing
        # process (and the baseline's, if the cache lacks it) prepares; other candidates' checks may run on
        # this GPU too.
        in_sequence = self.memory.in_sequence(processes)  # the timing prepares after the check, not beside it

        def prepare_timing() -> None:
            timing.prepare()
            baselines.prepare()
            # A loop's call count follows from the baseline: where it is cached, the timing judge computes
            # its checks of the loops now, beside the candidate's checks, not after the timing.
            labels = [s.label for s in result.shapes]
            known = {str(n): outside_calls(baselines.found[x]) for n, x in enumerate(labels) if x in baselines.found}
            timed_judge.prepare({"outside_calls": known})

        with gate.shared() if gate is not None else nullcontext():
            judge.prepare()
            if timing is not None and not in_sequence:
                prepare_timing()
            began = time.monotonic()
            outcome = processes.check.go()
            self._absorb(result, outcome, "correctness")
            if result.failure is None:  # the verdict: the judge's, from the outputs handed over
                self._absorb(result, judge.go(trusted=True), "judge")
                verdict.checked(result)
            else:
                judge.stop()
            result.phases_s["correctness"] = time.monotonic() - began
            if timing is not None and in_sequence:
                result.scheduling.phases_in_sequence = True
                prepare_timing()
            if timing is not None:  # no GPU preparation may run on into the timed phase
                baselines.wait_prepared()
                timing.wait_prepared()
                timed_judge.wait_prepared()
                self.memory.learn(processes)
                # what its check's judge held on the GPU (reported before any candidate code ran), as planned with
                result.scheduling.gpu_prepared_bytes = judge.prepared_bytes or None
                result.scheduling.gpu_peak_bytes = judge.peak_bytes or None
                if not result.correct:
                    timing.stop()
                    timed_judge.stop()
        if timing is None:
            return result
        # The timed phase: the GPU alone. A baseline is timed even for a failed candidate: the next
        # one will need it.
        with gate.exclusive():
            self.places.tell(processes.place, processes.slot, "timing", node_id)
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
            verdict.fail(result, Failure.TIMING, "the candidate's process never finished the outside-timed loops", "")
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
            if result.failure is None:  # with this module's OUTSIDE_MARGIN and PADDING_MS, read at each call
                verdict.bound_latencies(
                    result, loops, baseline_ms, baselines.slopes, margin=OUTSIDE_MARGIN, padding_ms=PADDING_MS
                )
        else:
            timed_judge.stop()
        verdict.settle(result, spec, cases, baseline_ms, self.speedup_bound)
        return result

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
        """verdict.absorb, with this evaluator's limits for its messages."""
        verdict.absorb(result, outcome, phase, timeout_s=self.timeout_s, memory_limit_bytes=self.max_total_rss_bytes)


# Warm sets live while their evaluator does: on exit they are stopped, not left waiting.
_LIVE: "weakref.WeakSet[Evaluator]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for evaluator in list(_LIVE):
        evaluator.close()
