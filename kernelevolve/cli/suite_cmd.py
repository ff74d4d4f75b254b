"""`kernelevolve suite | score`: campaigns over many problems, and their KernelBench-style scores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from kernelevolve.cli.app import (
    db_option,
    POLICY_HELP,
    POLICY_METAVAR,
    DB_HELP,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNUSABLE,
    app,
    check_model_or_fail,
    console,
    err_console,
    fail,
    plural,
    print_entries,
    print_plain,
    repo_or_fail,
    resolve_device,
    settings_or_fail,
)
from kernelevolve.cli.interrupts import exit_now, interrupt_code, sigterm_as_interrupt
from kernelevolve.operators import providers_help

SHAPE_HELP = (
    "Shapes of one problem instead of its own or the interpreter rule's: PROBLEM:NAME=VALUE[,...]; "
    "repeat for several shapes or problems."
)


@app.command("suite")
def suite_command(
    paths: Optional[list[str]] = typer.Argument(
        None,
        metavar="PATH...",
        help="Specs (.yaml), KernelBench-style problem files (.py), directories of them, or globs.",
    ),
    resume: Optional[str] = typer.Option(
        None,
        "--resume",
        metavar="CAMPAIGN",
        help="Continue a campaign that was stopped or killed: finished problems stay, the others go on.",
    ),
    solutions: Optional[Path] = typer.Option(
        None,
        "--solutions",
        metavar="DIR",
        help="Score the kernels in DIR (PROBLEM.py, or the spec's kernel name) instead of searching.",
    ),
    model: Optional[str] = typer.Option(
        None,
        "--model",
        metavar="PROVIDER:MODEL",
        help=f"The operator: {providers_help()} (the providers as registered). "
        "Default: offline (problems without a reference kernel are skipped).",
    ),
    budget: Optional[int] = typer.Option(
        None, "--budget", metavar="N", help="Most nodes per problem (default: each spec's budget.nodes)."
    ),
    policy: str = typer.Option("greedy", "--policy", metavar=POLICY_METAVAR, help=POLICY_HELP),
    drafts: int = typer.Option(
        3, "--drafts", metavar="N", help="Independent drafts per problem before any improvement."
    ),
    parallel: int = typer.Option(
        2, "--parallel", metavar="N", help="Problems searched at once (they share the evaluation workers)."
    ),
    device: Optional[str] = typer.Option(
        None, "--device", metavar="cuda|interpret", help="cuda or interpret (CPU, correctness only)."
    ),
    shape: Optional[list[str]] = typer.Option(None, "--shape", metavar="PROBLEM:NAME=VALUE[,...]", help=SHAPE_HELP),
    baseline: Optional[str] = typer.Option(
        None,
        "--baseline",
        metavar="eager|torch.compile",
        help="Time every problem against eager or torch.compile (default: each spec's baseline).",
    ),
    timeout: float = typer.Option(
        300.0, "--timeout", metavar="SECONDS", help="Evaluation time limit per candidate phase."
    ),
    seed: Optional[int] = typer.Option(
        None, "--seed", metavar="N", help="Seed of the campaign (problem i's run gets seed + i)."
    ),
    no_model_check: bool = typer.Option(
        False, "--no-model-check", help="Skip the one cheap request that checks --model."
    ),
    force: bool = typer.Option(False, "--force", help="With --resume: even if a live process on this host holds it."),
    db: Optional[str] = typer.Option(None, "--db", metavar="URL", help=DB_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the campaign's score as JSON on stdout at the end."),
) -> None:
    """Search (or score given kernels for) many problems as one campaign, then print its score.

    Each problem gets one search, a run in the database; --parallel of them run at once over the
    evaluation workers. Under the interpreter a problem file without small shapes gets them by
    the scaling rule (README: Campaigns). The campaign id comes first; `kernelevolve suite
    --resume CAMPAIGN` continues after Ctrl-C, a crash or kill -9; `kernelevolve score CAMPAIGN`
    prints the score again.

    Examples:

    \b
      kernelevolve suite specs/ --model openai:my-model --budget 10
      kernelevolve suite --solutions my_kernels/ kernelbench/level1/
    """
    from kernelevolve import runs
    from kernelevolve.campaign import runner
    from kernelevolve.campaign.problems import (
        ProblemError,
        choose_shapes,
        load_problems,
        match_solutions,
        parse_problem_shapes,
    )

    repo = repo_or_fail(db, write=True)
    out = err_console if as_json else console
    if resume is not None:
        if paths or solutions is not None:
            fail("--resume CAMPAIGN takes no PATH or --solutions: the campaign keeps its own")
        try:
            row = runner.check_resumable(repo, resume, force)
        except runner.CampaignError as e:
            fail(str(e))
        resolve_device(runner.CampaignSettings.model_validate(row.settings).device)  # a cuda campaign needs its GPU
        campaign_id = resume
        out.print(f"resuming campaign {campaign_id}", highlight=False)
    else:
        if not paths:
            fail("name at least one PATH (spec, problem file, directory or glob), or --resume CAMPAIGN")
        if parallel is not None and parallel <= 0:
            fail(f"--parallel {parallel}: must be more than 0")
        try:  # the problems' runs: policy, model (over the environment), timeout, knowledge base
            template = runs.resolve(
                runs.RunOptions(policy=policy, budget=budget, timeout=timeout, drafts=drafts, model=model),
                env=settings_or_fail(),
            )
        except runs.ConfigError as e:
            fail(str(e))
        if baseline not in (None, "eager", "torch.compile"):
            fail(f"--baseline {baseline!r}: use eager or torch.compile")
        device = resolve_device(device)
        try:
            problems = load_problems(paths)
            shapes = parse_problem_shapes(shape, problems)
            for p in problems:
                choose_shapes(p, device, shapes.get(p.name))
            if solutions is not None:
                match_solutions(problems, solutions)
        except ProblemError as e:
            fail(str(e))
        settings = runner.CampaignSettings.of(
            template,
            kind=runner.SOLUTIONS if solutions is not None else runner.SEARCH,
            budget=budget,
            device=device,
            parallel=parallel,
            seed=seed,
            baseline=baseline,
            solutions=None if solutions is None else str(solutions.resolve()),
            paths=list(paths),
        )
        skip = _skipped(problems, settings, no_model_check)
        campaign_id = runner.create(repo, problems, settings, skip)
        out.print(
            f"campaign {campaign_id} ({plural(len(problems), 'problem')}, "
            f"{'solutions from ' + str(solutions) if solutions else settings.model}, {device}); resume with:",
            highlight=False,
        )
        print_plain(f"  kernelevolve suite --resume {campaign_id}{db_option(db)}", out=out)
        for p in problems:
            why = f" (skipped: {skip[p.name]})" if p.name in skip else ""
            print_plain(f"  {p.name}: {p.shapes_text(device)} [{p.shape_rule}]{why}", out=out)

    def progress(event) -> None:
        print_plain(f"[{event.done}/{event.total}] {event.problem}: {event.text}", out=out)

    from kernelevolve.logs import run_log

    try:
        with sigterm_as_interrupt(), run_log(campaign_id) as log_file:  # one file: each line names its run
            print_plain(f"log: {log_file}", out=out)
            runner.run(repo, campaign_id, progress)
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM
        # Everything recorded is safe (the database is written step by step); workers are cut off.
        print_plain(
            f"interrupted: resume with `kernelevolve suite --resume {campaign_id}{db_option(db)}`", out=err_console
        )
        exit_now(interrupt_code(e))
    result = _print_score(repo, campaign_id, None, as_json)
    skipped = [p for p in result.problems if (p.failure or "").startswith("skipped")]
    if result.problems and len(skipped) == len(result.problems):  # nothing was searched or scored
        print_plain(f"error: {_nothing_ran(result.problems, skipped[0].failure)}", out=err_console)
        raise typer.Exit(EXIT_UNUSABLE)
    # As `run`: 0 when a problem got a correct kernel, 1 when none did.
    raise typer.Exit(EXIT_OK if result.correct else EXIT_FAILED)


def _nothing_ran(problems, why: str) -> str:
    """The one line for a campaign whose every problem was skipped (after its score: exit 2)."""
    names = ", ".join(p.name for p in problems[:5]) + (f" and {len(problems) - 5} more" if len(problems) > 5 else "")
    if "no solution file" in why:
        return (
            f"no solution file for any of the {len(problems)} problems ({names}): "
            "name each PROBLEM.py (or after the spec's `kernel:`) in --solutions DIR"
        )
    return (
        f"none of the {len(problems)} problems could be searched with the offline operator ({names}): it has no "
        "reference kernel for them in the knowledge base; give --model PROVIDER:MODEL (or plugin:PATH.py:CLASS), "
        "or score your own kernels with --solutions DIR"
    )


def _skipped(problems, settings, no_model_check: bool) -> dict[str, str]:
    """Problem name -> why it is not run: no solution file, or no reference kernel for the offline operator."""
    from kernelevolve import runs
    from kernelevolve.campaign.runner import NEEDS_A_MODEL, SOLUTIONS
    from kernelevolve.operators import OperatorError

    if settings.kind == SOLUTIONS:
        return {p.name: "no solution file" for p in problems if p.solution is None}
    try:
        operator = runs.make_operator(settings.run_config())
    except runs.RunError as e:
        fail(str(e))
    if not no_model_check:
        check_model_or_fail(operator, settings.model)
    skip = {}
    for p in problems:
        try:
            operator.check(p.spec)
        except OperatorError:
            skip[p.name] = NEEDS_A_MODEL  # the offline operator has no reference kernel for it
    return skip


@app.command("score")
def score_command(
    campaign_id: Optional[str] = typer.Argument(
        None, metavar="[CAMPAIGN]", help="Without it: the campaigns in the database."
    ),
    baseline: Optional[str] = typer.Option(
        None,
        "--baseline",
        metavar="eager|torch.compile",
        help="Speedups against eager or torch.compile (default: what each problem was timed against).",
    ),
    db: Optional[str] = typer.Option(None, "--db", metavar="URL", help=DB_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the score as JSON."),
) -> None:
    """A campaign's score (without CAMPAIGN: the campaigns in the database): pass rate, fast_p for p in 0, 0.5, 0.8, 1.0, 1.5, 2.0, geometric-mean
    speedup over correct problems, failure classes, and one line per problem (best node, speedup,
    failure). Interpreter campaigns are untimed: correctness only."""
    from kernelevolve.memory import campaigns

    if baseline not in (None, "eager", "torch.compile"):
        fail(f"--baseline {baseline!r}: use eager or torch.compile")
    repo = repo_or_fail(db)
    if campaign_id is None:
        _list_campaigns(repo, as_json)
        return
    if campaigns.campaign(repo, campaign_id) is None:
        known = ", ".join(c.id for c in campaigns.campaigns(repo)[:5]) or "none"
        fail(f"no campaign {campaign_id!r} in {repo.display_url} (recent campaigns: {known})")
    _print_score(repo, campaign_id, baseline, as_json)


def _list_campaigns(repo, as_json: bool) -> None:
    import time

    from kernelevolve.memory import campaigns

    rows = []
    for c in campaigns.campaigns(repo):
        states = [p.state for p in campaigns.problems(repo, c.id)]
        rows.append(
            {
                "id": c.id,
                "kind": c.kind,
                "status": c.status,
                "problems": len(states),
                "done": states.count(campaigns.DONE),
                "created_at": c.created_at,
            }
        )
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        console.print(f"no campaigns in {repo.display_url}", highlight=False, soft_wrap=True)
    for r in rows:
        print_plain(
            f"{r['id']}  {r['kind']}  {r['status']}  {r['done']}/{r['problems']} problems done  "
            f"{time.strftime('%m-%d %H:%M', time.localtime(r['created_at']))}"
        )


def _print_score(repo, campaign_id: str, baseline: str | None, as_json: bool):
    from kernelevolve.campaign.scoring import score

    result = score(repo, campaign_id, baseline)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
        return result
    pct = lambda n: f"{n}/{result.total} ({100 * n / max(1, result.total):.0f}%)"  # noqa: E731
    console.print(
        f"campaign {campaign_id} ({result.kind}, {result.device}): correct {pct(result.correct)}",
        highlight=False,
        markup=False,
    )
    if result.timed:
        console.print(
            f"against {result.baseline}: "
            + ", ".join(f"fast_{p} {n}" for p, n in result.fast_p.items())
            + (f"; geometric-mean speedup {result.geomean_speedup:.3f}x" if result.geomean_speedup else ""),
            highlight=False,
            markup=False,
        )
    if result.note:
        console.print(result.note, highlight=False, markup=False)
    if result.failures:
        console.print(
            "failures: " + ", ".join(f"{k} {v}" for k, v in result.failures.items()), highlight=False, markup=False
        )
    entries = []
    for p in result.problems:
        if p.correct:
            what = f"correct, node {p.best_node}" + (
                f", {p.speedup:.3f}x"
                if p.speedup is not None
                else (" (untimed)" if not result.timed else ", no timing")
            )
        else:
            what = p.failure or "failed"
        rule = f" [{p.shape_rule}]" if p.shape_rule else ""
        shapes = p.shapes or "the spec's"
        entries.append(
            (
                f"{p.name}: {what}",
                f"{plural(p.nodes, 'node')}; shapes {shapes}{rule}" + (f"; run {p.run_id}" if p.run_id else ""),
            )
        )
    print_entries(entries)
    return result
