"""`kernelevolve cache clear`: the opt-in LLM reply cache."""

from __future__ import annotations

from typing import Optional

import typer

from kernelevolve.cli.app import DB_HELP, app, console, repo_or_fail

cache_app = typer.Typer(
    help=(
        "The LLM reply cache, off unless `run --reply-cache` (or KERNELEVOLVE_REPLY_CACHE=1): replies kept in the "
        "experiment database (table reply_cache), keyed by provider, model, endpoint, temperature, reply limit, "
        "system prompt and prompt."
    ),
    no_args_is_help=True,
)
app.add_typer(cache_app, name="cache")


@cache_app.command("clear")
def clear_command(db: Optional[str] = typer.Option(None, "--db", metavar="URL", help=DB_HELP)) -> None:
    """Delete every cached LLM reply of the database (runs keep their recorded calls), and the
    files an older version cached under $KERNELEVOLVE_CACHE_DIR/llm_replies."""
    from kernelevolve.llm.cache import clear
    from kernelevolve.memory.repository import database_url

    url = database_url(db)
    removed = 0
    path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else None
    if path is None or (path and __import__("os").path.exists(path)):  # never create a database to empty it
        repo = repo_or_fail(db, write=True)
        try:
            removed = repo.clear_reply_cache()
        finally:
            repo.close()
    removed += clear()
    console.print(f"removed {removed} cached repl{'y' if removed == 1 else 'ies'}", highlight=False, soft_wrap=True)
