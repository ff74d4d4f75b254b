"""People review the winning kernels before they use them.

A verdict (approve / reject, with a reviewer and notes) is written to the experiment database;
`export` writes a node's kernel to a file with a provenance header, and refuses a node that no
one has approved unless the caller says otherwise.
"""

from __future__ import annotations

import getpass
import time
from dataclasses import dataclass

VERDICTS = ("approve", "reject")


class ReviewError(ValueError):
    """A review or export that cannot be done; str() is one line."""


@dataclass
class Verdict:
    node_id: int
    reviewer: str
    verdict: str
    notes: str
    created_at: float


def _evaluated_node(repo, run_id: str, node_id: int):
    if repo.run(run_id) is None:
        raise ReviewError(f"no run {run_id} in {repo.display_url}")
    graph = repo.load_graph(run_id)
    if node_id not in graph:
        raise ReviewError(f"run {run_id} has no node {node_id} (nodes 0-{len(graph) - 1})")
    node = graph[node_id]
    if node.source is None or node.evaluation is None:
        raise ReviewError(f"node {node_id} of run {run_id} has no evaluated kernel to review")
    return node


def review(repo, run_id: str, node_id: int, verdict: str, notes: str = "", reviewer: str | None = None) -> Verdict:
    """Record a verdict on one node; only a correct kernel can be approved."""
    if verdict not in VERDICTS:
        raise ReviewError(f"verdict {verdict!r}: use one of {', '.join(VERDICTS)}")
    node = _evaluated_node(repo, run_id, node_id)
    if verdict == "approve" and not node.correct:
        raise ReviewError(f"node {node_id} failed its evaluation ({node.failure}): it cannot be approved")
    reviewer = reviewer or getpass.getuser()
    repo.add_review(run_id, node_id, reviewer, verdict, notes)
    return Verdict(node_id, reviewer, verdict, notes, time.time())


def verdicts(repo, run_id: str) -> dict[int, Verdict]:
    """The latest verdict on each reviewed node of a run."""
    latest: dict[int, Verdict] = {}
    for row in repo.reviews(run_id):
        latest[row.node_id] = Verdict(row.node_id, row.reviewer, row.verdict, row.notes, row.created_at)
    return latest


def export(repo, run_id: str, node_id: int, allow_unreviewed: bool = False) -> str:
    """The node's kernel with a provenance header; unapproved nodes need `allow_unreviewed`."""
    node = _evaluated_node(repo, run_id, node_id)
    verdict = verdicts(repo, run_id).get(node_id)
    if not node.correct:
        raise ReviewError(f"node {node_id} failed its evaluation ({node.failure}): nothing worth exporting")
    if (verdict is None or verdict.verdict != "approve") and not allow_unreviewed:
        state = "was rejected" if verdict else "has not been reviewed"
        raise ReviewError(
            f"node {node_id} of run {run_id} {state}: approve it with `kernelevolve review {run_id} "
            f"{node_id} --approve`, or export anyway with --unreviewed"
        )
    run = repo.run(run_id)
    ev = node.evaluation
    fitness = ev.fitness
    lines = [
        f"# Exported by KernelEvolve from run {run_id}, node {node_id} (spec {run.spec_name}, device {ev.device}).",
        "# Fitness: "
        + (
            f"{fitness:.3f}x geometric-mean speedup over the baseline"
            if fitness is not None
            else "correct, untimed (evaluated under the Triton interpreter)"
        ),
        "# Review: "
        + (
            f"{verdict.verdict} by {verdict.reviewer}" + (f": {verdict.notes}" if verdict.notes else "")
            if verdict
            else "NOT REVIEWED"
        ),
    ]
    for s in ev.shapes:
        timing = f", {s.latency_ms:.4f} ms vs {s.baseline_ms:.4f} ms" if s.latency_ms and s.baseline_ms else ""
        lines.append(
            f"#   {s.label}: max abs err {s.max_abs_err:.3g}{timing}" if s.max_abs_err is not None else f"#   {s.label}"
        )
    return "\n".join(lines) + "\n\n" + node.source
