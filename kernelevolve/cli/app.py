"""The typer application shared by the command modules, and their common helpers."""

from __future__ import annotations

import sys
from typing import NoReturn

import typer
from rich.console import Console

app = typer.Typer(
    name="kernelevolve",
    help=(
        "Search for fast Triton kernels with an LLM in the loop.\n\n"
        "Start with `kernelevolve eval SPEC CANDIDATE.py` to check one kernel, or "
        "`kernelevolve run SPEC` to search. SPEC is a YAML file in specs/ or a KernelBench-style "
        "reference module (class Model, get_inputs, get_init_inputs)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

console = Console()
err_console = Console(stderr=True)

# Exit statuses shared by every command.
EXIT_OK, EXIT_FAILED, EXIT_UNUSABLE = 0, 1, 2


def fail(message: str, code: int = EXIT_UNUSABLE) -> NoReturn:
    """One-line error on stderr, then exit: never a traceback for bad input."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    sys.exit(code)
