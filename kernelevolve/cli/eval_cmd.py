"""`kernelevolve eval SPEC CANDIDATE.py`: check (and on a GPU, time) one candidate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from kernelevolve.cli.app import (
    EXIT_FAILED,
    EXIT_OK,
    app,
    console,
    fail,
    load_spec_or_fail,
    resolve_device,
    shapes_or_fail,
)
from kernelevolve.evaluation.result import EvalResult


@app.command("eval")
def eval_command(
    spec_path: str = typer.Argument(..., metavar="SPEC", help="Spec YAML (specs/softmax.yaml) or a KernelBench reference module (.py)."),
    candidate: Path = typer.Argument(..., metavar="CANDIDATE.py", help="Python source defining class ModelNew(nn.Module)."),
    device: Optional[str] = typer.Option(None, "--device", help="cuda (check + time on a GPU) or interpret (CPU, TRITON_INTERPRET=1, correctness only). Default: cuda if a GPU is visible."),
    shape: Optional[list[str]] = typer.Option(None, "--shape", metavar="NAME=VALUE[,NAME=VALUE...]", help="Override the reference's module constants; repeat for several shapes (they replace the spec's)."),
    timeout: float = typer.Option(300.0, "--timeout", min=1, metavar="SECONDS", help="Wall-clock limit per phase (correctness, benchmark); the process group is killed after it."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of the table."),
) -> None:
    """Evaluate one candidate kernel against a spec: correctness, then timing on a GPU.

    Exit status: 0 correct, 1 evaluated and failed, 2 could not evaluate (bad spec, arguments or file).

    Example: kernelevolve eval specs/softmax.yaml knowledge_base/kernels/softmax.py --device interpret
    """
    spec = load_spec_or_fail(spec_path)
    shapes = shapes_or_fail(spec, shape)
    if not candidate.is_file():
        fail(f"{candidate}: no such file")
    try:
        source = candidate.read_text()
    except (OSError, UnicodeDecodeError) as e:
        fail(f"{candidate}: cannot read: {e}")
    device = resolve_device(device)

    from kernelevolve.evaluation.evaluator import Evaluator

    evaluator = Evaluator(device=device, timeout_s=timeout)
    if as_json:
        result = evaluator.evaluate(spec, source, shapes)
        typer.echo(json.dumps(result.to_dict(), indent=2))
    else:
        with console.status(f"evaluating {candidate.name} on {device} ({spec.name}, {len(spec.cases(device, shapes))} cases)…"):
            result = evaluator.evaluate(spec, source, shapes)
        print_result(result, spec.name, candidate.name)
    raise typer.Exit(EXIT_OK if result.correct else EXIT_FAILED)


def _num(value: float | None, fmt: str) -> str:
    return "—" if value is None else format(value, fmt)


def print_result(result: EvalResult, spec_name: str, candidate_name: str) -> None:
    table = Table(title=f"{candidate_name} vs {spec_name} ({result.device})", title_justify="left")
    for col in ("shape", "ok", "max abs err", "rel err", "latency ms", "baseline ms", "speedup", "GB/s"):
        table.add_column(col, justify="left" if col == "shape" else "right", no_wrap=col == "shape")
    for s in result.shapes:
        ok = {True: "[green]yes[/]", False: f"[red]{s.failure or 'no'}[/]", None: "—"}[s.correct]
        base = _num(s.baseline_ms, ".4f") + (" (cached)" if s.baseline_cached else "")
        table.add_row(s.label, ok, _num(s.max_abs_err, ".2e"), _num(s.max_rel_err, ".2e"), _num(s.latency_ms, ".4f"),
                      base, _num(s.speedup, ".2f") + ("x" if s.speedup else ""), _num(s.gbps, ".0f"))
    console.print(table)
    if result.failure:
        console.print(f"[red]failed ({result.failure}):[/] {result.message}", highlight=False)
        for s in result.shapes:
            if s.message and s.message not in result.message:
                console.print(f"  {s.label}: {s.message}", highlight=False)
    fitness = result.fitness
    if fitness is None:
        note = "correct; untimed (the interpreter checks correctness only, run with --device cuda for speedups)"
        console.print(f"fitness: — ({note})")
    else:
        console.print(f"fitness: [bold]{fitness:.3f}[/] (geometric-mean speedup over {len(result.shapes)} cases)")
    for mark, reason in result.marks.items():
        console.print(f"[yellow]{mark}:[/] {reason}; not to be trusted until a person has looked", highlight=False)
    phases = ", ".join(f"{k} {v:.1f}s" for k, v in result.phases_s.items())
    console.print(f"[dim]evaluated in {result.duration_s:.1f}s ({phases})[/]")
