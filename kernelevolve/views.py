"""The words a run's outcome is shown in, shared by the command line, the review pages and campaigns.

One vocabulary everywhere: a node or shape is `correct`, `failed (CLASS)` or `pending`/`not
checked`; a timed correct one shows its speedup as `1.234x`; an untimed one (the interpreter)
is `correct (untimed)`, never a speedup; marks are `[suspicious: held for review]`.
"""

from __future__ import annotations

from kernelevolve.records.graph import Node, SearchGraph
from kernelevolve.records.result import Failure

UNTIMED = "correct (untimed)"
NOT_RUN = "not run (needs a GPU)"  # failure class needs_gpu: a GPU-only kernel language under the interpreter


def verdict(correct: bool | None, failure: str | None = None) -> str:
    """One shape's or one evaluation's outcome in the shared vocabulary."""
    if failure == Failure.NEEDS_GPU:
        return NOT_RUN
    if correct is None:
        return f"failed ({failure})" if failure else "not checked"
    return "correct" if correct else f"failed ({failure or 'incorrect'})"


def marks_text(marks: dict) -> str:
    return f" [{', '.join(marks)}: held for review]" if marks else ""


def fitness_text(node: Node) -> str:
    """Never shows the selection surrogate as a speedup."""
    if node.evaluation is None:
        return "pending"
    if not node.correct:
        return NOT_RUN if node.failure == Failure.NEEDS_GPU else f"failed ({node.failure})"
    held = marks_text(node.evaluation.marks) if node.held else ""
    if node.fitness is not None:
        return f"{node.fitness:.3f}x" + held
    cost = (node.evaluation.static or {}).get("cost")  # a static estimate (evaluation/static_cost.py), not a speedup
    return UNTIMED + (f" est. cost {cost:.2f}" if cost is not None else "") + held


def node_fields(graph: SearchGraph, node: Node) -> dict:
    """What every view of a node starts from: its place in the graph and its outcome
    (`correct` is None while pending, unlike Node.correct)."""
    return {
        "id": node.id,
        "parents": list(node.parents),
        "kind": graph.kind(node.id),
        "state": node.state,
        "correct": node.correct if node.evaluation is not None else None,
        "fitness": node.fitness,
        "failure": node.failure,
        "static_cost": (node.evaluation.static or {}).get("cost") if node.evaluation is not None else None,
    }


def failure_line(node: Node) -> str:
    """`failed (CLASS): message` for a failed node (the message's first line), else ''."""
    if node.evaluation is None or node.correct:
        return ""
    message = " ".join((node.evaluation.message or "").split()).replace(
        "operator error: OperatorError: ", "operator error: "
    )
    if node.failure == Failure.NEEDS_GPU:
        return f"not run: {message}" if message else NOT_RUN
    return f"failed ({node.failure})" + (f": {message}" if message else "")


def clip(text: str, width: int | None) -> str:
    """`text` cut to `width` characters with an ellipsis (None: uncut)."""
    if width is None or len(text) <= width:
        return text
    return text[: max(1, width - 1)] + "…"


RUN_FIELDS = (
    "id",
    "spec_name",
    "spec_path",
    "policy",
    "device",
    "status",
    "termination_reason",
    "created_at",
    "updated_at",
    "elapsed_s",
    "settings",
)


def run_fields(run) -> dict:
    """What every view of a run starts from (`spec_name` shown as `spec`)."""
    return {("spec" if f == "spec_name" else f): getattr(run, f) for f in RUN_FIELDS}
