"""Insights: short notes a writer (usually a model) draws from an evaluated node and its parents,
filed under a family and a hardware and read back into later prompts (of this run and others).

Apart from the engine because what an insight writer is, which family notes are filed under and
how one is stored do not depend on the loop; the loop only runs the writer on a thread of its own.
"""

from __future__ import annotations

from typing import Any, Callable

from kernelevolve.operators.base import ParentView
from kernelevolve.records.calls import LLMCallRecord

# (spec, child, parents, record_llm_call) -> insight text; model calls it makes are recorded run-level.
InsightWriter = Callable[[Any, ParentView, list[ParentView], Callable[[LLMCallRecord], Any]], "str | None"]
INSIGHT_LIMIT = 8  # insights read into one round of proposals


def insight_family(spec) -> str:
    """The family insights are filed under and read from: the spec's, else the one its reference's
    source shows (knowledge.traits), so that problems without a `family:` (KernelBench's) share notes
    only with problems of the same kind, not every other problem of a campaign."""
    from kernelevolve.knowledge import traits

    return spec.family or traits.of_spec(spec).primary


def writer_name(writer: InsightWriter) -> str:
    """What an insight is stored as coming from."""
    return getattr(writer, "__name__", type(writer).__name__)


def store_insight(repo, run_id: str, node_id: int, family: str, spec, writer: InsightWriter, text: str) -> None:
    repo.add_insight(run_id, node_id, family, spec.hardware, text, source=writer_name(writer))
