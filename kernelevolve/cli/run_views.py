"""What `runs`, `show` and `show --json` print about a run: its nodes as JSON-ready dicts and as
an indented tree (in the vocabulary of kernelevolve.views)."""

from __future__ import annotations

from kernelevolve.records.graph import Node, SearchGraph, best_nodes
from kernelevolve.views import clip, failure_line, fitness_text, node_fields, run_fields


def node_language(node: Node) -> str | None:
    """The kernel language of a node's stored source (kernelevolve/languages.py): `triton`, `cute`,
    `triton+cute` or `none`; None without source. Read from the source, so old runs show it too."""
    from kernelevolve.languages import detect

    return None if node.source is None else detect(node.source).label


def node_dict(graph: SearchGraph, node: Node, with_source: bool = False) -> dict:
    ev = node.evaluation
    d = {
        **node_fields(graph, node),
        "message": ev.message if ev is not None else "",
        "note": node.note,
        "language": node_language(node),
        "marks": dict(ev.marks) if ev is not None else {},
        "approved": node.approved,
        "recheck": ev.recheck if ev is not None else None,
        "debug_depth": graph.debug_depth(node.id),
        "best_descendant": graph.best_descendant(node.id),
        "tokens": node.tokens,
        "cost_usd": node.cost_usd,
        "shapes": []
        if ev is None
        else [
            {
                "label": s.label,
                "correct": s.correct,
                "failure": s.failure,
                "max_abs_err": s.max_abs_err,
                "latency_ms": s.latency_ms,
                "baseline_ms": s.baseline_ms,
                "speedup": s.speedup,
            }
            for s in ev.shapes
        ],
    }
    if with_source:
        d["source"] = node.source
    return d


def run_dict(run, graph: SearchGraph, with_source: bool = False) -> dict:
    best = best_nodes(graph, 1)
    return {
        **run_fields(run),
        "best": None if not best else {"id": best[0].id, "fitness": best[0].fitness, "text": fitness_text(best[0])},
        "nodes": [node_dict(graph, n, with_source) for n in graph.nodes()],
    }


def tree_lines(graph: SearchGraph, max_lines: int = 200, width: int | None = None) -> list[str]:
    """An indented tree under the first parent (a crossover also names its second parent).

    Each line: id, kind, outcome, then the node's note (the model's one-line summary of its
    change) or, for a failed node, its failure line; cut to `width` columns."""
    kids: dict[int, list[int]] = {}
    for n in graph.nodes():
        if n.parents:
            kids.setdefault(n.parents[0], []).append(n.id)
    lines: list[str] = []
    stack = [(r, 0) for r in reversed(graph.roots())]
    while stack and len(lines) < max_lines:
        node_id, depth = stack.pop()
        node = graph[node_id]
        extra = f" x #{', #'.join(map(str, node.parents[1:]))}" if len(node.parents) > 1 else ""
        kind = graph.kind(node.id)
        note = node.note if node.note and node.note != kind else ""
        if node.evaluation is not None and not node.correct:
            outcome = failure_line(node) + (f" | {note}" if note else "")
        else:
            outcome = fitness_text(node) + (f" | {note}" if note else "")
        lines.append(clip(f"{'  ' * depth}#{node.id} {kind}{extra}: {outcome}", width))
        stack.extend((c, depth + 1) for c in reversed(kids.get(node_id, [])))
    if len(graph) > len(lines):
        lines.append(f"... {len(graph) - len(lines)} more nodes (see --json)")
    return lines
