"""Turn one candidate into one EvalResult: a static screen, correctness in a sandbox, then (cuda)
the baseline (in a process of its own, cached) and the candidate's timing, then plausibility marks.

Thread-safe: the search engine may call `evaluate` from several threads; on cuda each call holds
one GPU (CUDA_VISIBLE_DEVICES) for its duration, so there is one worker per GPU.
"""

from __future__ import annotations

import ast
import functools
import os
import queue
import secrets
import shutil
import tempfile
import threading
import time
from pathlib import Path

from kernelevolve import languages
from kernelevolve.evaluation import plausibility
from kernelevolve.evaluation.baselines import BaselineStore, MemoryBaselineStore
from kernelevolve.evaluation.result import EvalResult, Failure, ShapeResult
from kernelevolve.evaluation.sandbox import Limits, Outcome, clean_environment, run_script
from kernelevolve.harness import render
from kernelevolve.harness.runtime.screen import screen_source
from kernelevolve.paths import KNOWLEDGE_BASE
from kernelevolve.spec import Case, Spec, ShapeValue

DEVICES = ("cuda", "interpret")


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
        if device == "cuda":
            if gpus is None:
                import torch

                gpus = list(range(torch.cuda.device_count()))
            if not gpus:
                raise RuntimeError("--device cuda: no CUDA GPU is visible")
            slots = [str(g) for g in gpus]
        else:
            # The interpreter is single-threaded numpy: one evaluation per core, at most.
            slots = [""] * max(1, (os.cpu_count() or 2) // 2)
        self._slots: queue.Queue[str] = queue.Queue()
        for s in slots:
            self._slots.put(s)
        self.parallelism = len(slots)
        # Address-space limits break CUDA (it reserves huge virtual ranges): CPU only.
        self.max_memory_bytes = max_memory_bytes if device == "interpret" else None

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
        problems = screen_source(source) if self.screen else []
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
        slot = self._slots.get()
        workdir = Path(tempfile.mkdtemp(prefix="kernelevolve-eval-", dir=self.scratch_root))
        try:
            return self._finish(self._evaluate_in(workdir, slot, spec, source, cases, deep), start)
        finally:
            self._slots.put(slot)
            if not self.keep_workdirs:
                shutil.rmtree(workdir, ignore_errors=True)

    def _finish(self, result: EvalResult, start: float) -> EvalResult:
        result.duration_s = time.monotonic() - start
        return result

    def _evaluate_in(
        self, workdir: Path, slot: str, spec: Spec, source: str, cases: list[Case], deep: bool
    ) -> EvalResult:
        (workdir / "candidate.py").write_text(source)
        shutil.copy(spec.reference, workdir / "reference.py")
        seed = secrets.randbits(30)
        # Each sandboxed process writes only its own folder (its result file included): none can touch
        # the candidate, the reference or another process's signals in `workdir`.
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
            "import_paths": [str(KNOWLEDGE_BASE / "kernels")],
        }
        env = self._environment(workdir, slot, trusted=False)
        limits = Limits(
            timeout_s=self.timeout_s,
            max_memory_bytes=self.max_memory_bytes,
            writable=[workdir / "cache"],
            per_uid_dirs={"TRITON_CACHE_DIR": _candidate_compile_cache()},
        )
        result = EvalResult(correct=False, device=self.device, shapes=[_shape(c) for c in cases])

        bench = dict(
            config, mode="candidate", profile=deep, baseline=spec.baseline, warmup_ms=self.warmup_ms, rep_ms=self.rep_ms
        )
        baselines = timing = None
        if self.device == "cuda":
            # Both processes start now and prepare (imports, inputs, the reference's outputs, compiles)
            # while the candidate is checked; each times only when told to, one after the other.
            baselines = _BaselineJob(
                self, spec, bench, workdir, slot, self._environment(workdir, slot, trusted=True), result
            )
            timing = _WaitingRun(
                lambda go: render("benchmark", dict(bench, **go)),
                workdir / "bench",
                limits=limits,
                env=env,
                prepare_timeout_s=2 * self.timeout_s,
            )

        outcome = run_script(
            render("correctness", config),
            workdir / "check",
            limits=limits,
            env=env,
            result_path=workdir / "check" / "result.json",
        )
        result.phases_s["correctness"] = outcome.duration_s
        self._absorb(result, outcome, "correctness")
        result.environment["seed"] = seed
        if result.failure is None:
            result.correct = all(s.correct for s in result.shapes)
        if not result.correct or timing is None:
            if timing is not None:
                timing.stop()
                baselines.finish()  # timed and cached all the same: the next candidate will need it
            return result

        baseline_ms = baselines.finish()
        outcome = timing.go()
        result.phases_s["benchmark"] = timing.after_go_s
        self._absorb(result, outcome, "benchmark")
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

    def _environment(self, workdir: Path, slot: str, trusted: bool) -> dict[str, str]:
        """Compiler caches. Candidates share one Triton cache across evaluations (recompiling every
        kernel costs seconds each time); whatever it hands a candidate is still checked, timed calls
        included, so writing into it gains a candidate nothing. The baseline process (no candidate
        code) compiles into a cache of its own that candidates cannot write."""
        caches = workdir / ("baseline-cache" if trusted else "cache")
        caches.mkdir(parents=True, exist_ok=True)
        extra = {
            "HOME": str(workdir),
            "TMPDIR": str(workdir),
            "TRITON_CACHE_DIR": str(caches / "triton" if trusted else _candidate_compile_cache()),
            "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
            "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 2) // self.parallelism)),
        }
        env = clean_environment(extra)
        if self.device == "cuda":
            env.pop("TRITON_INTERPRET", None)
            env["CUDA_VISIBLE_DEVICES"] = slot
        else:
            env["TRITON_INTERPRET"] = "1"
            env["CUDA_VISIBLE_DEVICES"] = ""
        return env

    def _absorb(self, result: EvalResult, outcome: Outcome, phase: str) -> None:
        """Fold one sandboxed run into the result, classifying how it ended."""
        data = outcome.result or {}
        result.environment.update(data.get("environment", {}))
        result.environment["sandbox"] = outcome.sandbox
        result.environment.setdefault("stages_s", {})[phase] = data.get("stages_s", {})  # where the time went
        by_label = {s.label: s for s in result.shapes}
        for case in data.get("cases", []):
            shape = by_label.get(case["label"])
            if shape is None:
                continue
            if phase == "correctness":
                for key in ("correct", "failure", "message", "max_abs_err", "max_rel_err"):
                    setattr(shape, key, case.get(key))
            else:
                shape.latency_ms = case.get("latency_ms")
        stage = data.get("stage", "start-up")
        failure = data.get("failure")
        log = "\n".join(x for x in ((failure or {}).get("traceback", ""), outcome.stderr.strip()) if x)
        if outcome.timed_out:
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


class _WaitingRun:
    """A sandboxed harness process that starts at once, prepares, then waits for `go()` (its timeout
    counts from then) or `stop()` (it leaves unused). `render(signals)` makes its script, given the
    paths it watches; they lie in its own folder, which only this evaluator writes before the go."""

    def __init__(self, render_script, folder: Path, *, limits: Limits, env: dict, prepare_timeout_s: float):
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.result_path = folder / "result.json"
        self._clock = threading.Event()
        self.outcome: Outcome | None = None
        self.after_go_s = 0.0
        script = render_script(
            {
                "go_path": str(folder / "go"),
                "stop_path": str(folder / "stop"),
                "go_timeout_s": prepare_timeout_s,
                "result_path": str(self.result_path),
            }
        )

        def run() -> None:
            self.outcome = run_script(
                script,
                folder,
                limits=limits,
                env=env,
                result_path=self.result_path,
                clock=self._clock,
                prepare_timeout_s=prepare_timeout_s,
            )

        self._thread = threading.Thread(target=run, name=f"kernelevolve-{folder.name}", daemon=True)
        self._thread.start()

    def go(self) -> Outcome | None:
        start = time.monotonic()
        self._signal("go")
        self.after_go_s = time.monotonic() - start
        return self.outcome

    def stop(self) -> None:
        self._signal("stop")

    def _signal(self, name: str) -> None:
        (self.folder / name).write_text(name)
        self._clock.set()
        self._thread.join()


class _BaselineJob:
    """Baseline medians by case label: cached per (spec, shape, GPU, torch, triton), else timed in a
    process that never sees the candidate (so no candidate can slow it down or forge it).

    The process starts at once and prepares (imports, builds, compiles, warms up) while the
    candidate is checked; it times when told to, so its timing never overlaps the candidate's."""

    def __init__(
        self, evaluator: "Evaluator", spec: Spec, bench: dict, workdir: Path, slot: str, env: dict, result: EvalResult
    ):
        self.result, self.evaluator = result, evaluator
        self.keys = {
            c["label"]: "|".join([spec.fingerprint, c["label"], spec.baseline, *_software(slot)])
            for c in bench["cases"]
        }
        cached = evaluator.baselines.lookup(spec.fingerprint)
        self.found = {label: cached[k] for label, k in self.keys.items() if k in cached}
        result.environment["baselines_cached"] = sorted(self.found)
        missing = [c for c in bench["cases"] if c["label"] not in self.found]
        self.run: _WaitingRun | None = None
        if missing:
            config = dict(bench, mode="baseline", cases=missing)
            limits = Limits(
                timeout_s=evaluator.timeout_s,
                max_memory_bytes=evaluator.max_memory_bytes,
                writable=[workdir / "baseline-cache"],
            )
            self.run = _WaitingRun(
                lambda go: render("benchmark", dict(config, **go)),
                workdir / "baseline",
                limits=limits,
                env=env,
                prepare_timeout_s=2 * evaluator.timeout_s,
            )

    def finish(self) -> dict[str, float]:
        if self.run is None:
            return self.found
        run, self.run = self.run, None
        outcome = run.go()
        self.result.phases_s["baseline"] = run.after_go_s
        data = (outcome.result if outcome else None) or {}
        for case in data.get("cases", []):
            if case.get("baseline_ms") is not None and case.get("label") in self.keys:
                self.found[case["label"]] = case["baseline_ms"]
                self.evaluator.baselines.save(self.keys[case["label"]], case["baseline_ms"])
        if len(self.found) < len(self.keys):
            how = f"{outcome.signal_name or outcome.returncode}" if outcome else "not started"
            last = (outcome.stderr.strip().splitlines() or [""])[-1][:300] if outcome else ""
            self.result.environment["baseline_error"] = (data.get("failure") or {}).get("message") or (
                f"the baseline process ended without timings ({how}): {last}"
            )
        return self.found


def _candidate_compile_cache() -> Path:
    """Under the system temp dir, not the user's home: the sandbox's unprivileged uid must reach it."""
    path = Path(tempfile.gettempdir()) / f"kernelevolve-triton-cache-{os.getuid()}"
    path.mkdir(mode=0o711, exist_ok=True)  # a folder per sandbox uid inside (Limits.per_uid_dirs)
    return path


@functools.lru_cache(maxsize=None)
def _software(slot: str) -> tuple[str, str, str]:
    """(GPU name, torch, triton) for a GPU slot, known here rather than reported by a candidate's process."""
    import torch
    import triton

    return torch.cuda.get_device_name(int(slot or 0)), torch.__version__, triton.__version__


def _shape(case: Case) -> ShapeResult:
    return ShapeResult(label=case.label, params=dict(case.params), dtype=case.dtype)
