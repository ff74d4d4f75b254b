"""`kernelevolve runs`: the runs in the experiment database."""

from __future__ import annotations

import json
import time
from typing import Optional

import typer

from kernelevolve.cli.app import DB_HELP, app, console, print_plain, repo_or_fail


@app.command("runs")
def runs_command(
    db: Optional[str] = typer.Option(None, "--db", metavar="URL", help=DB_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list."),
) -> None:
    """List the runs in the experiment database, newest first: spec, model, status, nodes,
    best result and LLM cost.

    A run whose process died (kill -9, a crash) shows as stopped, not running: `kernelevolve
    resume RUN_ID` continues it."""
    from kernelevolve.records.graph import best_nodes
    from kernelevolve.views import fitness_text

    from kernelevolve.memory.workers import GONE, SILENT, run_processes

    repo = repo_or_fail(db)
    counts = repo.node_counts()
    runs = repo.runs()
    processes = run_processes(repo, runs)  # a `running` row whose process died is not running
    rows = []
    for run in runs:
        c = counts.get(run.id, {})
        best = best_nodes(repo.load_graph(run.id), 1)
        tokens, cost = repo.totals(run.id)
        rows.append(
            {
                "id": run.id,
                "spec": run.spec_name,
                "policy": run.policy,
                "device": run.device,
                "model": run.settings.get("model") or "offline",
                "status": run.status,
                # running rows only: alive, gone (its process died: resume it) or silent (no heartbeat)
                "process": processes.get(run.id),
                "termination_reason": run.termination_reason,
                "nodes": c.get("nodes", 0),
                "evaluated": c.get("evaluated", 0),
                "correct": c.get("correct", 0),
                "budget": run.settings.get("limits", {}).get("max_nodes"),
                "best": None
                if not best
                else {"id": best[0].id, "fitness": best[0].fitness, "text": fitness_text(best[0])},
                "tokens": tokens,
                "cost_usd": cost,
                "created_at": run.created_at,
            }
        )
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        console.print(f"no runs in {repo.display_url}", highlight=False, soft_wrap=True)
        return
    lines = []
    for r in rows:
        stop = r["status"] + (f" ({r['termination_reason']})" if r["termination_reason"] else "")
        if r["process"] == GONE:
            stop = "stopped (its process is gone: resume it)"
        elif r["process"] == SILENT:
            stop = "running? (no heartbeat)"
        best = "none" if r["best"] is None else f"#{r['best']['id']} {r['best']['text']}"
        lines.append(
            [
                r["id"],
                r["spec"],
                r["model"],
                stop,
                f"{r['correct']}/{r['evaluated']}/{r['budget']}",
                best,
                f"${r['cost_usd']:.2f}",
                time.strftime("%m-%d %H:%M", time.localtime(r["created_at"])),
            ]
        )
    header = ["run", "spec", "model", "status", "nodes", "best", "cost", "created"]
    widths = [max(len(x[i]) for x in [header, *lines]) for i in range(len(header))]
    if sum(widths) + 2 * (len(widths) - 1) <= console.width:  # one row per run, nothing cut or wrapped
        for row in [header, *lines]:
            text = "  ".join(cell.ljust(w) if i != 4 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
            print_plain(text.rstrip())
    else:  # narrow terminals and files: two lines per run, words never broken
        for row in lines:
            print_plain(f"{row[0]}  {row[1]}  {row[2]}  {row[7]}")
            print_plain(f"  {row[3]}, nodes {row[4]}, best {row[5]}, {row[6]}")
    console.print("nodes: correct/evaluated/budget", style="dim", highlight=False)
