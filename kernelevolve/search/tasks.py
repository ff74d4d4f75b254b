"""The engine's units of work: one record per job handed to a worker thread (a proposal, an
evaluation, a recheck, an insight, a profile), how its time is taken, and the order in which
completions seen together are handled.

Apart from the engine because the records and their ordering rule are data, not the loop: the
loop keeps them in `in_flight` and `waiting` and decides what to do when one finishes.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from kernelevolve.records.calls import LLMCallRecord
from kernelevolve.records.result import EvalResult
from kernelevolve.search.policies import Expansion

# Stages that take one of the evaluator's places.
EVALUATOR_STAGES = ("evaluate", "recheck", "profile")


@dataclass
class Task:
    stage: str  # propose | evaluate | recheck | insight | profile
    expansion: Expansion | None = None
    node_id: int | None = None
    calls: list[tuple[int, LLMCallRecord]] = field(default_factory=list)
    first: EvalResult | None = None  # recheck: the evaluation being confirmed
    lost: str | None = None  # evaluate/recheck: why its worker was lost once already (it is a retry)
    seconds: float = 0.0  # how long its work ran (set on the worker thread)
    done: Future | None = None  # propose: the finished proposal, while it waits for a place
    seq: int = 0  # order of submission


def timed(task: Task, fn, *args):
    """Worker thread: run the task's work, noting how long it took."""
    t0 = time.monotonic()
    try:
        return fn(*args)
    finally:
        task.seconds = time.monotonic() - t0


def proposed_source(task: Task) -> str | None:
    """A finished proposal's kernel source (None while it runs, when it failed or holds none)."""
    future = task.done
    return None if future is None or future.exception() is not None else future.result().source


def completion_order(task: Task) -> tuple:
    """Completions seen together are handled evaluations first (by node), then profiles, then proposals
    (in the order they were asked for), then insights."""
    rank = {"evaluate": 0, "recheck": 0, "profile": 1, "propose": 2, "insight": 3}[task.stage]
    return rank, task.node_id if task.node_id is not None else -1, task.seq
