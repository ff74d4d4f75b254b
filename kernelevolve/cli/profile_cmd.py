"""`kernelevolve profile SPEC CANDIDATE.py`: where a kernel's time goes, and what limits it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table as RichTable

from kernelevolve.cli.app import (
    EXIT_FAILED,
    EXIT_OK,
    app,
    candidate_or_fail,
    console,
    fail,
    load_spec_or_fail,
    print_entries,
    plural,
    print_plain,
    print_table_or_entries,
    styled,
    shapes_or_fail,
)
from kernelevolve.profiling.schema import ProfileSummary
from kernelevolve.profiling.tools import TOOLS
from kernelevolve.profiling.tools.base import Block, Line, Plain, Table

# --tool's, --keep's and --profile's help name the tools as registered (kernelevolve/profiling/tools/: TOOLS).
TOOLS_HELP = ", ".join(f"{t.name} ({t.what})" for t in TOOLS.values())


@app.command("profile")
def profile_command(
    spec_path: str = typer.Argument(
        ..., metavar="SPEC", help="Spec YAML (specs/softmax.yaml) or a KernelBench reference module (.py)."
    ),
    candidate: Path = typer.Argument(
        ..., metavar="CANDIDATE.py", help="Python source defining class ModelNew(nn.Module)."
    ),
    tool: str = typer.Option(
        "all",
        "--tool",
        metavar="|".join((*TOOLS, "all")),
        help=f"{TOOLS_HELP} or all.",
    ),
    shape: Optional[list[str]] = typer.Option(
        None,
        "--shape",
        metavar="NAME=VALUE[,NAME=VALUE...]",
        help="Profile at these shapes instead of the spec's; repeat for several.",
    ),
    timeout: float = typer.Option(
        300.0,
        "--timeout",
        min=10,
        metavar="SECONDS",
        help="Wall-clock limit per tool; the sandboxed process group is killed after it.",
    ),
    keep: Optional[Path] = typer.Option(
        None,
        "--keep",
        metavar="DIR",
        help=f"Keep the tools' raw outputs ({', '.join(t.output for t in TOOLS.values())}) in DIR/<tool>/.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of the tables."),
) -> None:
    """Profile one candidate kernel on a GPU: kernels per call, Nsight Compute metrics, the roofline line.

    Each tool runs the candidate in the evaluation sandbox. ncu uses a fixed metric set (duration,
    DRAM bytes and % of peak, SM %, occupancy, registers, local-memory spills, shared memory, L2
    hit rate, top warp stalls) with --clock-control none, so durations compare with do_bench.
    Needs a CUDA GPU (and ncu on PATH for --tool ncu or all): without them, one line and exit 2.

    Exit status: 0 every tool profiled every shape, 1 some tool failed on the candidate, 2 unusable input or machine.

    Examples:

    \b
      kernelevolve profile specs/softmax.yaml \\
          knowledge_base/kernels/softmax.py --shape M=32768,N=4096
    """
    from kernelevolve.profiling.runner import ToolUnavailable, check_available

    if tool not in (*TOOLS, "all"):
        fail(f"--tool {tool!r}: use one of {', '.join(TOOLS)} or all")
    tools = list(TOOLS) if tool == "all" else [tool]
    spec = load_spec_or_fail(spec_path)
    shapes = shapes_or_fail(spec, shape)
    candidate, source = candidate_or_fail(candidate)
    import torch

    try:
        check_available(tools, "cuda" if torch.cuda.is_available() else "none")
    except ToolUnavailable as e:
        fail(f"profile: {e}")
    from kernelevolve.harness.runtime.screen import screen_source

    problems = screen_source(source)
    if problems:
        fail(f"{candidate}: refused before it ran (it tampers with its evaluation): {problems[0]}", EXIT_FAILED)
    from kernelevolve.profiling.collect import profile_candidate

    cases = spec.cases("cuda", shapes)
    if as_json:
        summaries = profile_candidate(spec, source, cases, tools, timeout_s=timeout, raw_dir=keep)
        typer.echo(
            json.dumps(
                {
                    "spec": spec.name,
                    "candidate": str(candidate),
                    "tools": tools,
                    "profiles": [s.model_dump() for s in summaries],
                },
                indent=2,
            )
        )
    else:
        with console.status(f"profiling {candidate.name} with {', '.join(tools)} ({plural(len(cases), 'shape')})…"):
            summaries = profile_candidate(spec, source, cases, tools, timeout_s=timeout, raw_dir=keep)
        console.print(f"{candidate.name} vs {spec.name}: profiles ({', '.join(tools)})", highlight=False, markup=False)
        for s in summaries:
            print_profile(s)
    complete = all(not s.errors.keys() & set(tools) for s in summaries)
    raise typer.Exit(EXIT_OK if complete else EXIT_FAILED)


def print_profile(s: ProfileSummary) -> None:
    """One case's profile: the roofline line, then one block per tool; tables only where they fit."""
    console.print()
    console.print(styled((s.label, "bold"), f" ({s.seconds:.1f} s of profiling)"), highlight=False)
    if s.roofline:
        _wrapped(s.roofline.line())
    for name, tool in TOOLS.items():
        if name in s.parts:
            for block in tool.report(s.parts[name]):
                _print_block(block)
    for tool, err in s.errors.items():
        console.print(styled("  ", (f"{tool}:", "red"), " no profile"), highlight=False)
        print_entries([("", err)], indent=4)


def _print_block(block: Block) -> None:
    if isinstance(block, Line):
        _wrapped(block.text)
    elif isinstance(block, Plain):
        console.print(block.text, highlight=False, markup=False)
    elif isinstance(block, Table):
        table = RichTable(box=None, pad_edge=False)
        for c in block.columns:
            table.add_column(c, justify="left" if c in block.left else "right", no_wrap=True)
        for row in block.rows:
            table.add_row(*row)
        print_table_or_entries(table, block.entries)


def _wrapped(text: str) -> None:
    """A line of facts at any width: wrapped at word boundaries, continuation lines indented."""
    import textwrap

    for line in textwrap.wrap(
        text,
        width=max(40, console.width),
        initial_indent="  ",
        subsequent_indent="    ",
        break_long_words=False,
        break_on_hyphens=False,
    ):
        print_plain(line)


_NEED_PROGRAMS = "".join(f", {t.name} only when it is on PATH" for t in TOOLS.values() if t.program)
PROFILE_HELP = (
    "Profile promising nodes (a new best, or within --profile-within of it) with these tools: "
    f"auto (on a GPU: {', '.join(TOOLS)}{_NEED_PROGRAMS}; none under the interpreter), "
    f"off, all, or a list of {', '.join(TOOLS)} such as {','.join(list(TOOLS)[:2])}. "
    "Their summaries reach the next optimise prompts."
)


def profile_settings_or_fail(
    tools: str, device: str, within: float, timeout_s: float, stop_at: float | None, share: float = 0.1
) -> dict | None:
    """`kernelevolve run`'s --profile options as ProfileSettings (a dict for the run's settings), or
    one-line exit 2; None when nothing is profiled."""
    from kernelevolve.profiling.runner import ToolUnavailable, check_available
    from kernelevolve.search.profiling import ProfileSettings

    if not 0 <= within < 1:
        fail(f"--profile-within {within}: a fraction between 0 and 1 (0.05: within 5% of the best)")
    if not 0 < share <= 1:
        fail(f"--profile-share {share}: a fraction of the GPU time above 0 and at most 1 (0.1: 10%)")
    if stop_at is not None and not 0 < stop_at <= 1.5:
        fail(f"--stop-at-roofline {stop_at}: a fraction of the roofline, e.g. 0.85")
    if tools == "off":
        if stop_at is not None:
            fail("--stop-at-roofline needs profiles: drop --profile off")
        return None
    if tools == "auto":
        if device != "cuda":
            if stop_at is not None:
                fail("--stop-at-roofline needs GPU profiles (--device cuda)")
            return None
        chosen = [name for name, t in TOOLS.items() if not t.missing()]
    else:
        chosen = (
            list(TOOLS) if tools == "all" else list(dict.fromkeys(t.strip() for t in tools.split(",") if t.strip()))
        )
        bad = [t for t in chosen if t not in TOOLS]
        if bad or not chosen:
            fail(f"--profile {tools!r}: use auto, off, all, or a list of {', '.join(TOOLS)}")
        if device != "cuda" and not all(TOOLS[t].on_interpreter for t in chosen):
            runs = " and ".join(name for name, t in TOOLS.items() if t.on_interpreter) or "none"
            fail(f"--profile {tools}: under the interpreter only {runs} runs (host time, no GPU kernels)")
        if device == "cuda":
            try:
                check_available(chosen, device)
            except ToolUnavailable as e:
                fail(f"--profile: {e}")
    return ProfileSettings(
        tools=chosen, within=within, timeout_s=timeout_s, roofline_stop=stop_at, share=share
    ).to_dict()


def print_node_profile(row) -> None:
    """`show --node N`: the node's stored profile (kernelevolve.memory.profiles.ProfileRow), if any."""
    if row is None:
        return
    console.print(f"# profile ({row.seconds:.1f} s of profiling):", highlight=False, markup=False)
    for data in row.summaries:
        print_profile(ProfileSummary.model_validate(data))
