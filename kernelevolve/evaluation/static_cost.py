"""A static cost estimate for candidates that only the interpreter has run, so a CPU search can rank them.

Under the interpreter nothing is timed, so every correct candidate used to score the same and the first
stayed the best. After a candidate passes, the evaluator (a hook in `Evaluator.evaluate`) runs
static_probe.py in a sandboxed process: one forward at the smallest checked shape, counted (launches,
the bytes its loads and stores touch), and each launched kernel compiled for the spec's GPU without
running it (ptxas: registers, spills, shared memory). From those, one number, the estimated cost:

    cost = sum over launches of (bytes it moved / the call's minimal bytes) * occupancy penalty * spill penalty
           + LAUNCH_COST for each launch after the first

1.0 is one pass over the minimal bytes (the spec's `bytes` at that shape, else the inputs, outputs and
parameters once each) in one launch that keeps enough warps resident without spilling. Lower is better.
The occupancy penalty is MIN_OCCUPANCY / occupancy when the kernel's registers, shared memory and warps
leave fewer resident warps per SM than that (the GPU's limits below); the spill penalty is
1 + min(1, spill bytes per thread / SPILL_SCALE).

It is an estimate from static facts, never a speedup: stored as `EvalResult.static`, shown as "est.", and
used for selection only where no node of the run is timed (a timed fitness always ranks above it). The
probe runs the candidate's code, so its figures are the candidate process's word: they steer which node
an interpreter search improves next; a GPU evaluation (`kernelevolve retime`) replaces them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import secrets
import shutil
import tempfile
import time
import threading
from pathlib import Path

from kernelevolve.harness.runtime.configs import Case, ProbeConfig
from kernelevolve.harness.runtime.report import ProbeReport
from kernelevolve.records.result import static_score as score  # noqa: F401 (the ranking rule: with the records)

ENV = "KERNELEVOLVE_STATIC_COST"  # "0" turns the estimate off (a search then ranks as before: all ties)
LAUNCH_COST = 0.25  # each launch after the first: its fixed cost and a return trip through memory
MIN_OCCUPANCY = 0.125  # resident warps per SM over the most it holds; below this, latency is not hidden
SPILL_SCALE = 256  # spill bytes per thread that double the cost
PROBE_TIMEOUT_S = 300.0
# Estimates already made in this process, by spec, GPU, case, knowledge base and source: a candidate whose
# source is one already probed (a search's operator often writes the same kernel again) gets that estimate
# without two more processes. Only estimates that were made (never an error) are kept; the oldest go first.
_MADE: dict[tuple, dict] = {}
_MADE_MAX = 256
_MADE_LOCK = threading.Lock()

# What an SM holds (compute capability, registers, shared memory in bytes, warps, blocks), per GPU.
GPUS = {
    "h200": (90, 65536, 233472, 64, 32),
    "h100": (90, 65536, 233472, 64, 32),
    "b200": (100, 65536, 233472, 64, 32),
    "a100": (80, 65536, 167936, 64, 32),
    "l40s": (89, 65536, 102400, 48, 24),
}


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "off", "no", "false")


def gpu_of(hardware: str) -> tuple[str, tuple]:
    name = (hardware or "").lower()
    return (name, GPUS[name]) if name in GPUS else ("h200", GPUS["h200"])


def occupancy(kernel: dict, gpu: tuple) -> float | None:
    """Resident warps per SM over the SM's most, from registers, shared memory and warps (None: unknown)."""
    _, regs_sm, smem_sm, warps_sm, blocks_sm = gpu
    regs, warps = kernel.get("registers"), kernel.get("num_warps")
    if not regs or not warps:
        return None
    per_warp = math.ceil(regs * 32 / 256) * 256  # registers are allocated per warp in units of 256
    blocks = [blocks_sm, warps_sm // warps, regs_sm // (per_warp * warps)]
    shared = kernel.get("shared_bytes") or 0
    if shared:
        blocks.append(smem_sm // (shared + 1024))  # 1 KB per block is the system's
    resident = max(0, min(blocks))
    return resident * warps / warps_sm


def estimate(probe: dict, minimal_bytes: float | None, hardware: str) -> dict:
    """What is stored with the evaluation: the probe's figures per kernel, per call, and the cost."""
    name, gpu = gpu_of(hardware)
    launches = probe.get("launches") or []
    kernels = probe.get("kernels") or {}
    floor = minimal_bytes or probe.get("io_bytes") or 0
    moved = sum(launch.get("bytes", 0) for launch in launches)
    cost = LAUNCH_COST * max(0, len(launches) - 1)
    notes = []
    shown = {}
    for launch in launches:
        kernel = kernels.get(launch.get("key"), {})
        occ = occupancy(kernel, gpu)
        slow = MIN_OCCUPANCY / occ if occ is not None and 0 < occ < MIN_OCCUPANCY else 1.0
        if occ == 0:
            slow = 8.0  # does not fit on an SM at all: will not launch as compiled
            notes.append(f"{kernel.get('name', launch.get('kernel'))} does not fit on one SM")
        elif str(kernel.get("error", "")).startswith("does not compile"):
            # Passes under the interpreter, fails on the GPU (KernelBench's cumsum: a 2-D tl.cumsum on sm_90):
            # ranked last among the correct, and the reason goes to the improve prompt.
            slow = 8.0
            notes.append(f"{kernel.get('name', launch.get('kernel'))} {kernel['error']}"[:300])
        spill = 1 + min(1.0, (kernel.get("spill_bytes") or 0) / SPILL_SCALE)
        share = launch.get("bytes", 0) / floor if floor else 1.0
        cost += share * slow * spill
        label = kernel.get("name", launch.get("kernel", "?"))
        if label not in shown:
            shown[label] = {
                k: kernel.get(k)
                for k in ("num_warps", "num_stages", "registers", "spill_bytes", "shared_bytes", "tensor_core", "error")
                if kernel.get(k) is not None
            } | ({"occupancy": round(occ, 3)} if occ is not None else {})
    return {
        "cost": round(cost, 4),
        "target": f"sm_{gpu[0]} ({name})",
        "shape": probe.get("shape"),
        "launches": len(launches),
        "bytes": moved,
        "minimal_bytes": floor,
        "minimal_from": "the spec's bytes" if minimal_bytes else "inputs, outputs and parameters once each",
        "kernels": shown,
        **({"notes": notes} if notes else {}),
        "stages_s": probe.get("stages_s"),
    }


def summary(static: dict | None) -> str:
    """One line for people and prompts: 'est. cost 1.42 (sm_90): 2 launches, 1.3x the minimal bytes, ...'."""
    if not static or static.get("cost") is None:
        return ""
    parts = [f"{static['launches']} launch{'es' if static['launches'] != 1 else ''}"]
    if static.get("minimal_bytes"):
        parts.append(f"{static['bytes'] / static['minimal_bytes']:.2f}x the minimal bytes")
    for name, k in list(static.get("kernels", {}).items())[:3]:
        if k.get("error"):
            parts.append(f"{name}: {k['error']}")
            continue
        bits = [f"{k['registers']} regs" if k.get("registers") else None]
        bits.append(f"{k['spill_bytes']} B spilled" if k.get("spill_bytes") else "no spills")
        if k.get("shared_bytes"):
            shared = k["shared_bytes"]
            bits.append(f"{shared // 1024} KB shared" if shared >= 1024 else f"{shared} B shared")
        if k.get("occupancy") is not None:
            bits.append(f"occupancy {k['occupancy']:.0%}")
        parts.append(f"{name}: " + ", ".join(b for b in bits if b))
    return f"est. cost {static['cost']:.2f} ({static.get('target', '?')}, static, not timed): " + "; ".join(parts)


def _script(config: ProbeConfig) -> str:
    root = str(Path(__file__).resolve().parents[2])
    return (
        "# Generated by KernelEvolve: the static cost probe (kernelevolve/evaluation/static_probe.py).\n"
        "import json\nimport sys\n\n"
        f"sys.path.insert(0, {root!r})\n"
        f"CONFIG = json.loads({json.dumps(config.to_dict())!r})\n\n"
        "from kernelevolve.evaluation.static_probe import main  # noqa: E402\n\n"
        "main(CONFIG)\n"
    )


def _size(params: dict) -> float:
    numbers = [v for x in params.values() for v in (x if isinstance(x, (list, tuple)) else [x])]
    return math.prod(float(v) for v in numbers if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0)


def _run(config: ProbeConfig, folder: Path, limits, env: dict, timeout_s: float) -> tuple[ProbeReport, str | None]:
    """One sandboxed probe process: (its report, None) or (what it left, the one-line reason it failed)."""
    from kernelevolve.evaluation.sandbox import run_script

    outcome = run_script(_script(config), folder, limits=limits, env=env, result_path=Path(config.result_path))
    report = ProbeReport.read(outcome.result)
    if outcome.timed_out:
        return report, f"the static probe ({config.phase}) took over {limits.timeout_s:g}s"
    if report.failure:
        return report, report.failure
    if not report.done:
        last = (outcome.stderr.strip().splitlines() or ["no output"])[-1]
        return report, f"the static probe ({config.phase}) ended during {report.stage}: {last[:200]}"
    return report, None


class Probe:
    """The two probe processes of one candidate, made ready when its evaluation starts and started by
    `finish(result)` only when the result is correct and untimed (a failing candidate costs nothing)."""

    def __init__(
        self,
        spec,
        source: str,
        cases,
        *,
        timeout_s: float = PROBE_TIMEOUT_S,
        scratch_root: Path | None = None,
        knowledge_base: Path | None = None,
    ) -> None:
        from kernelevolve import paths
        from kernelevolve.evaluation.sandbox import Limits, clean_environment

        self.spec, self.timeout_s = spec, timeout_s
        self.case = min(cases, key=lambda c: _size(c.params))  # the cheapest to interpret
        self.key = (
            spec.fingerprint,
            spec.hardware,
            self.case.label,
            json.dumps(self.case.params, sort_keys=True, default=str),
            str(self.case.dtype),
            str(knowledge_base or paths.knowledge_base()),
            source,
        )
        self.began = time.monotonic()
        self.workdir = workdir = Path(tempfile.mkdtemp(prefix="kernelevolve-static-", dir=scratch_root))
        shutil.copy(spec.reference, workdir / "reference.py")
        (workdir / "candidate.py").write_text(source)
        caches = workdir / "cache"
        caches.mkdir()
        env = clean_environment(
            {
                "HOME": str(workdir),
                "TMPDIR": str(caches),
                "TRITON_CACHE_DIR": str(caches / "triton"),
                "XDG_CACHE_HOME": str(caches),
                "OMP_NUM_THREADS": "1",
                "TRITON_INTERPRET": "1",
                "CUDA_VISIBLE_DEVICES": "",
            }
        )
        count = ProbeConfig(
            phase="count",
            candidate_path=str(workdir / "candidate.py"),
            reference_path=str(workdir / "reference.py"),
            result_path=str(workdir / "count" / "result.json"),
            case=Case(self.case.label, dict(self.case.params), self.case.dtype),
            seed=secrets.randbits(30),
            import_paths=(str((knowledge_base or paths.knowledge_base()) / "kernels"),),
            go_path=str(workdir / "go"),
            stop_path=str(workdir / "stop"),
            wait_s=timeout_s,
        )
        # The compile runs in a process of its own, whose Triton is imported with the interpreter off.
        compile_ = dataclasses.replace(
            count,
            phase="compile",
            result_path=str(workdir / "compile" / "result.json"),
            go_path=str(workdir / "specs.json"),
            arch=gpu_of(spec.hardware)[1][0],
            compile_budget_s=max(10.0, timeout_s / 2),
        )
        # The count has the evaluation's timeout; the compile waits for the count, then has one of its own.
        limits = Limits(
            timeout_s=2 * timeout_s, max_memory_bytes=16 << 30, max_total_rss_bytes=16 << 30, writable=[caches]
        )
        self.results: dict[str, tuple[ProbeReport, str | None]] = {}

        def run(config: ProbeConfig, environment: dict) -> None:
            try:
                self.results[config.phase] = _run(config, workdir / config.phase, limits, environment, timeout_s)
            except Exception as exc:
                self.results[config.phase] = (ProbeReport(), f"static probe: {type(exc).__name__}: {exc}"[:300])

        self.threads = [
            threading.Thread(target=run, args=(count, env), daemon=True),
            threading.Thread(target=run, args=(compile_, dict(env, TRITON_INTERPRET="0")), daemon=True),
        ]
        self.started = False

    def _start(self) -> None:
        """Both processes at once: the compile process (Triton alone, no torch) is ready when the count ends."""
        self.started = True
        for thread in self.threads:
            thread.start()

    def _signal(self, name: str, text: str = "") -> None:
        tmp = self.workdir / f".{name}.tmp"
        tmp.write_text(text)
        os.replace(tmp, self.workdir / name)

    def stop(self) -> None:
        """Not needed (the candidate failed, or the evaluation ended otherwise): the processes leave."""
        if self.workdir.exists():
            self._signal("stop")
            for thread in self.threads if self.started else ():
                thread.join()
            shutil.rmtree(self.workdir, ignore_errors=True)

    def measure(self) -> dict:
        """The estimate, or {"error": one line} when it could not be made (the candidate stays as it was)."""
        try:
            self._signal("go")
            if not self.started:
                self._start()
            self.threads[0].join()
            count, error = self.results.get("count", (ProbeReport(), "the count process left nothing"))
            if not error and not count.launches:
                error = "no Triton launch was seen on the probed call"
            if error:
                return {"error": error}
            self._signal("specs.json", json.dumps(count.specs))
            self.threads[1].join()
            compiled, error = self.results.get("compile", (ProbeReport(), "the compile process left nothing"))
            figures = {
                "launches": count.launches,
                "io_bytes": count.io_bytes,
                "kernels": compiled.kernels,
                "stages_s": {"count": count.stages_s or None, "compile": compiled.stages_s or None},
                "shape": self.case.label,
            }
            if error:
                figures["compile_error"] = error
            minimal, _ = self.spec.roofline(self.case)
            return estimate(figures, minimal, self.spec.hardware)
        except Exception as exc:  # the estimate is optional: never fails an evaluation
            return {"error": f"static probe: {type(exc).__name__}: {exc}"[:300]}
        finally:
            self.stop()

    def finish(self, result) -> None:
        """The evaluator's hook after its verdict: a correct, untimed result gets `static`; else stop."""
        if not result.correct or result.timed:
            self.stop()
            return
        began = time.monotonic()
        with _MADE_LOCK:
            made = _MADE.get(self.key)
        if made is not None:  # the same source, already probed here: its estimate, without the processes
            self.stop()
            result.static = json.loads(json.dumps(made))
        else:
            result.static = self.measure()
            if result.static.get("cost") is not None:
                with _MADE_LOCK:
                    _MADE[self.key] = json.loads(json.dumps(result.static))
                    while len(_MADE) > _MADE_MAX:
                        _MADE.pop(next(iter(_MADE)))
        result.phases_s["static estimate"] = time.monotonic() - began


def start(spec, source: str, cases, timeout_s: float, scratch_root: Path | None = None, knowledge_base=None):
    """The evaluator's hook when an evaluation starts: a Probe, or None when the estimate is off."""
    if not enabled():
        return None
    try:
        return Probe(
            spec,
            source,
            cases,
            timeout_s=timeout_s,
            scratch_root=scratch_root,
            knowledge_base=knowledge_base,
        )
    except Exception:  # the estimate is optional
        return None


def measure(spec, source: str, cases, **kw) -> dict:
    """The estimate of one candidate on its own (started and run at once)."""
    return Probe(spec, source, cases, **kw).measure()
