"""Record the profiling tools' raw outputs on a GPU (fixtures for the CPU parser tests), and check
how ncu fares inside the evaluation sandbox.

    python bench/framework/profile_fixtures.py --out DIR [--kernels softmax|all|NAME,...] [--shapes first|all]
                                     [--tools torch,ncu,proton] [--budget-s 200]

Per (kernel, tool): the reference kernel from knowledge_base/kernels/ (as a candidate: ModelNew
inside a candidate-side `proton.scope`, so Proton's tree shows a candidate scope) is profiled by
kernelevolve/profiling/runner.run_tool in the sealed sandbox; the raw outputs (Chrome trace, ncu
CSV, Proton hatchet) are copied to DIR/<kernel>/<tool>/ with a JSON verdict (error, seconds).
For ncu on the first kernel, when the sandboxed run fails, it is tried again with the sandbox's
network namespace off, and then outside the sandbox (plain subprocess), so the verdicts say what
ncu needs. DIR/environment.json: GPU, ncu version, the driver's profiling restriction. Every case
is written as it finishes; the budget skips what would start after it.
Under no GPU: one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

KERNELS = ("softmax", "rmsnorm", "cross_entropy", "flash_attention", "ikbo_lce", "ikbo_target_attention")

CANDIDATE = """import triton.profiler as proton

from {kernel} import ModelNew as _Reference


class ModelNew(_Reference):
    def forward(self, *args):
        with proton.scope("candidate.{kernel}"):
            return super().forward(*args)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--kernels", default="softmax")
    ap.add_argument("--shapes", choices=("first", "all"), default="first")
    ap.add_argument("--tools", default="torch,ncu,proton")
    ap.add_argument("--budget-s", type=float, default=200.0)
    ap.add_argument("--timeout-s", type=float, default=180.0)
    ap.add_argument("--device", default="cuda", help="cuda, or interpret to try the torch harness on a CPU")
    args = ap.parse_args()

    import torch

    from kernelevolve.profiling.runner import run_tool
    from kernelevolve.profiling.tools.ncu import find_ncu
    from kernelevolve.spec import load_spec

    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            "profile_fixtures: needs a CUDA GPU (none visible); --device interpret runs the torch harness on CPU",
            file=sys.stderr,
        )
        return 2
    kernels = KERNELS if args.kernels == "all" else tuple(args.kernels.split(","))
    tools = args.tools.split(",")
    args.out.mkdir(parents=True, exist_ok=True)
    _write(args.out / "environment.json", _environment(args.device, find_ncu()))
    start = time.monotonic()
    for k, kernel in enumerate(kernels):
        spec = load_spec(ROOT / "specs" / f"{kernel}.yaml")
        cases = spec.cases(args.device)
        cases = cases[:1] if args.shapes == "first" else cases
        source = CANDIDATE.format(kernel=kernel)
        for tool in tools:
            if time.monotonic() - start > args.budget_s:
                _write(args.out / kernel / tool / "verdict.json", {"skipped": "over the budget"})
                continue
            dest = args.out / kernel / tool
            scratch = Path(tempfile.mkdtemp(prefix=f"prof-{kernel}-{tool}-"))
            run = run_tool(tool, spec, source, cases, scratch, device=args.device, timeout_s=args.timeout_s)
            _keep(run, dest, "sandboxed")
            print(f"{kernel} {tool}: {run.error or 'ok'} ({run.duration_s:.1f} s)", flush=True)
            if tool == "ncu" and k == 0 and run.error:  # what does ncu need that the sandbox withholds?
                run = run_tool(
                    tool,
                    spec,
                    source,
                    cases,
                    scratch,
                    device=args.device,
                    timeout_s=args.timeout_s,
                    isolate_network=False,
                )
                _keep(run, args.out / kernel / "ncu_no_netns", "sandboxed, network namespace off")
                print(f"{kernel} ncu without netns: {run.error or 'ok'} ({run.duration_s:.1f} s)", flush=True)
                _keep_direct(spec, source, cases, scratch, args.out / kernel / "ncu_direct", args.timeout_s)
    print(f"done in {time.monotonic() - start:.0f} s")
    return 0


def _keep(run, dest: Path, how: str) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name in run.outputs.values():
        if (run.directory / name).is_file():
            shutil.copy(run.directory / name, dest / name)
    _write(
        dest / "verdict.json",
        {
            "how": how,
            "error": run.error,
            "seconds": round(run.duration_s, 2),
            "outputs": run.outputs,
            "sandbox": run.sandbox,
            "dropped_metrics": run.dropped_metrics,
        },
    )


def _keep_direct(spec, source: str, cases, scratch: Path, dest: Path, timeout_s: float) -> None:
    """The ncu harness as a plain subprocess (no sandbox): the control for the sandboxed verdicts."""
    from kernelevolve.harness import PACKAGE_ROOT, render
    from kernelevolve.paths import KNOWLEDGE_BASE
    from kernelevolve.profiling.tools.ncu import LAUNCH_COUNT, find_ncu

    work = scratch / "direct"
    work.mkdir(parents=True, exist_ok=True)
    (work / "candidate.py").write_text(source)
    shutil.copy(spec.reference, work / "reference.py")
    config = {
        "device": "cuda",
        "candidate_path": str(work / "candidate.py"),
        "reference_path": str(work / "reference.py"),
        "result_path": str(work / "result.json"),
        "output_dir": str(work),
        "cases": [{"label": c.label, "params": c.params, "dtype": c.dtype} for c in cases],
        "seed": 1234,
        "calls": 1,
        "import_paths": [str(KNOWLEDGE_BASE / "kernels")],
        "package_root": str(PACKAGE_ROOT),
        "ncu_path": find_ncu() or "ncu",
        "ncu_launch_count": LAUNCH_COUNT,
        "ncu_timeout_s": timeout_s - 20,
    }
    (work / "harness.py").write_text(
        render("profile", dict(config, harness="kernelevolve.harness.runtime.profile_ncu"))
    )
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, str(work / "harness.py")], cwd=work, capture_output=True, text=True, timeout=timeout_s
        )
        tail = (proc.stderr or proc.stdout)[-1500:]
    except subprocess.TimeoutExpired:
        tail = "timed out"
    dest.mkdir(parents=True, exist_ok=True)
    result = json.loads((work / "result.json").read_text()) if (work / "result.json").exists() else {}
    for case in result.get("cases", []):
        shutil.copy(work / case["output"], dest / case["output"])
    _write(
        dest / "verdict.json",
        {
            "how": "direct subprocess, no sandbox",
            "result": result,
            "stderr_tail": tail,
            "seconds": round(time.monotonic() - t0, 2),
        },
    )
    print(f"ncu direct: {(result.get('failure') or {}).get('message') or 'ok'}", flush=True)


def _environment(device: str, ncu: str | None) -> dict:
    import torch
    import triton

    env = {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": sys.version.split()[0],
        "ncu": ncu,
        "gpu": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
    }
    if ncu:
        env["ncu_version"] = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip()[-200:]
    try:
        params = Path("/proc/driver/nvidia/params").read_text()
        env["driver_profiling_restriction"] = [ln for ln in params.splitlines() if "Profiling" in ln]
    except OSError:
        env["driver_profiling_restriction"] = "unreadable"
    return env


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str))


if __name__ == "__main__":
    sys.exit(main())
