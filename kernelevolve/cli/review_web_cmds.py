"""`kernelevolve report` and `kernelevolve serve`: the review pages, as files or live."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from kernelevolve.cli.app import DB_HELP, app, fail, plural, print_plain, repo_or_fail, settings_or_fail


@app.command("report")
def report_command(
    run_id: str = typer.Argument(..., metavar="RUN_ID"),
    output: Path = typer.Option(
        ..., "--output", "-o", metavar="PATH", help="Folder to write the site into (created if missing)."
    ),
    db: Optional[str] = typer.Option(None, "--db", metavar="URL", help=DB_HELP),
) -> None:
    """Write a run as a static site that opens from disk with no network: the search tree, fitness
    over evaluations, per-shape numbers, every node's source and diffs, every model call.

    Examples:

    \b
      kernelevolve report r-1a2b3c4d -o review/
      xdg-open review/index.html
    """
    import time

    from kernelevolve.review.pages import PageError
    from kernelevolve.review.report import write_report

    repo = repo_or_fail(db)
    if repo.run(run_id) is None:
        fail(f"no run {run_id!r} in {repo.display_url} (see `kernelevolve runs`)")
    if output.exists() and not output.is_dir():
        fail(f"{output}: exists and is not a folder")
    start = time.perf_counter()
    try:
        written = write_report(repo, run_id, output)
    except PageError as e:
        fail(str(e))
    except OSError as e:
        fail(f"{output}: cannot write the report: {e.strerror or e}")
    print_plain(f"wrote {plural(written['nodes'], 'node')} in {time.perf_counter() - start:.1f}s: {written['index']}")


@app.command("serve")
def serve_command(
    db: Optional[str] = typer.Option(None, "--db", metavar="URL", help=DB_HELP),
    host: str = typer.Option(
        "127.0.0.1", "--host", metavar="HOST", help="Address to bind; anything but loopback needs a token."
    ),
    port: int = typer.Option(8765, "--port", metavar="PORT", help="Port (0: any free port)."),
    token: Optional[str] = typer.Option(
        None,
        "--token",
        metavar="TOKEN",
        help="Secret every review and export must carry (default: "
        "$KERNELEVOLVE_REVIEW_TOKEN; on a non-loopback host, else a new one, printed).",
    ),
) -> None:
    """Serve the review pages for every run in the database: live while a search runs, with
    approve/reject and a note per node (stored as `kernelevolve review` stores them) and export.

    Open the address it prints.

    Example:

    \b
      kernelevolve serve --db sqlite:///runs.db
    """
    from kernelevolve.review.server import make_server

    if not 0 <= port <= 65535:
        fail(f"--port {port}: use 0-65535")
    token = token or settings_or_fail().review_token  # the environment through kernelevolve.settings
    if token is not None and len(token) < 16:
        fail("--token: use at least 16 characters (or leave it out to get a generated one)")
    repo = repo_or_fail(db)
    try:
        server, review_app = make_server(repo, host, port, token)
    except OSError as e:
        fail(f"cannot listen on {host}:{port}: {e.strerror or e}")
    bound_host, bound_port = server.server_address[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    url = f"http://{shown}:{bound_port}/"
    if review_app.token:
        url += f"?token={review_app.token}"
    where = "loopback only" if review_app.loopback else "reachable from the network: reviews need the token"
    print(f"serving {repo.display_url} at {url} ({where}); Ctrl-C stops", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
