"""One search driven to its end, shared by `kernelevolve run` and `resume`: the operator, the
engine with its progress view, then the summary and the exit status."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import typer

from kernelevolve.cli.app import (
    db_option,
    EXIT_FAILED,
    EXIT_OK,
    console,
    err_console,
    fail,
    plural,
    print_plain,
    sandbox_warning,
    styled,
)
from kernelevolve.cli.interrupts import exit_now, interrupt_code, sigterm_as_interrupt, sigterm_deferred

log = logging.getLogger(__name__)


def operator_or_fail(config, spec=None):
    """The run's operator (kernelevolve.runs.make_operator), checked against the spec before any run is
    created (e.g. the offline operator needs a reference kernel for it); one line when it cannot be."""
    from kernelevolve import runs

    try:
        return runs.make_operator(config, spec)
    except runs.RunError as e:
        fail(str(e))


def drive_search(start: Callable[[], object], as_json: bool, db: str | None, header: Callable[[object], None]) -> None:
    """Open the run (`start()`: a kernelevolve.runs.Run, its row written as running), print `header(run)`,
    search until it stops, then print its summary; never returns (it ends the command with its exit status).
    SIGTERM is Ctrl-C from before the run's row exists to the end: whenever it comes, the run is left
    `interrupted` with the resume command printed, never `running` with no process. The run's executor is
    closed on the way out."""
    from kernelevolve.cli.progress import ProgressView
    from kernelevolve.runs import RunError

    out = err_console if as_json else console
    view = ProgressView(out)
    run = interrupted = None
    with sigterm_as_interrupt():
        try:
            with sigterm_deferred():  # the row is written in there: a signal meanwhile waits until run is set
                run = start()
            with run:  # Ray workers retire, a Ray cluster started for the run stops, however the search ends
                header(run)
                try:
                    engine = run.engine(on_event=view)
                except RunError as e:
                    fail(str(e))
                reason = _drive(run, view, as_json, db)
        except KeyboardInterrupt as e:
            interrupted = interrupt_code(e)
            if run is not None:
                _left_interrupted(run, db)
    if interrupted is not None:
        exit_now(interrupted)
    _summarise(run.repo, run.id, engine, reason, as_json, db)


def _left_interrupted(run, db: str | None) -> None:
    """After an interruption: the run's row says `interrupted` (the engine writes it once its loop has begun;
    a signal before that leaves it to this) and the resume command is printed."""
    try:
        if run.repo.run(run.id).status == "running":
            run.repo.update_run(run.id, status="interrupted")
    except Exception as e:  # noqa: BLE001 (the database may be what failed; the hint still goes out)
        log.warning("run %s: could not mark it interrupted: %s", run.id, e)
    print_plain(f"interrupted: resume with `kernelevolve resume {run.id}{db_option(db)}`", out=err_console)


def _drive(run, view, as_json: bool, db: str | None) -> str:
    from sqlalchemy.exc import SQLAlchemyError

    run_id = run.id
    try:
        with view:
            reason = run.search(
                on_log=lambda log_file: print_plain(f"log: {log_file}", out=err_console if as_json else console)
            )
    except SQLAlchemyError as e:  # the database went away mid-run: what was committed is safe
        fail(
            f"database error during the search ({type(e).__name__}: {str(e).strip().splitlines()[0]}); "
            f"once it is back: `kernelevolve resume {run_id}{db_option(db)}`"
        )
    return reason


def _summarise(repo, run_id: str, engine, reason: str, as_json: bool, db: str | None) -> None:
    from kernelevolve.cli.run_views import run_dict
    from kernelevolve.records.graph import best_nodes
    from kernelevolve.views import fitness_text

    run = repo.run(run_id)
    graph = engine.graph
    best = best_nodes(graph, 1)
    for warning in engine.warnings[:3]:
        err_console.print(styled(("warning:", "yellow"), f" {warning}"), highlight=False)
    ran = next((n for n in graph.evaluated() if n.evaluation.diagnostics.sandbox), None)
    sealed = None if ran is None else sandbox_warning(ran.evaluation.diagnostics.sandbox)
    if sealed:  # as eval says it: once per run, from the first evaluation that reported its sandbox
        print_plain(sealed, out=err_console)
    if as_json:
        summary = run_dict(run, graph)
        summary["nodes"] = [
            {k: n[k] for k in ("id", "parents", "kind", "fitness", "failure", "message", "note")}
            for n in summary["nodes"]
        ]
        typer.echo(json.dumps(summary, indent=2))
    else:
        done = graph.evaluated()
        console.print(
            f"finished: {reason}; {plural(len(done), 'node')}, {sum(n.correct for n in done)} correct, {engine.elapsed_s:.0f}s",
            highlight=False,
        )
        if reason == "operator_error":
            last = next((n for n in reversed(graph.nodes()) if n.evaluation is not None and not n.correct), None)
            if last is not None:
                console.print(
                    f"the operator failed {engine.operator_errors} times in a row; last: {last.evaluation.message}",
                    highlight=False,
                    markup=False,
                )
        if best:
            console.print(
                f"best: node {best[0].id} ({graph.kind(best[0].id)}): {fitness_text(best[0])}; its source:",
                highlight=False,
                markup=False,
            )
            print_plain(f"  kernelevolve show {run_id} --node {best[0].id}{db_option(db)}")
        else:
            console.print("no correct kernel found", highlight=False)
    raise typer.Exit(EXIT_OK if best else EXIT_FAILED)
