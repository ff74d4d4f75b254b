"""`kernelevolve kb ...`: search and read the knowledge base."""

from __future__ import annotations

import json
from typing import Optional

import typer
from kernelevolve.cli.app import app, console, fail, print_entries

kb_app = typer.Typer(
    help="Search and read the knowledge base (hardware notes, Triton constraints, guidance, reference kernels).",
    no_args_is_help=True,
)
app.add_typer(kb_app, name="kb")


def _load():
    from kernelevolve.knowledge import KnowledgeBase, KnowledgeError

    try:
        return KnowledgeBase.load()
    except KnowledgeError as e:
        fail(str(e))


@kb_app.command("search")
def search_cmd(
    query: str = typer.Argument(..., metavar="QUERY", help="Words to look for, e.g. 'online softmax split row'."),
    kind: Optional[str] = typer.Option(
        None, "--kind", metavar="KIND", help="hardware, constraints, guidance or kernels."
    ),
    hardware: Optional[str] = typer.Option(
        None, "--hardware", metavar="GPU", help="Only documents for this GPU (e.g. h200)."
    ),
    family: Optional[str] = typer.Option(
        None, "--family", metavar="FAMILY", help="Only documents for this operator family."
    ),
    tag: Optional[list[str]] = typer.Option(
        None, "--tag", metavar="TAG", help="Only documents with this tag (repeatable)."
    ),
    limit: int = typer.Option(5, "--limit", metavar="N", min=1, help="How many results."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
) -> None:
    """Rank documents by BM25 over title, tags and body, after the filters."""
    from kernelevolve.knowledge import KnowledgeError

    kb = _load()
    try:
        hits = kb.rank(query, kind=kind, hardware=hardware, family=family, tags=tag, limit=limit)
    except KnowledgeError as e:
        fail(str(e))
    if as_json:
        print(json.dumps([{**d.summary(), "score": round(s, 4)} for d, s in hits], indent=2))
        return
    if not hits:
        console.print("no matching document")
        raise typer.Exit(1)
    # The document name (what `kb show` takes) heads each entry, whole; the title wraps under it.
    print_entries(
        [
            (
                f"{i}. {d.ref}  (score {s:.2f})",
                f"{d.title} (hardware: {', '.join(d.hardware) or '-'}; family: {', '.join(d.family) or '-'})",
            )
            for i, (d, s) in enumerate(hits, 1)
        ]
    )


@kb_app.command("show")
def show_cmd(
    name: str = typer.Argument(
        ..., metavar="NAME", help="A document name (h200, masking) or kind/name (kernels/softmax)."
    ),
) -> None:
    """Print one document as it goes into a prompt."""
    from kernelevolve.knowledge import KnowledgeError

    kb = _load()
    try:
        doc = kb.get(name)
    except KnowledgeError as e:
        fail(str(e))
    if doc is None:
        fail(f"no document named {name!r} (try `kernelevolve kb search {name}`)")
    print(doc.text)
