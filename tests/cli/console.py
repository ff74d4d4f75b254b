"""Helpers that make the CLI tests cheaper without making them less real.

`kernelevolve_many`: several command lines through the console script's own `main()` (the function the
`kernelevolve` entry point calls) in ONE real subprocess, each with its own exit status, stdout and stderr
(file descriptors 1 and 2 redirected per command, so whatever writes there -- print, rich, logging, a child
process -- lands in that command's output). A start of the CLI costs ~3 s of CPU in imports; a test that
checks five command lines pays it once instead of five times.

`made_once`: something expensive (a finished run) made once a pytest session and shared by the tests
that only read it, under pytest-xdist too (the first worker to need it makes it; the others wait and read).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

_RUNNER = r"""
import json, os, sys, tempfile, traceback

# Imported with COLUMNS unset, rich's consoles follow the variable at each write (set with it, they keep
# the width they were made with): a command line may then give its own COLUMNS.
columns = os.environ.pop("COLUMNS", None)
from kernelevolve.cli import main

if columns is not None:
    os.environ["COLUMNS"] = columns
cases, answers, results = json.loads(sys.argv[1]), sys.argv[2], []
for argv, extra in cases:
    before = {name: os.environ.get(name) for name in extra}
    os.environ.update(extra)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        sys.argv = ["kernelevolve", *argv]
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
        except BaseException:  # as the interpreter does for an exception out of a console script
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name)
                else:
                    os.environ[name] = value
        out.seek(0)
        err.seek(0)
        results.append([code, out.read().decode(), err.read().decode()])
with open(answers, "w") as f:
    json.dump(results, f)
"""


def kernelevolve_many(
    commands: list, cwd: Path, env: dict[str, str], timeout: float = 300
) -> list[subprocess.CompletedProcess]:
    """Each command line (without `kernelevolve`) run in turn by `main()` in one subprocess; a
    CompletedProcess per command, as `subprocess.run(..., capture_output=True, text=True)` gives.
    A command line is a list of arguments, or (arguments, environment variables for it alone)."""
    cases = [(argv, {}) if isinstance(argv, list) else argv for argv in commands]
    commands = [([str(a) for a in argv], extra) for argv, extra in cases]
    results = Path(cwd) / f".kernelevolve_many-{os.getpid()}-{id(commands)}.json"
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, json.dumps(commands), str(results)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0 and results.exists(), (proc.returncode, proc.stdout, proc.stderr)
    answers = json.loads(results.read_text())
    results.unlink()
    return [
        subprocess.CompletedProcess(["kernelevolve", *argv], code, out, err)
        for (argv, _), (code, out, err) in zip(commands, answers, strict=True)
    ]


def made_once(tmp_path_factory, worker_id: str, name: str, make: Callable[[Path], object]):
    """`make(folder)`'s JSON-able answer, made once this session (one folder, shared by the xdist workers)."""
    from filelock import FileLock

    # This session's folder, common to all its xdist workers (without xdist: the session's own).
    base = tmp_path_factory.getbasetemp()
    shared = base if worker_id == "master" else base.parent
    with FileLock(str(shared / f"{name}.lock")):
        made = shared / f"{name}.json"
        if made.exists():
            return json.loads(made.read_text())
        (folder := shared / name).mkdir()
        answer = make(folder)
        made.write_text(json.dumps(answer))
        return answer


def kernelevolve_in_process(args, monkeypatch, env: dict | None = None, cwd: Path | None = None, unset=()):
    """`kernelevolve ARGS` in this process (typer's CliRunner): `unset` variables removed and `env`'s set for
    it (through monkeypatch: undone after the test), cwd `cwd`, the settings read afresh as a new process
    would. Its imports are the test process's, and the runs of one test process share the evaluator's fork
    server (candidates and judges are still sandboxed processes). (returncode, stdout, stderr); an
    exception other than SystemExit is appended to stderr."""
    from types import SimpleNamespace

    from typer.testing import CliRunner

    from kernelevolve.cli import app
    from kernelevolve.settings import settings

    for name in unset:
        monkeypatch.delenv(name, raising=False)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    if cwd is not None:
        monkeypatch.chdir(cwd)
    settings.cache_clear()
    out = CliRunner().invoke(app, [str(a) for a in args])
    stderr = out.stderr + (repr(out.exception) if out.exception and not isinstance(out.exception, SystemExit) else "")
    return SimpleNamespace(returncode=out.exit_code, stdout=out.stdout, stderr=stderr)
