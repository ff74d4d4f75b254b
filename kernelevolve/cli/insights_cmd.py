"""`kernelevolve insights`: what the context memory learned, across runs."""

from __future__ import annotations

import json
import time
from typing import Optional

import typer
from kernelevolve.cli.app import DB_HELP, app, console, fail, plural, print_entries, repo_or_fail


@app.command("insights")
def insights_command(
    family: Optional[str] = typer.Option(
        None, "--family", metavar="FAMILY", help="Only insights about this operator family (e.g. rmsnorm)."
    ),
    hardware: Optional[str] = typer.Option(
        None, "--hardware", metavar="GPU", help="Only insights from searches for this GPU (e.g. h200)."
    ),
    limit: int = typer.Option(20, "--limit", metavar="N", help="How many, most recent first."),
    as_json: bool = typer.Option(False, "--json", help="Print them as a JSON list."),
    db: Optional[str] = typer.Option(None, "--db", metavar="URL", help=DB_HELP),
) -> None:
    """Short analyses written after each evaluation (by the model, or by rules offline): which
    change did what to correctness and speed. Later prompts on the same family retrieve them.

    Example:

    \b
      kernelevolve insights --family rmsnorm --hardware h200 --limit 10
    """
    if limit < 1:
        fail(f"--limit {limit}: must be 1 or more")
    repo = repo_or_fail(db)
    try:
        rows = repo.insights(family=family, hardware=hardware, limit=limit)
        runs = [] if rows or as_json else repo.runs()
    finally:
        repo.close()
    if as_json:
        print(
            json.dumps(
                [
                    {
                        "id": r.id,
                        "run_id": r.run_id,
                        "node_id": r.node_id,
                        "family": r.family,
                        "hardware": r.hardware,
                        "source": r.source,
                        "created_at": r.created_at,
                        "text": r.text,
                    }
                    for r in rows
                ],
                indent=2,
            )
        )
        return
    if not rows:
        what = " ".join(
            x for x in (f"family {family}" if family else "", f"hardware {hardware}" if hardware else "") if x
        )
        why = ""
        if runs and all(r.device == "interpret" for r in runs):  # say why a CPU-only database has none
            why = (
                f": its {plural(len(runs), 'run')} {'is' if len(runs) == 1 else 'are'} untimed (the interpreter), "
                "and untimed runs write insights only about failures and their repairs; insights about speed come from "
                "runs on a GPU"
            )
        head = f"no insights{' for ' + what if what else ''} in {repo.display_url}"
        if why:
            print_entries([(head + ":", why[2:])])
        else:
            console.print(head, highlight=False)
        return
    from kernelevolve.operators.context_builder import usable_insight

    entries = []
    for r in rows:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created_at))
        node = "" if r.node_id is None else f" node {r.node_id}"
        text = (
            r.text
            if usable_insight(r.text)
            else (
                f"(stored before insights were checked: it holds code or is {len(r.text)} characters long; "
                "never put into a prompt; see --json)"
            )
        )
        entries.append((f"{when}  run {r.run_id or '-'}{node}  {r.family or '-'} on {r.hardware or '-'}", text))
    print_entries(entries)
