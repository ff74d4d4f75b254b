"""Run one profiling tool's harness (a tool of kernelevolve/profiling/tools/) on a candidate, sandboxed.

The same sealed sandbox as every evaluation (evaluation/sandbox.run_script), with a timeout of
its own; the script is harness_templates/profile.py.j2, which runs the tool's harness module with
the config; the tool's raw outputs stay in the run's scratch directory for its parser. Nothing here
judges the candidate: profiles are taken of candidates the evaluator already passed.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from kernelevolve.evaluation.sandbox import Limits, clean_environment, run_script
from kernelevolve.harness import PACKAGE_ROOT, render
from kernelevolve import paths
from kernelevolve.profiling.tools import TOOLS
from kernelevolve.spec import Case, Spec

DEFAULT_CALLS = 3  # forward calls per profile (ncu profiles one)


class ToolUnavailable(Exception):
    """What the machine lacks for a tool (no GPU, no ncu on PATH): one line for the user."""


@dataclass
class ToolRun:
    tool: str
    directory: Path  # where the raw outputs are
    outputs: dict[str, str] = field(default_factory=dict)  # case label -> raw output file name
    error: str | None = None  # how the run failed, one line
    duration_s: float = 0.0
    sandbox: dict = field(default_factory=dict)
    dropped_metrics: list[str] = field(default_factory=list)


def check_available(tools: list[str], device: str) -> None:
    """ToolUnavailable naming the first thing missing for `tools` on this machine."""
    if device != "cuda":
        raise ToolUnavailable("profiles need a CUDA GPU and none is visible (the interpreter measures no GPU time)")
    for name in tools:
        missing = TOOLS[name].missing()
        if missing:
            others = " or ".join(f"--tool {t.name}" for t in TOOLS.values() if not t.program)
            raise ToolUnavailable(f"{missing}; install it" + (f" or use {others}" if others else ""))


def run_tool(
    tool: str,
    spec: Spec,
    source: str,
    cases: list[Case],
    workdir: Path,
    *,
    device: str = "cuda",
    gpu: str = "0",
    timeout_s: float = 300.0,
    calls: int = DEFAULT_CALLS,
    isolate_network: bool = True,
    knowledge_base: Path | None = None,
) -> ToolRun:
    """Run the tool's harness in the sandbox under `workdir`/<tool>-XXXX, and say what it left."""
    if tool not in TOOLS:
        raise ValueError(f"unknown profiling tool {tool!r} (have: {', '.join(TOOLS)})")
    # A private (0700) folder per run whose parent the sandbox's uid may pass through: the sandbox
    # then hands the folder to that uid (else the harness keeps uid 0 without capabilities).
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    workdir.chmod(workdir.stat().st_mode | 0o111)
    base = Path(tempfile.mkdtemp(prefix=f"{tool}-", dir=workdir))
    (base / "candidate.py").write_text(source)
    shutil.copy(spec.reference, base / "reference.py")
    run_dir = base / "run"  # the harness's scratch: its raw outputs land here
    config = {
        "device": device,
        "candidate_path": str(base / "candidate.py"),
        "reference_path": str(base / "reference.py"),
        "result_path": str(base / "result.json"),
        "output_dir": str(run_dir),
        "cases": [{"label": c.label, "params": c.params, "dtype": c.dtype} for c in cases],
        "seed": secrets.randbits(30),
        "calls": calls,
        # The run's knowledge base (a Ray worker's copy of it); None: the process's (--kb), read now.
        "import_paths": [str(Path(knowledge_base or paths.knowledge_base()) / "kernels")],
        "package_root": str(PACKAGE_ROOT),
        "harness": TOOLS[tool].harness.__name__,  # the module the script runs: its main(config)
        **TOOLS[tool].config(timeout_s),
    }
    env = clean_environment(
        {
            "HOME": str(run_dir),
            "TMPDIR": str(run_dir),
            # This profile's own caches, removed with its folder (nothing a candidate writes outlives it).
            "TRITON_CACHE_DIR": str(base / "triton"),
            "TORCHINDUCTOR_CACHE_DIR": str(base / "inductor"),
            "CUDA_CACHE_PATH": str(base / "cuda"),
        }
    )
    if device == "cuda":
        env.pop("TRITON_INTERPRET", None)
        env["CUDA_VISIBLE_DEVICES"] = gpu
    else:
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    limits = Limits(
        timeout_s=timeout_s,
        isolate_network=isolate_network,
        max_memory_bytes=None if device == "cuda" else 16 << 30,
        writable=[base / "inductor", base / "triton", base / "cuda"],
    )
    outcome = run_script(render("profile", config), run_dir, limits=limits, env=env, result_path=base / "result.json")
    run = ToolRun(tool=tool, directory=run_dir, duration_s=outcome.duration_s, sandbox=outcome.sandbox)
    data = outcome.result or {}
    run.outputs = {c["label"]: c["output"] for c in data.get("cases", []) if c.get("output")}
    run.dropped_metrics = list(data.get("dropped_metrics", []))
    failure = data.get("failure")
    if outcome.timed_out:
        run.error = f"{tool}: no result after {timeout_s:g}s (during {data.get('stage', 'start-up')})"
    elif failure:
        run.error = f"{tool}: {failure['message']}"
    elif data.get("stage") != "done":
        last = (outcome.stderr.strip().splitlines() or ["no output"])[-1][:300]
        run.error = (
            f"{tool}: the harness ended during {data.get('stage', 'start-up')} "
            f"({outcome.signal_name or outcome.returncode}): {last}"
        )
    return run


def scratch_dir(root: Path | None = None) -> Path:
    return Path(tempfile.mkdtemp(prefix="kernelevolve-profile-", dir=root or os.environ.get("TMPDIR")))
