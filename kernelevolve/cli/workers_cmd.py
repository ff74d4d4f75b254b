"""`kernelevolve workers`: the evaluation workers alive now and what each is doing."""

from __future__ import annotations

import json
import time
from typing import Optional

import typer
from rich.table import Table

from kernelevolve.cli.app import DB_HELP, app, print_plain, print_table_or_entries, repo_or_fail


@app.command("workers")
def workers_command(
    db: Optional[str] = typer.Option(None, "--db", metavar="URL", help=DB_HELP),
    run: Optional[str] = typer.Option(None, "--run", metavar="RUN_ID", help="Only the workers of this run."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list."),
) -> None:
    """Live evaluation workers (local GPU slots and Ray actors) that wrote to this database: host, GPU,
    pid, executor, run, state (idle, evaluating, timing), node and queue. A worker is listed while
    its heartbeat is recent (every few seconds); one that died drops out of the list by itself.

    Example:

    \b
      kernelevolve workers --db postgresql+psycopg://me@dbhost/kernels
    """
    from kernelevolve.memory.workers import STALE_S, WorkerRegistry

    repo = repo_or_fail(db)
    now = time.time()
    rows = [
        {
            "id": w.id,
            "host": w.host,
            "gpu": w.gpu,
            "pid": w.pid,
            "executor": w.executor,
            "run_id": w.run_id,
            "state": w.state,
            "node": w.node_id,
            "queued": w.queued,
            "heartbeat_s_ago": round(max(0.0, now - w.heartbeat_at), 1),
            "up_s": round(max(0.0, now - w.started_at), 1),
        }
        for w in WorkerRegistry(repo).live(run_id=run)
    ]
    repo.close()
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        whose = f" of run {run}" if run else ""
        print_plain(f"no live workers{whose} in {repo.display_url} (none sent a heartbeat in the last {STALE_S:g} s)")
        return
    table = Table("worker", "host", "gpu", "pid", "executor", "run", "state", "queue", "heartbeat", box=None)
    entries = []
    for r in rows:
        state = r["state"] + (f" node {r['node']}" if r["node"] is not None else "")
        beat = f"{r['heartbeat_s_ago']:.0f}s ago"
        table.add_row(
            str(r["id"]),
            r["host"],
            r["gpu"],
            str(r["pid"]),
            r["executor"],
            r["run_id"] or "-",
            state,
            str(r["queued"]),
            beat,
        )
        entries.append(
            (
                f"worker {r['id']}:",
                f"{r['executor']} on {r['host']}, GPU {r['gpu']}, pid {r['pid']}, run {r['run_id'] or '-'}: "
                f"{state}, {r['queued']} queued, heartbeat {beat}",
            )
        )
    print_table_or_entries(table, entries)
