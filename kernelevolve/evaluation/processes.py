"""The sandboxed harness processes of one candidate, started before the candidate exists.

`WaitingRun` is one process: it starts at once, imports, waits for the evaluator's `prepare` (GPU
work allowed) and `go` (candidate code allowed), or leaves on `stop` / is killed on `cancel`.
`BaselineJob` is the baseline's process (none when the cache has every shape). `ProcessSet` is what
one candidate is judged with: its check, and on the GPU its timing and baseline; used once.
The evaluator (evaluator.py) decides when each may use the GPU.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import secrets
import shutil
import threading
import time
from pathlib import Path

from kernelevolve.evaluation.baselines import BaselineStore
from kernelevolve.evaluation.outside_clock import OutsideClock
from kernelevolve.records.baselines import BaselineKey
from kernelevolve.records.result import EvalResult
from kernelevolve.evaluation.sandbox import Limits, Outcome, run_script
from kernelevolve.harness import render
from kernelevolve.harness.runtime.configs import BenchmarkConfig, HarnessConfig
from kernelevolve.harness.runtime.report import WAITING_FOR_GO, BaselineCase, Report
from kernelevolve.spec import Spec

WARM_MARGIN_S = 120.0  # a warm set this close to leaving is not handed out
OUTSIDE_LOOPS = 2  # harness/runtime/outside.py's LOOPS
# The loop's GPU time, roughly: its start and stop jitter (up to ~1 ms on the H200) spread over more calls.
OUTSIDE_TARGET_MS = 40.0
OUTSIDE_PAD_MS = 0.5  # outside.py's PAD_CYCLES before each call, roughly (at the H200's ~2 GHz)


def outside_calls(baseline_ms: float | None) -> int:
    """Calls of the outside-timed loop, the same for the baseline and every candidate of a shape."""
    if not baseline_ms or baseline_ms <= 0:
        return 16
    return max(8, min(64, round(OUTSIDE_TARGET_MS / (baseline_ms + OUTSIDE_PAD_MS))))


def fastest_loop(loops: dict, n: int):
    """The fastest of case n's outside-timed loops (a first loop may pay for allocations), or None."""
    found = [loops[f"c{n}.{i}"] for i in range(OUTSIDE_LOOPS) if f"c{n}.{i}" in loops]
    return min(found, key=lambda loop: loop.wall_ms) if len(found) == OUTSIDE_LOOPS else None


def outside_names(cases: int) -> list[str]:
    return [f"c{n}.{i}" for n in range(cases) for i in range(OUTSIDE_LOOPS)]


class WaitingRun:
    """A sandboxed harness process that starts at once, prepares, then waits for `go()` (its timeout
    counts from then) or `stop()` (it leaves unused). With `prepare`, it also waits before its first
    use of the GPU until `prepare()`, and the timeout counts from that. `render(signals)` makes its
    script, given the paths it watches; they lie in its own folder, which only this evaluator writes
    before the go."""

    def __init__(
        self,
        render_script,
        folder: Path,
        *,
        limits: Limits,
        env: dict,
        prepare_timeout_s: float,
        prepare=False,
        secret: bytes | None = None,
    ):
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.result_path = folder / "result.json"
        self._clock = threading.Event()
        self._cancel = threading.Event()
        self.outcome: Outcome | None = None
        self.after_go_s = 0.0
        # GPU memory it holds once prepared, and the most it held (its own report, before any candidate code)
        self.prepared_bytes = self.peak_bytes = 0
        self.started = time.monotonic()
        signals = {
            "go_path": str(folder / "go"),
            "stop_path": str(folder / "stop"),
            "go_timeout_s": prepare_timeout_s,
            "result_path": str(self.result_path),
        }
        if prepare:
            signals["prepare_path"] = str(folder / "prepare")
        script = render_script(signals)

        def run() -> None:
            self.outcome = run_script(
                script,
                folder,
                limits=limits,
                env=env,
                result_path=self.result_path,
                clock=self._clock,
                prepare_timeout_s=prepare_timeout_s,
                cancel=self._cancel,
                stdin_bytes=secret,
            )

        self._thread = threading.Thread(target=run, name=f"kernelevolve-{folder.name}", daemon=True)
        self._thread.start()

    @classmethod
    def of(
        cls, config: HarnessConfig, folder: Path, limits: Limits, env: dict, waiting_s: float, **options
    ) -> "WaitingRun":
        """The harness `config` is for (harness_templates/, configs.py), with the signal paths; `options`
        are __init__'s (`prepare`, `secret`)."""
        return cls(
            lambda signals: render(config.TOOL, config.with_signals(**signals).to_dict()),
            folder,
            limits=limits,
            env=env,
            prepare_timeout_s=waiting_s,
            **options,
        )

    def running(self) -> bool:
        return self._thread.is_alive()

    @property
    def waiting(self) -> bool:
        """Still alive and not yet told anything."""
        return self._thread.is_alive() and not self._clock.is_set()

    def prepare(self, payload: dict | None = None) -> None:
        """Let it use the GPU to prepare; `payload` (settings known only now) is merged into its config."""
        self._write("prepare", json.dumps(payload or {}))

    def wait_prepared(self) -> None:
        """Until it waits for its go (prepared) or has ended: the GPU preparation is over either way."""
        while self._thread.is_alive():
            report = Report.read(self._result())
            if report.stage == WAITING_FOR_GO:  # read before any candidate code ran
                self.prepared_bytes = held_bytes(report.environment.gpu_prepared_bytes)
                self.peak_bytes = held_bytes(report.environment.gpu_peak_bytes)
                return
            self._thread.join(0.01)

    def go(self, payload: dict | None = None, trusted: bool = False) -> Outcome | None:
        """Let it run its candidate (or judge); its timeout counts from here. A process still preparing
        (imports, inputs, references on a busy CPU) finishes that first, within its preparation's own
        time limit: the timeout is the candidate's time, not the machine's start-up. `trusted` (a judge,
        which runs no candidate code): its result counts as soon as it is written whole, and its exit
        (a CUDA context torn down, ~0.1 s) is not waited for."""
        self.wait_prepared()
        start = time.monotonic()
        self._write("go", json.dumps(payload or {}))
        while trusted and self._thread.is_alive():
            data = self._result()
            if Report.read(data).done:
                self.after_go_s = time.monotonic() - start
                return Outcome(0, False, None, time.monotonic() - self.started, "", "", data)
            self._thread.join(0.002)
        self._thread.join()
        self.after_go_s = time.monotonic() - start
        return self.outcome

    def _result(self) -> dict:
        try:  # written whole (os.replace): either the last version or none
            data = json.loads(self.result_path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def stop(self) -> None:
        self._write("stop", "stop")
        self._thread.join()

    def abandon(self) -> None:
        """Told to leave (a judge still preparing when its evaluation ended early), not waited for."""
        if self._thread.is_alive() and not (self.folder / "go").exists():
            try:
                self._write("stop", "stop")
            except OSError:
                pass

    def cancel(self) -> None:
        """Kill it, wherever it is in its start-up (it has run nothing of a candidate: only before a go)."""
        self._cancel.set()
        self._thread.join()

    def _write(self, name: str, text: str) -> None:
        path = self.folder / name
        tmp = self.folder / f".{name}.tmp"  # whole or absent: the harness opens it as soon as it exists
        tmp.write_text(text)
        os.replace(tmp, path)
        self._clock.set()


class BaselineJob:
    """Baseline medians by case label: cached per (spec, shape, GPU, torch, triton), else timed in a
    process that never sees the candidate (so no candidate can slow it down or forge it).

    The process starts at once and imports; it prepares (builds, compiles, warms up) beside the
    candidate's checks, and times only in the evaluator's timed phase, when the GPU is its own. Timings
    are looked up in and saved to `store` (the evaluator's); the process runs under `limits`."""

    def __init__(
        self,
        store: BaselineStore,
        spec: Spec,
        bench: BenchmarkConfig,
        workdir: Path,
        slot: str,
        env: dict,
        limits: Limits,
        waiting_s: float,
    ):
        self.store = store
        self.fingerprint = spec.fingerprint  # every key's (what the store is asked for)
        self.keys = {
            c.label: BaselineKey(spec.fingerprint, c.label, spec.baseline, *_software(slot)) for c in bench.cases
        }
        # Per label: the wall time of the baseline's outside-timed loop (ms), stored beside its latency.
        self.slope_keys = {label: key.outside_loop() for label, key in self.keys.items()}
        self.slopes: dict[str, float] = {}
        self.found = self._cached()
        missing = tuple(c for c in bench.cases if c.label not in self.found)
        self.missing = [c.label for c in missing]
        self.run: WaitingRun | None = None
        if missing:
            config = dataclasses.replace(bench, mode="baseline", cases=missing)
            self.run = WaitingRun.of(config, workdir / "baseline", limits, env, waiting_s, prepare=True)

    def _cached(self) -> dict[str, float]:
        """Labels whose latency and outside-timed slope are both in the store (an entry without its slope,
        from an older version, is timed again)."""
        cached = self.store.lookup(self.fingerprint)
        found = {label: cached[k] for label, k in self.keys.items() if k in cached and self.slope_keys[label] in cached}
        self.slopes.update({label: cached[self.slope_keys[label]] for label in found})
        return found

    @property
    def waiting(self) -> bool:
        return self.run is None or self.run.waiting

    def prepare(self) -> None:
        if self.run is not None:
            self.found = self._cached()  # another evaluation may have timed them meanwhile
            if len(self.found) == len(self.keys):
                self.stop()
            else:
                self.run.prepare()

    def wait_prepared(self) -> None:
        if self.run is not None:
            self.run.wait_prepared()

    def stop(self) -> None:
        if self.run is not None:
            run, self.run = self.run, None
            run.stop()

    def cancel(self) -> None:
        if self.run is not None:
            run, self.run = self.run, None
            run.cancel() if run.waiting else run.stop()

    def finish(self, result: EvalResult) -> dict[str, float]:
        """Time what is still missing (call with the GPU held alone)."""
        self.found = self._cached() | self.found
        if self.run is not None and len(self.found) == len(self.keys):
            self.stop()  # timed by another evaluation while this one was checked
        for shape in result.shapes:  # cached: found in the store, not timed by this evaluation
            shape.baseline_cached = shape.label in self.found
        if self.run is None:
            return self.found
        run, self.run = self.run, None

        def plan(name: str, ready: str) -> dict:  # this process runs no candidate code: its estimate counts
            try:
                estimate = json.loads(ready).get("estimate_ms")
            except (ValueError, AttributeError):
                estimate = None
            return {"seed": secrets.randbits(40), "calls": outside_calls(estimate)}

        clock = OutsideClock(run.folder, outside_names(len(self.missing)), plan, alive=run.running)
        outcome = run.go()
        loops = clock.join()
        result.phases_s["baseline"] = run.after_go_s
        report = outcome.report(BaselineCase) if outcome else Report.read(None, BaselineCase)
        for case in report.cases:
            if case.baseline_ms is not None and case.label in self.keys:
                label = case.label
                loop = fastest_loop(loops, self.missing.index(label)) if label in self.missing else None
                if loop is None or loop.payload["calls"] != outside_calls(case.baseline_ms):
                    continue
                slope = loop.wall_ms
                self.found[label], self.slopes[label] = case.baseline_ms, slope
                self.store.save(self.keys[label], case.baseline_ms)
                self.store.save(self.slope_keys[label], slope)
        if len(self.found) < len(self.keys):
            how = f"{outcome.signal_name or outcome.returncode}" if outcome else "not started"
            last = (outcome.stderr.strip().splitlines() or [""])[-1][:300] if outcome else ""
            result.diagnostics.baseline_error = (report.failure.message if report.failure else "") or (
                f"the baseline process ended without timings ({how}): {last}"
            )
        return self.found


class ProcessSet:
    """The sandboxed processes of one candidate, started before it is known: its correctness check and
    the judge of its outputs, and on the GPU its timing, the judge of its timed outputs and (if not
    cached) its baseline. Used once, then discarded."""

    def __init__(
        self,
        key,
        workdir: Path,
        slot: str,
        seed: int,
        check,
        baselines,
        timing,
        waiting_s: float,
        judge,
        timed_judge,
        loop_seeds: dict[str, int] | None = None,
    ):
        self.key, self.workdir, self.slot, self.seed = key, workdir, slot, seed
        self.place = 0  # the evaluator's place (worker) judging with it
        self.check, self.baselines, self.timing = check, baselines, timing
        self.judge, self.timed_judge = judge, timed_judge  # never import the candidate: their verdicts count
        self.runs = [r for r in (check, judge, timing, timed_judge) if r is not None]
        self.expires = time.monotonic() + waiting_s - WARM_MARGIN_S
        self.loop_seeds = loop_seeds or {}  # the outside-timed loops' seeds: the timed judge's and the evaluator's

    def usable(self) -> bool:
        """Every process still waits, with time to spare before it gives up waiting."""
        alive = all(r.waiting for r in self.runs) and (self.baselines is None or self.baselines.waiting)
        return alive and time.monotonic() < self.expires

    def discard(self, keep: bool = False) -> None:
        for run in self.runs:
            if run.waiting:
                run.cancel()
            else:
                run.abandon()
        if self.baselines is not None:
            self.baselines.cancel()
        if not keep:
            shutil.rmtree(self.workdir, ignore_errors=True)


def held_bytes(value) -> int:
    return value if isinstance(value, int) and value > 0 else 0


@functools.lru_cache(maxsize=None)
def _software(slot: str) -> tuple[str, str, str]:
    """(GPU name, torch, triton) for a GPU slot, known here rather than reported by a candidate's process."""
    import torch
    import triton

    return torch.cuda.get_device_name(int(slot or 0)), torch.__version__, triton.__version__
