"""Live progress of a search: a rich panel on a terminal, one plain line per node elsewhere."""

from __future__ import annotations

import time

from rich.console import Console
from rich.live import Live
from rich.table import Table

from kernelevolve.cli.app import print_entries, print_wrapped
from kernelevolve.search.progress import Progress
from kernelevolve.views import UNTIMED, clip, failure_line, fitness_text


def _best_text(p: Progress) -> str:
    if p.best is None:
        return "none correct yet"
    return f"#{p.best.id} " + (f"{p.best.fitness:.3f}x" if p.best.fitness is not None else UNTIMED)


def node_line(node, kind: str) -> str:
    """`node 3 debug: failed (no_code): operator error: ... connection refused` — a failed node
    carries its failure line, so a dead endpoint is visible where the run is watched."""
    return f"node {node.id} {kind}: " + (failure_line(node) or fitness_text(node))


def _budget_text(p: Progress) -> str:
    left = p.max_nodes - p.nodes
    parts = [f"{left} node{'' if left == 1 else 's'}"]
    if p.wall_clock_s:
        parts.append(f"{max(0.0, p.wall_clock_s - p.elapsed_s):.0f}s")
    return ", ".join(parts) + " left"


def summary_line(p: Progress) -> str:
    failures = ", ".join(f"{k} {v}" for k, v in sorted(p.failures.items())) or "none"
    held = "".join(f", {k} {v}" for k, v in sorted(p.held.items()))
    return (
        f"{p.evaluated}/{p.max_nodes} done, {p.in_flight} in flight | failures: {failures}{held} | "
        f"best: {_best_text(p)} | {_budget_text(p)} | {p.elapsed_s:.0f}s"
    ) + (f" | {p.time.line()}" if p.time is not None else "")  # where time goes: search/timing.py


class ProgressView:
    """Use as the engine's on_event callback, inside `with ProgressView(console):`."""

    def __init__(self, console: Console, live: bool | None = None) -> None:
        self.console = console
        self.live_enabled = console.is_terminal if live is None else live
        self._live: Live | None = None
        self._last = 0.0

    def __enter__(self) -> "ProgressView":
        if self.live_enabled:
            self._live = Live(console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def __call__(self, event: str, engine, node) -> None:
        p = engine.progress()
        if event == "finished" and p.time is not None:  # the run's time breakdown and profile share, once
            print_wrapped(p.time.summary(), out=self.console, indent=4)
        if self._live is not None:
            if event in ("evaluated", "node", "finished") or time.monotonic() - self._last > 0.5:
                self._last = time.monotonic()
                self._live.update(self._panel(p, engine, node))
            return
        if event == "evaluated":  # in a file or a pipe: the node's line, then the run's state wrapped under it
            kind = engine.graph.kind(node.id)
            print_entries([(clip(node_line(node, kind), 300), summary_line(p))], out=self.console)

    def _panel(self, p: Progress, engine, node) -> Table:
        table = Table.grid(padding=(0, 2))
        table.add_row("run", f"{engine.run_id}  {engine.policy.name} on {engine.device}")
        table.add_row("nodes", f"{p.evaluated} done / {p.in_flight} in flight / {p.max_nodes} budget")
        failures = ", ".join(f"{k} {v}" for k, v in sorted(p.failures.items())) or "none"
        table.add_row("failures", failures)
        if p.held:
            table.add_row("held for review", ", ".join(f"{k} {v}" for k, v in sorted(p.held.items())))
        table.add_row("best", _best_text(p))
        table.add_row("budget", f"{_budget_text(p)}; {p.elapsed_s:.0f}s elapsed, {p.tokens} tokens, ${p.cost_usd:.2f}")
        if p.time is not None:  # search/timing.py
            table.add_row("time", f"{p.time.line()}; {p.time.profile_text()}")
        if node is not None and node.evaluation is not None:
            width = max(20, self.console.width - 12)
            table.add_row("last", clip(node_line(node, engine.graph.kind(node.id)), width))
        return table
