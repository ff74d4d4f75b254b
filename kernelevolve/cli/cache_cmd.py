"""`kernelevolve cache clear`: the opt-in LLM reply cache."""

from __future__ import annotations

import typer

from kernelevolve.cli.app import app, console

cache_app = typer.Typer(
    help=("The LLM reply cache (off unless `run --reply-cache` or KERNELEVOLVE_REPLY_CACHE=1): replies stored "
          "under $KERNELEVOLVE_CACHE_DIR/llm_replies (default ~/.cache/kernelevolve), keyed by provider, model, "
          "endpoint, temperature, reply limit, system prompt and prompt."),
    no_args_is_help=True,
)
app.add_typer(cache_app, name="cache")


@cache_app.command("clear")
def clear_command() -> None:
    """Delete every cached LLM reply (runs in the database keep their recorded calls)."""
    from kernelevolve.llm.cache import clear, default_root

    n = clear()
    console.print(f"removed {n} cached repl{'y' if n == 1 else 'ies'} from {default_root()}", highlight=False,
                  soft_wrap=True)


@cache_app.command("path")
def path_command() -> None:
    """Print where cached replies are kept."""
    from kernelevolve.llm.cache import default_root

    typer.echo(str(default_root()))
