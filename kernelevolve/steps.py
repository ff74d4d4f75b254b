"""Which kind a search step is: the one rule, used by the graph, the engine, the operators and the
insights alike."""

from __future__ import annotations

from typing import Literal, Sequence

StepKind = Literal["draft", "debug", "improve", "crossover"]
STEP_KINDS: tuple[StepKind, ...] = ("draft", "debug", "improve", "crossover")


def step_kind(parents_correct: Sequence[bool]) -> StepKind:
    """draft (no parent), debug (one failed parent), improve (one passed parent), crossover (two or
    more), given whether each parent, in order, evaluated correct."""
    if not parents_correct:
        return "draft"
    if len(parents_correct) >= 2:
        return "crossover"
    return "improve" if parents_correct[0] else "debug"
