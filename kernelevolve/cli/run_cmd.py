"""`kernelevolve run | resume`: search for kernels, and continue a search where it stopped."""

from __future__ import annotations

from typing import Optional

import typer

from kernelevolve.cli.app import (
    db_option,
    POLICY_HELP,
    POLICY_METAVAR,
    DB_HELP,
    app,
    check_model_or_fail,
    chosen_shapes,
    console,
    err_console,
    fail,
    load_spec_or_fail,
    plural,
    preflight_or_fail,
    print_plain,
    print_wrapped,
    repo_or_fail,
    resolve_device,
    settings_or_fail,
    shapes_or_fail,
)
from kernelevolve.cli.profile_cmd import PROFILE_HELP, profile_settings_or_fail
from kernelevolve.cli.searching import drive_search, operator_or_fail
from kernelevolve.operators import providers_help

REPLY_CACHE_HELP = (
    "Reuse LLM replies cached by earlier runs in the same --db database (off by default, or "
    "KERNELEVOLVE_REPLY_CACHE=1): keyed by provider, model, endpoint, temperature, reply limit and the "
    "whole prompt (spec, shapes, dtypes, device); `kernelevolve cache clear` empties it. A resumed run replays its own recorded calls "
    "either way, so it never pays twice."
)


PARALLEL_HELP = (
    "Evaluations at once (default: what the evaluator takes: up to four per GPU here, every worker's under Ray); "
    "as many proposals are made ahead while they run, and results are recorded as they complete. "
    "Saved with the run; resume keeps it unless given."
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


@app.command("run")
def run_command(
    spec_path: str = typer.Argument(..., metavar="SPEC", help="Spec YAML or a KernelBench reference module (.py)."),
    policy: str = typer.Option("greedy", "--policy", metavar=POLICY_METAVAR, help=POLICY_HELP),
    budget: Optional[int] = typer.Option(
        None, "--budget", metavar="N", help="Most nodes (kernel candidates) to make; default: the spec's budget.nodes."
    ),
    device: Optional[str] = typer.Option(
        None,
        "--device",
        metavar="cuda|interpret",
        help="cuda or interpret (CPU, correctness only). Default: cuda if a GPU is visible.",
    ),
    shape: Optional[list[str]] = typer.Option(
        None, "--shape", metavar="NAME=VALUE[,NAME=VALUE...]", help="Replace the spec's shapes; repeat for several."
    ),
    db: Optional[str] = typer.Option(None, "--db", metavar="URL", help=DB_HELP),
    model: Optional[str] = typer.Option(
        None,
        "--model",
        metavar="PROVIDER:MODEL",
        help=f"The operator: {providers_help()} (the providers as registered). Default: offline.",
    ),
    kernel: Optional[str] = typer.Option(
        None,
        "--kernel",
        metavar="NAME",
        help="With the offline operator: the knowledge base's kernel to start from and tune "
        "(knowledge_base/kernels/NAME.py, e.g. softmax_cute for the CuTe DSL one). Default: the spec's `kernel:`.",
    ),
    temperature: Optional[float] = typer.Option(
        None,
        "--temperature",
        metavar="T",
        help="LLM sampling temperature (default: the provider's, or $KERNELEVOLVE_TEMPERATURE).",
    ),
    max_tokens: Optional[int] = typer.Option(
        None,
        "--max-tokens",
        metavar="N",
        help="Longest LLM reply in tokens (default 8192, or $KERNELEVOLVE_MAX_TOKENS).",
    ),
    timeout: float = typer.Option(
        300.0, "--timeout", metavar="SECONDS", help="Evaluation time limit per candidate phase."
    ),
    drafts: int = typer.Option(3, "--drafts", metavar="N", help="Independent drafts before any improvement."),
    seed: Optional[int] = typer.Option(
        None, "--seed", metavar="N", help="Seed of the run's random stream (saved; resume continues it)."
    ),
    wall_clock: Optional[float] = typer.Option(
        None, "--wall-clock", metavar="SECONDS", help="Stop starting nodes after this much search time."
    ),
    tokens: Optional[int] = typer.Option(None, "--tokens", metavar="N", help="Stop after this many LLM tokens."),
    cost: Optional[float] = typer.Option(None, "--cost", metavar="USD", help="Stop after this much LLM cost."),
    stall: Optional[int] = typer.Option(
        None, "--stall", metavar="K", help="Stop after K evaluated nodes without a new best."
    ),
    target: Optional[float] = typer.Option(
        None, "--target", metavar="SPEEDUP", help="Stop once a node reaches this fitness (GPU only)."
    ),
    debug_depth: int = typer.Option(
        3, "--debug-depth", metavar="N", help="Most debug attempts in a row on a failing line."
    ),
    exploration: float = typer.Option(1.4, "--exploration", metavar="C", help="MCTS: UCT exploration constant."),
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
    profile_share: float = typer.Option(
        0.1,
        "--profile-share",
        metavar="FRACTION",
        help="Most of the GPU time profiles may take (0.1: 10%; the best node first, others when a GPU would "
        "idle); the share spent is printed at the end and stored with the run.",
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

    On a GPU, `--kernel softmax_cute` tunes the CuTe DSL kernel's CONFIG instead.

    Examples:

    \b
      kernelevolve run specs/softmax.yaml --policy mcts --budget 30
      kernelevolve run specs/softmax.yaml --model openai:my-model
    """
    from kernelevolve import runs

    spec = load_spec_or_fail(spec_path)
    shapes = shapes_or_fail(spec, shape)
    out = err_console if as_json else console
    options = runs.RunOptions(
        policy=policy,
        budget=budget,
        wall_clock=wall_clock,
        tokens=tokens,
        cost=cost,
        stall=stall,
        target=target,
        timeout=timeout,
        drafts=drafts,
        debug_depth=debug_depth,
        exploration=exploration,
        seed=seed,
        parallel=parallel,
        workers=workers,
        executor=executor,
        ray_address=ray_address,
        device=device,
        model=model,
        kernel=kernel,
        temperature=temperature,
        max_tokens=max_tokens,
        reply_cache=reply_cache,
        profile_timeout=profile_timeout,
    )
    try:
        config = runs.resolve(
            options,
            spec,
            settings_or_fail(),
            device=resolve_device,
            shapes=lambda device: chosen_shapes(spec, device, shapes, out),
            profile=lambda device: profile_settings_or_fail(
                profile, device, profile_within, profile_timeout, stop_at_roofline, share=profile_share
            ),
        )
    except runs.ConfigError as e:
        fail(str(e))
    repo = repo_or_fail(db, write=True)  # an unusable database fails before anything is spent
    if executor == "ray" and ray_address and repo.url.startswith("sqlite"):
        print_plain(
            f"note: Ray workers on other hosts cannot open {repo.display_url} (a file on this host); "
            "give them a --db they can all reach (PostgreSQL)",
            out=err_console,
        )
    operator = operator_or_fail(config, spec)
    if not no_preflight:
        preflight_or_fail(spec, config.device, config.evaluation.shapes, timeout)
    if not no_model_check:
        check_model_or_fail(operator, config.model.name)

    def start():
        try:
            return runs.start(repo, spec, config, operator=operator)
        except runs.RunError as e:
            fail(str(e))

    def header(run) -> None:
        print_wrapped(
            f"run {run.id} ({spec.name}, {policy}, {config.device}, budget {plural(config.limits.max_nodes, 'node')}, "
            f"{operator.name}); resume with:",
            out=out,
        )
        print_plain(f"  kernelevolve resume {run.id}{db_option(db)}", out=out)

    drive_search(start, as_json, db, header)


@app.command("resume")
def resume_command(
    run_id: str = typer.Argument(..., metavar="RUN_ID"),
    db: Optional[str] = typer.Option(None, "--db", metavar="URL", help=DB_HELP),
    budget: Optional[int] = typer.Option(
        None, "--budget", metavar="N", help="A new node budget (to search on after a finished run)."
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
    from kernelevolve import runs

    try:
        runs.config.positive("--budget", budget)
        parallel = runs.config.parallel_option(parallel, workers)
    except runs.ConfigError as e:
        fail(str(e))
    repo = repo_or_fail(db, write=True)
    try:
        row = runs.check_resumable(repo, run_id, force)
        saved = runs.RunConfig.from_row(row.settings)
        runs.config.check_executor(
            executor, ray_address if executor != "local" else None, saved=saved.evaluation.executor
        )
    except runs.RunError as e:
        fail(str(e))
    if executor == "local" and ray_address is not None:
        fail("--ray-address needs --executor ray")
    nodes = len(repo.load_graph(run_id))
    if row.status == "finished" and (budget is None or budget <= nodes):
        fail(
            f"run {run_id} already finished ({row.termination_reason}) with {plural(nodes, 'node')}; "
            f"pass --budget N (more than {nodes}) to search on"
        )

    def start():
        try:
            return runs.open(
                repo,
                run_id,
                config=saved,
                max_nodes=budget,
                parallel=parallel,
                executor_name=executor,
                ray_address=ray_address,
            )
        except runs.RunError as e:
            fail(str(e))

    def header(run) -> None:
        more = (
            f"; {run.replayed} recorded model repl{'y' if run.replayed == 1 else 'ies'} to replay"
            if run.replayed
            else ""
        )
        (err_console if as_json else console).print(
            f"resuming run {run_id} ({plural(nodes, 'node')} so far{more})", highlight=False
        )

    drive_search(start, as_json, db, header)
