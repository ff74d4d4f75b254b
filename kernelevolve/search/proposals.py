"""Proposals: what the operator is shown about a node (its view), the work a proposal thread does,
and what an operator's own error becomes.

Apart from the engine because these read the graph or the operator and never write: the engine
decides when a proposal is asked for and writes what comes back (search/engine.py).
"""

from __future__ import annotations

import traceback
from dataclasses import replace

from kernelevolve.operators.base import OperatorContext, ParentView, Proposal
from kernelevolve.records.graph import SearchGraph
from kernelevolve.records.result import Failure

ANCESTRY_LIMIT = 8  # ancestors shown to the operator beside a step's parents
MAX_OPERATOR_ERRORS = 3  # in a row: the operator is broken (no key, no network), not unlucky


def debug() -> bool:
    """KERNELEVOLVE_DEBUG=1: an operator's exception is printed with its traceback."""
    from kernelevolve.settings import SettingsError, settings

    try:
        return settings().debug
    except SettingsError:
        return False


def parent_view(graph: SearchGraph, node_id: int, profiles: dict, compact: bool = False) -> ParentView:
    """A node as the operator sees it (compact: without its evaluation's log)."""
    node = graph[node_id]
    ev = node.evaluation
    if compact and ev is not None:
        ev = replace(ev, log="")
    return ParentView(
        node_id=node.id,
        source=node.source,
        kind=graph.kind(node.id),
        evaluation=ev,
        note=node.note,
        profile=profiles.get(node_id),
    )


def ancestry(graph: SearchGraph, parents) -> list[int]:
    """The parents' ancestors shown with a step, the latest ANCESTRY_LIMIT of them."""
    above: set[int] = set()
    for p in parents:
        above |= graph.ancestors(p)
    return sorted(above)[-ANCESTRY_LIMIT:]


def propose(operator, spec, parents: list[ParentView], context: OperatorContext) -> Proposal:
    """Worker thread: a draft when the step has no parents, else an improvement on them."""
    if not parents:
        return operator.draft(spec, context)
    return operator.improve(parents, context)


def operator_failure(error: BaseException) -> tuple[Proposal, str]:
    """The operator's own error (building the prompt, calling the model) as a proposal holding no kernel,
    and its traceback; never charged to the model as no_code."""
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    proposal = Proposal(
        source=None, failure=str(Failure.OPERATOR), message=f"operator error: {type(error).__name__}: {error}"
    )
    return proposal, trace
