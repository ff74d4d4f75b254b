"""Preflight: before a run or an eval spends anything, the reference runs once per case in the
sandbox, with the same limits a candidate's evaluation gets.

A reference that cannot run at a shape (too big for the sandbox's memory, too slow for the
timeout, or an error in the module) would otherwise fail every candidate: the search would
spend its model calls and evaluations on "crashes" that are not the candidates' fault. The
answer is one line naming the shape and what went wrong, and suggesting `--shape` or the
spec's `interpret_shapes`.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kernelevolve.spec import Spec, ShapeValue

DEFAULT_MEMORY_BYTES = 16 << 30  # what Evaluator gives a candidate on the interpreter


@dataclass
class PreflightResult:
    ok: bool
    message: str = ""  # one line when not ok
    label: str | None = None  # the case that could not run
    duration_s: float = 0.0


def _environment(workdir: Path, device: str) -> dict[str, str]:
    """The environment an evaluation gets (see Evaluator._environment), for one process."""
    from kernelevolve.evaluation.sandbox import clean_environment
    from kernelevolve.paths import cache_dir

    caches = cache_dir()
    env = clean_environment(
        {
            "HOME": str(workdir),
            "TMPDIR": str(workdir),
            "TRITON_CACHE_DIR": str(caches / "triton"),
            "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
            "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 2) // 2)),
        }
    )
    if device == "cuda":
        env.pop("TRITON_INTERPRET", None)
    else:
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def _short(why: str) -> str:
    """An allocator's novel reduced to what a person needs."""
    import re

    if "memory" in why.lower() or why.startswith("MemoryError"):
        m = re.search(r"allocate (\d+) bytes", why)
        return "out of memory" + (f" (it asked for {int(m.group(1)) / 2**30:.1f} GiB)" if m else "")
    return why[:200]


def suggestion(spec: Spec, device: str) -> str:
    """What to do about a reference that cannot run: the constants to pass with --shape, with the
    interpreter rule's values for them when the module's sizes are large."""
    from kernelevolve.campaign.scaling import scaled_shape
    from kernelevolve.shapes import constants
    from kernelevolve.spec import shape_text

    try:
        names = constants(spec.reference_source)
        scaled = scaled_shape(spec.reference_source)
    except SyntaxError:
        names, scaled = {"NAME": None}, {}
    if not names:
        return (
            f"{spec.reference.name} has no module-level size constants that --shape could override: "
            "write its sizes as constants (batch_size = 16 ...) or make a smaller copy of it"
        )
    if scaled:
        example = f"--shape {shape_text(scaled)}"
    else:
        example = f"--shape NAME=VALUE (its constants: {', '.join(names)})"
    if device == "interpret" and not spec.interpret_shapes and spec.path is not None:
        return f"give smaller shapes, e.g. {example}, or add interpret_shapes to {spec.path.name}"
    return f"give smaller shapes, e.g. {example}" + (
        "" if spec.path is None else f" (or change the shapes in {spec.path.name})"
    )


def preflight(
    spec: Spec,
    device: str,
    shapes: list[dict[str, ShapeValue]] | None = None,
    *,
    timeout_s: float = 300.0,
    max_memory_bytes: int | None = DEFAULT_MEMORY_BYTES,
) -> PreflightResult:
    """Run the reference alone at every case of (spec, device, shapes) in one sandboxed process."""
    from kernelevolve.evaluation.sandbox import Limits, run_script
    from kernelevolve.harness import render
    from kernelevolve.harness.runtime.configs import Case as HarnessCase
    from kernelevolve.harness.runtime.configs import PreflightConfig
    from kernelevolve.harness.runtime.report import PreflightCase

    cases = spec.cases(device, shapes)
    workdir = Path(tempfile.mkdtemp(prefix="kernelevolve-preflight-"))
    try:
        shutil.copy(spec.reference, workdir / "reference.py")
        config = PreflightConfig(
            device=device,
            reference_path=str(workdir / "reference.py"),
            result_path=str(workdir / "run" / "result.json"),
            cases=tuple(HarnessCase(c.label, dict(c.params), c.dtype) for c in cases),
            seed=secrets.randbits(30),
        )
        limits = Limits(timeout_s=timeout_s, max_memory_bytes=max_memory_bytes if device == "interpret" else None)
        outcome = run_script(
            render("preflight", config),
            workdir / "run",
            limits=limits,
            env=_environment(workdir, device),
            result_path=workdir / "run" / "result.json",
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    done = {c.label: c for c in outcome.report(PreflightCase).cases}
    head = f"the reference {spec.reference.name} cannot run"
    for case in cases:
        entry = done.get(case.label)
        if entry is not None and entry.ok:
            continue
        if entry is not None:
            why = _short(entry.message or "it failed")
        elif outcome.timed_out:
            why = f"no result after {timeout_s:g}s"
        elif outcome.signal_name:
            why = f"its process was killed by {outcome.signal_name} (out of memory?)"
        else:
            last = (outcome.stderr.strip().splitlines() or ["no output"])[-1][:200]
            why = f"its process exited with status {outcome.returncode}: {last}"
        where = (
            case.label.replace("default", "the module's own sizes,", 1)
            if case.label.startswith("default")
            else case.label
        )
        message = f"{head} at {where} on {device}: {why}; {suggestion(spec, device)}"
        return PreflightResult(False, " ".join(message.split()), case.label, outcome.duration_s)
    return PreflightResult(True, duration_s=outcome.duration_s)
