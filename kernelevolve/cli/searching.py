"""One search driven to its end, shared by `kernelevolve run` and `resume`: the operator, the
engine with its progress view, then the summary and the exit status."""

from __future__ import annotations

import json

import typer

from kernelevolve.cli.app import (
    EXIT_FAILED,
    EXIT_OK,
    console,
    err_console,
    exit_now,
    fail,
    interrupt_code,
    plural,
    print_plain,
    sandbox_warning,
    sigterm_as_interrupt,
    styled,
)


def operator_or_fail(model: str | None, spec=None, options: dict | None = None):
    """The operator, checked against the spec before any run is created (e.g. the offline
    operator needs a reference kernel for it)."""
    from kernelevolve.operators import OperatorError, resolve_operator

    try:
        operator = resolve_operator(model, **(options or {}))
        if spec is not None:
            operator.check(spec)
        return operator
    except OperatorError as e:
        fail(str(e))
    except Exception as e:  # a plugin that fails to import or construct is unusable input too
        fail(f"--model {model!r}: cannot load the operator: {type(e).__name__}: {e}")


def drive_search(
    repo,
    run_id: str,
    operator,
    as_json: bool,
    db: str | None,
    max_nodes: int | None = None,
    overrides: dict | None = None,
) -> None:
    """Search until the run stops, then print its summary; never returns (it ends the command with its exit status)."""
    from kernelevolve.cli.progress import ProgressView
    from kernelevolve.search.session import SessionError, build_engine

    operator.attach(repo)  # e.g. --reply-cache: kept in the experiment database
    out = err_console if as_json else console
    view = ProgressView(out)
    try:
        engine = build_engine(repo, run_id, operator=operator, on_event=view, max_nodes=max_nodes, **(overrides or {}))
    except SessionError as e:
        fail(str(e))
    interrupted = None
    try:
        with sigterm_as_interrupt():
            reason = _drive(engine, view, run_id, as_json, db)
    except KeyboardInterrupt as e:
        interrupted = interrupt_code(e)
    finally:
        close = getattr(engine.evaluator, "close", None)
        if close is not None:  # Ray workers retire; a Ray cluster started for the run stops
            close()
    if interrupted is not None:
        exit_now(interrupted)
    _summarise(repo, run_id, engine, reason, as_json, db)


def _drive(engine, view, run_id: str, as_json: bool, db: str | None) -> str:
    from sqlalchemy.exc import SQLAlchemyError
    from kernelevolve.logs import run_log

    try:
        with view, run_log(run_id) as log_file:
            print_plain(f"log: {log_file}", out=err_console if as_json else console)
            reason = engine.run()
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (Terminated): the engine marked the run interrupted
        where = "" if db is None else f" --db {db}"
        print_plain(f"interrupted: resume with `kernelevolve resume {run_id}{where}`", out=err_console)
        raise
    except SQLAlchemyError as e:  # the database went away mid-run: what was committed is safe
        where = "" if db is None else f" --db {db}"
        fail(
            f"database error during the search ({type(e).__name__}: {str(e).strip().splitlines()[0]}); "
            f"once it is back: `kernelevolve resume {run_id}{where}`"
        )
    return reason


def _summarise(repo, run_id: str, engine, reason: str, as_json: bool, db: str | None) -> None:
    from kernelevolve.cli.run_views import run_dict
    from kernelevolve.search.graph import best_nodes
    from kernelevolve.views import fitness_text

    run = repo.run(run_id)
    graph = engine.graph
    best = best_nodes(graph, 1)
    for warning in engine.warnings[:3]:
        err_console.print(styled(("warning:", "yellow"), f" {warning}"), highlight=False)
    ran = next((n for n in graph.evaluated() if (n.evaluation.environment or {}).get("sandbox")), None)
    sealed = None if ran is None else sandbox_warning(ran.evaluation.environment["sandbox"])
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
            where = "" if db is None else f" --db {db}"
            console.print(
                f"best: node {best[0].id} ({graph.kind(best[0].id)}): {fitness_text(best[0])}; its source:",
                highlight=False,
                markup=False,
            )
            print_plain(f"  kernelevolve show {run_id} --node {best[0].id}{where}")
        else:
            console.print("no correct kernel found", highlight=False)
    raise typer.Exit(EXIT_OK if best else EXIT_FAILED)
