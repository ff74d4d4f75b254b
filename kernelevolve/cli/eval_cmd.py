"""`kernelevolve eval SPEC CANDIDATE.py`: check (and on a GPU, time) one candidate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.text import Text
from rich.table import Table

from kernelevolve.cli.app import (
    DB_HELP,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNUSABLE,
    app,
    candidate_or_fail,
    chosen_shapes,
    err_console,
    fail,
    console,
    load_spec_or_fail,
    preflight_or_fail,
    plural,
    print_plain,
    print_table_or_entries,
    print_wrapped,
    repo_or_fail,
    resolve_device,
    sandbox_warning,
    shapes_or_fail,
    styled,
)
from kernelevolve.records.result import EvalResult, Failure


@app.command("eval")
def eval_command(
    spec_path: str = typer.Argument(
        ..., metavar="SPEC", help="Spec YAML (specs/softmax.yaml) or a KernelBench reference module (.py)."
    ),
    candidate: Path = typer.Argument(
        ..., metavar="CANDIDATE.py", help="Python source defining class ModelNew(nn.Module)."
    ),
    device: Optional[str] = typer.Option(
        None,
        "--device",
        metavar="cuda|interpret",
        help="cuda (check + time on a GPU) or interpret (CPU, TRITON_INTERPRET=1, correctness only). Default: cuda if a GPU is visible.",
    ),
    shape: Optional[list[str]] = typer.Option(
        None,
        "--shape",
        metavar="NAME=VALUE[,NAME=VALUE...]",
        help="Override the reference's module constants; repeat for several shapes (they replace the spec's).",
    ),
    timeout: float = typer.Option(
        300.0,
        "--timeout",
        min=1,
        metavar="SECONDS",
        help="Wall-clock limit per phase (correctness, benchmark); the process group is killed after it.",
    ),
    no_preflight: bool = typer.Option(
        False, "--no-preflight", help="Skip running the reference alone once per shape first."
    ),
    db: Optional[str] = typer.Option(
        None, "--db", metavar="URL", help="Where baseline timings are cached on a GPU: " + DB_HELP
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of the table."),
) -> None:
    """Evaluate one candidate kernel against a spec: correctness, then timing on a GPU.

    First the reference runs alone once per shape in the sandbox: a reference that cannot run
    there (too big for its memory, too slow, an error) is exit 2 with a hint to use --shape,
    never a failure of the candidate.

    Exit status: 0 correct, 1 evaluated and failed, 2 could not evaluate (bad spec, arguments or
    file, or a GPU-only kernel language such as CuTe DSL under the CPU interpreter).

    Examples:

    \b
      kernelevolve eval specs/softmax.yaml \\
          knowledge_base/kernels/softmax.py --device interpret
      kernelevolve eval level1/19_ReLU.py my_relu.py --json
    """
    spec = load_spec_or_fail(spec_path)
    shapes = shapes_or_fail(spec, shape)
    candidate, source = candidate_or_fail(candidate)
    device = resolve_device(device)
    shapes = chosen_shapes(spec, device, shapes, err_console if as_json else console)
    if not no_preflight:
        preflight_or_fail(spec, device, shapes, timeout, quiet=as_json)

    from kernelevolve.evaluation.evaluator import Evaluator
    from kernelevolve.evaluation.executors import EvaluationKind, EvaluationRequest

    store = None
    if device == "cuda":  # only timings need the database: a CPU check leaves no file behind
        from kernelevolve.memory.repository import BaselineTable

        store = BaselineTable(repo_or_fail(db, write=True))
    # One candidate: no processes started ahead for a next one.
    evaluator = Evaluator(device=device, timeout_s=timeout, baseline_store=store, warm=False)
    request = EvaluationRequest(spec, source, shapes, kind=EvaluationKind.FILE)  # a profiled call on the GPU too
    if as_json:
        result = evaluator.run(request)
        typer.echo(json.dumps(result.to_dict(), indent=2))
    else:
        with console.status(
            f"evaluating {candidate.name} on {device} ({spec.name}, {plural(len(spec.cases(device, shapes)), 'case')})…"
        ):
            result = evaluator.run(request)
        print_result(result, spec.name, candidate.name)
    _warn_unsealed(result)
    if result.failure == Failure.REFERENCE:  # the reference could not run: unusable input, not the candidate's fault
        from kernelevolve.preflight import suggestion

        why = " ".join((result.message or "it failed").split())
        if why.startswith("default "):  # the label of the module's own constants
            why = "at the module's own sizes, " + why[len("default ") :]
        fail(f"the reference {spec.reference.name} cannot run on {device}: {why}; {suggestion(spec, device)}")
    # needs_gpu: the candidate could not be evaluated on this device (exit 2), it did not fail.
    raise typer.Exit(
        EXIT_OK if result.correct else EXIT_UNUSABLE if result.failure == Failure.NEEDS_GPU else EXIT_FAILED
    )


def _warn_unsealed(result: EvalResult) -> None:
    """One line on stderr when the OS refused part of the sandbox (the verdict still stands)."""
    # A candidate refused before it ran (the screen, the language check) had no sandbox to warn about.
    if result.failure != Failure.TAMPERING and result.phases_s:
        line = sandbox_warning(result.diagnostics.sandbox)
        if line:
            typer.echo(line, err=True)


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def print_result(result: EvalResult, spec_name: str, candidate_name: str) -> None:
    """A table that reads at 80 columns: timing columns only when something was timed."""
    from kernelevolve.records.result import EXPLANATIONS
    from kernelevolve.views import NOT_RUN, UNTIMED, verdict

    timed = any(s.latency_ms is not None or s.baseline_ms is not None for s in result.shapes)
    console.print(f"{candidate_name} vs {spec_name} on {result.device}:", highlight=False, markup=False)
    columns = ["shape", "result", "max abs err", "rel err"] + (
        ["latency ms", "baseline ms", "speedup", "GB/s"] if timed else []
    )
    table = Table(box=None, pad_edge=False)
    for col in columns:
        table.add_column(col, justify="left" if col in ("shape", "result") else "right", no_wrap=True)
    entries = []
    for s in result.shapes:
        text = verdict(s.correct, s.failure)
        row = [
            s.label,
            Text(text, style="green" if s.correct else "red" if s.correct is False or s.failure else ""),
            _num(s.max_abs_err, ".2e"),
            _num(s.max_rel_err, ".2e"),
        ]
        facts = f"{text}; max abs err {_num(s.max_abs_err, '.2e')}, rel err {_num(s.max_rel_err, '.2e')}"
        if timed:
            base = _num(s.baseline_ms, ".4f") + (" (cached)" if s.baseline_cached else "")
            row += [
                _num(s.latency_ms, ".4f"),
                base,
                _num(s.speedup, ".2f") + ("x" if s.speedup else ""),
                _num(s.gbps, ".0f"),
            ]
            cached = " (cached)" if s.baseline_cached else ""
            facts += (
                f"; {_num(s.latency_ms, '.4f')} ms against a baseline of {_num(s.baseline_ms, '.4f')} ms{cached}"
                + (f", speedup {s.speedup:.2f}x" if s.speedup else "")
                + (f", {s.gbps:.0f} GB/s" if s.gbps else "")
            )
        table.add_row(*row)
        entries.append((f"{s.label}:", facts))
    print_table_or_entries(table, entries)
    if result.failure == Failure.NEEDS_GPU:
        print_plain(result.message)
    elif result.failure:
        console.print(styled((f"failed ({result.failure}):", "red"), " " + result.message), highlight=False)
        if result.failure in EXPLANATIONS:
            console.print(f"  what this check means: {EXPLANATIONS[result.failure]}", highlight=False, markup=False)
        for s in result.shapes:
            if s.message and s.message not in result.message:
                console.print(f"  {s.label}: {s.message}", highlight=False, markup=False)
    fitness = result.fitness
    n = len(result.shapes)
    if result.failure == Failure.NEEDS_GPU:  # not a fault of the kernel: nothing ran
        console.print(f"result: {NOT_RUN}; run it with --device cuda", highlight=False)
    elif not result.correct:
        console.print(f"result: failed ({result.failure or 'incorrect'}); fitness 0", highlight=False)
    elif fitness is None:
        console.print(
            f"result: {UNTIMED} at {f'all {n} shapes' if n != 1 else 'its one shape'}; the interpreter checks "
            "correctness only (--device cuda measures speedups)",
            highlight=False,
        )
        from kernelevolve.evaluation.static_cost import summary

        if summary(result.static):  # a static estimate (kernelevolve/evaluation/static_cost.py), not a speedup
            print_wrapped(summary(result.static), out=console)
    else:
        console.print(
            styled(
                "result: correct; fitness ",
                (f"{fitness:.3f}x", "bold"),
                f" (geometric-mean speedup over {n} shape{'s' if n != 1 else ''})",
            ),
            highlight=False,
        )
    for mark, reason in result.marks.items():
        console.print(
            styled((f"{mark}:", "yellow"), f" {reason}; held for review: not to be trusted until a person has looked"),
            highlight=False,
        )
    phases = ", ".join(f"{k} {v:.1f}s" for k, v in result.phases_s.items())
    how = phases or "no process started: the source was refused before it ran"
    console.print(f"evaluated in {result.duration_s:.1f}s ({how})", style="dim", highlight=False)
