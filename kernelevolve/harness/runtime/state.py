"""The result file a harness process leaves behind (its fields: report.py), and how its failures are
classified."""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

from kernelevolve.harness.runtime.report import Failed, to_json


class Result:
    """What the evaluator reads back (report.Report): stage, per-case entries (report.py's CheckCase,
    TimedCase, ...; a profiling harness's plain dicts), environment, failure.

    Rewritten after every step, so a later hang or crash still leaves what was measured."""

    def __init__(self, path: str):
        self.path = path
        self.data: dict = {"stage": "start", "cases": [], "environment": {}, "failure": None, "stages_s": {}}
        self._clock = time.monotonic
        self._last = self._clock()
        # Captured now: a candidate that rebinds os.replace or json.dump cannot redirect the verdict.
        self._replace, self._dump, self._exit, self._open = os.replace, json.dump, os._exit, open
        self._default = to_json

    @property
    def cases(self) -> list:
        return self.data["cases"]

    def stage(self, text: str) -> None:
        """Enter a stage; the time spent in the previous one is kept (where evaluation time goes)."""
        self._close_stage()
        self.data["stage"] = text
        self.write()

    def _close_stage(self) -> None:
        now = self._clock()
        previous = self.data["stage"]
        self.data["stages_s"][previous] = round(self.data["stages_s"].get(previous, 0.0) + now - self._last, 3)
        self._last = now

    def write(self) -> None:
        tmp = self.path + ".tmp"
        with self._open(tmp, "w") as f:
            self._dump(self.data, f, default=self._default)
        self._replace(tmp, self.path)

    def finish(self, failure: str | None = None, message: str = "", exc: BaseException | None = None) -> None:
        """Write the verdict and leave at once (no atexit hooks of the candidate's run)."""
        self._close_stage()
        if failure:
            self.data["failure"] = Failed(failure, message, traceback.format_exc(limit=20)[-6000:] if exc else "")
        self.data["stage"] = "done"
        self.write()
        sys.stdout.flush()
        sys.stderr.flush()
        self._exit(0)


def wait_for_go(config, result: Result, signal: str = "go") -> dict:
    """Block until the evaluator writes the signal's file (`go_path`: the GPU is ours now;
    `prepare_path`: the GPU may be used for preparation); `stop_path` instead means the evaluator no
    longer needs this process (the candidate failed its checks): leave quietly. Returns what the
    evaluator wrote into the file (a JSON object: settings known only now, e.g. `profile`), for
    `config.signalled(...)`.

    Lets a process start and prepare (imports, inputs, compiles) while others run, or before its
    candidate exists at all (the evaluator's warm processes), and use the GPU only when let."""
    path = setting(config, "prepare_path" if signal == "prepare" else "go_path")
    stop_path = setting(config, "stop_path")
    if not path:
        return {}
    result.stage(f"waiting for the evaluator's {signal}")
    deadline = time.monotonic() + (setting(config, "go_timeout_s") or 600)
    while not os.path.exists(path):
        if stop_path and os.path.exists(stop_path):
            result.data["cancelled"] = True
            result.finish()
        if time.monotonic() > deadline:
            result.finish("timeout", f"the evaluator never said {signal}")
        time.sleep(0.01)
    # Written by the evaluator before this process ran any candidate code: trusted.
    with open(path) as f:
        text = f.read().strip()
    try:
        payload = json.loads(text) if text.startswith("{") else {}
    except ValueError:
        payload = {}
    return payload if isinstance(payload, dict) else {}


def setting(config, name: str):
    """One setting of a harness's configuration: a typed one (configs.py), or the plain dict the profiling
    harnesses still read (None where it has no such key)."""
    return config.get(name) if isinstance(config, dict) else getattr(config, name, None)


def report_memory(result: Result, torch) -> None:
    """What this process holds on its GPU now (its cache of freed blocks given back first) and the most it
    held (the transient peak), for the evaluator's memory budget of the GPU it shares."""
    torch.cuda.empty_cache()
    result.data["environment"]["gpu_prepared_bytes"] = torch.cuda.memory_reserved()
    result.data["environment"]["gpu_peak_bytes"] = torch.cuda.max_memory_reserved()
    result.write()


def one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return (lines[0] if lines else type(exc).__name__)[:500]


def failure_class(exc: BaseException) -> str:
    """Triton's own errors mean the kernel was refused (compile); anything else is a runtime error."""
    for cls in type(exc).__mro__:
        if cls.__module__.startswith(("triton.compiler", "triton.runtime.errors", "triton.runtime.interpreter")):
            return "compile"
        if cls.__name__ in (
            "CompilationError",
            "CompileTimeAssertionFailure",
            "OutOfResources",
            "PTXASError",
            "InterpreterError",
        ):
            return "compile"
    return "runtime"


def import_candidate(config, result: Result):
    """The candidate's module, imported last (after everything the judge relies on was captured);
    a candidate that cannot be imported, or defines no ModelNew, ends the process with its verdict."""
    from kernelevolve.harness.runtime.modules import load_module

    result.stage("import")
    sys.path[:0] = list(setting(config, "import_paths") or [])
    try:
        candidate = load_module(setting(config, "candidate_path"), "kernelevolve_candidate")
    except SyntaxError as exc:
        result.finish("syntax", f"line {exc.lineno}: {exc.msg}", exc)
    except Exception as exc:
        result.finish("import", "importing the candidate raised " + one_line(exc), exc)
    if not isinstance(getattr(candidate, "ModelNew", None), type):
        result.finish("import", "the candidate defines no class ModelNew")
    return candidate
