"""`kernelevolve show`: one run (its search tree, best nodes and per-shape numbers) or one node."""

from __future__ import annotations

import json
from typing import Optional

import typer
from rich.table import Column, Table

from kernelevolve.cli.app import (
    DB_HELP,
    EXIT_FAILED,
    app,
    console,
    err_console,
    fail,
    plural,
    print_plain,
    print_table_or_entries,
    repo_or_fail,
)
from kernelevolve.cli.profile_cmd import print_node_profile


@app.command("show")
def show_command(
    run_id: str = typer.Argument(..., metavar="RUN_ID"),
    db: Optional[str] = typer.Option(None, "--db", metavar="URL", help=DB_HELP),
    node: Optional[int] = typer.Option(
        None,
        "--node",
        metavar="N",
        help="Print this node's outcome (on stderr) and source (with --json: all its details).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the run and its nodes as JSON."),
) -> None:
    """A run: its search tree, best nodes and their per-shape numbers; or one node's source."""
    from kernelevolve.cli.run_views import node_dict, node_language, run_dict, tree_lines
    from kernelevolve.records.graph import best_nodes
    from kernelevolve.views import fitness_text, verdict

    repo = repo_or_fail(db)
    run = repo.run(run_id)
    if run is None:
        fail(f"no run {run_id!r} in {repo.display_url} (see `kernelevolve runs`)")
    graph = repo.load_graph(run_id)
    if node is not None:
        if node not in graph:
            fail(f"run {run_id} has no node {node} (nodes 0..{len(graph) - 1})")
        from kernelevolve.memory.profiles import load_profile

        profiled = load_profile(repo, run_id, node)
        if as_json:
            details = node_dict(graph, graph[node], with_source=True)
            details["profile"] = (
                None if profiled is None else {"summaries": profiled.summaries, "seconds": profiled.seconds}
            )
            typer.echo(json.dumps(details, indent=2))
        elif graph[node].source is None:
            from kernelevolve.views import failure_line

            fail(
                f"node {node} has no source (the operator's reply held no kernel): {failure_line(graph[node])}",
                EXIT_FAILED,
            )
        else:
            for line in _node_header(run_id, graph, graph[node]):  # stderr: `> kernel.py` keeps the source alone
                print_plain(line, out=err_console)
            typer.echo(graph[node].source)
            print_node_profile(profiled)
        return
    if as_json:
        typer.echo(json.dumps(run_dict(run, graph), indent=2))
        return
    width = console.width
    status = run.status + (f" ({run.termination_reason})" if run.termination_reason else "")
    model = run.settings.get("model") or "offline"
    tokens, cost = repo.totals(run_id)
    console.print(
        f"run {run.id}: {run.spec_name}, {run.policy} on {run.device}, {model}, {status}, {plural(len(graph), 'node')}, "
        f"{run.elapsed_s:.0f}s, {tokens} tokens, ${cost:.2f}",
        highlight=False,
        markup=False,
    )
    for line in tree_lines(graph, width=width):
        print_plain(line)
    for n in graph.evaluated():
        if n.held:
            for mark, reason in n.evaluation.marks.items():
                console.print(
                    f"node {n.id} held for review ({mark}): {reason}; a person may approve it with:",
                    highlight=False,
                    markup=False,
                )
                print_plain(f"  kernelevolve review {run_id} {n.id} --approve")
    best = best_nodes(graph, 5)
    if not best:
        console.print(
            "no correct node yet" + (" that is not held for review" if any(n.held for n in graph.evaluated()) else "")
        )
        return
    console.print("best nodes:", highlight=False)
    # The kernel language column only where a run holds candidates in more than Triton.
    language = {n.id: node_language(n) for n in graph.nodes()}
    several = set(language.values()) - {None, "triton"}
    table = Table(
        Column("node", justify="right", no_wrap=True),
        Column("kind", no_wrap=True),
        *([Column("language", no_wrap=True)] if several else []),
        Column("result", no_wrap=True),
        Column("change", overflow="fold"),
        box=None,
        pad_edge=False,
    )
    for n in best:
        table.add_row(
            str(n.id),
            graph.kind(n.id),
            *([language[n.id] or "-"] if several else []),
            fitness_text(n),
            n.note if n.note != graph.kind(n.id) else "",
        )
    console.print(table)
    ev = best[0].evaluation
    console.print(f"node {best[0].id} per shape:", highlight=False)
    fmt = lambda v, f="{:.4g}": "-" if v is None else f.format(v)  # noqa: E731
    entries = []
    if ev.timed:
        shapes = Table(
            "shape", "result", "max abs err", "latency ms", "baseline ms", "speedup", box=None, pad_edge=False
        )
        for s in ev.shapes:
            shapes.add_row(
                s.label,
                verdict(s.correct, s.failure),
                fmt(s.max_abs_err),
                fmt(s.latency_ms),
                fmt(s.baseline_ms),
                fmt(s.speedup, "{:.3f}x"),
            )
            entries.append(
                (
                    f"{s.label}:",
                    f"{verdict(s.correct, s.failure)}; max abs err {fmt(s.max_abs_err)}; "
                    f"{fmt(s.latency_ms)} ms against {fmt(s.baseline_ms)} ms baseline, "
                    f"speedup {fmt(s.speedup, '{:.3f}x')}",
                )
            )
    else:  # untimed: no latency columns that could only say "-"
        shapes = Table("shape", "result", "max abs err", "rel err", box=None, pad_edge=False)
        for s in ev.shapes:
            shapes.add_row(s.label, verdict(s.correct, s.failure), fmt(s.max_abs_err), fmt(s.max_rel_err))
            entries.append(
                (
                    f"{s.label}:",
                    f"{verdict(s.correct, s.failure)}; max abs err {fmt(s.max_abs_err)}, rel err {fmt(s.max_rel_err)}",
                )
            )
    print_table_or_entries(shapes, entries)


def _node_header(run_id: str, graph, node) -> list[str]:
    """The node's outcome as Python comments above its source (on the terminal the whole reads as one module):
    where it came from, its result or failure line, its change note, its result per shape."""
    import textwrap

    from kernelevolve.views import failure_line, fitness_text, verdict

    width = max(40, err_console.width)
    parents = f", from #{', #'.join(map(str, node.parents))}" if node.parents else ""
    texts = [
        f"node {node.id} of run {run_id} ({graph.kind(node.id)}{parents}): {failure_line(node) or fitness_text(node)}"
    ]
    if node.note and node.note != graph.kind(node.id):
        texts.append(f"change: {node.note}")
    ev = node.evaluation
    for s in [] if ev is None else ev.shapes:
        err = "" if s.max_abs_err is None else f", max abs err {s.max_abs_err:.3g}"
        speed = "" if s.speedup is None else f", {s.speedup:.3f}x"
        texts.append(f"{s.label}: {verdict(s.correct, s.failure)}{err}{speed}")
    lines = []
    for text in texts:
        lines += textwrap.wrap(
            " ".join(text.split()),
            width=width,
            initial_indent="# ",
            subsequent_indent="#   ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    return lines
