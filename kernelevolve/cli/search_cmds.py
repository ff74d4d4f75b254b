"""`kernelevolve run | resume | runs | show`: search for kernels and look at past searches."""

from __future__ import annotations

import json
import time
from typing import Optional

import typer
from rich.console import Console
from rich.table import Column, Table

from kernelevolve.cli.app import (
    DB_HELP,
    EXIT_FAILED,
    EXIT_OK,
    app,
    check_model_or_fail,
    console,
    err_console,
    fail,
    load_spec_or_fail,
    preflight_or_fail,
    print_plain,
    print_table_or_entries,
    repo_or_fail,
    resolve_device,
    settings_or_fail,
    shapes_or_fail,
)
from kernelevolve.cli.profile_cmd import PROFILE_HELP, print_node_profile, profile_settings_or_fail

REPLY_CACHE_HELP = (
    "Reuse LLM replies cached by earlier runs in the same --db database (off by default, or "
    "KERNELEVOLVE_REPLY_CACHE=1): keyed by provider, model, endpoint, temperature, reply limit and the "
    "whole prompt (spec, shapes, dtypes, device); `kernelevolve cache clear` empties it. A resumed run replays its own recorded calls "
    "either way, so it never pays twice."
)


PARALLEL_HELP = (
    "Nodes in flight at once: proposals and evaluations overlap and results are recorded as they complete "
    "(default: the executor's parallelism, one per GPU). Saved with the run; resume keeps it unless given."
)
EXECUTOR_HELP = (
    "Where evaluations run: local (this host's GPUs) or ray (one worker per GPU of a Ray cluster; "
    "pip install 'kernelevolve[ray]'). Saved with the run."
)
RAY_ADDRESS_HELP = (
    "With --executor ray: the cluster to join (HOST:PORT, or auto: the one running on this host); default: "
    "$RAY_ADDRESS, else a cluster started on this host for the run. Workers on other hosts need a --db they can "
    "reach (PostgreSQL)."
)


def _parallel_or_fail(parallel: int | None, workers: int | None) -> int | None:
    """--parallel, or --workers, its earlier name (kept, hidden)."""
    if parallel is not None and workers is not None and parallel != workers:
        fail(f"--parallel {parallel} and --workers {workers}: --workers is the old name of --parallel; give one")
    value = parallel if parallel is not None else workers
    _positive("--parallel", value)
    return value


def _executor_or_fail(executor: str | None, ray_address: str | None, saved: str | None = None) -> None:
    """A known executor; Ray installed when it is the one (one line otherwise, before anything is spent)."""
    if executor is not None and executor not in ("local", "ray"):
        fail(f"--executor {executor!r}: use local or ray")
    if (executor or saved) == "ray":
        from kernelevolve.evaluation.ray_executor import RayUnavailable, require_ray

        try:
            require_ray()
        except RayUnavailable as e:
            fail(str(e))
    elif ray_address is not None:
        fail("--ray-address needs --executor ray")


def _positive(name: str, value, allow_zero: bool = False) -> None:
    if value is not None and (value < 0 or (value == 0 and not allow_zero)):
        fail(f"{name} {value}: must be {'0 or more' if allow_zero else 'more than 0'}")


@app.command("run")
def run_command(
    spec_path: str = typer.Argument(..., metavar="SPEC", help="Spec YAML or a KernelBench reference module (.py)."),
    policy: str = typer.Option("greedy", "--policy", help="greedy | mcts | evolutionary."),
    budget: Optional[int] = typer.Option(
        None, "--budget", help="Most nodes (kernel candidates) to make; default: the spec's budget.nodes."
    ),
    device: Optional[str] = typer.Option(
        None, "--device", help="cuda or interpret (CPU, correctness only). Default: cuda if a GPU is visible."
    ),
    shape: Optional[list[str]] = typer.Option(
        None, "--shape", metavar="NAME=VALUE[,NAME=VALUE...]", help="Replace the spec's shapes; repeat for several."
    ),
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
    model: Optional[str] = typer.Option(
        None, "--model", help="Operator: PROVIDER:MODEL, or plugin:PATH.py:CLASS. Default: the offline operator."
    ),
    temperature: Optional[float] = typer.Option(
        None, "--temperature", help="LLM sampling temperature (default: the provider's, or $KERNELEVOLVE_TEMPERATURE)."
    ),
    max_tokens: Optional[int] = typer.Option(
        None, "--max-tokens", help="Longest LLM reply in tokens (default 8192, or $KERNELEVOLVE_MAX_TOKENS)."
    ),
    timeout: float = typer.Option(
        300.0, "--timeout", metavar="SECONDS", help="Evaluation time limit per candidate phase."
    ),
    drafts: int = typer.Option(3, "--drafts", help="Independent drafts before any improvement."),
    seed: Optional[int] = typer.Option(
        None, "--seed", help="Seed of the run's random stream (saved; resume continues it)."
    ),
    wall_clock: Optional[float] = typer.Option(
        None, "--wall-clock", metavar="SECONDS", help="Stop starting nodes after this much search time."
    ),
    tokens: Optional[int] = typer.Option(None, "--tokens", help="Stop after this many LLM tokens."),
    cost: Optional[float] = typer.Option(None, "--cost", metavar="USD", help="Stop after this much LLM cost."),
    stall: Optional[int] = typer.Option(
        None, "--stall", metavar="K", help="Stop after K evaluated nodes without a new best."
    ),
    target: Optional[float] = typer.Option(
        None, "--target", metavar="SPEEDUP", help="Stop once a node reaches this fitness (GPU only)."
    ),
    debug_depth: int = typer.Option(3, "--debug-depth", help="Most debug attempts in a row on a failing line."),
    exploration: float = typer.Option(1.4, "--exploration", help="MCTS: UCT exploration constant."),
    parallel: Optional[int] = typer.Option(None, "--parallel", metavar="N", help=PARALLEL_HELP),
    workers: Optional[int] = typer.Option(None, "--workers", hidden=True, help="The old name of --parallel."),
    executor: str = typer.Option("local", "--executor", metavar="local|ray", help=EXECUTOR_HELP),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", metavar="ADDR", help=RAY_ADDRESS_HELP),
    reply_cache: bool = typer.Option(False, "--reply-cache", help=REPLY_CACHE_HELP),
    no_model_check: bool = typer.Option(
        False,
        "--no-model-check",
        help="Skip the one cheap request that checks --model's endpoint, key and model before the run.",
    ),
    no_preflight: bool = typer.Option(
        False, "--no-preflight", help="Skip running the reference once per shape in the sandbox before the run."
    ),
    profile: str = typer.Option("auto", "--profile", metavar="TOOLS", help=PROFILE_HELP),
    profile_within: float = typer.Option(
        0.05,
        "--profile-within",
        metavar="FRACTION",
        help="Profile nodes scoring within this fraction of the best (0: new bests only).",
    ),
    profile_timeout: float = typer.Option(
        300.0,
        "--profile-timeout",
        metavar="SECONDS",
        help="Time limit per profiling tool and node (sandboxed like evaluations).",
    ),
    stop_at_roofline: Optional[float] = typer.Option(
        None,
        "--stop-at-roofline",
        metavar="FRACTION",
        help="Stop once a profiled node reaches this fraction of its roofline (termination reason: roofline).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON summary on stdout (progress goes to stderr)."),
) -> None:
    """Search for a faster kernel: drafts, then debug/improve steps chosen by the policy.

    Before anything is spent, the reference runs once per shape in the sandbox (a reference too
    big for it stops the run with a hint to use --shape) and --model gets one cheap check
    request. The run id comes first; `kernelevolve resume RUN_ID` continues a run that was
    stopped or killed. LLM replies are not cached across runs unless --reply-cache is given.
    Exit status: 0 a correct kernel was found, 1 none was, 2 unusable input.

    Example: kernelevolve run specs/softmax.yaml --policy mcts --budget 30
    """
    from kernelevolve.search.policies import POLICIES, make_policy
    from kernelevolve.search.session import RunSettings, SessionError, start_run

    spec = load_spec_or_fail(spec_path)
    shapes = shapes_or_fail(spec, shape)
    if policy not in POLICIES:
        fail(f"--policy {policy!r}: use one of {', '.join(POLICIES)}")
    for name, value in (
        ("--budget", budget),
        ("--timeout", timeout),
        ("--drafts", drafts),
        ("--wall-clock", wall_clock),
        ("--tokens", tokens),
        ("--cost", cost),
        ("--stall", stall),
        ("--target", target),
    ):
        _positive(name, value)
    parallel = _parallel_or_fail(parallel, workers)
    _executor_or_fail(executor, ray_address)
    _positive("--debug-depth", debug_depth, allow_zero=True)
    _positive("--exploration", exploration, allow_zero=True)
    options = {"drafts": drafts, "max_debug_depth": debug_depth}
    if policy == "mcts":
        options["exploration"] = exploration
    try:
        make_policy(policy, **options)
    except ValueError as e:
        fail(str(e))
    if temperature is not None and not 0 <= temperature <= 2:
        fail(f"--temperature {temperature}: must be between 0 and 2")
    _positive("--max-tokens", max_tokens)
    env = settings_or_fail()
    model = (model or env.model or "offline").strip()
    model_options = {k: v for k, v in (("temperature", temperature), ("max_tokens", max_tokens)) if v is not None}
    if not model.startswith(("plugin:", "offline")):  # a model: the environment's settings under the options'
        model_options = {**env.operator_options(), **model_options}
        if reply_cache:
            model_options["use_cache"] = True
    # model_options are saved with the run: a resume builds the same operator whatever its environment
    device = resolve_device(device)
    _positive("--profile-timeout", profile_timeout)
    profiling = profile_settings_or_fail(profile, device, profile_within, profile_timeout, stop_at_roofline)
    if executor == "ray" and profiling is not None:
        # Profiles are taken on this host's GPUs, where they would share a GPU with the workers' timings.
        if profile != "auto":
            fail(f"--profile {profile}: not with --executor ray yet (profiles run on this host); use --profile off")
        profiling = None
    repo = repo_or_fail(db)  # an unusable database fails before anything is spent
    if executor == "ray" and ray_address and repo.url.startswith("sqlite"):
        print_plain(
            f"note: Ray workers on other hosts cannot open {repo.display_url} (a file on this host); "
            "give them a --db they can all reach (PostgreSQL)",
            out=err_console,
        )
    operator = _operator_or_fail(model, spec, model_options)
    if not no_preflight:
        preflight_or_fail(spec, device, shapes, timeout)
    if not no_model_check:
        check_model_or_fail(operator, model)
    limits = spec.budget.with_overrides(
        max_nodes=budget, wall_clock_s=wall_clock, tokens=tokens, cost_usd=cost, stall=stall, target_fitness=target
    )
    settings = RunSettings(
        policy=policy,
        policy_options=options,
        limits=limits,
        device=device,
        shapes=shapes,
        model=model,
        model_options=model_options,
        timeout_s=timeout,
        seed=seed,
        parallel=parallel,
        executor=executor,
        ray_address=ray_address,
        knowledge_base=_users_knowledge_base(),
        profile=profiling,
    )
    try:
        run_id = start_run(repo, spec, settings)
    except (SessionError, ValueError) as e:
        fail(str(e))
    where = "" if db is None else f" --db {db}"
    out = err_console if as_json else console
    out.print(
        f"run [bold]{run_id}[/] ({spec.name}, {policy}, {device}, budget {limits.max_nodes} nodes, "
        f"{operator.name}); resume with:",
        highlight=False,
    )
    print_plain(f"  kernelevolve resume {run_id}{where}", out=out)
    _search(repo, run_id, operator, as_json, db)


@app.command("resume")
def resume_command(
    run_id: str = typer.Argument(..., metavar="RUN_ID"),
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
    budget: Optional[int] = typer.Option(
        None, "--budget", help="A new node budget (to search on after a finished run)."
    ),
    force: bool = typer.Option(
        False, "--force", help="Resume even if the run looks held by a live process on this host."
    ),
    parallel: Optional[int] = typer.Option(None, "--parallel", metavar="N", help=PARALLEL_HELP),
    workers: Optional[int] = typer.Option(None, "--workers", hidden=True, help="The old name of --parallel."),
    executor: Optional[str] = typer.Option(
        None, "--executor", metavar="local|ray", help="Where evaluations run (default: where the run's did)."
    ),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", metavar="ADDR", help=RAY_ADDRESS_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON summary on stdout."),
) -> None:
    """Continue a run where the database left it: evaluated nodes stay, pending ones are evaluated again.

    Exit status: 0 a correct kernel was found, 1 none was, 2 unusable input.
    """
    from kernelevolve.search.session import RunSettings, SessionError, check_resumable

    _positive("--budget", budget)
    parallel = _parallel_or_fail(parallel, workers)
    repo = repo_or_fail(db)
    try:
        run = check_resumable(repo, run_id, force)
    except SessionError as e:
        fail(str(e))
    settings = RunSettings.model_validate(run.settings)
    _executor_or_fail(executor, ray_address if executor != "local" else None, saved=settings.executor)
    if executor == "local" and ray_address is not None:
        fail("--ray-address needs --executor ray")
    nodes = len(repo.load_graph(run_id))
    if run.status == "finished" and (budget is None or budget <= nodes):
        fail(
            f"run {run_id} already finished ({run.termination_reason}) with {nodes} nodes; "
            f"pass --budget N (more than {nodes}) to search on"
        )
    operator = _operator_or_fail(settings.model, options=settings.model_options)
    replayed = operator.replay(repo.llm_calls(run_id))
    more = f"; {replayed} recorded model repl{'y' if replayed == 1 else 'ies'} to replay" if replayed else ""
    (err_console if as_json else console).print(
        f"resuming run [bold]{run_id}[/] ({nodes} nodes so far{more})", highlight=False
    )
    _search(
        repo,
        run_id,
        operator,
        as_json,
        db,
        max_nodes=budget,
        overrides={"parallel": parallel, "executor": executor, "ray_address": ray_address},
    )


def _users_knowledge_base() -> str | None:
    from kernelevolve.paths import users_knowledge_base

    kb = users_knowledge_base()
    return None if kb is None else str(kb)


def _operator_or_fail(model: str | None, spec=None, options: dict | None = None):
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


def _search(
    repo,
    run_id: str,
    operator,
    as_json: bool,
    db: str | None,
    max_nodes: int | None = None,
    overrides: dict | None = None,
) -> None:
    from kernelevolve.cli.progress import ProgressView
    from kernelevolve.search.session import SessionError, build_engine

    operator.attach(repo)  # e.g. --reply-cache: kept in the experiment database
    out = Console(stderr=True) if as_json else console
    view = ProgressView(out)
    try:
        engine = build_engine(repo, run_id, operator=operator, on_event=view, max_nodes=max_nodes, **(overrides or {}))
    except SessionError as e:
        fail(str(e))
    try:
        reason = _drive(engine, view, run_id, as_json, db)
    finally:
        close = getattr(engine.evaluator, "close", None)
        if close is not None:  # Ray workers retire; a Ray cluster started for the run stops
            close()
    _summarise(repo, run_id, engine, reason, as_json, db)


def _drive(engine, view, run_id: str, as_json: bool, db: str | None) -> str:
    from sqlalchemy.exc import SQLAlchemyError
    from kernelevolve.logs import run_log

    try:
        with view, run_log(run_id) as log_file:
            print_plain(f"log: {log_file}", out=err_console if as_json else console)
            reason = engine.run()
    except KeyboardInterrupt:
        where = "" if db is None else f" --db {db}"
        err_console.print(f"interrupted: resume with `kernelevolve resume {run_id}{where}`", highlight=False)
        raise typer.Exit(130) from None
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
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False)
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
            f"finished: {reason}; {len(done)} nodes, {sum(n.correct for n in done)} correct, {engine.elapsed_s:.0f}s",
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


@app.command("runs")
def runs_command(
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list."),
) -> None:
    """List the runs in the experiment database, newest first: spec, model, status, nodes,
    best result and LLM cost."""
    from kernelevolve.search.graph import best_nodes
    from kernelevolve.views import fitness_text

    repo = repo_or_fail(db)
    counts = repo.node_counts()
    rows = []
    for run in repo.runs():
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


@app.command("show")
def show_command(
    run_id: str = typer.Argument(..., metavar="RUN_ID"),
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
    node: Optional[int] = typer.Option(None, "--node", help="Print this node's source (with --json: all its details)."),
    as_json: bool = typer.Option(False, "--json", help="Print the run and its nodes as JSON."),
) -> None:
    """A run: its search tree, best nodes and their per-shape numbers; or one node's source."""
    from kernelevolve.cli.run_views import node_dict, node_language, run_dict, tree_lines
    from kernelevolve.search.graph import best_nodes
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
        f"run {run.id}: {run.spec_name}, {run.policy} on {run.device}, {model}, {status}, {len(graph)} nodes, "
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
