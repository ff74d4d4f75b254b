"""`kernelevolve retime RUN|CAMPAIGN --device cuda`: time on a GPU what a search found under the interpreter.

A search made on a laptop (the interpreter: every candidate checked, none timed) is finished on a GPU host:
each correct node (or every node with code, `--all`) is evaluated again by the real evaluator at the spec's
GPU shapes, and the result replaces the node's interpreter evaluation (the old verdict and static estimate are
kept in the new one as `retimed_from`). Then the best is recomputed the way a search confirms a
new best: evaluated once more in fresh processes, held for review when the two disagree. The run's random
and policy state and its search time are left as they were, so `kernelevolve resume` continues it exactly
where it stopped (now with timed nodes, which rank above any estimate). Nodes already timed on this device
are skipped: after an interruption the same command picks up where it stopped.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Optional

import typer

from kernelevolve.records.result import Failure
from kernelevolve.runs import live_owner
from kernelevolve.cli.app import (
    DB_HELP,
    app,
    fail,
    plural,
    repo_or_fail,
    resolve_device,
    shapes_or_fail,
)
from kernelevolve.cli.interrupts import sigterm_as_interrupt

if TYPE_CHECKING:
    from kernelevolve.evaluation.executors import Executor

RECHECKS = 3  # how many would-be bests are re-evaluated at most when earlier ones prove unstable


class RetimeError(Exception):
    """A run that cannot be retimed; str() is one line."""


def _spec_of(run, given: str | None = None):
    """The run's spec as on disk now, unchanged since the run (its reference's fingerprint). A run made on
    another machine names a path that may not exist here: `given` (--spec), else the same file name in the
    bundled specs or the current directory."""
    from pathlib import Path

    from kernelevolve.paths import SPECS
    from kernelevolve.spec import SpecError, load_spec

    path = Path(given or run.spec_path)
    if not given and not path.exists():
        path = next((p for p in (SPECS / path.name, Path.cwd() / path.name) if p.exists()), path)
    try:
        spec = load_spec(path)
    except (SpecError, OSError) as e:
        raise RetimeError(f"run {run.id}: its spec cannot be loaded (give it with --spec PATH): {e}") from None
    if spec.fingerprint != run.spec_fingerprint:
        raise RetimeError(
            f"run {run.id}: the reference of {path} is not the run's "
            f"(fingerprint {spec.fingerprint} != {run.spec_fingerprint}): its nodes were written for the old one"
        )
    return spec


def _before(evaluation):
    """What the replaced evaluation said, kept with the new one."""
    from kernelevolve.records.result import Retimed

    return Retimed(
        device=evaluation.device,
        correct=evaluation.correct,
        failure=evaluation.failure,
        fitness=evaluation.fitness,
        shapes=[s.label for s in evaluation.shapes],
        static_cost=(evaluation.static or {}).get("cost"),
    )


def _was(node) -> str:
    from kernelevolve.views import fitness_text

    return fitness_text(node)


def targets(graph, every: bool, device: str, again: bool) -> list:
    """The nodes to evaluate: correct ones (or every one with code), less those already timed on `device`
    (a retime that failed because the reference could not run counts as not done);
    the run's best first (as it ranks them now: a static estimate under the interpreter), so that a retime
    cut short has timed what matters most."""
    from kernelevolve.records.graph import best_nodes

    rank = {n.id: i for i, n in enumerate(best_nodes(graph, len(graph)))}
    out = []
    for node in graph.evaluated():
        ev = node.evaluation
        # The reference itself failed there (out of the GPU's memory, say): nothing was learned of the node,
        # so it is tried again as if it had not been retimed.
        tool_failed = ev.failure == Failure.REFERENCE and ev.retimed_from is not None
        if node.source is None or not (every or node.correct or tool_failed):
            continue
        done = ev.device == device and (ev.timed or device == "interpret") and ev.retimed_from is not None
        done = done and not tool_failed
        if done and not again:
            continue
        out.append(node)
    return sorted(out, key=lambda n: (rank.get(n.id, len(rank)), n.id))


def retime_run(
    repo, run, evaluator: Executor, shapes, *, every: bool = False, again: bool = False, say=print, spec=None
) -> dict:
    """Evaluate the run's nodes with `evaluator`, store the results, recompute and confirm the best.
    Returns a summary (for --json)."""
    from kernelevolve.evaluation.executors import EvaluationKind, EvaluationRequest
    from kernelevolve.search.recheck import confirmed as confirm
    from kernelevolve.records.graph import best_nodes
    from kernelevolve.views import fitness_text

    spec = spec or _spec_of(run)
    graph = repo.load_graph(run.id)
    before = [{"id": n.id, "text": fitness_text(n)} for n in best_nodes(graph, 1)]  # before the graph changes
    todo = targets(graph, every, evaluator.device, again)
    state = dict(policy_state=run.policy_state or {}, rng_state=run.rng_state or {}, elapsed_s=run.elapsed_s)
    say(
        f"run {run.id} ({run.spec_name}): {plural(len(todo), 'node')} to evaluate on {evaluator.device}"
        + (f" ({plural(len(graph.evaluated()) - len(todo), 'other')} left as they are)" if graph.evaluated() else "")
    )
    done = []
    for i, node in enumerate(todo, 1):
        was = _was(node)
        began = time.monotonic()
        request = EvaluationRequest(spec, node.source, shapes, node_id=node.id, kind=EvaluationKind.RETIME)
        result = evaluator.run(request)
        result.retimed_from = node.evaluation.retimed_from or _before(node.evaluation)
        repo.record_evaluation(run.id, node.id, result, **state)  # the run's own state, unchanged: resume is exact
        graph.set_evaluation(node.id, result)
        now = fitness_text(graph[node.id])
        why = f": {result.message}" if not result.correct and result.message else ""
        say(f"  [{i}/{len(todo)}] node {node.id}: {now}{why} (was {was}; {time.monotonic() - began:.0f}s)")
        done.append({"node": node.id, "was": was, "now": now, "fitness": result.fitness})
    confirmed = _confirm_best(repo, run, graph, evaluator, spec, shapes, state, say, confirm)
    after = best_nodes(graph, 1)
    old = f"node {before[0]['id']} {before[0]['text']}" if before else "none"
    new = f"node {after[0].id} {fitness_text(after[0])}" if after else "none"
    say(f"run {run.id}: best {new} (before: {old})")
    return {
        "run": run.id,
        "spec": run.spec_name,
        "device": evaluator.device,
        "evaluated": done,
        "rechecked": confirmed,
        "best": None if not after else {"id": after[0].id, "fitness": after[0].fitness, "text": fitness_text(after[0])},
        "best_before": before[0] if before else None,
    }


def _confirm_best(repo, run, graph, evaluator: Executor, spec, shapes, state, say, confirmed) -> list[int]:
    """A timed best not confirmed yet is evaluated again in fresh processes (as a search does before a new
    best counts); one the second evaluation disagrees with is held for review, and the next is tried."""
    from kernelevolve.evaluation.executors import EvaluationKind, EvaluationRequest
    from kernelevolve.records.graph import best_nodes

    rechecked = []
    for _ in range(RECHECKS):
        best = best_nodes(graph, 1)
        if not best or best[0].fitness is None or best[0].evaluation.recheck is not None:
            break
        node = best[0]
        say(f"  node {node.id} leads: evaluating it again in fresh processes")
        second = evaluator.run(
            EvaluationRequest(spec, node.source, shapes, node_id=node.id, kind=EvaluationKind.RECHECK)
        )
        result = confirmed(node.evaluation, second)
        repo.record_evaluation(run.id, node.id, result, **state)
        graph.set_evaluation(node.id, result)
        rechecked.append(node.id)
        if result.marks:
            say(f"  node {node.id}: held for review: {'; '.join(result.marks.values())}")
        else:
            break
    return rechecked


def _runs_of(repo, target: str) -> list:
    """The run `target`, or the runs of campaign `target`; RetimeError when it is neither."""
    run = repo.run(target)
    if run is not None:
        return [run]
    from kernelevolve.memory.campaigns import campaign, problems

    if campaign(repo, target) is not None:
        runs = [repo.run(p.run_id) for p in problems(repo, target) if p.run_id]
        runs = [r for r in runs if r is not None]
        if not runs:
            raise RetimeError(f"campaign {target} has no runs yet (its problems were skipped or not started)")
        return runs
    known = ", ".join(r.id for r in repo.runs()[:5]) or "none"
    raise RetimeError(f"no run or campaign {target!r} in {repo.display_url} (recent runs: {known})")


@app.command("retime")
def retime_command(
    target: str = typer.Argument(..., metavar="RUN|CAMPAIGN", help="A run id, or a campaign id (all its runs)."),
    device: str = typer.Option(
        "cuda",
        "--device",
        metavar="DEVICE",
        help="cuda (time on this host's GPUs), or interpret (check again on the CPU).",
    ),
    every: bool = typer.Option(
        False, "--all", help="Every node with code, failed ones included (default: the correct ones)."
    ),
    again: bool = typer.Option(False, "--again", help="Nodes already retimed on this device too."),
    shape: Optional[list[str]] = typer.Option(
        None,
        "--shape",
        metavar="NAME=VALUE[,...]",
        help="Shapes to evaluate at, repeatable (default: the spec's shapes for the device).",
    ),
    spec_path: Optional[str] = typer.Option(
        None, "--spec", metavar="PATH", help="The run's spec or reference file, when the path it names is not here."
    ),
    timeout: Optional[float] = typer.Option(
        None, "--timeout", metavar="SECONDS", help="Per evaluation phase (default: the run's)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary on stdout (progress goes to stderr)."),
    db: Optional[str] = typer.Option(None, "--db", metavar="URL", help=DB_HELP),
) -> None:
    """Evaluate the nodes of an interpreter run (or of every run of a campaign) on a GPU with the real
    evaluator, store the timed results as the nodes' evaluations, and recompute the run's best (confirmed
    by a second evaluation, as a search does). The run can be resumed afterwards exactly where it stopped.

    Example:

    \b
      kernelevolve retime 3f9c2a1b --device cuda
    """
    import sys

    device = resolve_device(device)  # cuda without a visible GPU: one line, exit 2
    repo = repo_or_fail(db, write=True)
    out = (lambda text: print(text, file=sys.stderr, flush=True)) if as_json else (lambda text: print(text, flush=True))
    summaries = []
    try:
        try:
            runs = _runs_of(repo, target)
            for run in runs:
                pid = live_owner(run.owner) if run.status == "running" else None
                if pid is not None:
                    raise RetimeError(f"run {run.id} is being searched by process {pid} on this host: stop it first")
            plans = []
            for run in runs:
                spec = _spec_of(run, spec_path if len(runs) == 1 else None)
                shapes = (
                    shapes_or_fail(spec, shape)
                    if shape
                    else (run.settings.get("shapes") if device == "interpret" else None)
                )
                plans.append((run, spec, shapes))
        except RetimeError as e:
            fail(str(e))
        from kernelevolve.evaluation.evaluator import Evaluator
        from kernelevolve.memory.repository import BaselineTable
        from kernelevolve import paths

        with sigterm_as_interrupt():
            for run, spec, shapes in plans:
                kb = run.settings.get("knowledge_base")
                if kb:
                    paths.use_knowledge_base(kb)  # the kernels the run's candidates import
                limit = timeout if timeout is not None else float(run.settings.get("timeout_s") or 300.0)
                from kernelevolve.preflight import preflight

                checked = preflight(spec, device, shapes, timeout_s=limit)
                if not checked.ok:  # the reference cannot run at these shapes: no node could pass, none is charged
                    out(f"run {run.id} ({run.spec_name}): skipped: {checked.message}")
                    summaries.append({"run": run.id, "spec": run.spec_name, "skipped": checked.message, "best": None})
                    continue
                store = BaselineTable(repo)
                with Evaluator(device=device, timeout_s=limit, baseline_store=store, warm=False) as evaluator:
                    summaries.append(
                        retime_run(repo, run, evaluator, shapes, every=every, again=again, say=out, spec=spec)
                    )
    except KeyboardInterrupt:
        print(
            f"interrupted: the nodes evaluated so far are stored; `kernelevolve retime {target}` continues "
            "(nodes already retimed are skipped)",
            file=sys.stderr,
        )
        raise
    finally:
        repo.close()
    if as_json:
        print(json.dumps(summaries if len(summaries) != 1 else summaries[0], indent=2))
    if any(s["best"] is None for s in summaries):
        raise typer.Exit(1)  # as `run`: a run left without a correct kernel
