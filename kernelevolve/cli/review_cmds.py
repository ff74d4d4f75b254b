"""`kernelevolve review` and `kernelevolve export`: a person signs off a kernel before it is used."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from kernelevolve.cli.app import DB_HELP, app, console, fail, print_plain, repo_or_fail, styled


@app.command("review")
def review_command(
    run_id: str = typer.Argument(..., metavar="RUN_ID"),
    node: int = typer.Argument(..., metavar="NODE", help="Node id (see `kernelevolve show RUN_ID`)."),
    approve: bool = typer.Option(False, "--approve", help="The kernel may be used."),
    reject: bool = typer.Option(False, "--reject", help="The kernel must not be used."),
    note: str = typer.Option("", "--note", metavar="TEXT", help="Why: what you checked, what worries you."),
    reviewer: Optional[str] = typer.Option(
        None, "--reviewer", metavar="NAME", help="Who reviews (default: your user name)."
    ),
    db: Optional[str] = typer.Option(None, "--db", metavar="URL", help=DB_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the recorded verdict as JSON."),
) -> None:
    """Record your verdict on one kernel of a run; only a correct kernel can be approved.

    Read it first: `kernelevolve show RUN_ID --node NODE`.

    Examples:

    \b
      kernelevolve review r-1a2b3c4d 7 --approve \\
          --note "checked masking and int64 offsets"
    """
    from kernelevolve.review import ReviewError, review

    if approve == reject:
        fail("give exactly one of --approve or --reject")
    repo = repo_or_fail(db, write=True)
    try:
        verdict = review(repo, run_id, node, "approve" if approve else "reject", note, reviewer)
    except ReviewError as e:
        fail(str(e))
    if as_json:
        typer.echo(json.dumps(verdict.__dict__))
    else:
        console.print(
            styled(f"run {run_id} node {node}: ", (verdict.verdict, "bold"), f" by {verdict.reviewer}"), highlight=False
        )


@app.command("export")
def export_command(
    run_id: str = typer.Argument(..., metavar="RUN_ID"),
    node: int = typer.Argument(..., metavar="NODE"),
    output: Optional[Path] = typer.Option(
        None,
        "--output",
        "-o",
        metavar="PATH",
        help="Write here (default: print on stdout); with --as-op, the folder to write the op into.",
    ),
    as_op: Optional[str] = typer.Option(
        None,
        "--as-op",
        metavar="NAMESPACE::NAME",
        help="Write a PyTorch custom op: kernel, torch.library registration with a "
        "fake implementation, a pytest file and a GPU benchmark.",
    ),
    tritonbench: bool = typer.Option(
        False,
        "--tritonbench",
        help="Write a TritonBench operator package (operator.py: "
        "the baseline and this kernel registered, the run's shapes as inputs) into -o DIR.",
    ),
    unreviewed: bool = typer.Option(
        False, "--unreviewed", help="Export even if nobody approved this kernel (or it is marked suspicious)."
    ),
    db: Optional[str] = typer.Option(None, "--db", metavar="URL", help=DB_HELP),
) -> None:
    """Write an approved kernel to a file, with a header saying where it came from, how fast and
    how accurate it was, and who approved it; or, with --as-op, as a PyTorch custom op.

    The file stands alone: the knowledge-base helpers the kernel imports are written into it.

    Examples:

    \b
      kernelevolve export r-1a2b3c4d 7 -o rmsnorm_triton.py
      kernelevolve export r-1a2b3c4d 7 -o rmsnorm_op/ --as-op mylib::rmsnorm
      kernelevolve export r-1a2b3c4d 7 -o rmsnorm_tb/ --tritonbench
    """
    from kernelevolve.review import ReviewError, export

    if as_op is not None and tritonbench:
        fail("--as-op and --tritonbench write different folders: give one of them")
    if (as_op is not None or tritonbench) and output is None:
        fail(f"{'--as-op' if as_op is not None else '--tritonbench'} writes a folder: give it with -o DIR")
    if output is not None and (as_op is not None or tritonbench) and output.exists() and not output.is_dir():
        fail(f"{output}: exists and is not a folder")
    repo = repo_or_fail(db)
    if tritonbench:
        from kernelevolve.review.export_op import export_tritonbench

        try:
            operator = export_tritonbench(repo, run_id, node, output, allow_unreviewed=unreviewed)
        except ReviewError as e:
            fail(str(e))
        except OSError as e:
            fail(f"{output}: cannot write: {e}")
        print_plain(f"wrote {operator}: run it with `tritonbench` where TritonBench is installed")
        return
    if as_op is not None:
        from kernelevolve.review.export_op import export_package

        try:
            written = export_package(repo, run_id, node, output, as_op, allow_unreviewed=unreviewed)
        except ReviewError as e:
            fail(str(e))
        name = as_op.split("::")[-1]
        print_plain(
            f"wrote {len(written)} files to {output}: check with `python -m pytest {output / (name + '_test.py')}`"
        )
        return
    from kernelevolve.review.export_op import standalone_source

    try:  # one file that needs only torch and triton: the knowledge-base helpers it imports go in it
        text = standalone_source(export(repo, run_id, node, allow_unreviewed=unreviewed))
    except ReviewError as e:
        fail(str(e))
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.write_text(text)
    except OSError as e:
        fail(f"{output}: cannot write: {e}")
    console.print(f"wrote {output}", highlight=False)
